"""A Spark standalone cluster on 127.0.0.1, for testing a query the way it runs on a cluster: a master and
workers started from the installed pyspark (``bin/spark-class ... deploy.master.Master`` /
``deploy.worker.Worker``), each worker with its own cores and working directory, on ports picked free. Its
executors are separate JVMs with their own Python workers, as on a real cluster (what ``local[N]`` never
shows: plugins must be importable there, state and files must be where they look for them).

Used by the udmkit tests (``tests/test_spark_cluster.py``) and ``python -m bench.bench_stages --cluster``::

    with Cluster(Path("work"), workers=2, cores=1) as c:
        subprocess.run(["udm", "run", "q.yaml", "-i", "in.jsonl", "-o", "out.jsonl", "--engine", "spark",
                        "--master", c.url])

Every process it starts is stopped by its pid, with its children (a worker's executors and their Python
workers), also when a start fails half way."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "descendants", "free_port"]

# lazy imports: pyspark — `import udm.host.testing` (the pytest plugin) never loads Spark


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found, then theirs)."""
    kids = _children()
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


@dataclass
class Cluster:
    """``start()`` a master and ``workers`` workers of ``cores`` cores each under ``root``; ``stop()``."""

    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    master_port: int = 0
    ui_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spark_class(self) -> list[str]:
        import pyspark

        home = Path(pyspark.__file__).parent
        return [str(home / "bin" / "spark-class")]

    def _env(self) -> dict[str, str]:
        import pyspark

        env = dict(os.environ)
        env.update({"SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"})
        env.pop("SPARK_REMOTE", None)
        env.pop("UDM_SPARK_MASTER", None)
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.root / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen([*self._spark_class(), *args], env=self._env(), stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 240.0) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.ui_port = free_port(), free_port()
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(self.master_port), "--webui-port", str(self.ui_port)])
        for k in range(self.workers):
            work = self.root / f"worker-{k}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker-{k}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                        "--cores", str(self.cores), "--memory", self.memory, "--work-dir",
                                        str(work), "--port", str(free_port()), "--webui-port", str(free_port()),
                                        self.url])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}): {self.log(name)[-2000:]}")
            if len(self.alive_workers()) == self.workers:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not come up in {timeout:.0f}s: {self.log('master')[-2000:]}")

    def state(self) -> dict[str, Any]:
        """The master's status page as JSON (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            got: dict[str, Any] = json.loads(r.read().decode())
        return got

    def alive_workers(self) -> list[dict[str, Any]]:
        with contextlib.suppress(OSError, ValueError):
            return [w for w in self.state().get("workers") or [] if w.get("state") == "ALIVE"]
        return []

    def log(self, name: str) -> str:
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def kill(self, name: str) -> None:
        """SIGKILL a process and everything below it (a worker: its executors and their Python workers)."""
        p = self.procs.pop(name, None)
        if p is None:
            return
        for pid in [p.pid, *descendants(p.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=30)

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "master"] + ["master"]:
            self.kill(name)

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
