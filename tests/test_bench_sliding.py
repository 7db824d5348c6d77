"""`bench.bench_sliding` checks every cell against its own numpy computation of the windows; that
computation must itself be right. It is compared here with the project's oracle (`udm.host.testing.oracle`,
SEMANTICS word by word) on small streams: in order, grouped, and disordered (ties of LE included, where
rows order by the canonical JSON of the UDA's input). And a cell run end to end reports a checked figure."""

from __future__ import annotations

from typing import Any

import pytest

from bench import bench_sliding as bs
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Insert
from udm.host.testing.oracle import oracle


def oracle_rows(row: str, size: int, uda: str, s: bs.Stream) -> list[tuple[Any, ...]]:
    spec = bs.query_spec(row, size, uda, s.groups > 1)
    els = [e for _, e in ElementBatch.from_table(s.table).to_elements()]
    if row == "range":  # the oracle takes one window step: apply the alter_lifetime here
        spec["steps"] = spec["steps"][1:]
        els = [Insert(e.id, e.le, e.le + size, e.payload) if isinstance(e, Insert) else e for e in els]
    got = oracle(bind(parse_query(spec)), els)
    return sorted((p.get("g"), le, re, p[uda]) for le, re, p in got.events())


@pytest.mark.parametrize("row", bs.ROWS)
@pytest.mark.parametrize(("ticks", "groups", "d"), [(120, 1, 0), (50, 3, 0), (150, 1, 4)])
def test_the_bench_computation_equals_the_oracle(row: str, ticks: int, groups: int, d: int) -> None:
    s = bs.make_stream(ticks, groups, d)
    for uda, size in (("sum", 7), ("avg", 1), ("min", 12), ("max", 7), ("count", 30)):
        mine = bs.expected(row, size, uda, s, len(s.le))
        assert mine, "every case has windows"
        assert bs.same(mine, oracle_rows(row, size, uda, s)), (row, uda, size)


def test_a_prefix_is_the_query_over_the_events_fed() -> None:
    """A cell is checked over the events it fed: the computation of a prefix must
    differ from the whole stream's (or the check of a cut cell would prove nothing)."""
    s = bs.make_stream(200, 1, 3)
    assert bs.expected("rows", 5, "sum", s, 100) != bs.expected("rows", 5, "sum", s, len(s.le))


def test_a_cell_runs_and_is_checked() -> None:
    s = bs.make_stream(300, 2, 0)
    cell = bs.run_cell("hopping", 20, "max", s, slide=200, chunks=3)
    assert cell.ok is True and cell.complete and cell.slid and cell.us > 0
    assert cell.text()[0].isdigit()
    assert cell.agg_values is not None and cell.agg_values >= 1


def test_a_wrong_answer_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is live: a computation that disagrees with the engine marks the cell WRONG."""
    real = bs.expected
    monkeypatch.setattr(bs, "expected", lambda *a: [(g, le, re, v + 1) for g, le, re, v in real(*a)])
    cell = bs.run_cell("rows", 5, "sum", bs.make_stream(100, 1, 0), slide=50, chunks=2)
    assert cell.ok is False and cell.text() == "WRONG"


def test_repeats_show_the_median_and_a_wrong_run_stays_wrong() -> None:
    c = [bs.Cell(us, True, True, True) for us in (5.0, 1.0, 3.0)]
    assert bs.median_cell(c).us == 3.0 and bs.median_cell(c).ok is True
    c[1] = bs.Cell(1.0, True, True, False)
    assert bs.median_cell(c).ok is False
    c[1] = bs.Cell(1.0, True, False, None)
    assert bs.median_cell(c).ok is None and not bs.median_cell(c).complete


@pytest.mark.parametrize(("ticks", "groups", "d", "size"), [(700, 1, 0, 30), (800, 4, 0, 7), (900, 1, 50, 100)])
def test_every_chunk_ends_at_a_cti_and_holds_as_many(ticks: int, groups: int, d: int, size: int) -> None:
    """A CTI releases windows: chunks of the slide end right after one and hold the same number, or a
    chunk's figure would depend on where the flushes fell."""
    s = bs.make_stream(ticks, groups, d)
    kinds = s.table.column("kind").to_pylist()
    start, ends = bs.slide_cuts(size, s, 300, 3)
    assert len(ends) == 3 and kinds[start - 1] == "cti"
    assert int(s.event_rows[min((size + 1) * groups, len(s.le) - 1)]) <= start  # the windows have filled
    counts = []
    for a, b in zip([start, *ends], ends, strict=False):
        assert kinds[b - 1] == "cti"
        counts.append(kinds[a:b].count("cti"))
        assert abs((b - a - counts[-1]) - 300 // 3) <= s.cti_every  # about slide / chunks events
    assert len(set(counts)) == 1


def test_the_cells_of_a_row_interleave_and_each_is_checked() -> None:
    s = bs.make_stream(400, 2, 0)
    cells = bs.run_cells("count_by_start", "sum", [(5, s), (40, s)], bs.Plan(slide=400, chunks=2))
    for c in cells:
        assert c.ok is True and c.complete and len(c.chunks) == 2 and min(c.chunks) <= c.us <= max(c.chunks)
        lo, hi = c.spread().split("-")
        assert float(lo) <= float(hi)


def test_repeats_keep_every_chunk_for_the_spread() -> None:
    c = [bs.Cell(us, True, True, True, chunks=[us - 1, us, us + 1]) for us in (5.0, 1.0, 3.0)]
    m = bs.median_cell(c)
    assert m.us == 3.0 and sorted(m.chunks) == sorted(x for cell in c for x in cell.chunks)
    assert m.spread() == "0.0-6.0"
