"""``python -m bench.nexmark [--events N] [--queries q0,q5] [--format jsonl|parquet|both] [--spark]``: the
Nexmark-shaped benchmark.

Generates the streams (`bench.nexmark.gen`, default 200 k events: a quick run), then runs each query of
`bench.nexmark.queries` over the bids in a fresh process (`bench.nexmark._child`) and prints, per query:

- el/s: input elements (bids and their CTIs) over the run's seconds (first byte read to last byte
  written; interpreter start-up and query binding excluded), and over the child's whole wall time
  (``incl. start``: the issue's end-to-end figure, which the targets apply to);
- el/cpu-s: the same elements over the CPU seconds all of the process's threads spent in the run (the
  reader parses in two threads beside the engine): the per-core figure to set beside Flink 1.13's;
- Flink 1.13's per-core figure and the ratio;
- el/cpu-s incl. start: the elements over the child's CPU seconds from its start (the steadier figure on a
  loaded machine, where wall time says little);
- peak RSS of the child (MiB);
- first the same query on the same engine fed one element per call (engine ``el``: the file read by the
  same reader, every element handed to `QueryRunner.process`; `bench.nexmark._child`), the baseline
  measured in the same run; the ``local`` line shows its el/s as a multiple of that baseline's and whether
  the two outputs are the same (bytes, else the same CHT: a batch's size must not change the answer);
- with ``--format parquet`` (or ``both``): the same query over the bids as a user's Parquet table
  (`bench.nexmark.gen.to_parquet`, written once before any run: ``udm run --input bids.parquet --time le
  --cti-every 1000 --cti-lag 101``) with Parquet output (the physical view), engine ``local``, format
  ``parquet``; its answer is checked against the JSON Lines run (the same CHT; ids and the generated CTIs
  differ). ``jsonl`` (the default) keeps the figures comparable with earlier sessions;
- with ``--spark``: the same query on the Spark batch engine (local[*]) and, where native Spark SQL
  expresses it, natively over the same file (``native``) with the ratio udm-on-Spark / native in time.
  Spark's executors are other processes, so its el/cpu-s (the driver's) is not shown. Queries calling
  the benchmark's own UDFs (not installed, so Spark's workers cannot load them) are skipped on Spark.

`bench.nexmark.before_after` runs the same local-engine queries on a baseline git revision and on this
checkout, side by side in one run (``python -m bench.nexmark.before_after --base REV``).

Targets (issues 13 and 26): every query >= Flink's per-core figure and >= 500 k el/s; q0, q1, q2, q5, q7 and
q14 >= 1 M el/s. Figures print side by side; nothing here fails a build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.nexmark.gen import generate, table_options, to_parquet
from bench.nexmark.queries import BENCH_UDFS, FLINK_PER_CORE, NATIVE, QUERIES, query_names

ROOT = Path(__file__).resolve().parent.parent.parent
#: el/s targets (issue 26): every query 500 k, these 1 M
FAST = ("q0", "q1", "q2", "q5", "q7", "q14")


def child_env() -> dict[str, str]:
    """The children's environment: bytecode caches on (``PYTHONDONTWRITEBYTECODE`` unset), as an installed
    udmkit runs; with the variable set (some shells and CI images set it) every child compiled the modules
    changed since the caches were last written, ~0.1-0.2 s of start-up that no user pays."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_bytecode() -> None:
    """Write the bytecode caches of this checkout's packages once, before any timed child."""
    dirs = [str(ROOT / d) for d in ("host", "sdk", "registry", "templates", "plugins", "bench") if (ROOT / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"[/\\](\.venv|build|node_modules)[/\\]", *dirs],
                   capture_output=True, env=child_env(), check=False)


def run_child(query: dict[str, Any], inp: Path, out: Path, engine: str, table: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.nexmark._child", json.dumps(query), str(inp), str(out), engine,
           *([json.dumps(table)] if table is not None else [])]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=child_env())
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail}
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def same_output(a: Path, b: Path) -> str:
    """Whether two runs' outputs agree: the same bytes, or else the same CHT (ids and order may differ)."""
    if a.read_bytes() == b.read_bytes():
        return "same bytes"
    from udm.host.testing.cht import cht

    return "same CHT" if cht(output_elements(a)) == cht(output_elements(b)) else "OUTPUTS DIFFER"


def output_elements(path: Path) -> list[Any]:
    """A run's output elements: element JSON Lines, or a Parquet table's physical view."""
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        from udm.host.io.table_columns import physical_elements

        return physical_elements(pq.read_table(path).to_pylist())
    from udm.host.io.jsonl import read_jsonl_elements

    return [el for _, el in read_jsonl_elements(path)]


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=200_000, help="Nexmark events generated (bids are 46/50)")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--disorder", type=int, default=100, help="ticks an event may lie before its arrival")
    ap.add_argument("--spark", action="store_true", help="also run each query on the Spark batch engine")
    ap.add_argument("--format", choices=("jsonl", "parquet", "both"), default="jsonl",
                    help="input and output as element JSON Lines, as Parquet tables, or both side by side")
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated streams in this directory")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the one-element-per-call baseline (engine 'el')")
    args = ap.parse_args(argv)
    names = query_names(ap, args.queries)
    tmp = Path(tempfile.mkdtemp(prefix="nexmark-"))
    where = args.keep or tmp
    streams = generate(where, args.events, disorder=args.disorder)
    warm_bytecode()
    table = table_options(args.disorder)
    bids_table = to_parquet(streams.bids, where / "bids.parquet") if args.format != "jsonl" else None
    n_bids = streams.counts["bids"]
    print(f"nexmark: {args.events:,} events -> {n_bids:,} bid elements (incl. CTIs), disorder {args.disorder} "
          f"ticks; {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}", flush=True)
    engines = [] if args.format == "parquet" else ["el", "local", "spark", "native"] if args.spark else ["el", "local"]
    if bids_table is not None:
        engines.append("parquet")
    head = f"{'query':6} {'engine':7} {'el/s':>11} {'incl. start':>11} {'el/cpu-s':>11} {'cpu incl.':>11} " \
           f"{'flink/core':>10} {'vs flink':>8} {'out':>9} {'RSS MiB':>8} {'wall s':>7}"
    print(head)
    rows: list[dict[str, Any]] = []
    for q in names:
        secs: dict[str, float] = {}
        for eng in engines:
            if eng == "spark" and q in BENCH_UDFS:
                print(f"{q:6} {eng:7} skipped: calls a benchmark UDF that Spark's workers cannot load", flush=True)
                continue
            if eng == "native" and q not in NATIVE:
                continue
            if eng == "el" and args.no_baseline:
                continue
            child_engine = {"native": f"native:{q}", "parquet": "local"}.get(eng, eng)
            r = run_child(QUERIES[q], bids_table or streams.bids, tmp / f"{q}.{eng}.out.parquet", "local", table) \
                if eng == "parquet" else run_child(QUERIES[q], streams.bids, tmp / f"{q}.{eng}.out.jsonl", child_engine)
            if "error" in r:
                print(f"{q:6} {eng:7} failed: {r['error']}", flush=True)
                rows.append({"query": q, "engine": eng, **r})
                continue
            secs[eng] = r["seconds"]
            eps = r["in"] / r["seconds"]
            local = eng in ("local", "el", "parquet")
            cps = r["in"] / r["cpu"] if r["cpu"] > 0 and local else None
            cps_all = r["in"] / r["cpu_all"] if local else None
            flink = FLINK_PER_CORE.get(q)
            vs = f"{cps / flink:.2f}x" if flink and cps else "-"
            whole = r["in"] / r["wall"]
            mark = ""
            if eng in ("local", "parquet"):
                target = 1_000_000 if q in FAST else 500_000
                mark = f" (target {target / 1e6:g} M el/s incl. start{'' if whole >= target else ': missed'}"
                if eng == "local" and "el" in secs:
                    same = same_output(tmp / f"{q}.el.out.jsonl", tmp / f"{q}.local.out.jsonl")
                    mark += f"; x{secs['el'] / r['seconds']:.1f} one el/call's el/s, {same}"
                    r["same_as_el"] = same
                ref = next((e for e in ("local", "el") if e in secs), None)
                if eng == "parquet" and ref is not None:
                    same = same_output(tmp / f"{q}.{ref}.out.jsonl", tmp / f"{q}.parquet.out.parquet")
                    mark += f"; vs JSON Lines ({ref}): {same}"
                    r["same_as_jsonl"] = same
                mark += ")"
            if eng == "native" and "spark" in secs:
                mark = f" (udm spark / native time: x{secs['spark'] / r['seconds']:.2f})"
            print(f"{q:6} {eng:7} {_fmt(eps):>11} {_fmt(whole):>11} {_fmt(cps):>11} {_fmt(cps_all):>11} "
                  f"{_fmt(flink):>10} {vs:>8} "
                  f"{r['out']:>9,} {r['rss_mb']:>8.0f} {r['wall']:>7.1f}{mark}", flush=True)
            rows.append({"query": q, "engine": eng, "el_per_s": eps, "el_per_cpu_s": cps, "flink_per_core": flink,
                         **r})
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)  # the outputs (and the streams, unless --keep): ~250 MB per 1 M events
    return 0


if __name__ == "__main__":
    sys.exit(main())
