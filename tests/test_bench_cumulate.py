"""`bench.bench_cumulate` checks every cell against its own numpy computation of the windows; that computation
must itself be right. It is compared here with the project's oracle (`udm.host.testing.oracle`, SEMANTICS word
by word) on small streams: one group and several, events sharing ticks (rows of equal LE order by the
value's JSON text), periods of cumulate windows cut anywhere."""

from __future__ import annotations

from typing import Any

import pytest

from bench import bench_cumulate as bc
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.testing.oracle import oracle


def oracle_rows(window: dict[str, Any], uda: str, s: bc.Stream) -> list[tuple[Any, ...]]:
    els = [e for _, e in ElementBatch.from_table(s.table).to_elements()]
    got = oracle(bind(parse_query(bc.query_spec(window, uda, s.groups > 1))), els)
    rows = [(p.get("g"), le, re, p[uda]) for le, re, p in got.events()]
    return sorted(rows, key=lambda r: (str(r[0]), r[1], r[2], r[3]))


@pytest.mark.parametrize(("n", "groups", "ticks"), [(40, 1, 2 * bc.SIZE), (60, 3, bc.SIZE // 2), (90, 1, 30)])
@pytest.mark.parametrize("uda", ["sum", "max"])
def test_the_bench_computation_equals_the_oracle(n: int, groups: int, ticks: int, uda: str) -> None:
    s = bc.make_stream(n, groups, ticks)
    for window in (bc.cumulate_window(bc.BASE_STEP), bc.cumulate_window(21_600), bc.RUNNING):
        mine = bc.expected(window, uda, s)
        assert mine, "every case has windows"
        assert mine == oracle_rows(window, uda, s), (window, uda)
