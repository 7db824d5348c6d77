"""`run_order`: the order `make test` hands out its units. Every unit exactly once, each kind longest first,
the kinds interleaved by their share of time spent (checked against a brute-force replay of the rule), and a
test the table does not know costed from its module or its markers."""

from __future__ import annotations

import random
from pathlib import Path

from run_order import Durations, Unit, load, schedule, write


def _units(rng: random.Random, n: int) -> list[Unit]:
    return [Unit(f"u{i}", round(rng.expovariate(0.2), 1), rng.random() < 0.4) for i in range(n)]


def test_every_unit_once_each_kind_longest_first_and_in_proportion() -> None:
    rng = random.Random(5)
    for n in (0, 1, 2, 7, 60):
        units = _units(rng, n)
        got = schedule(units)
        assert sorted(u.name for u in got) == sorted(u.name for u in units)
        for kind in (True, False):
            secs = [u.seconds for u in got if u.spark is kind]
            assert secs == sorted(secs, reverse=True)
        total = {k: sum(u.seconds for u in units if u.spark is k) or 1.0 for k in (True, False)}
        for i, u in enumerate(got):  # (the one taken was the kind further behind, or the only kind left)
            done = {k: sum(v.seconds for v in got[:i] if v.spark is k) for k in (True, False)}
            left = {k: any(v.spark is k for v in got[i:]) for k in (True, False)}
            other = not u.spark
            assert not left[other] or done[u.spark] / total[u.spark] <= done[other] / total[other]


def test_an_unknown_test_costs_its_module_then_its_markers(tmp_path: Path) -> None:
    report = "\n".join(["1795.0 3.00s call     tests/a.py::long", "0.50s setup    tests/a.py::long",
                        "0.20s call     tests/a.py::x", "0.40s call     tests/a.py::y", "0.9s call tests/a.py::z",
                        "0.01s teardown tests/b.py::t"])
    table = write(report, tmp_path / "d.json")
    assert table == load(tmp_path / "d.json") == Durations({"tests/a.py::long": 3.5},
                                                           {"tests/a.py": 0.4, "tests/b.py": 0.01})
    assert table.estimate("tests/a.py::long") == 3.5
    assert table.estimate("tests/a.py::new[1]", ["spark"]) == 0.4
    assert table.estimate("tests/c.py::t", ["spark", "slow"]) == 20.0
    assert table.estimate("tests/c.py::t", ["parametrize"]) == 0.3
    assert load(tmp_path / "missing.json") == Durations({}, {})
