"""``udm run`` on a real Spark standalone cluster (`udm.host.testing.spark_cluster`): a master and two
workers on 127.0.0.1, one core each, executors in JVMs of their own with their own Python workers.

One Spark application (``tests/cluster_job.py``) runs, with ``--master spark://...``: batch (the engine
path with retractions, bad lines and CTIs; the two-phase plan on a clean file), a staged query graph
(joined by one key, counted per another), and spark-streaming on a file; then a larger batch job during
which one worker is killed (SIGKILL, with its executor). Each output CHT and dead-letter file must be the
local engine's, the killed one included: Spark re-runs the lost tasks on the other worker. The plugins
reach the executors as installed packages (the executors run this venv's Python)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stage_queries import JOIN_THEN_WINDOW
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, run_local
from udm.host.temporal.elements import parse_element
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate, generate_related
from udm.host.testing.spark_cluster import Cluster
from udm.host.testing.verifier import verify

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MEDIAN = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                     "udm": "median", "input": "v"}]}
SUM = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                  "udm": "sum", "input": "v"}]}
#: how long the whole application may take on a loaded two-core machine
TIMEOUT = 1800


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1) as c:
        yield c


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _dead(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _dead_key(d: dict[str, Any]) -> tuple[str, int, str]:
    return d.get("input") or "", d["line"] or 0, d["reason"]


def _inputs(work: Path) -> list[dict[str, Any]]:
    """The runs of the application, their inputs written under ``work``."""
    runs: list[dict[str, Any]] = []

    def add(name: str, engine: str, query: dict[str, Any], streams: dict[str, list[Any]], **extra: Any) -> None:
        paths = {}
        for k, s in streams.items():
            paths[k] = str(work / f"{name}-{k}.jsonl")
            write_stream(paths[k], s)
        runs.append({"name": name, "engine": engine, "query": query,
                     "input": paths["main"] if list(paths) == ["main"] else paths,
                     "output": str(work / f"{name}.out.jsonl"), "dead": str(work / f"{name}.dead.jsonl"), **extra})

    add("batch", "spark", MEDIAN, {"main": generate(seed=7, events=400, groups=4, speculation=0.3, bad=0.03,
                                                     duration="mixed", cti="regular")})
    add("algebraic", "spark", SUM, {"main": generate(seed=8, events=400, groups=4, speculation=0.0,
                                                      disorder="in_order", cti="regular")})
    add("staged", "spark", JOIN_THEN_WINDOW, generate_related(2, seed=9, keys=3, events=120, bad=0.03,
                                                              speculation=0.3, cti="regular"))
    add("streaming", "spark-streaming", MEDIAN,
        {"main": generate(seed=10, events=200, groups=4, speculation=0.3, bad=0.03, cti="regular")}, batch_size=60)
    add("kill", "spark", MEDIAN, {"main": generate(seed=11, events=60_000, groups=40, speculation=0.2,
                                                    cti="regular")})
    return runs


def test_batch_graph_and_streaming_on_a_cluster_equal_the_local_engine(cluster: Cluster, tmp_path: Path) -> None:
    runs = _inputs(tmp_path)
    (tmp_path / "job.json").write_text(json.dumps(runs), encoding="utf-8")
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen([sys.executable, str(root / "tests" / "cluster_job.py"), str(tmp_path), cluster.url],
                             cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed_at = None
    try:
        deadline = time.monotonic() + TIMEOUT
        while child.poll() is None and time.monotonic() < deadline:
            if killed_at is None and (tmp_path / "kill-started").exists():
                time.sleep(1.0)  # (into the job: its first tasks are under way)
                cluster.kill("worker-1")
                killed_at = time.time()
            time.sleep(0.2)
        if child.poll() is None:
            child.kill()
        log = child.communicate()[0]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, log[-4000:]
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert killed_at is not None and killed_at < results["kill"]["end"], "the worker was killed after the job ended"
    assert len(cluster.alive_workers()) <= 1

    for run in runs:
        local_out, local_dead = tmp_path / f"{run['name']}.local.jsonl", tmp_path / f"{run['name']}.local.dead.jsonl"
        inputs = run["input"] if isinstance(run["input"], str) else dict(run["input"])
        res = run_local(RunRequest(bind(parse_query(run["query"])), inputs, local_out, dead_letter=local_dead))
        verdict = verify(_read(Path(run["output"])), _read(local_out), rel_tol=1e-9)
        assert verdict, f"{run['name']}: {verdict}"
        got, want = _dead(Path(run["dead"])), _dead(local_dead)
        assert sorted(got, key=_dead_key) == sorted(want, key=_dead_key), run["name"]
        assert results[run["name"]]["elements_in"] == res.elements_in, run["name"]
