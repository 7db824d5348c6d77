"""Per-key state of a staged graph's keyed stages (`udm.host.spark.stage_bucket`, semantics-notes 59), without
Spark: the staged plan replayed micro-batch by micro-batch (`udm.host.spark.stage_replay`) with every keyed
stage kept per key gives, after every micro-batch, the same output CTI, dead letters and output CHT before
that CTI as with
one engine per stage bucket, and the graph oracle's CHT at the end; a micro-batch reads only the keys it
touches and the keys due."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest
from stage_queries import JOIN_THEN_WINDOW, QUERIES, TWO

from tests.stream_io import with_keys
from udm.host.io.interleave import interleave
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.stage_bucket import OLD_STAGE_LAYOUT, keyed_stage
from udm.host.spark.stage_replay import BatchResult, StagedReplay
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing.cht import cht
from udm.host.testing.generator import generate_related
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify
from udm.sdk import INF

#: counted per k, the counts unioned with b, then counted per v over hopping windows (union then window)
UNION_THEN_WINDOW = {"inputs": TWO, "steps": [
    {"id": "w1", "from": "a", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"],
     "udm": "sum", "input": "v", "as": "v"},
    {"id": "u", "op": "union", "from": ["w1", "b"]},
    {"id": "w2", "op": "window", "window": {"type": "hopping", "size": 12, "hop": 4}, "group_by": ["v"],
     "udm": "count", "as": "n"}]}
#: joined by k, shifted, then a tumbling count per v (a stage holding one exact window per key)
JOIN_SHIFT_WINDOW = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "b_"},
    {"id": "al", "op": "alter_lifetime", "le": {"shift": 3}, "duration": "keep"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["v"], "udm": "count",
     "as": "n"}]}
CASES = {**QUERIES, "union_then_window": UNION_THEN_WINDOW, "join_shift_window": JOIN_SHIFT_WINDOW}

Row = tuple[str, int | None, Element]


def _rows(streams: dict[str, list[Element]]) -> list[Row]:
    return list(interleave([(n, enumerate(s, 1)) for n, s in streams.items()]))


def _dead(b: BatchResult) -> list[tuple[Any, ...]]:
    """Dead letters as compared: a step inside the graph names the id its engine gave an element, which
    differs between one engine and per-key ones (and between buckets' id prefixes); the rest must agree."""
    return sorted(((inp, line, re.sub(r"id '[^']*'", "id ?", reason) if reason.startswith("step ") else reason, cat)
                   for inp, line, reason, cat in b.dead), key=lambda d: (d[0], -1 if d[1] is None else d[1], *d[2:]))


def _stream(results: list[BatchResult]) -> list[Element]:
    out: list[Element] = []
    for b in results:
        out += b.out + ([Cti(b.cti)] if b.cti is not None else [])
    return out


def _final(results: list[BatchResult], cti: int | None) -> dict[Any, int]:
    """The output so far that the stream's CTI made final: its CHT's rows wholly before the CTI (what a
    reader keeps, semantics-notes 46). Before the CTI the two layouts may differ as one engine and per-key
    engines do: speculative releases follow each engine's own watermark (semantics-notes 41)."""
    if cti is None:
        return {}
    return {row: c for row, c in cht(_stream(results)).items() if row[1] <= cti}


def _both(query: dict[str, Any], rows: list[Row], size: int, n: int = 3) -> tuple[list[BatchResult], StagedReplay]:
    """The plan with per-key stages and with whole-bucket stages over the same micro-batches; asserts that
    after each one they report the same output CTI, dead letters and final output so far."""
    spec = parse_query(query)
    keyed, whole = StagedReplay(spec, n, per_key=True), StagedReplay(spec, n, per_key=False)
    assert any(keyed_stage(s) for s in keyed.stages), "the test wants a staged graph with a keyed stage"
    got_k, got_w = keyed.run(rows, size), whole.run(rows, size)
    assert len(got_k) == len(got_w)
    for k, (a, b) in enumerate(zip(got_k, got_w, strict=True)):
        assert a.cti == b.cti, f"micro-batch {k}: per-key CTI {a.cti}, whole-bucket {b.cti}"
        assert _dead(a) == _dead(b), k
        assert _final(got_k[:k + 1], a.cti) == _final(got_w[:k + 1], b.cti), k
    return got_k, keyed


@pytest.mark.parametrize(("name", "seed", "size"), [
    ("join_then_window", 1, 13), ("window_then_join", 2, 9), ("join_then_keyless", 3, 17), ("multicast", 4, 11),
    ("input_in_two_stages", 5, 8), ("union_then_window", 6, 10), ("join_shift_window", 7, 12)])
def test_keyed_stages_equal_one_engine_per_stage_bucket_and_the_oracle(name: str, seed: int, size: int) -> None:
    """Random related streams (shared and lone keys, disorder, retractions, bad lines, inserts without the
    key): per-key stages = whole-bucket stages after every micro-batch, and the oracle's CHT; nothing is
    left in a keyed stage's store after the end."""
    query = CASES[name]
    streams = generate_related(2, seed=seed, keys=6, only=2, key_type="mixed", missing_key=0.05, events=60,
                               duration="mixed", speculation=0.4, disorder="slightly", cti="regular", bad=0.04)
    results, keyed = _both(query, _rows(streams), size)
    verdict = verify(_stream(results), oracle_run(bind(parse_query(query)), streams).cht)
    assert verdict, str(verdict)
    assert sum(len(b.dead) for b in results) > 0  # the bad lines were judged
    for s, stores in zip(keyed.stages, keyed.stores, strict=True):
        if keyed_stage(s):
            assert all(st.slabs == {} and st.ids == {} and st.whole is None for st in stores), s.index


@pytest.mark.parametrize(("seed", "size"), [(15, 5), (24, 8), (34, 5)])
def test_every_output_cti_of_either_layout_is_honest(seed: int, size: int) -> None:
    """Where a keyed stage's output CTI after a micro-batch is not the whole-bucket stage's (a key's engine
    may hold the CTI back, or release it, by its own elements: these seeds of a join, a shift and a window
    do), each layout's CTI still makes final exactly the oracle's output before it."""
    streams = generate_related(2, seed=seed, keys=6, only=2, key_type="mixed", missing_key=0.05, events=60,
                               duration="mixed", speculation=0.4, disorder="slightly", cti="regular", bad=0.04)
    spec = parse_query(JOIN_SHIFT_WINDOW)
    want = oracle_run(bind(spec), streams).cht
    for per_key in (True, False):
        got = StagedReplay(spec, 3, per_key=per_key).run(_rows(streams), size)
        assert got[-1].cti == INF
        for k, b in enumerate(got):
            if b.cti is not None:
                assert _final(got[:k + 1], b.cti) == {r: c for r, c in want.items() if r[1] <= b.cti}, (per_key, k)


@pytest.mark.parametrize("name", ["join_then_window", "window_then_join", "union_then_window"])
def test_a_dataframe_streams_rows_are_keyed_by_their_payload(name: str) -> None:
    """Rows that name no key (a DataFrame stream's, whose retractions repeat their key fields): a keyed stage
    reads each row's key off its payload; the same CTIs, dead letters and final output as one engine per
    stage bucket, and the oracle's CHT."""
    query = CASES[name]
    streams = {n: with_keys(s) for n, s in generate_related(
        2, seed=21, keys=5, only=1, events=50, duration="mixed", speculation=0.4, disorder="slightly",
        cti="regular").items()}
    spec = parse_query(query)
    rows = _rows(streams)
    keyed = StagedReplay(spec, 3, driver_keys=False).run(rows, 9)
    whole = StagedReplay(spec, 3, per_key=False).run(rows, 9)
    for k, (a, b) in enumerate(zip(keyed, whole, strict=True)):
        assert (a.cti, _dead(a)) == (b.cti, _dead(b)), k
    assert verify(_stream(keyed), oracle_run(bind(spec), streams).cht)
    assert max(s["keys"]["live"] for b in keyed for s in b.stats if "keys" in s) > 1  # kept per key


def test_exchange_retractions_reach_the_key_of_their_insert() -> None:
    """A join's result retracted (its left event shortened) after the next stage took it: the retraction,
    which carries no payload, finds the key that holds the insert (its producer names it); no id map."""
    streams = {"a": [Insert("a1", 1, 30, {"k": 1, "v": 5}), Insert("a2", 2, 30, {"k": 2, "v": 6}), Cti(3),
                     Cti(4)],
               "b": [Insert("b1", 1, 40, {"k": 1}), Insert("b2", 2, 40, {"k": 2}), Cti(3), Cti(4)]}
    from udm.host.temporal.elements import Retract

    streams["a"] += [Retract("a1", 1, 30, 12), Cti(15), Cti(50)]
    streams["b"] += [Cti(15), Cti(50)]
    results, keyed = _both(JOIN_THEN_WINDOW, _rows(streams), 3, n=2)
    assert verify(_stream(results), oracle_run(bind(parse_query(JOIN_THEN_WINDOW)), streams).cht)
    assert not any(b.dead for b in results)
    assert not any(st.counts["id_reads"] or st.counts["id_writes"] for ss in keyed.stores for st in ss)


def test_an_insert_reusing_the_id_of_one_without_the_key_is_a_duplicate_as_in_one_engine() -> None:
    """An input insert lacking the join field is live at the input (the join dead-letters it, not the input):
    a later insert with its id and a key is a duplicate. The driver routes it to the first one's key, whose
    engine judges it as one engine over the bucket does, and the oracle."""
    streams = {"a": [Insert("a1", 1, 30, {"v": 5}), Insert("a1", 2, 20, {"k": 1, "v": 6}),
                     Insert("a2", 3, 20, {"k": 1, "v": 7}), Cti(40), Cti(INF)],
               "b": [Insert("b1", 1, 40, {"k": 1}), Cti(40), Cti(INF)]}
    results, _ = _both(JOIN_SHIFT_WINDOW, _rows(streams), 2, n=2)
    dead = sorted(d[1:3] for b in results for d in b.dead)
    assert dead == [(1, "step j: missing join field 'k' in the left input 'a'"), (2, "duplicate live id 'a1'")]
    oracle = oracle_run(bind(parse_query(JOIN_SHIFT_WINDOW)), streams)
    assert [r.reason for r in oracle.rejected_by_input["a"]] == ["duplicate live id 'a1'"]
    assert verify(_stream(results), oracle.cht)


def _reads(rep: StagedReplay, stage: int, what: str = "engine_reads") -> int:
    """``what`` counted over a stage's buckets since the last call (the counters are reset)."""
    n = sum(st.counts[what] for st in rep.stores[stage])
    for st in rep.stores[stage]:
        st.counts.clear()
    return n


def test_a_stage_micro_batch_reads_only_the_keys_it_touches_and_the_keys_due() -> None:
    """40 join keys live in the first stage (two buckets; each bucket's keys, first seen in one call, share
    an engine, semantics-notes 78): an element of one key reads that key's engine alone there and one key in
    the window's stage; a CTI that ends nothing reads no join key; the CTI that ends every join event reads
    each engine once (then drops it). One engine per bucket reads all of its keys every time."""
    spec = parse_query(JOIN_THEN_WINDOW)
    keyed, whole = StagedReplay(spec, 2), StagedReplay(spec, 2, per_key=False)
    assert keyed_stage(keyed.stages[0]) and keyed_stage(keyed.stages[1])
    line = iter(range(1, 10_000))

    def call(rep: StagedReplay, rows: list[tuple[str, Element]]) -> BatchResult:
        head, tail = rep.input_rows([(n, next(line), e) for n, e in rows])
        return rep.batch(head + tail)

    first = [("a", Insert(f"a{k}", 1, 50, {"k": f"k{k}", "v": k % 3})) for k in range(40)]
    first += [("a", Cti(1)), ("b", Cti(1))]
    for rep in (keyed, whole):
        call(rep, first)
        _reads(rep, 0), _reads(rep, 1)
    assert sum(len(st.slabs) for st in keyed.stores[0]) == 2  # (each bucket's ~20 small engines: one slab)
    touch = [("b", Insert("b7", 2, 30, {"k": "k7"}))]
    res = call(keyed, touch)
    assert (_reads(keyed, 0, "slab_reads"), _reads(keyed, 1, "slab_reads")) == (1, 0)  # the window's stage: a new key
    call(whole, touch)  # one engine: the touched bucket's, holding its ~20 keys (bytes: bench_stream_graph)
    assert _reads(whole, 0) == 1
    assert res.out == []  # the window is open
    ctis = [("a", Cti(20)), ("b", Cti(20))]
    res = call(keyed, ctis)  # no join event ends; the windows [0, 10), [10, 20) of the one joined key close
    assert (_reads(keyed, 0, "slab_reads"), _reads(keyed, 1, "slab_reads")) == (0, 1)
    assert sorted((e.le, e.re, e.payload["n"]) for e in res.out if isinstance(e, Insert)) == [(0, 10, 1), (10, 20, 1)]
    assert res.cti == 20
    res = call(keyed, [("a", Cti(60)), ("b", Cti(60))])  # every join event ends: each slab read once, dropped
    assert _reads(keyed, 0, "slab_reads") == 2 and all(st.slabs == {} for st in keyed.stores[0])
    call(keyed, [("a", Cti(70)), ("b", Cti(70))])
    assert _reads(keyed, 0, "slab_reads") == 0


def test_a_stage_checkpoint_of_another_layout_is_refused_in_one_line() -> None:
    """A keyed stage finding one engine for its bucket (streaming layout 4's state), or an exchange blob
    without its layout number, stops with one line naming the layout."""
    spec = parse_query(JOIN_THEN_WINDOW)
    rep = StagedReplay(spec, 2)
    for st in rep.stores[0]:
        st.whole = (b"old", None)
    rows = [("a", 1, Insert("a1", 1, 5, {"k": "k1", "v": 1})), ("a", 2, Cti(2)), ("b", 1, Cti(2))]
    with pytest.raises(ValueError, match=re.escape(OLD_STAGE_LAYOUT)):
        rep.batch(rep.input_rows(rows)[0])
    rep = StagedReplay(spec, 2, per_key=False)
    for st in rep.stores[0]:
        st.aux = pickle.dumps({"routes": {}, "merge": {}})
    with pytest.raises(ValueError, match=r"^a checkpoint of a staged graph's state layout before streaming layout 5"):
        rep.batch(rep.input_rows(rows)[0])
    assert "\n" not in OLD_STAGE_LAYOUT


def test_the_stage_processor_reports_an_old_layout_as_one_line() -> None:
    """The Spark processor turns it into a `UdmError` (a stand-in for Spark's state handle)."""
    import pyarrow as pa

    from udm.host.errors import UdmError
    from udm.host.spark.stream_stages import _processor_class
    from udm.host.spark.stream_wire import IN_ARROW

    class State:
        def __init__(self, value: Any = None) -> None:
            self.value = value

        def exists(self) -> bool:
            return self.value is not None

        def get(self) -> Any:
            return self.value

    class Handle:
        def getValueState(self, name: str, schema: str) -> State:
            return State((b"old", None) if name == "engine" else None)

        def getMapState(self, name: str, key: str, value: str) -> State:
            return State()

    spec = parse_query(JOIN_THEN_WINDOW)
    rep = StagedReplay(spec, 2)
    proc = _processor_class()(rep.stages, 0, 2, rep.names, None)
    proc.init(Handle())
    rows = rep.input_rows([("a", 1, Insert("a1", 1, 5, {"k": "k1", "v": 1}))])[0]
    table = pa.Table.from_pylist([{**r, "udm_seq": 1, "udm_bucket": 0} for r in rows], schema=IN_ARROW)
    with pytest.raises(UdmError, match=re.escape(OLD_STAGE_LAYOUT)):
        list(proc.handleInputRows((0, 0), iter([table.to_pandas()]), None))


def test_an_unroutable_retraction_is_dead_lettered_as_by_one_engine() -> None:
    """A DataFrame stream's retraction without its input's key fields (routed `UNROUTABLE`) in a keyed stage:
    the same one dead letter, reason and count as with one engine per stage bucket."""
    from udm.host.spark.stream_wire import UNROUTABLE

    spec = parse_query(JOIN_THEN_WINDOW)
    got = {}
    for per_key in (True, False):
        rep = StagedReplay(spec, 2, per_key=per_key)
        head, _ = rep.input_rows([("a", 1, Insert("a1", 1, 9, {"k": "x", "v": 1})), ("a", 2, Cti(1)),
                                  ("b", 1, Cti(1))])
        bad = {**head[0], "kind": "retract", "re_new": 4, "payload": '{"v":1}', "line": 3, "udm_route": UNROUTABLE}
        res = rep.batch([*head, bad])
        got[per_key] = (res.dead, [s.get("reasons") for s in res.stats if s.get("reasons")])
    assert got[True] == got[False]
    (dead, reasons) = got[True]
    assert [d[1] for d in dead] == [3] and "'k'" in dead[0][2] and reasons == [{"unroutable": 1}]


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_endless_events_behind_an_id_routed_stage_end_and_match_the_oracle(seed: int) -> None:
    """An id-routed stage, then a keyed tumbling window, with events that never end (re inf): the window's
    frontier first moves after its groups evaluated windows, which once re-evaluated every window from the
    start of time (the run never ended). Now the staged plan ends, equal to whole buckets and the oracle."""
    query = {"steps": [{"op": "project", "set": {"tag": "x"}},
                       {"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["tag"],
                        "udm": "count"}]}
    from udm.host.testing.generator import generate

    streams = {"main": generate(seed=seed, events=30, groups=3, duration="mixed", speculation=0.4,
                                disorder="slightly", cti="regular", bad=0.05)}
    assert any(isinstance(e, Insert) and e.re >= INF for e in streams["main"])  # endless events
    results, _keyed = _both(query, _rows(streams), 9, n=2)
    verdict = verify(_stream(results), oracle_run(bind(parse_query(query)), streams).cht)
    assert verdict, str(verdict)
