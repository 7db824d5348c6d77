"""Per-key state of a query graph's streaming bucket (`udm.host.spark.key_state`, semantics-notes 52), without
Spark: a graph bucket run micro-batch by micro-batch over a dict store gives the graph oracle's CHT, and after
every micro-batch the same output CTI and dead letters as one engine over the whole bucket; a micro-batch
reads only the keys it touches and the keys due (exact for joins, unions, alter_lifetime and span steps;
any key holding window state when a CTI moves)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from tests.stream_io import agrees_with_whole, with_keys
from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.io.interleave import interleave
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.key_state import NO_KEY, KeyedBucket, KeyedResult, graph_key_of
from udm.host.spark.key_store import DictStore, load_index
from udm.host.spark.partition import graph_routing
from udm.host.spark.rows import feed_by_input, with_struct_payloads
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing.generator import generate_related
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

TWO = {"a": {}, "b": {}}
JOIN = {"inputs": TWO, "steps": [{"id": "j", "op": "join", "from": ["a", "b"], "on": "k"}]}
LEFT_ANTI = {"inputs": TWO, "steps": [{"id": "j", "op": "join", "type": "left_anti", "from": ["a", "b"], "on": "k"}]}
JOIN_AFTER_WINDOW = {"inputs": TWO, "steps": [
    {"id": "w", "from": "a", "op": "window", "window": {"type": "hopping", "size": 10, "hop": 5},
     "group_by": ["k"], "udm": "sum", "input": "v", "as": "total"},
    {"id": "j", "op": "join", "from": ["w", "b"], "on": [["k", "k"]], "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "out", "op": "project", "keep": ["l_k", "l_total", "r_v"]}]}
UNION_ALTER_WINDOW = {"inputs": TWO, "steps": [
    {"id": "u", "op": "union", "from": ["a", "b"]},
    {"id": "al", "op": "alter_lifetime", "le": {"shift": 3}, "duration": {"const": 7}},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"], "udm": "count"}]}
JOIN_THEN_WINDOW = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "snapshot"}, "group_by": ["l_k"], "udm": "count"}]}
SHIFT_JOIN_UNION = {"inputs": TWO, "steps": [
    {"id": "al", "from": "a", "op": "alter_lifetime", "le": {"shift": 6}, "duration": "keep"},
    {"id": "j", "op": "join", "from": ["al", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "p", "from": "b", "op": "project", "set": {"l_k": "b"}},
    {"id": "u", "op": "union", "from": ["j", "p"]}]}
JOIN_HOPPING = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "hopping", "size": 12, "hop": 4}, "group_by": ["l_k"],
     "udm": "count"},
    {"id": "p", "op": "project", "drop": ["count"]}]}
QUERIES = {"join_hopping": JOIN_HOPPING, "shift_join_union": SHIFT_JOIN_UNION, "join": JOIN, "left_anti": LEFT_ANTI,
           "join_after_window": JOIN_AFTER_WINDOW, "union_alter_window": UNION_ALTER_WINDOW,
           "join_then_window": JOIN_THEN_WINDOW}

Row = tuple[str, int | None, Element]


def _table(rows: list[Row]) -> pa.Table:
    t = ElementBatch.from_elements([e for _, _, e in rows], [ln for _, ln, _ in rows]).table
    t = t.append_column("udm_route", pa.array([0] * t.num_rows, pa.int64()))
    return t.append_column("udm_input", pa.array([n for n, _, _ in rows], pa.string()))


def _feed(runner: QueryRunner, part: pa.Table) -> list[Element]:
    """Runs of one input each, payloads converted per run (the Spark processor's feed)."""
    return feed_by_input(runner, part, part.column("udm_input").to_pylist())


def _prepare(part: pa.Table) -> pa.Table:
    """One input's rows with struct payloads (the Spark processor's ``prepare``)."""
    cols = ["kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw"]
    return with_struct_payloads(part.select(cols))


def _dead_key(dl: Any) -> tuple[Any, ...]:
    """A dead letter as compared: a step inside the graph names the id its engine gave an element
    (``o7``), which differs between one engine and per-key ones; the rest of the reason must agree."""
    reason = re.sub(r"id '[^']*'", "id ?", dl.reason) if dl.reason.startswith("step ") else dl.reason
    return (dl.input, dl.line, reason)


def _end(table: pa.Table) -> pa.Table:
    end = pa.table({c: pa.array([None], table.schema.field(c).type) for c in table.column_names})
    return end.set_column(0, "kind", pa.array(["_end"]))


def _run_both(query: dict[str, Any], rows: list[Row], size: int, *, track_ids: bool = True,
              prepare: bool = True) -> tuple[list[Element], DictStore]:
    """The graph bucket and one whole-bucket engine over the same micro-batches; asserts that after each
    one both report the same output CTI and dead letters. Returns the keyed output (with CTIs) and the
    store."""
    spec = parse_query(query)
    bound = bind(spec)
    routing = graph_routing(spec)
    assert isinstance(routing, dict), "the test wants a keyed graph"
    store = DictStore()
    whole = QueryRunner(bound)
    keyed_out: list[Element] = []
    whole_cti: int | None = None
    batches = [rows[i:i + size] for i in range(0, len(rows), size)]
    for k, batch in enumerate(batches):
        table = _table(batch)
        last = k == len(batches) - 1
        res = KeyedBucket(bound, None, routing, store, 0, track_ids=track_ids).run(
            pa.concat_tables([table, _end(table)]) if last else table, _feed, prepare=_prepare if prepare else None)
        got = _feed(whole, table) + (whole.finish() if last else [])
        whole_cti, outs = agrees_with_whole(k, res, got, whole, whole_cti, _dead_key)
        keyed_out += outs
    return keyed_out, store


def _rows(streams: dict[str, list[Element]]) -> list[Row]:
    """The inputs side by side in the documented order (`udm.host.io.interleave`), as the oracle reads them."""
    return list(interleave([(n, enumerate(s, 1)) for n, s in streams.items()]))


@pytest.mark.parametrize(("name", "seed", "size", "key_type"), [
    ("join", 1, 7, "str"), ("join", 2, 19, "mixed"), ("left_anti", 3, 9, "num"),
    ("join_after_window", 4, 11, "str"), ("union_alter_window", 5, 8, "mixed"),
    ("join_then_window", 6, 13, "str"), ("shift_join_union", 7, 10, "mixed"), ("join_hopping", 8, 9, "num")])
def test_graph_bucket_equals_the_oracle_and_one_engine(name: str, seed: int, size: int, key_type: str) -> None:
    """Random related streams (shared and lone keys, disorder, retractions, bad lines, inserts without the
    key), each graph kept per key: the oracle's CHT; one engine's CTIs and dead letters after every
    micro-batch; nothing left in the store after the end."""
    query = QUERIES[name]
    streams = generate_related(2, seed=seed, keys=6, only=2, key_type=key_type, missing_key=0.05, events=70,
                               duration="mixed", speculation=0.4, disorder="slightly", cti="regular", bad=0.04)
    out, store = _run_both(query, _rows(streams), size)
    expected = oracle_run(bind(parse_query(query)), streams)
    verdict = verify(out, expected.cht)
    assert verdict, str(verdict)
    assert store.slabs == {} and store.ids == {}


def test_graph_bucket_without_the_id_map_routes_retractions_by_their_keys() -> None:
    """A DataFrame stream with several buckets keeps no id map: retractions (which repeat their payload
    here) go by their key fields."""
    streams = {n: with_keys(s) for n, s in generate_related(
        2, seed=9, keys=5, only=1, events=60, duration="mixed", speculation=0.4, disorder="slightly",
        cti="regular").items()}
    assert any(isinstance(e, Retract) for s in streams.values() for e in s)
    out, store = _run_both(JOIN, _rows(streams), 10, track_ids=False, prepare=False)
    assert verify(out, oracle_run(bind(parse_query(JOIN)), streams).cht)
    assert store.ids == {}


def _bucket_calls(query: dict[str, Any], bucket: int, prepare: Any = None
                  ) -> tuple[Callable[[list[tuple[str, Element]]], KeyedResult], DictStore]:
    """Micro-batches of ``(input, element)`` rows, numbered on, through bucket ``bucket`` of ``query``'s
    per-key state in one store (returned, to count its reads)."""
    spec = parse_query(query)
    bound, routing = bind(spec), graph_routing(spec)
    assert isinstance(routing, dict)
    store = DictStore()
    line = iter(range(1, 10_000))

    def call(rows: list[tuple[str, Element]]) -> KeyedResult:
        return KeyedBucket(bound, None, routing, store, bucket).run(_table([(n, next(line), e) for n, e in rows]),
                                                                    _feed, prepare=prepare)

    return call, store


def test_a_graph_micro_batch_reads_only_the_keys_it_touches_and_the_keys_due(monkeypatch: Any) -> None:
    """40 keys with a live join event each, 8 to an engine (``PARK_KEYS``, semantics-notes 78): an element of
    one key reads that key's engine alone; a CTI reads only the engines whose events it lets the join forget
    (once both inputs' CTIs pass their ends, semantics-notes 52), which are then dropped and never read
    again."""
    from udm.host.spark import key_state

    monkeypatch.setattr(key_state, "PARK_KEYS", 8)
    call, store = _bucket_calls(JOIN, 3)

    call([("a", Insert(f"a{k}", 1, 50, {"k": f"k{k}", "v": 1.0})) for k in range(40)]
         + [("a", Cti(1)), ("b", Cti(1))])
    assert len(store.slabs) == 1  # (40 small engines: one slab)
    store.counts.clear()
    res = call([("b", Insert("b7", 2, 30, {"k": "k7", "v": 2.0}))])
    assert store.counts["slab_reads"] == 1 and store.counts["slab_writes"] == 1
    assert [el.payload["k"] for _, el in res.out] == ["k7"]  # the join met its partner
    assert res.stats["keys"] == {"loaded": 8, "live": 40, "engines": 1}
    store.counts.clear()
    res = call([("a", Cti(20)), ("b", Cti(20))])  # no event ends: a join's output CTI is the idle engine's
    assert store.counts["slab_reads"] == 0 and res.cti == 20
    store.counts.clear()
    res = call([("a", Cti(60)), ("b", Cti(60))])  # every event ends: all 40 are read once, then dropped
    assert store.counts["slab_reads"] == 2 and res.stats["keys"] == {"loaded": 40, "live": 0, "engines": 5}
    assert store.slabs == {}
    assert res.cti == 60
    store.counts.clear()
    res = call([("a", Cti(70)), ("b", Cti(70))])
    assert store.counts["slab_reads"] == 0 and res.cti == 70


def test_a_window_after_a_union_is_loaded_at_its_windows_end() -> None:
    """A tumbling window after a union and an alter_lifetime shift: a CTI that closes no window reads no
    key (its hold is the window's bound), the one that closes them reads every key, whose output arrives."""
    call, store = _bucket_calls(UNION_ALTER_WINDOW, 0, prepare=_prepare)

    call([("a", Insert(f"a{k}", 1, 50, {"k": f"k{k}"})) for k in range(30)] + [("a", Cti(1)), ("b", Cti(1))])
    store.counts.clear()
    res = call([("a", Cti(6)), ("b", Cti(5))])  # events shifted to [4, 11); window clock 8: [0, 10) stays open
    assert store.counts["slab_reads"] == 0 and res.cti == 0
    res = call([("a", Cti(15)), ("b", Cti(12))])  # window clock 15: [0, 10) closes in every key
    assert store.counts["slab_reads"] == 1 and res.stats["keys"]["loaded"] == 30
    assert len(res.out) == 30 and res.cti == 10


def test_graph_key_values_match_as_a_join_does() -> None:
    """Numbers by value (a join meets ``1`` and ``1.0``), ``true`` apart from ``1``; a row without its
    input's key fields has no key."""
    assert graph_key_of('{"k": 1}', ["k"]) == graph_key_of('{"k": 1.0}', ["k"])
    assert graph_key_of('{"k": true}', ["k"]) != graph_key_of('{"k": 1}', ["k"])
    assert graph_key_of('{"k": "1"}', ["k"]) != graph_key_of('{"k": 1}', ["k"])
    assert graph_key_of('{"k": {"x": [1, 2]}}', ["k"]) == graph_key_of('{"k": {"x": [1.0, 2.0]}}', ["k"])
    assert graph_key_of('{"k": {"x": true}}', ["k"]) != graph_key_of('{"k": {"x": 1}}', ["k"])
    assert graph_key_of('{"v": 1}', ["k"]) == graph_key_of("not json", ["k"]) == NO_KEY


def test_a_linear_index_is_refused_by_a_graph_bucket() -> None:
    """The two layouts differ (per-input CTIs): a checkpoint of one is not read as the other."""
    spec = parse_query(JOIN)
    routing = graph_routing(spec)
    assert isinstance(routing, dict)
    store = DictStore()
    linear = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                          "group_by": ["k"], "udm": "count"}]}))
    KeyedBucket(linear, None, ["k"], store, 0).run(None, _feed)
    with pytest.raises(ValueError, match="linear query's and a query graph's"):
        KeyedBucket(bind(spec), None, routing, store, 0)
    assert load_index(store.index or b"").graph is False


class _State:
    def __init__(self, exists: bool = False) -> None:
        self._exists = exists

    def exists(self) -> bool:
        return self._exists


class _Handle:
    """The processor's state handle: an ``engine`` ValueState (the whole-bucket layout's) that exists."""

    def getValueState(self, name: str, schema: str) -> _State:
        return _State(name == "engine")

    def getMapState(self, name: str, key: str, value: str) -> _State:
        return _State()


def test_a_graphs_whole_bucket_checkpoint_is_refused_in_one_line() -> None:
    """A DataFrame-API graph restarted from a checkpoint of its whole-bucket layout (before streaming layout
    4) stops with one line naming the layout (the processor, fed a stand-in for Spark's state handle)."""
    from udm.host.errors import UdmError
    from udm.host.spark.streaming import _keyed_processor_class

    spec = parse_query(JOIN)
    routing = graph_routing(spec)
    assert isinstance(routing, dict)
    proc = _keyed_processor_class()(spec.to_json_dict(), None, [], False, True, routing=routing)
    proc.init(_Handle())
    with pytest.raises(UdmError, match=r"^a checkpoint of a query graph's whole-bucket state layout \(udmkit "
                       r"before streaming layout 4\): a graph's state is now kept per key; start from a new "
                       r"checkpoint directory$"):
        list(proc._run(0, None, None))
