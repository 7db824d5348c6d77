"""``python -m bench.startup_before_after --base REV [--current REV] [--repeats N]``: the CPU a ``udm run`` spends
on a 5-element input — start-up, nearly all of it — on two code trees, alternating.

Why: issue #26 counts start-up into its el/s, and on a loaded machine wall time says nothing; the child's
CPU (user + system, all threads, from ``wait4``) is steadier. Both trees are ``git archive`` exports (so
they pay the same for their bytecode caches, written by one untimed run each) run through
`bench.bench_before_after`'s import redirect, each with a plugin cache of its own (``UDM_CATALOG_CACHE``:
one shared cache would be rewritten by every other run, since its records name the tree's files).
Prints per tree the median and the least CPU of the runs, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_before_after import REDIRECT, export_tree

__all__ = ["main"]

_BOOT = REDIRECT + "\nfrom udm.host.cli.app import main\n\nsys.argv = ['udm', *sys.argv[1:]]\nmain()\n"
_QUERY = {"steps": [{"op": "project", "keep": ["auction", "bidder", "price", "channel"]}]}


def _cpu(boot: Path, tree: Path, work: Path) -> float:
    """One ``udm run`` on ``tree``: the child's CPU seconds."""
    cmd = [sys.executable, str(boot), str(tree), "run", str(work / "q.json"), "--input", str(work / "in.jsonl"),
           "--output", str(work / "out.jsonl"), "--quiet"]
    env = {**os.environ, "UDM_CATALOG_CACHE": str(work / f"cache-{tree.name}")}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=work, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"udm run on {tree} failed: {err.decode(errors='replace')[-2000:]}")
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="baseline git revision")
    ap.add_argument("--current", default="HEAD", help="current git revision (default HEAD)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="udm-startup-ba-") as tmp:
        work = Path(tmp)
        trees = {"base": work / "base", "current": work / "current"}
        shas = {name: export_tree(rev, trees[name])[:10] for name, rev in (("base", args.base),
                                                                            ("current", args.current))}
        boot = work / "boot.py"
        boot.write_text(_BOOT)
        (work / "q.json").write_text(json.dumps(_QUERY))
        (work / "in.jsonl").write_text("".join(
            json.dumps({"kind": "insert", "id": f"b{i}", "le": i, "re": i + 1,
                        "payload": {"auction": i, "bidder": 2 * i, "price": 100 + i, "channel": "web"}}) + "\n"
            for i in range(5)))
        for tree in trees.values():
            _cpu(boot, tree, work)  # (bytecode caches and the plugin cache written: not timed)
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                cpu[name].append(_cpu(boot, tree, work))
    load = os.getloadavg()
    print(f"udm run start-up (5 elements), CPU seconds of the child; {args.repeats} alternating runs; "
          f"load avg {load[0]:.1f}/{load[1]:.1f} on {os.cpu_count()} cpus")
    for name, xs in cpu.items():
        print(f"{name:8} {shas[name]}  median {statistics.median(xs) * 1e3:6.0f} ms   least {min(xs) * 1e3:6.0f} ms")
    print(f"ratio current / base (medians): {statistics.median(cpu['current']) / statistics.median(cpu['base']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
