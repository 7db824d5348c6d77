"""DataFrame ↔ elements, timestamps ↔ µs ticks, and the native CHT against the reference `cht`."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from udm.host.spark.convert import cht_df, collect_elements, elements_df, events_from_df
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing.cht import CHT, cht
from udm.sdk import INF

pytestmark = pytest.mark.spark

UTC = dt.UTC


def _spark_cht(df: Any) -> CHT:
    return CHT.from_events((r["le"], r["re"], json.loads(r["payload"])) for r in cht_df(df).collect())


def test_cht_matches_reference_with_retractions_and_reuse(spark: Any) -> None:
    stream = [
        Insert("a", 1, 10, {"v": 1}), Insert("b", 2, INF, {"v": 2}), Cti(2),
        Retract("a", 1, 10, 5), Retract("b", 2, INF, 7), Retract("a", 1, 5, 8),  # extension after shortening
        Insert("c", 3, 4, {"v": 3}), Retract("c", 3, 4, 3),                       # fully retracted
        Insert("c", 6, 9, {"v": 4}),                                              # id reused after deletion
        Insert("d", 9, INF, {"v": 5}),
    ]
    assert _spark_cht(elements_df(spark, stream)) == cht(stream)


def test_elements_round_trip_keeps_order_and_inf(spark: Any) -> None:
    stream = [Insert("a", 1, INF, {"x": [1, 2]}), Cti(1), Retract("a", 1, INF, 4), Cti(INF)]
    assert collect_elements(elements_df(spark, stream)) == stream


def test_point_events_from_timestamps(spark: Any) -> None:
    t0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
    rows = [(t0, "A", 1.5), (t0 + dt.timedelta(seconds=1, microseconds=7), "B", 2.0)]
    df = spark.createDataFrame(rows, "ts timestamp, k string, v double")
    got = sorted((r["le"], r["re"], json.loads(r["payload"])) for r in events_from_df(df, "ts").collect())
    us = int(t0.timestamp()) * 1_000_000
    assert got == [(us, us + 1, {"k": "A", "v": 1.5}), (us + 1_000_007, us + 1_000_008, {"k": "B", "v": 2.0})]


def test_interval_and_edge_shapes(spark: Any) -> None:
    t0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
    s = dt.timedelta(seconds=1)
    us = int(t0.timestamp()) * 1_000_000
    iv = spark.createDataFrame([(t0, t0 + 3 * s, 1), (t0 + s, None, 2)], "a timestamp, b timestamp, v int")
    got = sorted((r["le"], r["re"]) for r in events_from_df(iv, "a", end="b", shape="interval").collect())
    assert got == [(us, us + 3_000_000), (us + 1_000_000, INF)]
    edge = spark.createDataFrame([(t0, "x", 1), (t0 + 2 * s, "x", 2), (t0 + s, "y", 3)],
                                 "ts timestamp, k string, v int")
    got2 = sorted((json.loads(r["payload"])["v"], r["le"], r["re"])
                  for r in events_from_df(edge, "ts", shape="edge", partition_by=["k"]).collect())
    assert got2 == [(1, us, us + 2_000_000), (2, us + 2_000_000, INF), (3, us + 1_000_000, INF)]


def test_cht_timestamps(spark: Any) -> None:
    df = elements_df(spark, [Insert("a", 1_000_000, INF, {})])
    row = cht_df(df, timestamps=True).collect()[0]
    assert row["start"] == dt.datetime(1970, 1, 1, 0, 0, 1) and row["end"] is None



@pytest.mark.parametrize("bad", [False, True])
def test_file_batches_keep_every_payload_exactly(spark: Any, tmp_path: Any, bad: bool) -> None:
    """Batches read from a file give the payloads ``json.loads`` gives: ints stay ints, float literals
    floats, escapes and non-ASCII text intact, nested objects and lists kept, rows without a payload and
    bad rows kept in place. A uniform file's struct payloads are turned into JSON text by Spark's
    ``to_json``; a file with odd lines mixes struct and text batches (json.dumps on the driver)."""
    from udm.host.io.jsonl import JsonlReader

    payloads = [
        {"k": "a\"b\\c\n", "v": 28.0, "n": 3, "big": 9007199254740993, "tiny": 1e-300, "huge": 1.5e300,
         "neg": -0.0, "u": "prïce ✓", "o": {"x": [1, 2], "y": {"z": "deep"}}, "l": [0.5, 2.5]},
        {"k": "", "v": 0.1, "n": -7, "big": -1, "tiny": 2.5e-7, "huge": 12345678.9, "neg": -1.25,
         "u": "tab\there", "o": {"x": [3], "y": {"z": ""}}, "l": [1.5]},
    ]
    lines = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1, "payload": payloads[i % 2]},
                        separators=(",", ":"), ensure_ascii=False) for i in range(5000 if bad else 300)]
    lines.append('{"kind":"cti","t":6000}')
    if bad:
        lines += ["not json", json.dumps({"kind": "insert", "id": "z", "le": 6001, "re": 6002,
                                          "payload": payloads[0]})]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    batches = list(JsonlReader(src, batch_size=1000))
    assert any(b.payload_is_struct for b in batches)
    assert all(b.payload_is_struct for b in batches) != bad
    rows = elements_df(spark, batches).orderBy("line").collect()
    expected = [json.loads(x).get("payload") if x.startswith("{") else None for x in lines]
    got = [None if r["payload"] is None else json.loads(r["payload"]) for r in rows]
    assert got == expected
    for g, e in zip(got, expected, strict=True):  # int vs float, recursively (== says 28 == 28.0)
        assert json.dumps(g, sort_keys=True) == json.dumps(e, sort_keys=True)
    assert [r["line"] for r in rows] == list(range(1, len(lines) + 1))
    if bad:
        assert rows[-2]["kind"] is None and rows[-2]["error"]


@pytest.mark.parametrize("seed", range(50))
def test_payload_texts_are_each_payloads_compact_json(seed: int) -> None:
    """The reader's struct payloads as text, built column by column (`object_texts`), read back as the
    payloads, and spelled as ``json.dumps`` with compact separators spells them (ints stay ints)."""
    import random

    from udm.host.io.batch import ElementBatch
    from udm.host.io.jsonl import struct_payloads
    from udm.host.spark.convert import payload_texts

    rng = random.Random(seed)
    kinds = [lambda: rng.randint(-10**12, 10**12), lambda: rng.choice([0.1, 2.0, -1e22, 5e-5, 1e-300]),
             lambda: rng.choice(["a", "é\"\\x", "", "{"]), lambda: rng.random() < 0.5, lambda: {"n": [1, 2.5]}]
    fields = rng.sample(["k", "v", "w", "x"], rng.randint(0, 4))
    typed = {f: rng.choice(kinds) for f in fields}
    els: list[Any] = []
    for i in range(rng.randint(1, 30)):
        if rng.random() < 0.2:
            els.append(Cti(i))
        else:
            els.append(Insert(f"e{i}", i, i + 1, {f: (typed[f]() if rng.random() < 0.9 else None) for f in fields}))
    batch = ElementBatch.from_elements(els)
    struct = struct_payloads(batch.table.column("payload"))  # (the reader's struct column, when faithful)
    if struct is not None:
        batch = ElementBatch.from_table(batch.table.set_column(batch.table.column_names.index("payload"),
                                                               "payload", struct))
    got = payload_texts(batch).to_pylist()
    want = [json.dumps(e.payload, separators=(",", ":")) if isinstance(e, Insert) else None for e in els]
    assert got == want
