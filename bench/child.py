"""A benchmark's child process, timed by wall clock and by the CPU seconds of its whole process tree (the
JVM it starts, PySpark's daemon and Python workers, what each of them reaped), sampled from Linux
``/proc`` every ``interval`` seconds while it runs: on a machine shared with other jobs the CPU seconds
say what a run costs, the wall clock what it waited as well. The last ``interval`` before the child ends
is not seen (a few percent of a run of seconds)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Measured", "load", "run_child", "tree_cpu", "tree_cpu_s"]


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    stdout: str
    #: ``cpu_s`` of the tree's JVMs (``java``: Spark), the rest is Python's (the driver, PySpark's daemon and
    #: workers): which side a change moved
    jvm_s: float = 0.0


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds so far of ``root`` and every live descendant, with the children each has reaped: all of
    them, and the JVMs' (processes named ``java``) among them."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    java: set[int] = set()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            name, f = (p / "stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = f.split()
        parent[int(p.name)] = int(fields[1])
        cpu[int(p.name)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        if name.endswith("(java"):
            java.add(int(p.name))
    mine, todo = set(), [root]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo += [c for c, pp in parent.items() if pp == pid and c not in mine]
    return (sum(cpu.get(p, 0) for p in mine) / tick, sum(cpu.get(p, 0) for p in mine & java) / tick)


def tree_cpu_s(root: int) -> float:
    """`tree_cpu`'s total."""
    return tree_cpu(root)[0]


def run_child(cmd: list[str], *, cwd: Path | None = None, interval: float = 0.2,
              env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` to the end; raise with its stderr when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu = jvm = 0.0
    while True:
        try:
            proc.wait(timeout=interval)
            break
        except subprocess.TimeoutExpired:
            total, java = tree_cpu(proc.pid)
            cpu, jvm = max(cpu, total), max(jvm, java)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])} ... failed ({proc.returncode}):\n{err[-3000:]}")
    return Measured(wall, cpu, out, jvm)
