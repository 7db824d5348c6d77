"""``python -m bench [--quick] [--strict]``: every benchmark, one after the other (``make bench``).

Runs `bench.bench_run` (end-to-end ``udm run``) in process, then each other ``bench/bench_*.py`` module
(e.g. the engine's micro-benchmarks) as ``python -m bench.NAME [--quick]`` in a child process.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description="Run all udmkit benchmarks.")
    ap.add_argument("--quick", action="store_true", help="smaller inputs (a short smoke run)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    flags = [f for f, on in (("--quick", args.quick), ("--strict", args.strict)) if on]
    t0 = time.perf_counter()
    rc = 0
    from bench import bench_run

    print("== bench_run: udm run --engine local, end to end", flush=True)
    rc |= bench_run.main(flags)
    here = Path(__file__).parent
    for mod in sorted(p.stem for p in here.glob("bench_*.py") if p.stem != "bench_run"):
        print(f"\n== {mod}", flush=True)
        # --quick goes to the modules that take it
        quick = ["--quick"] if args.quick and "--quick" in (here / f"{mod}.py").read_text() else []
        res = subprocess.run([sys.executable, "-m", f"bench.{mod}", *quick], cwd=here.parent)
        if res.returncode != 0:
            print(f"{mod} exited {res.returncode}", flush=True)
            rc |= 1 if args.strict else 0
    print(f"\nall benchmarks done in {time.perf_counter() - t0:.0f}s", flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
