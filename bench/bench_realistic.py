"""The issue-13 shapes end to end through ``udm run --engine local`` (a child process per run, as
`bench.bench_run` runs it): 10 groups, 100-tick tumbling ``sum`` (about 100 k output windows per 1 M
events), in order and disordered with ~17 % retractions (`bench.gen.disordered` with 10 groups).

Per shape and size it prints el/s over the run (`RunResult.seconds`) and over the whole wall time
*including interpreter start-up and query binding* (the issue's "end to end"), per-element time and peak
RSS with their 1 M / 100 k ratios, and elements per CPU-second of the child process (start-up included,
all threads): on a shared, loaded machine the one figure that the load does not inflate.

Targets (issue 13): in order >= 1 M el/s end to end incl. start-up; disordered with retractions >= 300 k
el/s; per-element time 1 M / 100 k <= 1.3x; peak RSS 1 M / 100 k <= 1.5x. Printed, never asserted.

``--startup`` instead measures start-up alone and its share of the in-order run, A/B in one run, variants
alternating round by round (median of ``--rounds``): ``udm run`` on a 1-line file and on the in-order file,
as it is, with the fast exit (`udm.host.cli.fast_exit`) off (``UDM_FAST_EXIT=0``), and with
``--baseline-python`` (another checkout's interpreter, e.g. ``/work/main/.venv/bin/python``) when given.
Children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` unset), as an installed udmkit would.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import gen
from bench.bench_run import run_udm

GROUPS = 10
QUERY: dict[str, Any] = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["sym"],
                                    "udm": "sum", "input": "price", "as": "total"}]}
TARGETS = {"in_order": 1_000_000, "disordered": 300_000}


def in_order(path: Path, n: int, *, cti_every: int = 1000, seed: int = 13) -> None:
    """Insert-only point events one tick apart, ``sym`` one of 10 groups, a CTI every ``cti_every``."""
    rng = random.Random(seed)

    def lines() -> Iterator[str]:
        t = 0
        for k in range(1, n + 1):
            if k % cti_every == 0:
                yield f'{{"kind":"cti","t":{t}}}\n'
            else:
                yield (f'{{"kind":"insert","id":"e{k}","le":{t},"re":{t + 1},'
                       f'"payload":{{"sym":"g{rng.randrange(GROUPS)}","price":{rng.randrange(1000)}}}}}\n')
                t += 1

    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines())


def disordered(path: Path, n: int) -> None:
    """`bench.gen.disordered` (jitter 50, ~17 % retractions) over 10 groups."""
    gen.disordered(path, n, syms=tuple(f"g{i}" for i in range(GROUPS)))


def _child(python: str, switches: dict[str, str], q: Path, inp: Path, tmp: Path) -> tuple[float, float]:
    """One ``udm run`` child (``--quiet --json``) with ``switches`` in its environment: (wall seconds, CPU
    seconds of the child, all threads)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(switches)
    cmd = [python, "-m", "udm.host.cli.app", "run", str(q), "--input", str(inp), "--output", str(tmp / "o.jsonl"),
           "--dead-letter", str(tmp / "dl.jsonl"), "--engine", "local", "--quiet", "--json"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"udm run failed: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def startup_ab(tmp: Path, q: Path, n: int, rounds: int, baseline: str | None) -> None:
    """Start-up (1-line file) and the in-order ``n``-element run incl. start-up, variants alternating."""
    one = tmp / "one.jsonl"
    in_order(one, 1)
    big = tmp / f"in_order-{n}.jsonl"
    in_order(big, n)
    variants = [("this", sys.executable, {"UDM_FAST_EXIT": "1"}),
                ("fast-exit off", sys.executable, {"UDM_FAST_EXIT": "0"})]
    if baseline:
        variants.append(("baseline", baseline, {}))
    for label, inp, count in (("1-line file", one, 1), (f"in order {n:,}", big, n)):
        for python in {v[1] for v in variants}:  # warm the bytecode caches and the page cache
            _child(python, {}, q, inp, tmp)
        res: dict[str, list[tuple[float, float]]] = {v[0]: [] for v in variants}
        loads = []
        for _ in range(rounds):
            for name, python, switches in variants:
                loads.append(os.getloadavg()[0])
                res[name].append(_child(python, switches, q, inp, tmp))
        ref = statistics.median(w for w, _ in res[variants[-1][0]])
        for name, runs in res.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            rate = f", {count / wall:>11,.0f} el/s incl. start-up, {count / cpu:>11,.0f} el/cpu-s" if count > 1 else ""
            print(f"{label:>18} {name:>13}: median {wall:.3f}s wall ({', '.join(f'{w:.2f}' for w, _ in runs)}), "
                  f"{cpu:.3f} CPU-s{rate}; wall x{wall / ref:.2f} vs {variants[-1][0]}", flush=True)
        print(f"{label:>18} load during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cpus",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_realistic", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 k and 100 k elements instead of 100 k and 1 M")
    ap.add_argument("--startup", action="store_true", help="start-up A/B (see the module docstring) instead")
    ap.add_argument("--rounds", type=int, default=5, help="--startup: runs per variant (default 5)")
    ap.add_argument("--baseline-python", help="--startup: also run udm with this interpreter (another checkout)")
    args = ap.parse_args(argv)
    if args.startup:
        tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
        try:
            q = tmp / "q.json"
            q.write_text(json.dumps(QUERY))
            startup_ab(tmp, q, 100_000 if args.quick else 1_000_000, args.rounds, args.baseline_python)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000]
    tmp = Path(tempfile.mkdtemp(prefix="bench-realistic-"))
    try:
        q = tmp / "q.json"
        q.write_text(json.dumps(QUERY))
        print(f"udm run --engine local: tumbling(100) group_by sym ({GROUPS} groups) sum(price); "
              f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus", flush=True)
        if os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.dont_write_bytecode:
            # without cached bytecode every start compiles udmkit's modules from source (measured ~0.1 CPU-s
            # of a ~0.5 s start-up): an installed udmkit does not pay that
            print("note: PYTHONDONTWRITEBYTECODE is set: start-up includes compiling udmkit from source", flush=True)
        for shape, make in (("in_order", in_order), ("disordered", disordered)):
            res = {}
            for n in sizes:
                inp = tmp / f"{shape}-{n}.jsonl"
                make(inp, n)
                r = run_udm(q, inp, tmp / "out.jsonl", tmp / "dl.jsonl")
                res[n] = r
                print(f"{shape:>10} {n:>9,} el: {n / r['seconds']:>11,.0f} el/s run, {n / r['wall']:>11,.0f} el/s "
                      f"incl. start-up ({r['wall']:.2f}s wall), {n / r['cpu']:>11,.0f} el/cpu-s incl. start-up "
                      f"({r['cpu']:.2f} CPU-s), {1e6 * r['seconds'] / n:.2f} us/el, "
                      f"peak RSS {r['rss_mib']:.0f} MiB, out {r['elements_out']:,}", flush=True)
            a, b = res[sizes[0]], res[sizes[1]]
            t_ratio = (b["seconds"] / sizes[1]) / (a["seconds"] / sizes[0])
            print(f"{shape:>10} ratios {sizes[1]:,}/{sizes[0]:,}: per-element time x{t_ratio:.2f} (target <= 1.3), "
                  f"peak RSS x{b['rss_mib'] / a['rss_mib']:.2f} (target <= 1.5); target "
                  f"{TARGETS[shape]:,} el/s ({'incl. start-up' if shape == 'in_order' else 'run'})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
