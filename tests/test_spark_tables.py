"""Spark batch over a user's DataFrame (`udm.host.spark.tables`): column options instead of the element
schema, bad rows dead-lettered with row numbers, and a typed result — against the oracle and pandas."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
import pytest

from udm.host.model.spec import parse_query
from udm.host.spark.batch import run_batch
from udm.host.spark.tables import table_elements_df, typed_output
from udm.host.temporal.elements import Insert
from udm.host.testing.cht import CHT, cht
from udm.host.testing.oracle import oracle
from udm.sdk import INF

pytestmark = pytest.mark.spark

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 5_000_000}, "group_by": ["sym"],
                    "udm": "median", "input": "price", "as": "m"}]}


def _elements(df: Any) -> list[Any]:
    from udm.host.spark.convert import collect_elements

    return collect_elements(df.where("kind is not null"))


def test_run_batch_on_a_user_dataframe_gives_typed_columns_equal_to_the_oracle(spark: Any) -> None:
    t0 = dt.datetime(2020, 1, 1)
    rows = [(t0 + dt.timedelta(seconds=i), "AB"[i % 2], float((i * 7) % 11)) for i in range(30)]
    df = spark.createDataFrame([*rows[:10], (None, "A", 1.0), *rows[10:]], "ts timestamp, sym string, price double")
    run = run_batch(QUERY, df, table={"time": "ts"})
    try:
        out = typed_output(run, QUERY, df.schema)
        assert [(f.name, f.dataType.simpleString()) for f in out.schema.fields] == [
            ("le", "bigint"), ("re", "bigint"), ("sym", "string"), ("m", "double")]
        got = CHT.from_events((r["le"], r["re"], {"sym": r["sym"], "m": r["m"]}) for r in out.collect())
        epoch = dt.datetime(1970, 1, 1)
        events = [Insert(f"e{i}", (t - epoch) // dt.timedelta(microseconds=1),
                         (t - epoch) // dt.timedelta(microseconds=1) + 1, {"sym": s, "price": p})
                  for i, (t, s, p) in enumerate(rows)]
        assert got == oracle(parse_query(QUERY), events)
        dead = run.dead_letters.collect()
        assert [(d["line"], "column 'ts'" in d["reason"]) for d in dead] == [(11, True)]
    finally:
        run.unpersist()


def test_intervals_and_edges_from_a_dataframe(spark: Any) -> None:
    iv = spark.createDataFrame([(1, 5, "a"), (2, None, "b"), (7, 7, "c")], "s long, e long, v string")
    els = table_elements_df(iv, start="s", end="e")
    assert cht(_elements(els)) == CHT.from_events([(1, 5, {"v": "a"}), (2, INF, {"v": "b"})])
    assert [r["line"] for r in els.where("error is not null").collect()] == [3]
    samples = pd.DataFrame({"t": [0, 5, 10, 3, 12], "k": ["x", "y", "x", "x", "y"]})
    got = cht(_elements(table_elements_df(spark.createDataFrame(samples), edge="t", key=["k"])))
    s = samples.sort_values("t")
    s["end"] = s.groupby("k")["t"].shift(-1).astype("Int64").fillna(INF)
    assert got == CHT.from_events((int(r.t), int(r.end), {"k": r.k}) for r in s.itertuples())


def test_udm_run_engine_spark_reads_a_table_like_the_local_engine(spark: Any, tmp_path: Any,
                                                                   capsys: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml
    from cli_harness import udm

    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                            "group_by": ["sym"], "udm": "sum", "input": "price", "as": "s"}]}))
    rows = [{"ts": t, "sym": "AB"[t % 2], "price": float(t)} for t in range(50)] + [{"ts": None, "sym": "A",
                                                                                     "price": 0.0}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    outs = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.parquet"
        code, _, err = udm(capsys, "run", str(q), "-i", str(tmp_path / "in.parquet"), "--time", "ts", "-o", str(out),
                           "--final", "--engine", engine, "--dead-letter", str(tmp_path / f"{engine}.dl.jsonl"))
        assert code == 0, err
        outs[engine] = sorted(pq.read_table(out).to_pylist(), key=lambda r: (r["le"], r["sym"]))
        assert '"line": 51' in (tmp_path / f"{engine}.dl.jsonl").read_text()
    assert outs["spark"] == outs["local"]
    assert outs["local"][0] == {"le": 0, "re": 10, "sym": "A", "s": float(sum(range(0, 10, 2)))}
