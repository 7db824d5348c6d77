"""A/B of the columnar grid path (`udm.host.engine.window.grid_columnar`) on `bench.bench_realistic`'s
in-order shape (10 groups, 100-tick tumbling ``sum``): ``udm run --engine local`` children alternating
with the path on and off (``grid_columnar.ENABLED``), the same input, the output bytes compared.

Per side it prints the median over the runs of: el/s over the whole wall time *including interpreter
start-up* (the issue's end-to-end figure), el/s over the run (`RunResult.seconds`), and elements per
CPU-second of the child (start-up included, all threads: the figure that load inflates least); then the
on/off ratios. Printed, never asserted. Run with bytecode cached (``env -u PYTHONDONTWRITEBYTECODE``).
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

from bench.bench_realistic import QUERY, in_order

_CHILD = """
import sys
from udm.host.engine.window import grid_columnar
grid_columnar.ENABLED = sys.argv[1] == "on"
from udm.host.cli.app import main
sys.argv = ["udm", *sys.argv[2:]]
main()
"""


def _run(on: bool, q: Path, inp: Path, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-c", _CHILD, "on" if on else "off", "run", str(q), "--input", str(inp), "--output",
           str(out), "--dead-letter", str(out.with_suffix(".dl")), "--engine", "local", "--quiet", "--json"]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=Path(__file__).resolve().parent.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"udm run failed: {fe.read().strip()}")
        summary = json.loads(fo.read().strip().splitlines()[-1])
    summary["wall"] = wall
    summary["cpu"] = usage.ru_utime + usage.ru_stime
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_grid_columnar", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="elements (default 1 M)")
    ap.add_argument("--runs", type=int, default=3, help="runs per side, alternating (default 3)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-grid-columnar-"))
    try:
        q = tmp / "q.json"
        q.write_text(json.dumps(QUERY))
        inp = tmp / "in.jsonl"
        in_order(inp, args.n)
        print(f"udm run --engine local, {args.n:,} in-order elements, tumbling(100) sum over 10 groups; "
              f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus", flush=True)
        if os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.dont_write_bytecode:
            print("note: PYTHONDONTWRITEBYTECODE is set: start-up includes compiling udmkit from source", flush=True)
        res: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for _ in range(args.runs):
            for on in (True, False):
                res[on].append(_run(on, q, inp, tmp / f"out-{on}.jsonl"))
        same = (tmp / "out-True.jsonl").read_bytes() == (tmp / "out-False.jsonl").read_bytes()
        n = args.n
        med: dict[bool, dict[str, float]] = {}
        for on in (True, False):
            rs = res[on]
            med[on] = {"e2e": statistics.median(n / r["wall"] for r in rs),
                       "run": statistics.median(n / r["seconds"] for r in rs),
                       "cpu": statistics.median(n / r["cpu"] for r in rs)}
            m = med[on]
            walls = ", ".join(f"{r['wall']:.2f}" for r in rs)
            print(f"  columnar {'on ' if on else 'off'}: {m['e2e']:>10,.0f} el/s incl. start-up  "
                  f"{m['run']:>10,.0f} el/s over the run  {m['cpu']:>10,.0f} el/CPU-s  "
                  f"(walls {walls} s)", flush=True)
        print(f"  on/off: incl. start-up {med[True]['e2e'] / med[False]['e2e']:.2f}x, over the run "
              f"{med[True]['run'] / med[False]['run']:.2f}x, per CPU-s {med[True]['cpu'] / med[False]['cpu']:.2f}x; "
              f"output bytes {'identical' if same else 'DIFFER'}; load {os.getloadavg()[0]:.1f}")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
