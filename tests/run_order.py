"""The order `make test` hands its units of work to the xdist workers (`tests/conftest.py`), from the measured
durations in `tests/durations.json`.

Longest first: a worker that takes a long test last runs alone while the other waits at the end. Spark and
the others interleaved: a Spark test waits much of its time (a JVM starting, micro-batch triggers, a child
process), which a Python test's CPU fills better than another Spark test's. A test the table does not
know (new, renamed, a new parameter) costs its module's typical small test, else a default by its markers:
a stale table makes a worse order, never a failure.

Refresh the table after a whole run with every duration::

    .venv/bin/python -m pytest -n 2 --durations=0 -p no:cacheprovider > /tmp/full.txt
    .venv/bin/python tests/run_order.py /tmp/full.txt
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TABLE", "Durations", "Unit", "load", "schedule", "write"]

TABLE = Path(__file__).with_name("durations.json")
#: a test at least this long is kept by name; shorter ones only count towards their module's typical test
OWN_ROW = 1.0
#: what a test costs that neither the table nor its module's row knows, by its markers
DEFAULT = {"slow": 20.0, "spark": 5.0}
OTHER = 0.3
_LINE = re.compile(r"^(?:[\d.]+ )?(?P<secs>[\d.]+)s (?:setup|call|teardown)\s+(?P<nodeid>\S+)\s*$")


@dataclass(frozen=True)
class Durations:
    #: seconds of setup + call + teardown of the tests at least `OWN_ROW` long
    tests: dict[str, float]
    #: per module, the median of its shorter tests
    modules: dict[str, float]

    def estimate(self, nodeid: str, markers: Iterable[str] = ()) -> float:
        if nodeid in self.tests:
            return self.tests[nodeid]
        module = nodeid.split("::", 1)[0]
        if module in self.modules:
            return self.modules[module]
        return max((DEFAULT.get(m, OTHER) for m in markers), default=OTHER)


@dataclass(frozen=True)
class Unit:
    name: str
    seconds: float
    spark: bool


def load(path: Path = TABLE) -> Durations:
    if not path.is_file():
        return Durations({}, {})
    raw = json.loads(path.read_text(encoding="utf-8"))
    return Durations(raw["tests"], raw["modules"])


def schedule(units: list[Unit]) -> list[Unit]:
    """Each kind longest first, the two merged so that each has spent the same share of its own time at
    every point (the next unit from the kind that is further behind), so both end on their shortest."""
    kinds = [sorted((u for u in units if u.spark is k), key=lambda u: -u.seconds) for k in (True, False)]
    totals = [sum(u.seconds for u in k) or 1.0 for k in kinds]
    spent = [0.0, 0.0]
    at = [0, 0]
    out: list[Unit] = []
    while len(out) < len(units):
        k = min((i for i in (0, 1) if at[i] < len(kinds[i])), key=lambda i: spent[i] / totals[i])
        unit = kinds[k][at[k]]
        out.append(unit)
        spent[k] += unit.seconds
        at[k] += 1
    return out


def write(report: str, path: Path = TABLE) -> Durations:
    """The table of a run's ``--durations=0`` report (each line optionally led by a time stamp)."""
    per_test: dict[str, float] = defaultdict(float)
    for line in report.splitlines():
        if m := _LINE.match(line):
            per_test[m["nodeid"]] += float(m["secs"])
    short: dict[str, list[float]] = defaultdict(list)
    for nodeid, secs in per_test.items():
        if secs < OWN_ROW:
            short[nodeid.split("::", 1)[0]].append(secs)
    table = Durations({k: round(v, 1) for k, v in sorted(per_test.items()) if v >= OWN_ROW},
                      {k: round(statistics.median(v), 3) for k, v in sorted(short.items())})
    path.write_text(json.dumps({"tests": table.tests, "modules": table.modules}, indent=0) + "\n", encoding="utf-8")
    return table


if __name__ == "__main__":
    write(Path(sys.argv[1]).read_text(encoding="utf-8"))
