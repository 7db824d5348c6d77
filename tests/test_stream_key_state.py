"""Per-key state of a streaming bucket (`udm.host.spark.key_state`), without Spark: the keyed bucket run
micro-batch by micro-batch over a dict store gives the oracle's CHT, the same dead letters as one engine
over the whole bucket, and after every micro-batch the same output CTI as that engine; a micro-batch
reads only the keys it touches and the keys due."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from tests.stream_io import agrees_with_whole, named_outputs
from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.key_state import KeyedBucket, KeyedResult, payload_key
from udm.host.spark.key_store import DictStore
from udm.host.spark.rows import with_struct_payloads
from udm.host.spark.stream_files import _routes
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.properties import check_properties
from udm.host.testing.verifier import verify

INF = 2**63 - 1
TUMBLING = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                       "udm": "sum", "input": "v"}]}
HOPPING = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 0, "hi": 60}},
                     {"op": "window", "window": {"type": "hopping", "size": 20, "hop": 5}, "group_by": ["g"],
                      "udm": "count"}]}
SESSION = {"steps": [{"op": "window", "window": {"type": "session", "gap": 4}, "group_by": ["g"],
                      "udm": "sum", "input": "v"}]}
TWO_WINDOWS = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                          "udm": "sum", "input": "v"},
                         {"op": "window", "window": {"type": "tumbling", "size": 30}, "group_by": ["g"],
                          "udm": "count"}]}
EARLY_ADJUST = {"on_violation": "adjust",
                "steps": [{"op": "window", "window": {"type": "tumbling", "size": 20}, "group_by": ["g"],
                           "udm": "sum", "input": "v", "early": 5, "max_delay": 3}]}
DELAYED = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                      "udm": "sum", "input": "v", "max_delay": 4}]}
SNAPSHOT = {"steps": [{"op": "window", "window": {"type": "snapshot"}, "group_by": ["g"], "udm": "count"}]}


def _table(els: list[tuple[int, Element]]) -> pa.Table:
    lines = [ln for ln, _ in els]
    t = ElementBatch.from_elements([e for _, e in els], lines).table
    return t.append_column("udm_route", pa.array([0] * t.num_rows, pa.int64()))


def _prepare(table: pa.Table) -> pa.Table:
    cols = ["kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw"]
    return with_struct_payloads(table.select(cols))


def _feed(runner: QueryRunner, part: pa.Table) -> list[Element]:
    if part.schema.field("payload").type == pa.string() and "udm_route" in part.column_names:
        part = _prepare(part)  # (the whole engine's batches)
    return runner.process_batch(ElementBatch.from_table(part))


def _dead_key(dl: Any) -> tuple[Any, str]:
    return (dl.line, dl.reason)


def _driver_keys(query: dict[str, Any], stream: list[Element]) -> list[str | None]:
    """Each element's key as the `udm run` driver names it (`stream_files._routes`, over the whole file)."""
    table = ElementBatch.from_elements(stream, list(range(1, len(stream) + 1))).table
    kinds, ts = table.column("kind").to_pylist(), table.column("t").to_pylist()
    _, keys = _routes(table, kinds, ts, ["g"], 1, parse_query(query).on_violation, key_of=payload_key)
    return keys


def _run_both(query: dict[str, Any], stream: list[Element], size: int, *, track_ids: bool = False,
              finish: bool = True, driver_keys: bool = False) -> tuple[list[Element], list[Element], DictStore]:
    """The keyed bucket and one whole-bucket engine over the same micro-batches; asserts that after each
    one both report the same output CTI and the same dead letters. Returns the keyed output (with its
    CTIs), the whole engine's, and the store."""
    bound = bind(parse_query(query))
    store = DictStore()
    whole = QueryRunner(bound)
    keyed_out: list[Element] = []
    whole_out: list[Element] = []
    whole_cti: int | None = None
    numbered = list(enumerate(stream, 1))
    batches = [numbered[i:i + size] for i in range(0, len(numbered), size)]
    told = _driver_keys(query, stream) if driver_keys else None
    for k, batch in enumerate(batches):
        table = _table(batch)
        if told is not None:
            table = table.append_column("udm_key", pa.array(told[k * size:k * size + len(batch)], pa.string()))
        if finish and k == len(batches) - 1:
            end = pa.table({c: pa.array([None], table.schema.field(c).type) for c in table.column_names})
            end = end.set_column(0, "kind", pa.array(["_end"]))
            table = pa.concat_tables([table, end])
        res = KeyedBucket(bound, None, ["g"], store, 0, track_ids=track_ids).run(table, _feed, prepare=_prepare)
        got = _feed(whole, _table(batch))
        if finish and k == len(batches) - 1:
            got += whole.finish()
        whole_cti, outs = agrees_with_whole(k, res, got, whole, whole_cti, _dead_key)
        keyed_out += outs
        whole_out += got
    return keyed_out, whole_out, store


@pytest.mark.parametrize(("query", "seed", "size"), [(TUMBLING, 1, 7), (TUMBLING, 2, 25), (HOPPING, 3, 11),
                                                     (SESSION, 4, 9), (SNAPSHOT, 5, 13),
                                                     (TWO_WINDOWS, 6, 10), (EARLY_ADJUST, 7, 8),
                                                     (DELAYED, 8, 6)])
def test_keyed_bucket_equals_the_oracle_and_one_engine(query: dict[str, Any], seed: int, size: int) -> None:
    """Many keys, disorder, retractions, bad rows, CTIs that close windows of keys not in the batch."""
    stream = generate(seed=seed, events=160, groups=15, duration="mixed", speculation=0.4, disorder="slightly",
                      cti="regular", bad=0.05)
    out, _, store = _run_both(query, stream, size, track_ids=True)
    expected = oracle_run(bind(parse_query(query)), stream)
    verdict = verify(out, expected.cht)
    assert verdict, str(verdict)
    assert not check_properties(stream, out, parse_query(query))
    assert store.slabs == {}  # the end of input leaves no per-key state behind


@pytest.mark.parametrize(("query", "seed", "size"), [(TUMBLING, 21, 25), (SESSION, 24, 40), (EARLY_ADJUST, 27, 30),
                                                     (DELAYED, 28, 20)])
def test_keys_sharing_engines_of_three_equal_the_oracle_and_one_engine(query: dict[str, Any], seed: int,
                                                                        size: int, monkeypatch: Any) -> None:
    """Keys first seen in one call share an engine, 3 to one here (semantics-notes 78): large micro-batches
    of many keys, so engines mix keys that come back with keys that do not; the oracle's CHT and, after every
    micro-batch, one engine's CTI and dead letters. And 600 keys first seen in one call live in 3 engines."""
    from udm.host.spark import key_state

    monkeypatch.setattr(key_state, "PARK_KEYS", 3)
    stream = generate(seed=seed, events=200, groups=20, duration="mixed", speculation=0.4, disorder="slightly",
                      cti="regular", bad=0.05)
    out, _, _ = _run_both(query, stream, size, track_ids=True)
    verdict = verify(out, oracle_run(bind(parse_query(query)), stream).cht)
    assert verdict, str(verdict)
    monkeypatch.setattr(key_state, "PARK_KEYS", 256)
    res = KeyedBucket(bind(parse_query(query)), None, ["g"], DictStore(), 0).run(
        _table(list(enumerate([*_stream_of_keys(600, 0), Cti(2)], 1))), _feed, prepare=_prepare)
    assert res.stats["keys"] == {"loaded": 600, "live": 600, "engines": 3}


@pytest.mark.parametrize(("query", "seed", "size"), [(TUMBLING, 11, 7), (HOPPING, 13, 11), (SESSION, 14, 9),
                                                     (EARLY_ADJUST, 17, 8), (DELAYED, 18, 6)])
def test_keys_named_by_the_udm_run_driver_need_no_id_map(query: dict[str, Any], seed: int, size: int) -> None:
    """The `udm run` driver names each row's key (``udm_key``, from its live-id tracking): the same output,
    CTIs and dead letters as the id map gives, and no id map in the state."""
    stream = generate(seed=seed, events=160, groups=15, duration="mixed", speculation=0.4, disorder="slightly",
                      cti="regular", bad=0.05)
    told, _, store = _run_both(query, stream, size, driver_keys=True)
    mapped, _, _ = _run_both(query, stream, size, track_ids=True)
    assert told == mapped
    assert verify(told, oracle_run(bind(parse_query(query)), stream).cht)
    assert store.counts["id_writes"] == store.counts["id_reads"] == 0


def test_retractions_without_key_fields_follow_their_id() -> None:
    """``udm run`` routes by id on the driver: a retraction need not repeat the key; an insert reusing an
    id live under another key is judged by that key's engine (a duplicate), as one engine judges it."""
    stream: list[Element] = [Insert("a", 1, 9, {"g": "x", "v": 1.0}), Insert("b", 2, 8, {"g": "y", "v": 2.0}),
                             Cti(2), Retract("a", 1, 9, 5), Insert("b", 3, 4, {"g": "x", "v": 5.0}), Cti(6),
                             Retract("b", 2, 8, 7), Insert("c", 12, 13, {"g": "y", "v": 1.0}), Cti(20)]
    out, _, store = _run_both(TUMBLING, stream, 2, track_ids=True)
    assert verify(out, oracle_run(bind(parse_query(TUMBLING)), stream).cht)
    assert store.ids == {}
    told, _, told_store = _run_both(TUMBLING, stream, 2, driver_keys=True)  # the driver's keys: the same
    assert told == out and store.counts["id_writes"] > 0 and told_store.counts["id_writes"] == 0


def test_a_cti_raises_t_for_keys_it_skips_in_the_same_micro_batch() -> None:
    """T (semantics-notes 2) rises with a CTI as well as with elements: the ``udm run`` driver sends every
    bucket ``cti(T)`` from the other buckets before the tail, in the micro-batch that also holds
    ``cti(INF)`` and the end. A key loaded only at the end must cut its never-ending events at that T (its
    windows up to W.LE = T: four of them), not at the largest time of the bucket's own elements (one)."""
    stream: list[Element] = [Insert("a", 3, INF, {"g": "x", "v": 5.0}), Insert("b", 1, 4, {"g": "y", "v": 2.0}),
                             Cti(2), Cti(30), Cti(INF)]
    out, _, _ = _run_both(TUMBLING, stream, 3, track_ids=True)
    expected = oracle_run(bind(parse_query(TUMBLING)), stream)
    verdict = verify(out, expected.cht)
    assert verdict, str(verdict)


def _counting_feed(calls: list[int]) -> Any:
    def feed(runner: QueryRunner, part: pa.Table) -> list[Element]:
        calls.append(part.num_rows)
        return _feed(runner, part)
    return feed


def _many_ctis(keys: int, ticks: int, endless: bool = False) -> list[Element]:
    """Every key one event per tick, a CTI after every tick; with ``endless``, key k0's first event never ends."""
    out: list[Element] = []
    for t in range(ticks):
        out += [Insert(f"e{t}-{k}", 10 * t + k, 10 * t + k + (INF if endless and t == 0 and k == 0 else 5),
                       {"g": f"k{k}", "v": float(t + k)}) for k in range(keys)]
        out.append(Cti(10 * t + 9))
    return out


@pytest.mark.parametrize("park", [256, 1])
@pytest.mark.parametrize("query", [TUMBLING, HOPPING, SESSION, EARLY_ADJUST, DELAYED])
def test_an_engine_takes_its_rows_and_the_ctis_between_them_in_one_call(query: dict[str, Any], park: int,
                                                                        monkeypatch: Any) -> None:
    """A micro-batch of 4 new keys and 12 CTIs: one call per engine (not one per engine and CTI): the 4 keys
    share one engine (semantics-notes 78), or with one key an engine (``PARK_KEYS`` 1) each takes its 12
    events and the 12 CTIs; the output and CTIs of one engine, the oracle's CHT."""
    from udm.host.spark import key_state

    monkeypatch.setattr(key_state, "PARK_KEYS", park)
    stream = _many_ctis(4, 12)
    bound = bind(parse_query(query))
    calls: list[int] = []
    res = KeyedBucket(bound, None, ["g"], DictStore(), 0).run(_table(list(enumerate(stream, 1))),
                                                              _counting_feed(calls), prepare=_prepare)
    assert sorted(calls) == ([4 * 12 + 12] if park > 4 else [12 + 12] * 4)
    whole = QueryRunner(bound)
    got = _feed(whole, _table(list(enumerate(stream, 1))))
    agrees_with_whole(0, res, got, whole, None, _dead_key)
    out, _, _ = _run_both(query, stream, 13, track_ids=True)
    assert verify(out, oracle_run(bound, stream).cht)


@pytest.mark.parametrize("size", [20, 8, 3])
def test_never_ending_events_reach_t_however_the_stream_is_cut(size: int) -> None:
    """An event that never ends joins the windows up to min(CTI, T) (semantics-notes 2), T the whole bucket's:
    key k0 holds one while k1's later rows and the CTIs raise T. In one micro-batch (size 20) the end of input
    once found k0 loaded in the same call but not yet brought to the last CTI, and cut its windows at its own
    T (52) instead of the bucket's (59): three windows were missing."""
    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 2}, "group_by": ["g"], "udm": "count"}]}
    stream: list[Element] = [Insert("a", 1, INF, {"g": "k0"}), Cti(1)]
    for t in range(6):
        stream += [Insert(f"x{t}", 10 * t + 1, 10 * t + 2, {"g": "k0"}),
                   Insert(f"y{t}", 10 * t + 5, 10 * t + 6, {"g": "k1"}), Cti(10 * t + 9)]
    out, _, _ = _run_both(q, stream, size, track_ids=True)
    expected = oracle_run(bind(parse_query(q)), stream).cht
    verdict = verify(out, expected)
    assert verdict, str(verdict)
    assert (58, 60, '{"count":1,"g":"k0"}') in set(expected.rows())
    assert not check_properties(stream, out, parse_query(q))


def _stream_of_keys(keys: int, le: int) -> list[Element]:
    return [Insert(f"e{le}-{k}", le + k % 3, le + 90, {"g": f"k{k}", "v": 1.0}) for k in range(keys)]


def test_a_micro_batch_reads_only_the_engines_it_touches_and_the_engines_due(monkeypatch: Any) -> None:
    """40 keys first seen in one call, 8 to an engine (``PARK_KEYS``, semantics-notes 78): an element of k7
    loads k7's engine alone; a CTI closing every window loads every engine once."""
    from udm.host.spark import key_state

    monkeypatch.setattr(key_state, "PARK_KEYS", 8)
    bound = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100},
                                         "group_by": ["g"], "udm": "sum", "input": "v"}]}))
    store = DictStore()

    def call(els: list[Element]) -> KeyedResult:
        return KeyedBucket(bound, None, ["g"], store, 3).run(_table(list(enumerate(els, 1))), _feed, prepare=_prepare)

    call([*_stream_of_keys(40, 0), Cti(5)])  # 40 keys, each with an open window [0, 100)
    assert len(store.slabs) == 1  # (5 small engines: one slab)
    store.counts.clear()
    res = call([Insert("one", 10, 20, {"g": "k7", "v": 2.0}), Cti(60)])  # one key, no window closes
    assert store.counts["slab_reads"] == 1 and store.counts["slab_writes"] == 1
    assert res.out == [] and res.stats["keys"] == {"loaded": 8, "live": 40, "engines": 1}  # (k0 to k7's)
    assert res.cti == 0  # every key holds its window open from 0
    store.counts.clear()
    res = call([Cti(100)])  # closes every key's window: all 5 engines are due, none is in the batch
    assert store.counts["slab_reads"] == 2  # (the 4 other engines' slab, k7's)
    assert res.stats["keys"] == {"loaded": 40, "live": 0, "engines": 5}
    assert sorted(el.payload["g"] for _, el in res.out) == sorted(f"k{k}" for k in range(40))
    assert res.cti == 100
    store.counts.clear()
    res = call([Cti(150)])  # nothing is live any more: no slab read
    assert store.counts["slab_reads"] == 0 and res.cti == 100 and store.slabs == {}


@pytest.mark.parametrize("enabled", [True, False])
def test_no_cyclic_collection_during_a_call_and_the_collector_as_it_was_after(enabled: bool) -> None:
    """A call's engines are alive until it writes them back: the collector is off while it runs (it only
    rescanned them), and left as it was after, also when the call fails; the call's cycles are freed after."""
    import gc

    bound = bind(parse_query(TUMBLING))
    seen: list[bool] = []

    def feed(runner: QueryRunner, part: pa.Table) -> list[Element]:
        seen.append(gc.isenabled())
        return _feed(runner, part)

    def broken(runner: QueryRunner, part: pa.Table) -> list[Element]:
        raise RuntimeError("boom")

    els = [Insert(f"e{k}", 1, 2, {"g": f"k{k}", "v": 1.0}) for k in range(5)] + [Cti(20)]
    (gc.enable if enabled else gc.disable)()
    try:
        store = DictStore()
        res = KeyedBucket(bound, None, ["g"], store, 0).run(_table(list(enumerate(els, 1))), feed, prepare=_prepare)
        assert seen == [False] and gc.isenabled() == enabled  # (the 5 new keys share one engine)
        assert sorted(el.payload["g"] for _, el in res.out) == [f"k{k}" for k in range(5)]
        with pytest.raises(RuntimeError, match="boom"):
            KeyedBucket(bound, None, ["g"], DictStore(), 0).run(_table(list(enumerate(els, 1))), broken,
                                                                 prepare=_prepare)
        assert gc.isenabled() == enabled
    finally:
        gc.enable()


def test_the_end_of_input_reads_every_live_key_in_one_bulk_read(monkeypatch: Any) -> None:
    """At the end every live key's engine ends, so all are read: in one pass over the store, not a read per
    engine (each a round trip to Spark's state server); the output is the oracle's as before. (40 keys, 8 to
    an engine.)"""
    from udm.host.spark import key_state

    monkeypatch.setattr(key_state, "PARK_KEYS", 8)
    query = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 100}, "group_by": ["g"],
                        "udm": "sum", "input": "v"}]}
    bound = bind(parse_query(query))
    store = DictStore()
    first = [*_stream_of_keys(40, 0), Cti(5)]
    KeyedBucket(bound, None, ["g"], store, 0).run(_table(list(enumerate(first, 1))), _feed, prepare=_prepare)
    store.counts.clear()
    table = _table([(41, Insert("late", 50, 60, {"g": "k3", "v": 5.0}))])
    end = pa.table({c: pa.array([None], table.schema.field(c).type) for c in table.column_names})
    table = pa.concat_tables([table, end.set_column(0, "kind", pa.array(["_end"]))])
    res = KeyedBucket(bound, None, ["g"], store, 0).run(table, _feed, prepare=_prepare)
    assert store.counts["bulk_reads"] == 1
    assert store.counts["slab_reads"] == 1  # only k3's engine's, touched before the end
    assert len(res.out) == 40
    assert verify([Insert(f"{p}.{el.id}", el.le, el.re, el.payload) for p, el in res.out],
                  oracle_run(bound, [*first, Insert("late", 50, 60, {"g": "k3", "v": 5.0})]).cht)
    assert store.slabs == {}


def test_due_is_the_next_window_end_and_the_events_end() -> None:
    bound = bind(parse_query(TUMBLING))
    r = QueryRunner(bound)
    r.process(Insert("a", 3, 25, {"g": "x", "v": 1.0}))
    r.process(Cti(4))
    assert r.due(4) == 10  # the window [0, 10) is released at cti(10)
    r.process(Cti(12))
    assert r.due(12) == 20
    r.process(Cti(30))
    assert r.due(30) == INF  # the event ended (forgotten at 26) and its last window closed


def test_an_index_of_another_layout_is_refused() -> None:
    store = DictStore(index=pickle.dumps({"not": "an index"}))
    with pytest.raises(ValueError, match="another layout"):
        KeyedBucket(bind(parse_query(TUMBLING)), None, ["g"], store, 0)


def test_the_index_is_stored_compressed_and_an_older_layout_is_refused() -> None:
    """The index blob is compressed (semantics-notes 61): a bucket of 400 keys writes it over twice as
    small as its pickle (~3x; ~10x at 10,000 keys). An index of streaming layouts 3 to 6 (plain, or of
    index version 1: engines by key, not in slabs), of layout 7 (index version 2: the keys as a tuple of
    lists), of layout 8 (index version 3: slabs not compressed) or of layout 9 (index version 4: an engine per
    key, where its slabs would be read as engines of several keys) is refused in one line (semantics-notes 74,
    75, 77, 78)."""
    from udm.host.spark.key_store import dump_index, load_index

    bound = bind(parse_query(TUMBLING))
    store = DictStore()
    KeyedBucket(bound, None, ["g"], store, 0).run(_table(list(enumerate([*_stream_of_keys(400, 0), Cti(2)], 1))),
                                                  _feed, prepare=_prepare)
    blob = store.index or b""
    ix = load_index(blob)
    plain = pickle.dumps(ix, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(blob) * 2 < len(plain)
    olds = [plain, _index_of_layout_6(), _index_of_layout_7()]
    for v in (1, 3, 4):  # (3: layout 8, its slabs plain pickles; 4: layout 9, an engine per key)
        ix.v = v
        olds.append(dump_index(ix))
    for old in olds:
        with pytest.raises(ValueError, match="^bucket state of another layout: start from a new checkpoint$"):
            KeyedBucket(bound, None, ["g"], DictStore(slabs=dict(store.slabs), index=old), 0)


def test_slabs_are_stored_compressed(monkeypatch: Any) -> None:
    """A slab is stored compressed (semantics-notes 77): the engines of one query repeat the same pickled
    structure, so 200 keys' slab (an engine each: ``PARK_KEYS`` 1) is over 20x smaller than its pickle; it
    reads back as the same engines."""
    from udm.host.spark import key_state
    from udm.host.spark.key_store import load_slab

    monkeypatch.setattr(key_state, "PARK_KEYS", 1)

    store = DictStore()
    KeyedBucket(bind(parse_query(TUMBLING)), None, ["g"], store, 0).run(
        _table(list(enumerate([*_stream_of_keys(200, 0), Cti(2)], 1))), _feed, prepare=_prepare)
    (blob,) = store.slabs.values()
    engines = load_slab(blob)
    assert len(engines) == 200 and len(blob) * 20 < len(pickle.dumps(engines, protocol=pickle.HIGHEST_PROTOCOL))


def _index_of_layout_6() -> bytes:
    """A compressed index blob as layouts 5 and 6 wrote it: an object of the class ``key_state._Index``, a
    name that no longer exists."""
    import zlib

    from udm.host.spark import key_state

    class Old:
        pass

    Old.__module__, Old.__qualname__ = key_state.__name__, "_Index"
    key_state._Index = Old  # type: ignore[attr-defined]  # (only while it is pickled)
    try:
        return b"udmz1" + zlib.compress(pickle.dumps(Old(), protocol=pickle.HIGHEST_PROTOCOL), 1)
    finally:
        del key_state._Index  # type: ignore[attr-defined]


def _index_of_layout_7() -> bytes:
    """A compressed index blob as layout 7 wrote it: a ``KeyIndex`` of index version 2, its keys a tuple of
    lists (names, dues, holds, serials, outputs, per-input dues, slabs)."""
    import zlib

    from udm.host.spark.key_store import KeyIndex

    state = {"cti": 4, "out": 4, "serial": 1, "v": 2, "cols": (['["a"]'], [10], [5], [1], [4], {}, [0]),
             "slabs": {0: [1, 1]}, "next_slab": 1}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KeyIndex, "__getstate__", lambda self: state)
        blob = pickle.dumps(KeyIndex.__new__(KeyIndex), protocol=pickle.HIGHEST_PROTOCOL)
    return b"udmz1" + zlib.compress(blob, 1)


@pytest.mark.parametrize("seed", [31, 32])
def test_slabs_keep_reads_flat_in_held_keys_and_the_store_compact(seed: int, monkeypatch: Any) -> None:
    """Keys held open (one far window each) and 40 active keys, a few of them touched a call, slabs of a
    few engines: a call reads and writes a number of slabs that does not grow with the held keys; after
    every call no slab holds more than twice as many engines as it has live keys (a slab read and left under
    half full is repacked), every live key's engine in the slab the index names; the output is the oracle's,
    restarting from the store each call, with disorder and retractions among the active keys."""
    import random

    from udm.host.spark import key_store

    monkeypatch.setattr(key_store, "SLAB_BYTES", 20000)
    bound = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 1000},
                                         "group_by": ["g"], "udm": "sum", "input": "v"}]}))
    rnd = random.Random(seed)
    reads: dict[int, list[int]] = {}
    for held in (30, 300):
        store = DictStore()
        stream: list[Element] = [Insert(f"h{k}", 10**9 + k, 10**9 + k + 1, {"g": f"h{k}", "v": 1.0})
                                 for k in range(held)]
        batches = [list(stream)]
        for b in range(16):
            batch: list[Element] = []
            live: dict[str, Insert] = {}
            active = rnd.sample(range(40), 5)
            for i in range(20):  # (out of order within the batch; some retracted, all after the last CTI)
                if live and rnd.random() < 0.2:
                    ev = live.pop(rnd.choice(sorted(live)))
                    batch.append(Retract(ev.id, ev.le, ev.re, ev.le, ev.payload))
                le = b * 10 + rnd.randrange(10)
                ev = Insert(f"e{b}-{i}", le, le + 1 + rnd.randrange(3), {"g": f"k{rnd.choice(active)}", "v": float(i)})
                live[ev.id] = ev
                batch.append(ev)
            batch.append(Cti(b * 10 + 10))
            batches.append(batch)
            stream += batch
        out: list[Element] = []
        n = 0
        for k, batch in enumerate(batches):
            store.counts.clear()
            table = _table(list(enumerate(batch, n + 1)))
            n += len(batch)
            if k == len(batches) - 1:
                end = pa.table({c: pa.array([None], table.schema.field(c).type) for c in table.column_names})
                table = pa.concat_tables([table, end.set_column(0, "kind", pa.array(["_end"]))])
            res = KeyedBucket(bound, None, ["g"], store, 0, track_ids=True).run(table, _feed, prepare=_prepare)
            out += named_outputs(res)
            if 0 < k < len(batches) - 1:
                reads.setdefault(held, []).append(store.counts["slab_reads"] + store.counts["slab_writes"])
                ix = key_store.load_index(store.index or b"")
                engines = {key: key_store.load_slab(store.slabs[e.slab]) for key, e in ix.entries()}
                assert all(key in got for key, got in engines.items())
                for n, blob in store.slabs.items():  # (no slab holds more than twice its live keys)
                    assert len(key_store.load_slab(blob)) <= 2 * sum(e.slab == n for _, e in ix.entries()), (k, n)
        assert store.slabs == {}
        assert verify(out, oracle_run(bound, stream).cht)
    assert max(reads[300]) <= max(reads[30]) + 2


def test_key_values_keep_json_types_apart() -> None:
    from udm.host.spark.key_state import NO_KEY, key_of

    assert key_of(json.dumps({"g": 1}), ["g"]) != key_of(json.dumps({"g": 1.0}), ["g"])
    assert key_of(json.dumps({"g": True}), ["g"]) != key_of(json.dumps({"g": 1}), ["g"])
    assert key_of(json.dumps({"v": 1}), ["g"]) == key_of("[1]", ["g"]) == key_of(None, ["g"]) == NO_KEY
    assert Counter([key_of(json.dumps({"g": "a", "v": i}), ["g"]) for i in range(3)]) == Counter({'["a"]': 3})


def test_a_restart_with_another_bucket_count_is_refused() -> None:
    bound = bind(parse_query(TUMBLING))
    store = DictStore()
    KeyedBucket(bound, None, ["g"], store, 0, buckets=4).run(_table([(1, Insert("a", 1, 2, {"g": "x", "v": 1.0}))]),
                                                             _feed)
    with pytest.raises(ValueError, match="written with 4 key buckets, this query has 2"):
        KeyedBucket(bound, None, ["g"], store, 0, buckets=2)
