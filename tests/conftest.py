"""Shared fixtures. Spark tests share one session-scoped SparkSession (local[2], 2 shuffle partitions,
UI off): starting Spark costs seconds and the machine is small.

How `make test` spreads the tests over its two xdist workers (`pytest -n 2`): one unit of work at a time to
the worker that is free, the longest first by the measured durations of `tests/durations.json`
(`run_order`), so that no long test starts last and leaves the other worker running alone at the end;
Spark units and the others interleaved in proportion to their time, so that a Spark test's waits (JVM start,
micro-batch triggers, child processes) overlap a Python test's CPU rather than another Spark test's. A
module- or class-scoped fixture is built once per worker that runs a test using it, so the tests of a module
that defines one go to one worker together, as one unit (the Spark Connect job, the published registry and
the browser are built once, not twice). xdist's own ``--dist loadgroup`` cannot do this here: it names a group
in the test's node id, which pytest 9 no longer lets a plugin change."""

from __future__ import annotations

import ast
import functools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import run_order

#: fixture scopes wider than a test and narrower than the session: built once per worker that uses them
SHARED_SCOPES = frozenset({"module", "class", "package"})
ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The plugin cache (`udm.host.plugin_cache`) of this test run, not the user's: hermetic, and it
    starts cold, so the runs of a session exercise both the first discovery and the cached ones. The Java
    options of every Spark driver JVM the run starts (`JVM_OPTIONS`)."""
    os.environ.setdefault("UDM_CATALOG_CACHE", tempfile.mkdtemp(prefix="udm-catalog-cache-"))
    os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)


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


def _unit(nodeid: str) -> str:
    """The unit of work a test goes out in: its module if that shares a fixture, else the test alone."""
    module = _module(nodeid)
    return module if shares_a_fixture(module) else nodeid


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The units in the order `run_order.schedule` gives (a stable sort: otherwise in collection order),
    each unit's tests together."""
    table = run_order.load()
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item.nodeid), []).append(item)
    costed = [run_order.Unit(name, sum(table.estimate(i.nodeid, _markers(i)) for i in its),
                                  any(i.get_closest_marker("spark") is not None for i in its))
              for name, its in units.items()]
    items[:] = [item for unit in run_order.schedule(costed) for item in units[unit.name]]


def _markers(item: pytest.Item) -> frozenset[str]:
    return frozenset(m.name for m in item.iter_markers())


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For ``-n N`` (xdist's ``--dist load``): one test per unit of work, except a module that shares a
    fixture, which is one unit; the units go out in the collection's order (above), not xdist's."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return SharedFixtureScheduling(config, log)


#: every Spark driver JVM of the run, the session's and those of the child processes tests start (``udm run
#: --engine spark``, the Connect job, the cluster's driver): C1 only and a serial GC. Their jobs are small
#: and short, so C2's compiler threads and G1's concurrent ones cost more CPU than they win back (three A/B
#: pairs over four Spark test files, CPU of the process and its JVM and workers: median 103 CPU-s against
#: 155; a child that starts a JVM and runs one small job, three A/B pairs: 10.6 CPU-s against 17-22).
#: ``spark-submit`` adds ``$SPARK_SUBMIT_OPTS`` to the driver's command line, so the children inherit it
#: and udmkit's log4j2 option stays as `get_spark` sets it. Only how fast the JVM runs changes.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from udm.host.spark.session import get_spark
    from udm.host.spark.stage_cost import STAGED_CONF

    # graphs with no single partitioning run as stages, as a larger session runs them (on two slots the
    # default would run them in one bucket: `udm.host.spark.stage_cost`); the staged path is what they test
    session = get_spark("local[2]", app_name="udmkit-tests", shuffle_partitions=2,
                        **{"spark.default.parallelism": 2, "spark.sql.adaptive.enabled": "false",
                           STAGED_CONF: "true"})
    yield session
    session.stop()
