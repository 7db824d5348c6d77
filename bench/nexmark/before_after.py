"""``python -m bench.nexmark.before_after --base REV [--events N] [--queries q0,q1] [--repeats R]``: the Nexmark
queries on the local engine, on two code trees in one run, side by side.

`bench.bench_before_after` runs ``udm run``, which cannot load the benchmark's own UDFs (q1, q2, q14); this
runs `bench.nexmark._child` instead (the same run as ``python -m bench.nexmark``, the UDFs in the catalog) on
the baseline tree (``git archive REV``, unpacked in a temporary directory) and on this checkout, through
`bench.bench_before_after`'s bootstrap idea: the editable install's import mapping is pointed at the chosen
tree before anything of ``udm`` is imported (the child reports which ``udm.host`` it imported; checked). The
benchmark's own code (``bench``: the child, the UDFs, the streams) is this checkout's for both.

Runs alternate (base, current, ...) ``--repeats`` times per query after one untimed warm-up run per tree
(children write bytecode caches, as an installed udmkit has them; ``--no-pyc`` turns that off). Per query and
tree it prints the median of: el/s over the run, el/s over the child's whole wall time (``incl. start``, the
issue-26 target figure), el per CPU-second of the run (all threads) and of the whole child (start-up
included; the steadier figures on a loaded machine), peak RSS; then the ratios current / base and whether
the two trees' outputs are the same bytes or the same CHT. ``--format parquet``: the bids as a Parquet
table and Parquet output, as ``bench.nexmark --format parquet`` runs them. Nothing here fails a build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_before_after import REDIRECT, export_tree
from bench.machine import load_text
from bench.nexmark.__main__ import same_output
from bench.nexmark.gen import generate, table_options, to_parquet
from bench.nexmark.queries import QUERIES, query_names

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent.parent

BOOT = r'''
"""``python boot.py TREE QUERY_JSON INPUT OUTPUT [TABLE_JSON]``: bench.nexmark._child on the udm of TREE."""
import runpy
''' + REDIRECT + r'''
sys.argv = ["bench.nexmark._child", *sys.argv[1:4], "local", *sys.argv[4:]]
import udm.host  # noqa: E402

sys.stderr.write(f"UDM_BENCH_TREE={udm.host.__file__}\n")
runpy.run_module("bench.nexmark._child", run_name="__main__", alter_sys=True)
'''


def run_tree(boot: Path, tree: Path, query: dict[str, Any], inp: Path, out: Path, pyc: bool,
             table: dict[str, Any] | None = None) -> dict[str, Any]:
    """One child on ``tree``: the child's own figures plus its CPU seconds from the OS (start-up included)."""
    env = dict(os.environ)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, str(boot), str(tree), json.dumps(query), str(inp), str(out),
           *([json.dumps(table)] if table is not None else [])]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env, text=True)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"child on {tree} failed ({proc.returncode}): {stderr.strip()[-2000:]}")
    imported = [x.split("=", 1)[1] for x in stderr.splitlines() if x.startswith("UDM_BENCH_TREE=")]
    if not imported or not Path(imported[0]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the child imported udm.host from {imported or '?'}, not from {tree}")
    r: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    r["wall_process"] = wall
    return r




def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.nexmark.before_after", description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="baseline git revision")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-pyc", action="store_true", help="children without bytecode caches (PYTHONDONTWRITEBYTECODE)")
    ap.add_argument("--keep", type=Path, default=None, help="generate (or reuse) the streams in this directory")
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                    help="input and output as element JSON Lines, or as Parquet tables (`bench.nexmark --format`)")
    args = ap.parse_args(argv)
    names = query_names(ap, args.queries)
    tmp = Path(tempfile.mkdtemp(prefix="nexmark-ba-"))
    try:
        base_tree = tmp / "base"
        sha = export_tree(args.base, base_tree)
        boot = tmp / "boot.py"
        boot.write_text(BOOT)
        trees = {"base": base_tree, "current": ROOT}
        where = args.keep or tmp / "streams"
        bids = where / "bids.jsonl"
        if not bids.exists():
            generate(where, args.events)
        tiny = tmp / "tiny.jsonl"
        with open(bids, "rb") as f:
            tiny.write_bytes(b"".join(f.readline() for _ in range(100)))
            n_lines = 100 + sum(1 for _ in f)
        table = table_options() if args.format == "parquet" else None
        ext = "parquet" if table is not None else "jsonl"
        if table is not None:
            bids, tiny = to_parquet(bids, tmp / "bids.parquet"), to_parquet(tiny, tmp / "tiny.parquet")
        pyc = not args.no_pyc
        print(f"nexmark before/after, local engine: {n_lines:,} bid elements ({bids}, {args.format}); "
              f"base = {args.base} "
              f"({sha[:10]}), current = {ROOT}; {args.repeats} alternating repeats, median; bytecode caches "
              f"{'on' if pyc else 'off'}; {load_text()}", flush=True)
        for tree in trees.values():  # bytecode caches and the page cache
            run_tree(boot, tree, QUERIES["q0"], tiny, tmp / f"warm.{ext}", pyc, table)
        print(f"{'query':5} {'tree':7} {'el/s':>10} {'incl.start':>10} {'el/cpu-s':>10} {'cpu incl.':>10} "
              f"{'RSS MiB':>7}   (ratios: current / base)", flush=True)
        for q in names:
            res: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
            outs: dict[str, Path] = {}
            for _ in range(args.repeats):
                for label, tree in trees.items():
                    out = tmp / f"{q}.{label}.out.{ext}"
                    res[label].append(run_tree(boot, tree, QUERIES[q], bids, out, pyc, table))
                    outs[label] = out
            med: dict[str, dict[str, float]] = {}
            for label, runs in res.items():
                n = runs[0]["in"]
                med[label] = {"eps": statistics.median(n / r["seconds"] for r in runs),
                              "start": statistics.median(n / r["wall"] for r in runs),
                              "cps": statistics.median(n / r["cpu"] for r in runs),
                              "cps_all": statistics.median(n / r["cpu_all"] for r in runs),
                              "rss": statistics.median(r["rss_mb"] for r in runs)}
                m = med[label]
                print(f"{q:5} {label:7} {m['eps']:>10,.0f} {m['start']:>10,.0f} {m['cps']:>10,.0f} "
                      f"{m['cps_all']:>10,.0f} {m['rss']:>7.0f}", flush=True)
            b, c = med["base"], med["current"]
            print(f"{q:5} {'ratio':7} {c['eps'] / b['eps']:>9.2f}x {c['start'] / b['start']:>9.2f}x "
                  f"{c['cps'] / b['cps']:>9.2f}x {c['cps_all'] / b['cps_all']:>9.2f}x {'':>7}   "
                  f"{same_output(outs['base'], outs['current'])}; {load_text()}", flush=True)
            for p in outs.values():
                p.unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
