"""The fluent API over users' tables: `Stream.from_table` runs in process and file to file, like
``udm run --input T --time COL`` (same CHT as the element JSON Lines of the same rows, and the oracle)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from udm.host.query import Stream
from udm.host.temporal.elements import Insert
from udm.host.testing.cht import CHT, cht
from udm.host.testing.oracle import oracle

ROWS = [{"ts": t, "sym": "AB"[t % 2], "price": float((t * 13) % 17)} for t in range(0, 60, 2)] + [
    {"ts": None, "sym": "A", "price": 1.0}]


def _events() -> list[Insert]:
    return [Insert(f"e{i}", r["ts"], r["ts"] + 1, {"sym": r["sym"], "price": r["price"]})
            for i, r in enumerate(ROWS) if r["ts"] is not None]


def test_from_table_in_process_matches_the_oracle_and_reports_bad_rows(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "t.parquet")
    stream = Stream.from_table(tmp_path / "t.parquet", time="ts", cti_every=10).group_by("sym").tumbling(10) \
        .aggregate("median", input="price", as_="m")
    dead: list[Any] = []
    got = cht(stream.to_elements(dead_letters=dead))
    assert got == oracle(stream.spec, _events())
    assert [d.line for d in dead] == [len(ROWS)]
    assert "table('" in repr(stream)


def test_from_table_run_writes_a_final_parquet_table(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    stream = Stream.from_table(tmp_path / "t.jsonl", time="ts").group_by("sym").tumbling(10) \
        .aggregate("max", input="price", as_="hi")
    res = stream.run(tmp_path / "out.parquet", final=True, dead_letter=tmp_path / "dl.jsonl")
    assert res.dead_lettered == 1
    rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert CHT.from_events((r["le"], r["re"], {"sym": r["sym"], "hi": r["hi"]}) for r in rows) == \
        oracle(stream.spec, _events())
    assert [json.loads(x)["line"] for x in (tmp_path / "dl.jsonl").read_text().splitlines()] == [len(ROWS)]
