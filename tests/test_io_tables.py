"""Reading users' tables (`udm.host.io.tables`): every format, every shape option, bad rows with their row
numbers, generated CTIs — against hand-computed elements and pandas."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from udm.host.errors import BadElement, UdmError
from udm.host.io.table_options import TableOptions, TableSource
from udm.host.io.tables import TableReader, read_table_elements
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing.cht import cht
from udm.sdk import INF

ROWS = [
    {"ts": 10, "sym": "A", "price": 1.5},
    {"ts": 11, "sym": "B", "price": 2.0},
    {"ts": 13, "sym": "A", "price": 3.25},
]


def _write(fmt: str, path: Path, rows: list[dict[str, Any]]) -> Path:
    table = pa.Table.from_pylist(rows)
    if fmt == "parquet":
        pq.write_table(table, path)
    elif fmt == "csv":
        pcsv.write_csv(table, path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("fmt,ext", [("parquet", "parquet"), ("csv", "csv"), ("json", "jsonl"), ("json", "json")])
def test_point_events_from_every_format(tmp_path: Path, fmt: str, ext: str) -> None:
    path = _write(fmt, tmp_path / f"in.{ext}", ROWS)
    got = read_table_elements(path, time="ts")
    assert got == [(i + 1, Insert(f"r{i + 1}", r["ts"], r["ts"] + 1, {"sym": r["sym"], "price": r["price"]}))
                   for i, r in enumerate(ROWS)]


def test_directory_of_files_is_read_in_name_order_with_running_row_numbers(tmp_path: Path) -> None:
    d = tmp_path / "parts"
    d.mkdir()
    _write("parquet", d / "part-1.parquet", ROWS[2:])
    _write("parquet", d / "part-0.parquet", ROWS[:2])
    (d / "_SUCCESS").write_text("")
    got = read_table_elements(d, time="ts")
    assert [(ln, e.le) for ln, e in got] == [(1, 10), (2, 11), (3, 13)]


def test_interval_events_null_end_is_inf_and_bad_ends_are_dead_letters(tmp_path: Path) -> None:
    rows = [{"s": 1, "e": 5, "v": "a"}, {"s": 2, "e": None, "v": "b"}, {"s": 7, "e": 7, "v": "c"},
            {"s": None, "e": 9, "v": "d"}]
    got = read_table_elements(_write("parquet", tmp_path / "i.parquet", rows), start="s", end="e", id="v")
    assert got[0] == (1, Insert("a", 1, 5, {}))
    assert got[1] == (2, Insert("b", 2, INF, {}))
    assert isinstance(got[2][1], BadElement) and got[2][0] == 3 and "end is not after start" in got[2][1].reason
    assert isinstance(got[3][1], BadElement) and got[3][0] == 4 and "column 's'" in got[3][1].reason
    assert got[3][1].raw == {"s": None, "e": 9, "v": "d"}  # the row itself goes to the dead-letter file


def test_edge_events_hold_until_the_next_sample_of_their_key(tmp_path: Path) -> None:
    rows = [{"t": 0, "k": "x", "v": 1}, {"t": 5, "k": "y", "v": 2}, {"t": 10, "k": "x", "v": 3},
            {"t": 12, "k": "y", "v": 4}, {"t": 11, "k": "y", "v": 5}]
    got = read_table_elements(_write("csv", tmp_path / "e.csv", rows), edge="t", key=("k",))
    els = [e for _, e in got]
    assert els[:2] == [Insert("r1", 0, INF, {"k": "x", "v": 1}), Insert("r2", 5, INF, {"k": "y", "v": 2})]
    assert els[2] == Retract("r1", 0, INF, 10, None) and els[3] == Insert("r3", 10, INF, {"k": "x", "v": 3})
    # a sample earlier than its key's previous one cannot end it: dead letter, with its row number
    assert isinstance(els[-1], BadElement) and got[-1][0] == 5 and "earlier than the previous sample" in els[-1].reason
    # the logical result: each sample lasts until its key's next one (pandas computes the same)
    df = pd.DataFrame(rows[:4]).sort_values("t")
    df["end"] = df.groupby("k")["t"].shift(-1).astype("Int64").fillna(INF)
    expected = cht([Insert(str(i), r.t, int(r.end), {"k": r.k, "v": r.v}) for i, r in enumerate(df.itertuples())])
    assert cht([e for e in els if not isinstance(e, BadElement)]) == expected


def test_timestamps_become_microsecond_ticks_and_text_times_are_parsed(tmp_path: Path) -> None:
    t0 = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    micros = int(t0.timestamp() * 1_000_000)
    pq.write_table(pa.table({"ts": pa.array([t0], pa.timestamp("ms", tz="UTC")), "x": [1]}), tmp_path / "a.parquet")
    assert read_table_elements(tmp_path / "a.parquet", time="ts")[0][1].le == micros
    (tmp_path / "b.csv").write_text("ts,x\n2024-01-02T03:04:05.678Z,1\n2024-01-02 03:04:05.678,2\nnot a time,3\n,4\n")
    got = read_table_elements(tmp_path / "b.csv", time="ts")
    assert [e.le for _, e in got[:2]] == [micros, micros]
    assert [ln for ln, e in got if isinstance(e, BadElement)] == [3, 4]


@pytest.mark.parametrize("unit,scale", [("s", 1_000_000), ("ms", 1_000), ("us", 1), ("ticks", 1)])
def test_numeric_times_with_a_unit(tmp_path: Path, unit: str, scale: int) -> None:
    path = _write("json", tmp_path / "u.jsonl", [{"ts": 3, "x": 1}, {"ts": 4.5, "x": 2}])
    got = read_table_elements(path, time="ts", unit=unit)
    assert [e.le for _, e in got] == [3 * scale, int(4.5 * scale)]


def test_cti_every_puts_ctis_where_the_watermark_crosses_a_multiple(tmp_path: Path) -> None:
    times = [1, 4, 6, 5, 12, 13, 25]
    path = _write("parquet", tmp_path / "c.parquet", [{"ts": t, "x": i} for i, t in enumerate(times)])
    reader = TableReader(TableSource(path, TableOptions(time="ts", cti_every=5, cti_lag=1)), batch_size=3)
    els = [e for b in reader for _, e in b.to_elements()]
    # watermark = running max - 1: 0 (cti 0), 3, 5 (cti 5), 5, 11 (cti 10), 12, 24 (cti 20) — across batch borders
    assert [("cti", e.t) if isinstance(e, Cti) else e.le for e in els] == [
        1, ("cti", 0), 4, 6, ("cti", 5), 5, 12, ("cti", 10), 13, 25, ("cti", 20)]


def test_missing_columns_and_contradicting_options_are_one_line_errors(tmp_path: Path) -> None:
    path = _write("parquet", tmp_path / "in.parquet", ROWS)
    with pytest.raises(UdmError, match="no column 'nope'; its columns: ts, sym, price"):
        read_table_elements(path, time="nope")
    with pytest.raises(UdmError, match="exactly one of --time"):
        read_table_elements(path, time="ts", edge="ts")
    with pytest.raises(UdmError, match="--start and --end go together"):
        read_table_elements(path, start="ts")
    with pytest.raises(UdmError, match="unknown time unit"):
        read_table_elements(path, time="ts", unit="fortnights")
    d = tmp_path / "parts"
    d.mkdir()
    _write("parquet", d / "a.parquet", ROWS)
    _write("parquet", d / "b.parquet", [{"time": 1, "sym": "A", "price": 1.0}])
    with pytest.raises(UdmError, match=r"b.parquet: no column 'ts'"):
        read_table_elements(d, time="ts")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(UdmError, match="cannot read parquet input"):
        read_table_elements(tmp_path / "bad.parquet", time="ts")


def test_payload_nulls_fall_back_to_json_text_with_the_same_values(tmp_path: Path) -> None:
    rows = [{"ts": 1, "a": None, "b": "x"}, {"ts": 2, "a": 2, "b": None}]
    got = read_table_elements(_write("parquet", tmp_path / "n.parquet", rows), time="ts")
    assert [e.payload for _, e in got] == [{"a": None, "b": "x"}, {"a": 2, "b": None}]


def test_gzipped_csv_json_array_and_progress_in_bytes(tmp_path: Path) -> None:
    import gzip

    with gzip.open(tmp_path / "in.csv.gz", "wt") as f:
        f.write("ts,sym,price\n" + "".join(f"{r['ts']},{r['sym']},{r['price']}\n" for r in ROWS))
    (tmp_path / "arr.json").write_text(json.dumps(ROWS))
    plain = read_table_elements(_write("parquet", tmp_path / "p.parquet", ROWS), time="ts")
    assert read_table_elements(tmp_path / "in.csv.gz", time="ts") == plain
    assert read_table_elements(tmp_path / "arr.json", time="ts") == plain
    rows = [{"ts": i, "v": "x" * 50} for i in range(20_000)]
    path = _write("csv", tmp_path / "big.csv", rows)
    reader = TableReader(TableSource(path, TableOptions(time="ts")))
    seen = []
    for _ in reader:
        seen.append(reader.bytes_done)
    # (the bytes read so far, read-ahead included: a few 4 MiB blocks ahead of the rows handed out)
    assert seen == sorted(seen) and seen[-1] == path.stat().st_size


@pytest.mark.parametrize("shape", ["point", "interval", "edge"])
def test_read_ahead_gives_the_same_batches_and_raises_in_the_consumer(tmp_path: Path, shape: str) -> None:
    """``prefetch``: the batches a background thread reads ahead are the ones read in line (bad rows, CTIs
    across batch borders, edge state), and a file that cannot be read fails the consumer's loop."""
    import random

    rng = random.Random(7)
    rows = [{"ts": rng.choice([None, *range(i, i + 8)]), "end": i + rng.randrange(-2, 9), "k": i % 3,
             "x": rng.choice([1.5, float("nan"), 2.0])} for i in range(0, 400, 2)]
    path = _write("parquet", tmp_path / "r.parquet", rows)
    opts = {"point": TableOptions(time="ts", cti_every=10, cti_lag=3),
            "interval": TableOptions(start="ts", end="end", cti_every=10),
            "edge": TableOptions(edge="ts", key=("k",))}[shape]

    def read(prefetch: int) -> list[Any]:
        reader = TableReader(TableSource(path, opts), batch_size=17, prefetch=prefetch)
        return [(ln, repr(e)) for b in reader for ln, e in b.to_elements()]

    assert read(2) == read(0)
    assert any("BadElement" in e for _, e in read(2))
    if shape == "point":  # independently: each good row is its insert, CTIs and bad rows in between
        import math

        got = [e for b in TableReader(TableSource(path, opts), batch_size=17, prefetch=2) for _, e in b.to_elements()
               if isinstance(e, Insert)]
        want = [(r["ts"], {"end": r["end"], "k": r["k"], "x": r["x"]}) for r in rows
                if r["ts"] is not None and not math.isnan(r["x"])]
        assert [(e.le, e.payload) for e in got] == want and all(e.re == e.le + 1 for e in got)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(UdmError, match="cannot read parquet input"):
        list(TableReader(TableSource(tmp_path / "bad.parquet", opts), prefetch=2))
