"""Table output (`udm.host.io.table_out`): the physical view keeps every element and every payload field
(whatever row comes first), the final view is the CHT (`udm.host.testing.cht`) written as CTIs make rows
final, and what cannot be written is a one-line error."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from udm.host.errors import UdmError
from udm.host.io.table_out import TableSink, TableWriter
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing.cht import CHT, cht
from udm.sdk import INF

STREAM = [Cti(0), Insert("a", 1, 5, {"x": 1, "le": 3}), Insert("b", 2, 9, {"x": 2, "le": 4}),
          Retract("a", 1, 5, 3, None), Retract("b", 2, 9, 2, None), Insert("c", 6, INF, {"x": 3, "le": 5}), Cti(10)]


def test_physical_view_keeps_fields_that_the_first_row_lacks(tmp_path: Path) -> None:
    with TableWriter(TableSink(tmp_path / "p.parquet", "parquet", view="physical")) as w:
        w.write(STREAM)
    rows = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert [r["kind"] for r in rows] == ["cti", "insert", "insert", "retract", "retract", "insert", "cti"]
    assert rows[1] == {"kind": "insert", "id": "a", "le": 1, "re": 5, "re_new": None, "t": None, "x": 1, "p_le": 3}
    assert rows[3]["re_new"] == 3 and rows[0]["t"] == 0


def test_parquet_statistics_for_every_column_but_the_ids(tmp_path: Path) -> None:
    """Readers prune row groups by the times' and payload's min/max; the ids' text order prunes nothing, and
    its statistics are not written."""
    with TableWriter(TableSink(tmp_path / "p.parquet", "parquet", view="physical")) as w:
        w.write(STREAM)
    meta = pq.ParquetFile(tmp_path / "p.parquet").metadata
    group = meta.row_group(0)
    stats = {group.column(i).path_in_schema: group.column(i).statistics for i in range(group.num_columns)}
    assert stats.pop("id") is None
    assert all(s is not None and s.has_min_max for name, s in stats.items() if name in ("le", "x", "kind"))
    assert (stats["le"].min, stats["x"].max) == (1, 3)


def test_final_view_is_the_cht_and_rows_are_written_once_final(tmp_path: Path) -> None:
    w = TableWriter(TableSink(tmp_path / "f.jsonl", "json", view="final"))
    w.write(STREAM[:-1])
    w._flush()
    assert (tmp_path / "f.jsonl").read_text() == ""  # no CTI past any end yet: nothing is final
    w.write([STREAM[-1]])
    w._flush()
    assert [json.loads(x)["x"] for x in (tmp_path / "f.jsonl").read_text().splitlines()] == [1]  # a ends at 3 <= 10
    w.close()
    rows = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert CHT.from_events((r["le"], r["re"], {"x": r["x"], "le": r["p_le"]}) for r in rows) == cht(STREAM)


def test_timestamps_with_inf_as_null(tmp_path: Path) -> None:
    with TableWriter(TableSink(tmp_path / "t.parquet", "parquet", view="final", times="timestamps")) as w:
        w.write(STREAM)
    rows = pq.read_table(tmp_path / "t.parquet").to_pylist()
    c = next(r for r in rows if r["x"] == 3)
    assert c["le"] == dt.datetime(1970, 1, 1, 0, 0, 0, 6, tzinfo=dt.UTC) and c["re"] is None


def test_a_field_appearing_after_the_columns_are_fixed_is_a_clear_error(tmp_path: Path) -> None:
    w = TableWriter(TableSink(tmp_path / "o.csv", "csv", view="physical"))
    w.write([Insert("a", 1, 2, {"x": 1})])
    w._flush()
    w.write([Insert("b", 1, 2, {"x": 1, "y": 2})])
    with pytest.raises(UdmError, match="output field 'y' appears after the first 1 rows fixed the csv columns"):
        w._flush()
