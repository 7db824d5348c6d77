"""The physical table view column by column (`udm.host.io.table_columns`, `TableWriter.write_batch`): for
random streams (disorder, retraction chains, CTIs, bad elements) through span steps (columnar payloads, a
projection's constant), windows and a join (payloads held as dicts), with a snapshot and restore half-way,
the rows written from the engine's batches are the rows the element route writes for the same output, and
the elements they spell have the oracle's CHT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.io.table_columns import physical_elements
from udm.host.io.table_out import TableSink, TableWriter
from udm.host.model.plan import build_plan
from udm.host.testing.cht import cht
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle

QUERIES: dict[str, dict[str, Any]] = {
    "project": {"steps": [{"op": "project", "keep": ["g", "v"], "set": {"src": "gen", "le": 1}}]},
    "filter": {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 40}}]},
    "window": {"steps": [{"op": "window", "window": {"type": "hopping", "size": 6, "hop": 3}, "group_by": ["g"],
                          "udm": "sum", "input": "v", "as": "total"}]},
    "join": {"inputs": {"a": {}},
             "steps": [{"id": "m", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 5},
                        "group_by": ["g"], "udm": "max", "input": "v", "as": "mx"},
                       {"id": "j", "op": "join", "from": ["a", "m"], "on": [["g", "g"]]}]},
}


def _stream(seed: int) -> list[Any]:
    return generate(seed=seed, events=60, groups=3, disorder="out_of_order", speculation=0.4, chain=2,
                    cti="regular", duration="mixed", bad=0.05)


def _run(query: dict[str, Any], stream: list[Any], sinks: list[TableWriter], size: int) -> None:
    """The stream through the engine in batches of ``size``, restored from a snapshot half-way; every output
    batch to the first writer by its columns and to the others by its elements."""
    bound = build_plan(query)
    runner = QueryRunner(bound)
    half = len(stream) // 2

    def out(b: Any) -> None:
        sinks[0].write_batch(b)
        for w in sinks[1:]:
            w.write(b.to_elements())

    for at in range(0, len(stream), size):
        if at >= half and at - size < half:
            runner = QueryRunner.restore(runner.snapshot(), bound)
        chunk = stream[at: at + size]
        out(runner.run_batch(ElementBatch.from_elements(chunk, list(range(at + 1, at + 1 + len(chunk))))))
    out(runner.finish_batch())


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("size", [7, 64])
def test_columns_write_the_rows_elements_write_and_the_oracles_cht(tmp_path: Path, name: str, seed: int,
                                                                      size: int) -> None:
    query = QUERIES[name]
    stream = _stream(seed)
    by_cols = TableWriter(TableSink(tmp_path / "cols.parquet", "parquet", view="physical"))
    by_els = TableWriter(TableSink(tmp_path / "els.parquet", "parquet", view="physical"))
    with by_cols, by_els:
        _run(query, stream, [by_cols, by_els], size)
    cols = pq.read_table(tmp_path / "cols.parquet")
    els = pq.read_table(tmp_path / "els.parquet")
    assert cols.schema == els.schema
    assert cols.to_pylist() == els.to_pylist()
    assert len(cols) > 0
    want = oracle(build_plan(query), stream)
    assert cht(physical_elements(cols.to_pylist())) == want


@pytest.mark.parametrize("times", ["ticks", "timestamps"])
def test_csv_and_timestamps_as_the_element_route(tmp_path: Path, times: str) -> None:
    """CSV output, and times as timestamps (``INF`` null), the same from columns as from elements."""
    stream = _stream(5)
    sinks = [TableWriter(TableSink(tmp_path / f"{k}.csv", "csv", view="physical", times=times))  # type: ignore[arg-type]
             for k in ("cols", "els")]
    with sinks[0], sinks[1]:
        _run(QUERIES["window"], stream, sinks, 16)
    assert (tmp_path / "cols.csv").read_text() == (tmp_path / "els.csv").read_text()
    assert len((tmp_path / "cols.csv").read_text().splitlines()) > 5
