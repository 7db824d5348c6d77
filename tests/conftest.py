"""Shared fixtures. Spark tests share one session-scoped SparkSession (local[2], 2 shuffle partitions,
UI off): starting Spark costs seconds and the machine is small.

How `make test` spreads the tests over its two xdist workers (`pytest -n 2`): one test at a time to the
worker that is free, the slow tests first, then the Spark ones, then the rest, so that no long test starts
last and leaves one worker running alone at the end. A module- or class-scoped fixture is built once per
worker that runs a test using it, so the tests of a module that defines one go to one worker together (the
Spark Connect job, the published registry and the browser are built once, not twice). xdist's own
``--dist loadgroup`` cannot do this here: it names a group in the test's node id, which pytest 9 no longer
lets a plugin change."""

from __future__ import annotations

import ast
import functools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: fixture scopes wider than a test and narrower than the session: built once per worker that uses them
SHARED_SCOPES = frozenset({"module", "class", "package"})
ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The plugin cache (`udm.host.plugin_cache`) of this test run, not the user's: hermetic, and it
    starts cold, so the runs of a session exercise both the first discovery and the cached ones."""
    os.environ.setdefault("UDM_CATALOG_CACHE", tempfile.mkdtemp(prefix="udm-catalog-cache-"))


@functools.cache
def shares_a_fixture(module: str) -> bool:
    """Whether the test module (a node id's path, from the repository root) defines a fixture of a shared
    scope. Read from its source: xdist's controller schedules by node id and never imports the tests."""
    path = ROOT / module
    if path.suffix != ".py" or not path.is_file():
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and any(
                        k.arg == "scope" and isinstance(k.value, ast.Constant) and k.value.value in SHARED_SCOPES
                        for k in deco.keywords):
                    return True
    return False


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _cost_rank(item: pytest.Item) -> int:
    """0 for a slow test, 1 for another Spark test, 2 for the rest: the order they start in."""
    if item.get_closest_marker("slow") is not None:
        return 0
    return 1 if item.get_closest_marker("spark") is not None else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first, Spark next (a stable sort: otherwise in collection order). A module that shares a
    fixture stays in one piece, at the rank of its most costly test, so its fixture is built once."""
    rank: dict[str, int] = {}
    for item in items:
        module = _module(item.nodeid)
        if shares_a_fixture(module):
            rank[module] = min(rank.get(module, 2), _cost_rank(item))
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(_module(item.nodeid), _cost_rank(item)), order[id(item)]))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For ``-n N`` (xdist's ``--dist load``): one test per unit of work, except a module that shares a
    fixture, which is one unit; the units go out in the collection's order (above), not by size."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            return module if shares_a_fixture(module) else nodeid

    config.option.loadscopereorder = False
    return SharedFixtureScheduling(config, log)


#: the tests' driver JVM: C1 only and a serial GC. Its jobs are small and short, so C2's compiler threads and
#: G1's concurrent ones cost more CPU than they win back (three A/B pairs over four Spark test files, CPU of
#: the process and its JVM and workers: median 103 CPU-s against 155; the first test, which starts the JVM,
#: 12-13 against 19-28). Only how fast the JVM runs changes; udmkit's log4j2 file stays (naming Java
#: options replaces the one `get_spark` would add).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from udm.host.spark.session import LOG4J_CONFIG, get_spark

    log4j = os.environ.get("UDM_SPARK_LOG4J") or str(LOG4J_CONFIG)
    session = get_spark("local[2]", app_name="udmkit-tests", shuffle_partitions=2,
                        **{"spark.default.parallelism": 2, "spark.sql.adaptive.enabled": "false",
                           "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j} {JVM_OPTIONS}"})
    yield session
    session.stop()
