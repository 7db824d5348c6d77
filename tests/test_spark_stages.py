"""Query graphs whose partitioning key changes along the way, on Spark batch: the plan is cut into stages
(`udm.host.spark.stages`), each routed by its own key, with an exchange (a shuffle by the next stage's key,
CTIs to every bucket, the minimum over the producing buckets) between them.

References: the conformance kit's brute-force graph oracle (independent of the engine) for the output CHT,
the local engine for dead letters and per-input counts, and hand-checked stage shapes."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from spark_runs import collected, local_dead
from stage_queries import (
    JOIN_THEN_KEYLESS,
    JOIN_THEN_WINDOW,
    MULTICAST,
    QUERIES,
    TWO,
    WINDOW_THEN_JOIN,
)

from udm.host.model.spec import parse_query
from udm.host.spark.partition import BY_ID
from udm.host.spark.stages import merge_exchange, plan_stages
from udm.host.temporal.elements import Cti, Insert, Retract


def _shape(query: dict[str, Any]) -> list[tuple[list[str], tuple[str, ...], Any]]:
    return [([n.name for n in s.nodes], s.inputs, s.routing) for s in plan_stages(parse_query(query))]


def test_stages_cut_where_the_key_changes() -> None:
    assert _shape(JOIN_THEN_WINDOW) == [(["j"], ("a", "b"), {"a": ["k"], "b": ["k"]}),
                                        (["w"], ("j",), {"j": ["v"]})]
    assert _shape(WINDOW_THEN_JOIN) == [(["w"], ("a",), {"a": ["k"]}),
                                        (["j"], ("w", "b"), {"w": ["n"], "b": ["v"]})]
    # the stateless filter joins the keyless window's one-bucket stage
    assert _shape(JOIN_THEN_KEYLESS) == [(["j"], ("a", "b"), {"a": ["k"], "b": ["k"]}), (["s", "w"], ("j",), None)]
    # p is read by two stages: a stage of its own (by id); the union of two stage outputs goes by id
    assert _shape(MULTICAST) == [(["p"], ("a",), BY_ID), (["w"], ("p",), {"p": ["k"]}),
                                 (["j"], ("p", "b"), {"p": ["v"], "b": ["v"]}), (["u"], ("w", "j"), BY_ID)]


def test_one_partitioning_for_the_whole_graph_is_one_stage() -> None:
    query = {"inputs": TWO, "steps": [
        {"id": "w", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"],
         "udm": "count", "as": "n"},
        {"id": "j", "op": "join", "from": ["w", "b"], "on": "k"}]}
    assert _shape(query) == [(["w", "j"], ("a", "b"), {"a": ["k"], "b": ["k"]})]
    assert len(plan_stages(parse_query(JOIN_THEN_WINDOW), split=False)) == 1


def test_a_stage_is_a_query_of_its_own_with_the_inputs_policies() -> None:
    query = dict(JOIN_THEN_WINDOW, inputs={"a": {"on_violation": "adjust"}, "b": {}})
    first, second = plan_stages(parse_query(query))
    assert first.spec.input_policy("a") == "adjust" and first.spec.input_policy("b") == "dead_letter"
    assert second.spec.input_names == ["j"] and second.spec.output == "w"
    assert second.origins == {"j": frozenset({"a", "b"})}


def _bucket_stream(rng: random.Random, bucket: int) -> list[Any]:
    """A valid physical stream as one bucket's engine could emit it: elements never below its own CTI."""
    out: list[Any] = []
    cti = 0
    live: dict[str, tuple[int, int]] = {}
    for i in range(rng.randint(0, 30)):
        if rng.random() < 0.2:
            cti += rng.randint(0, 4)
            out.append(Cti(cti))
            continue
        le = cti + rng.randint(0, 6)
        if live and rng.random() < 0.2:
            id_ = rng.choice(sorted(live))
            ole, ore = live.pop(id_)
            if ore >= cti:
                out.append(Retract(id_, ole, ore, max(ole, cti)))
            continue
        id_ = f"{bucket}.o{i}"
        live[id_] = (le, le + rng.randint(1, 5))
        out.append(Insert(id_, le, live[id_][1], {"b": bucket}))
    out.append(Cti(2**63 - 1))
    return out


def _merge(rows: list[tuple[int, int, Any]]) -> list[Any]:
    """`merge_exchange` over ``(bucket, seq, element)`` rows, as elements again."""
    import pyarrow as pa

    from udm.host.io.batch import ElementBatch

    table = ElementBatch.from_elements([el for _, _, el in rows]).table
    table = table.set_column(table.column_names.index("line"), "line", pa.array([s for _, s, _ in rows], pa.int64()))
    merged = merge_exchange(table.append_column("_src", pa.array([b for b, _, _ in rows], pa.int64())))
    assert merged.column("line").null_count == merged.num_rows  # intermediate elements have no line
    return [el for _, el in ElementBatch.from_table(merged).to_elements()]


@pytest.mark.parametrize("seed", range(300))
def test_merge_exchange_is_a_valid_union_whose_cti_is_the_minimum(seed: int) -> None:
    rng = random.Random(seed)
    streams = {b: _bucket_stream(rng, b) for b in range(rng.randint(1, 4))}
    rows = [(b, seq, el) for b, els in streams.items() for seq, el in enumerate(els)]
    rng.shuffle(rows)  # Spark hands rows in no particular order
    merged = _merge(rows)
    data = [el for el in merged if not isinstance(el, Cti)]
    assert sorted(map(repr, data)) == sorted(repr(el) for els in streams.values() for el in els
                                             if not isinstance(el, Cti))
    # each bucket's elements keep their order (a retraction follows its insert)
    for b, els in streams.items():
        assert [el for el in data if el.id.startswith(f"{b}.")] == [el for el in els if not isinstance(el, Cti)]
    ctis = [el.t for el in merged if isinstance(el, Cti)]
    assert ctis == sorted(set(ctis)) and ctis[-1] == 2**63 - 1
    low = -(2**63)
    for el in merged:  # the merged CTI never exceeds a bucket's CTI, nor any later element's sync time
        if isinstance(el, Cti):
            low = el.t
            continue
        sync = el.le if isinstance(el, Insert) else min(el.re, el.re_new)
        assert sync >= low
    assert low == min(max((x.t for x in els if isinstance(x, Cti)), default=-(2**63)) for els in streams.values())


def _value(rng: random.Random) -> Any:
    return rng.choice([lambda: rng.randint(-3, 3), lambda: rng.choice([0.5, 2.0, -1e20, 1e-7, 123456789.0]),
                       lambda: rng.choice(["a", "1", "é\"x", "", "{"]), lambda: rng.choice([True, False]),
                       lambda: None, lambda: {"a": [1, 2.5]}, lambda: [rng.randint(0, 2)]])()


def _engine_output(rng: random.Random) -> Any:
    """An engine output batch: inserts (payloads of one shape or several, as dicts or as columns),
    retractions of earlier inserts (and of ids never inserted), CTIs."""
    from udm.host.engine.batch import CTI, INSERT, RETRACT, Batch
    from udm.host.engine.payload import Payload

    shapes = [tuple(rng.sample(["k", "q", "v", "w"], rng.randint(0, 3))) for _ in range(rng.randint(1, 2))]
    typed = {f: rng.choice([int, float, str, bool, None]) for f in "kqvw"}
    kind: list[int] = []
    ids: list[int] = []
    le: list[int] = []
    re: list[int] = []
    rn: list[int] = []
    payloads: list[Any] = []
    live: list[int] = []
    for i in range(rng.randint(0, 40)):
        r = rng.random()
        if r < 0.15:
            kind.append(CTI)
            ids.append(0)
            le.append(i)
            re.append(i)
            rn.append(i)
            payloads.append({})
            continue
        if r < 0.35:
            kind.append(RETRACT)
            ids.append(rng.choice(live) if live and rng.random() < 0.9 else 1000 + i)
            payloads.append({})
        else:
            kind.append(INSERT)
            ids.append(i)
            live.append(i)
            shape = rng.choice(shapes)
            t = {f: typed[f] for f in shape}
            payloads.append({f: (t[f](rng.randint(0, 5)) if t[f] is not None and rng.random() < 0.9
                                 else _value(rng)) for f in shape})
        le.append(i)
        re.append(i + 5)
        rn.append(i + 1)
    b = Batch.of(kind, ids, le, re, rn, payloads)
    if len(shapes) == 1 and shapes[0] and rng.random() < 0.5:
        try:  # the same payloads held as columns (what a span step or the reader hands on)
            struct = pa.array([p if k == INSERT else None for k, p in zip(kind, payloads, strict=True)])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return b
        if pa.types.is_struct(struct.type):
            b = b.with_payload(Payload.from_struct(struct))
    return b


@pytest.mark.parametrize("seed", range(300))
def test_bucket_rows_are_the_engines_output_elements(seed: int) -> None:
    """A bucket's result rows, built column by column from its engine's output batch, spell the batch's
    elements (read back one by one): ids with the bucket's prefix, compact JSON payloads, an exchange row's
    ``keys`` the `key_text` of its payload's fields, a retraction's those of the latest insert of its id."""
    import json

    from udm.host.spark.graph import bucket_rows, key_text

    rng = random.Random(seed)
    b = _engine_output(rng)
    last = rng.random() < 0.3
    carried = () if last else tuple(rng.sample(["k", "q", "x"], rng.randint(0, 2)))
    stage = plan_stages(parse_query(JOIN_THEN_WINDOW))[0]
    got = bucket_rows(3, b, stage, last, carried).to_pylist()
    want = []
    keys: dict[str, Any] = {}
    for el in b.to_elements():
        if isinstance(el, Cti):
            if not last:
                want.append({"kind": "cti", "t": el.t, "keys": None})
            continue
        row: dict[str, Any] = {"kind": "insert" if isinstance(el, Insert) else "retract", "id": f"3.{el.id}",
                               "le": el.le, "re": el.re}
        if isinstance(el, Insert):
            row["payload"] = json.dumps(el.payload, separators=(",", ":"))
            keys[el.id] = [key_text(el.payload, f) for f in carried] if carried else None
            row["keys"] = keys[el.id]
        else:
            row["re_new"] = el.re_new
            row["keys"] = keys.get(el.id)
        want.append(row)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert {k: g[k] for k in w} == w
        assert g["payload"] is None or g["kind"] == "insert"
        assert g["input"] == (None if last else stage.sink) and g["part"] == stage.index
    assert [g["line"] for g in got] == [(i << 20) + 3 if last else i for i in range(len(got))]


def _inputs(seed: int) -> dict[str, list[Any]]:
    from udm.host.testing.generator import generate_related

    return generate_related(2, seed=seed, keys=3, events=24, bad=0.05, duration="mixed", speculation=0.3,
                            disorder="slightly", cti="regular")


@pytest.mark.spark
@pytest.mark.parametrize("name", list(QUERIES))
def test_staged_plan_equals_the_oracle_and_the_local_engine(spark: Any, name: str) -> None:
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.spark.convert import elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.testing import assert_equivalent, oracle
    from udm.host.testing.cht import cht

    spec = parse_query(QUERIES[name])
    assert len(plan_stages(spec)) > 1
    for seed in range(4):
        streams = _inputs(100 + seed)
        out, dead = collected(run_graph_batch(spec, {n: elements_df(spark, s) for n, s in streams.items()},
                                              buckets=3), "staged")
        assert_equivalent(out, oracle(spec, streams))
        local = QueryRunner(bind(spec))
        expected = local.run_all(streams)
        assert cht(out) == cht(expected)
        assert dead == local_dead(local)


@pytest.mark.spark
def test_staged_plan_truncates_at_the_inputs_T(spark: Any) -> None:
    """An event that never ends, joined, then counted per tumbling window in the second stage: output stops
    at T of the *inputs* (semantics-notes 2, 11), not at a time only the first stage's output reached."""
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.testing import assert_equivalent, oracle

    spec = parse_query({"inputs": TWO, "steps": [
        {"id": "j", "op": "join", "from": ["a", "b"], "on": "k"},
        {"id": "al", "op": "alter_lifetime", "le": {"shift": 7}, "duration": "keep"},
        {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 3}, "group_by": ["v"],
         "udm": "count", "as": "n"}]})
    streams = {"a": [Insert("x", 1, 2**63 - 1, {"k": 1, "v": 5}), Insert("y", 4, 6, {"k": 2, "v": 6})],
               "b": [Insert("z", 2, 12, {"k": 1}), Insert("q", 0, 2**63 - 1, {"k": 2}), Cti(9)]}
    run = run_graph_batch(spec, {n: elements_df(spark, s) for n, s in streams.items()}, buckets=2)
    try:
        assert run.split == "staged"
        out = collect_elements(run.output)
    finally:
        run.unpersist()
    assert_equivalent(out, oracle(spec, streams))


@pytest.mark.spark
def test_check_engine_holds_a_staged_plan_to_the_oracle(spark: Any) -> None:
    from udm.host.testing import check_engine, registered_engine

    report = check_engine(registered_engine("spark", buckets=3), parse_query(JOIN_THEN_WINDOW), _inputs(7),
                          variants=1, interleavings=("sync",))
    assert report.ok, report.text()



@pytest.mark.spark
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_each_bucket_is_one_task_of_its_own(spark: Any, n: int) -> None:
    """`bucket_groups` puts bucket ``b`` in shuffle partition ``b`` (no two buckets in one task, none
    coalesced away by adaptive execution), however uneven the buckets are; reference: Spark's own ``hash``
    for the partition values, and the partition each group's Python call runs in (TaskContext)."""
    import pyarrow as pa
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from udm.host.spark.partition import bucket_groups, bucket_partitions
    from udm.host.spark.stream_buckets import murmur3_long

    values = [*range(-3, 300), 2**40 + 7, -(2**50)]
    got = spark.createDataFrame([(v,) for v in values], "v bigint").select("v", F.hash("v").alias("h")).collect()
    assert [murmur3_long(r.v) for r in got] == [r.h for r in got]
    assert [murmur3_long(v) % n for v in bucket_partitions(n)] == list(range(n))

    # bucket 0 holds most rows (a hot key); the others a few each
    rows = spark.range(5000).select(F.when(F.col("id") < 4000, 0).otherwise(F.col("id") % n).cast("bigint")
                                    .alias("_bucket"))

    def where(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        ctx = TaskContext.get()
        assert ctx is not None
        return pa.table({"bucket": [key[-1].as_py()], "part": [ctx.partitionId()], "rows": [table.num_rows]})

    out = sorted(tuple(r) for r in bucket_groups(rows, n).applyInArrow(where, "bucket bigint, part bigint, rows bigint")
                 .collect())
    assert [(b, p) for b, p, _ in out] == [(b, b) for b in range(n)]
    assert sum(c for _, _, c in out) == 5000


@pytest.mark.spark
def test_an_exchange_rows_key_text_hashes_as_its_payload_field(spark: Any) -> None:
    """An exchange row is routed by the `key_text` its producing bucket wrote, a query input's row by its
    payload's JSON: rows with equal payload fields must hash alike. Reference: Spark's ``get_json_object``
    of the same payload text (`key_value`), over random values of every JSON kind."""
    import json

    from pyspark.sql import functions as F

    from udm.host.spark.graph import key_of_text, key_text, key_value

    rng = random.Random(5)
    kinds = [lambda: rng.randint(-5, 5), lambda: rng.choice([0.5, 1.0, -2.0, 1e20, 3.25]), lambda: rng.choice(
        ["a", "1", "2.0", "é\"x", "{x", "", "true"]), lambda: rng.choice([True, False]), lambda: None,
             lambda: {"a": rng.randint(0, 2)}, lambda: [rng.randint(0, 2)]]
    payloads = []
    for _ in range(200):
        p = {"z": 1}
        if rng.random() < 0.9:
            p["k"] = rng.choice(kinds)()
        payloads.append(p)
    rows = [(json.dumps(p), key_text(p, "k")) for p in payloads]
    got = spark.createDataFrame(rows, "payload string, kt string").select(
        F.xxhash64(key_value("k")).alias("a"), F.xxhash64(key_of_text(F.col("kt"))).alias("b")).collect()
    assert [r.a for r in got] == [r.b for r in got]


@pytest.mark.spark
def test_a_staged_result_is_one_partition_per_bucket_and_one_for_the_final_row(spark: Any) -> None:
    """Every scan of the persisted result (the small rows, the output, its sort) runs a Spark task per
    partition: the last stage's buckets and the final ``cti(INF)``'s one row (`one_row`), no empty ones
    (issue #31: tasks per staged run). Reference: the buckets asked for, and the row's values as given."""
    from udm.host.spark.convert import elements_df
    from udm.host.spark.graph import GRAPH_RESULT_DDL, run_graph_batch
    from udm.host.spark.partition import one_row

    values = ("out", "cti", None, None, None, None, 7, None, 9, None, None, None, None, None, 1)
    row = one_row(spark, GRAPH_RESULT_DDL, values)
    assert row.rdd.getNumPartitions() == 1
    assert tuple(row.collect()[0]) == values
    spec = parse_query(JOIN_THEN_WINDOW)
    for n in (2, 3):
        run = run_graph_batch(spec, {x: elements_df(spark, s) for x, s in _inputs(3).items()}, buckets=n)
        try:
            assert run.split == "staged"
            assert run.output.rdd.getNumPartitions() == n + 1
        finally:
            run.unpersist()


class _Session:
    """A stand-in for a SparkSession: its setting of `STAGED_CONF` and its task slots (None: it does not say)."""

    def __init__(self, value: str | None, slots: int | None) -> None:
        self.conf = {} if value is None else {"spark.udm.graph.staged": value}
        self.slots = slots

    @property
    def sparkContext(self) -> Any:
        if self.slots is None:
            raise RuntimeError("no SparkContext (Spark Connect)")
        return type("Ctx", (), {"defaultParallelism": self.slots})()


@pytest.mark.parametrize("value,slots,expected", [
    (None, 1, False), (None, 2, False), (None, 3, True), (None, 8, True), (None, None, True),
    ("auto", 2, False), ("AUTO", 4, True), ("true", 1, True), ("true", 2, True), ("false", 2, False),
    ("false", 16, False), (" False ", 16, False)])
def test_staging_pays_beyond_two_slots_unless_the_session_says(value: str | None, slots: int | None,
                                                               expected: bool) -> None:
    """The rule as docs/query-writer.md states it: stages on more than two task slots, one bucket on two or
    fewer; the session setting forces either plan; a session that does not say how many slots it has keeps
    the stages (as before the rule)."""
    from udm.host.spark.stage_cost import staging_pays

    assert staging_pays(_Session(value, slots)) is expected


def test_a_bad_staged_setting_is_a_clear_error() -> None:
    from udm.host.errors import UdmError
    from udm.host.spark.stage_cost import staging_pays

    with pytest.raises(UdmError, match="spark.udm.graph.staged must be one of auto, true, false; got 'yes'"):
        staging_pays(_Session("yes", 4))


@pytest.mark.spark
def test_on_two_slots_a_graph_runs_in_one_bucket_unless_forced_with_the_same_result(spark: Any) -> None:
    """The test session has two task slots: left to the rule (``auto``) or told ``false``, a graph that
    needs stages runs in one bucket; ``staged=True`` forces the stages over the setting. Every plan's
    output equals the oracle's and its CHT and dead letters the local engine's."""
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.spark.convert import elements_df
    from udm.host.spark.graph import run_graph_batch
    from udm.host.spark.stage_cost import STAGED_CONF
    from udm.host.testing import assert_equivalent, oracle
    from udm.host.testing.cht import cht

    spec = parse_query(JOIN_THEN_WINDOW)
    streams = _inputs(11)
    local = QueryRunner(bind(spec))
    expected = local.run_all(streams)
    expected_dead = local_dead(local)
    assert expected_dead  # (the inputs have bad lines: the plans must report them alike)
    assert spark.sparkContext.defaultParallelism == 2
    before = spark.conf.get(STAGED_CONF)
    try:
        for value, staged, split in (("auto", None, "single"), ("false", None, "single"), ("false", True, "staged"),
                                     ("auto", False, "single"), ("true", None, "staged")):
            spark.conf.set(STAGED_CONF, value)
            out, dead = collected(run_graph_batch(spec, {n: elements_df(spark, s) for n, s in streams.items()},
                                                  buckets=3, staged=staged), split)
            assert_equivalent(out, oracle(spec, streams))
            assert cht(out) == cht(expected)
            assert dead == expected_dead
    finally:
        spark.conf.set(STAGED_CONF, before)
