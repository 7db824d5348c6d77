"""End-to-end benchmark of ``udm run --engine local`` (issue 3).

For each input shape (in-order insert-only; disordered with ~17 % retractions) and size (100 k and 1 M
elements, a CTI every 1000), it runs the real ``udm`` command in a child process — file read, engine,
file write — and reports:

- throughput (elements/s) over the run itself (`RunResult.seconds`: first byte read to last byte
  written; interpreter start-up, imports and query binding excluded, shown separately as ``wall``);
- per-element time (µs) and its 1 M / 100 k ratio;
- peak RSS of the child (``os.wait4`` rusage) and its 1 M / 100 k ratio;
- the brute-force recompute baseline (`bench.baseline`) on the same file, and the speed-up over it;
- that the engine's output CHT equals the baseline's (float tolerance 1e-9).

Targets: >= 1,000,000 el/s in order, >= 150,000 el/s disordered with retractions, per-element time
1 M / 100 k <= 1.3x, peak RSS 1 M / 100 k <= 1.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import gen
from bench.baseline import run_baseline
from bench.machine import load_text

TARGETS = {"in_order": 1_000_000, "disordered": 150_000}
TIME_RATIO_MAX = 1.3
RSS_RATIO_MAX = 1.5
WINDOW = 1000
QUERIES: dict[str, dict[str, Any]] = {
    "avg": {"steps": [{"op": "window", "window": {"type": "tumbling", "size": WINDOW}, "group_by": ["sym"],
                       "udm": "avg", "input": "price", "as": "avg_price"}]},
    "median": {"steps": [{"op": "window", "window": {"type": "tumbling", "size": WINDOW}, "group_by": ["sym"],
                          "udm": "median", "input": "price", "as": "median_price"}]},
}


def run_udm(query: Path, inp: Path, out: Path, dl: Path) -> dict[str, Any]:
    """One ``udm run`` in a child process: its JSON summary, wall time and peak RSS (MiB, the child's own
    VmHWM; see `bench._udm_child`)."""
    cmd = [sys.executable, "-m", "bench._udm_child", "run", str(query), "--input", str(inp), "--output", str(out),
           "--dead-letter", str(dl), "--engine", "local", "--quiet", "--json"]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=Path(__file__).resolve().parent.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    if proc.returncode != 0:
        raise RuntimeError(f"udm run failed ({proc.returncode}): {stderr.strip()}")
    summary = json.loads(stdout.strip().splitlines()[-1])
    summary["wall"] = wall
    summary["cpu"] = usage.ru_utime + usage.ru_stime  # the child's CPU seconds, start-up included (all threads)
    hwm = [int(x.split("=", 1)[1]) for x in stderr.splitlines() if x.startswith("UDM_BENCH_VMHWM_KB=")]
    summary["rss_mib"] = (hwm[-1] if hwm else usage.ru_maxrss) / 1024
    return summary


def reader_alone(inp: Path) -> tuple[float, float]:
    """Elements/s of `JsonlReader` alone (read + parse + columnar checks, no engine), read the way
    ``udm run`` reads (`runners.READER_OPTIONS`): the ceiling that file input puts on it; and the CPU
    seconds (all threads) that took, which a loaded machine does not inflate the way it inflates wall time."""
    from udm.host.io.jsonl import JsonlReader
    from udm.host.query import runners

    opts = getattr(runners, "READER_OPTIONS", {"prefetch": 2})
    t0, c0 = time.perf_counter(), time.process_time()
    n = sum(len(b) for b in JsonlReader(inp, **opts))
    return n / (time.perf_counter() - t0), time.process_time() - c0




def _cht_equal(a: Path, b: Path) -> tuple[bool, str]:
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.testing.verifier import verify

    out = [e for _, e in read_jsonl_elements(a)]
    ref = [e for _, e in read_jsonl_elements(b)]
    v = verify(out, ref)
    return bool(v.ok), ("" if v.ok else str(v)[:400])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_run", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 k and 100 k elements instead of 100 k and 1 M")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="comma-separated element counts (default 100000,1000000)")
    ap.add_argument("--query", choices=sorted(QUERIES), default="avg")
    ap.add_argument("--cases", default="in_order,disordered")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target or check is not met")
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated files in this directory")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [100_000, 1_000_000])
    cases = [c for c in args.cases.split(",") if c]
    tmp = Path(tempfile.mkdtemp(prefix="udm-bench-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    query = tmp / f"query-{args.query}.json"
    query.write_text(json.dumps(QUERIES[args.query]))
    qstep = QUERIES[args.query]["steps"][0]
    print(f"udm run --engine local, query: tumbling({WINDOW}) group_by sym {args.query}(price); "
          f"CTI every 1000 elements; {load_text()}", flush=True)
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    try:
        for case in cases:
            gen_fn = getattr(gen, case)
            rows: dict[int, dict[str, Any]] = {}
            for n in sizes:
                inp = tmp / f"{case}-{n}.jsonl"
                counts = gen_fn(inp, n) if not inp.exists() else {}
                out, dl = tmp / f"{case}-{n}.out.jsonl", tmp / f"{case}-{n}.dl.jsonl"
                r = run_udm(query, inp, out, dl)
                row: dict[str, Any] = {"case": case, "n": n, "counts": counts, **r,
                                       "el_per_s": r["elements_in"] / r["seconds"],
                                       "us_per_el": r["seconds"] / r["elements_in"] * 1e6}
                if not args.no_baseline:
                    bout = tmp / f"{case}-{n}.baseline.jsonl"
                    b = run_baseline(inp, bout, size=WINDOW, group="sym", field="price", agg=args.query,
                                     alias=qstep["as"])
                    row["baseline_el_per_s"] = b["elements_in"] / b["seconds"]
                    row["speedup"] = row["el_per_s"] / row["baseline_el_per_s"]
                    same, diff = _cht_equal(out, bout)
                    row["same_answer"] = same
                    if not same:
                        failures.append(f"{case} {n}: engine output CHT differs from the baseline: {diff}")
                rows[n] = row
                results.append(row)
                base = (f"  baseline {row['baseline_el_per_s']:>11,.0f} el/s  x{row['speedup']:.1f}  "
                        f"same answer: {'yes' if row['same_answer'] else 'NO'}") if "speedup" in row else ""
                print(f"{case:>10} {n:>9,} el: {row['el_per_s']:>11,.0f} el/s  {row['us_per_el']:6.2f} us/el  "
                      f"peak RSS {row['rss_mib']:7.1f} MiB  (run {r['seconds']:.2f}s, wall {r['wall']:.2f}s, "
                      f"out {r['elements_out']:,}, dead-lettered {r['dead_lettered']}){base}", flush=True)
                if r["dead_lettered"]:
                    failures.append(f"{case} {n}: {r['dead_lettered']} elements dead-lettered (expected none)")
            big, small = max(sizes), min(sizes)
            if big != small:
                tr = rows[big]["us_per_el"] / rows[small]["us_per_el"]
                rr = rows[big]["rss_mib"] / rows[small]["rss_mib"]
                print(f"{case:>10} ratios {big:,}/{small:,}: per-element time x{tr:.2f} (target <= {TIME_RATIO_MAX}), "
                      f"peak RSS x{rr:.2f} (target <= {RSS_RATIO_MAX})", flush=True)
                results.append({"case": case, "time_ratio": tr, "rss_ratio": rr})
                if tr > TIME_RATIO_MAX:
                    failures.append(f"{case}: per-element time ratio {tr:.2f} > {TIME_RATIO_MAX}")
                if rr > RSS_RATIO_MAX:
                    failures.append(f"{case}: peak RSS ratio {rr:.2f} > {RSS_RATIO_MAX}")
            ra, rcpu = reader_alone(tmp / f"{case}-{big}.jsonl")
            print(f"{case:>10} reader alone at {big:,} (JSONL -> ElementBatch, no engine): {ra:,.0f} el/s, "
                  f"{rcpu:.2f} CPU-s; {load_text()}", flush=True)
            results.append({"case": case, "reader_el_per_s": ra, "reader_cpu_s": rcpu})
            target = TARGETS.get(case)
            if target:
                best = rows[big]["el_per_s"]
                verdict = "meets" if best >= target else "MISSES"
                print(f"{case:>10} throughput at {big:,}: {best:,.0f} el/s {verdict} the target {target:,} el/s",
                      flush=True)
                if best < target:
                    failures.append(f"{case}: {best:,.0f} el/s < target {target:,}")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json_out:
        args.json_out.write_text(json.dumps({"results": results, "failures": failures}, indent=2, default=str))
    if failures:
        print("targets/checks not met:\n  " + "\n  ".join(failures), flush=True)
    else:
        print("all targets and checks met", flush=True)
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
