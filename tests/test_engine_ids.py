"""Engine: event-id bookkeeping of the vectorized fast path — `udm.host.engine.ids.BatchIds` (id checks on
the Arrow bytes) and the columnar id store of `ColumnarEvents` — against a Python set, the general path
(`QueryRunner.process`, element by element) and the conformance kit's oracle."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from test_engine_fastpath import struct_batch
from test_engine_support import check_physical, cht, runner, window_query

import udm.host.engine.batch as batch_driver
import udm.host.engine.ids as ids_mod
from udm.host.engine.columnar import Cols
from udm.host.engine.ids import BatchIds, id_hashes
from udm.host.io.batch import ElementBatch
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle, verify

# ------------------------------------------------------------------------------------------------------
# BatchIds against a Python set
# ------------------------------------------------------------------------------------------------------

POOL = ["", "a", "b", "ab", "ba", "\x00", "\x00\x00", "é", "e\u0301", "日本", "e1", "e10", "e01", "x" * 40]


def _ids(rng: random.Random, n: int, pool: int) -> list[str]:
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.3:
            out.append(rng.choice(POOL))
        else:
            out.append(f"e{rng.randrange(pool)}")
    return out


def _arrays(values: list[str]) -> list[Any]:
    """The same ids as several Arrow layouts: plain, large_string, a slice with an offset."""
    pad = ["pad0", *values, "pad1"]
    return [pa.array(values, pa.string()), pa.array(values, pa.large_string()),
            pa.array(pad, pa.string()).slice(1, len(values))]


@pytest.fixture(params=["real", "degenerate"])
def hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Also run with a hash that collides all the time: the exact comparison must carry the result."""
    if request.param == "degenerate":
        real = ids_mod.id_hashes

        def weak(arr: Any) -> Any:
            h = real(arr)
            return None if h is None else h & np.uint64(3)

        monkeypatch.setattr(ids_mod, "id_hashes", weak)
    return str(request.param)


def test_hashes_are_equal_for_equal_strings_whatever_the_layout() -> None:
    vals = POOL + [f"id-{i}" for i in range(100)]
    hs = [id_hashes(a) for a in _arrays(vals)]
    for h in hs:
        assert h is not None
        assert np.array_equal(h, hs[0])
    assert len(set(hs[0].tolist())) == len(set(vals))  # no collision among these (a sanity check)
    assert id_hashes(pa.array([1, 2])) is None  # not strings: the caller falls back


@pytest.mark.usefixtures("hashes")
def test_distinct_matches_a_set() -> None:
    rng = random.Random(7)
    for trial in range(120):
        n = rng.choice([0, 1, 5, 63, 64, 65, 200, 1000])
        values = _ids(rng, n, pool=rng.choice([3 * n + 1, 10 ** 9]))
        if trial % 3 == 0:
            values = list(dict.fromkeys(values))  # often distinct
        for arr in _arrays(values):
            assert BatchIds(arr).distinct() == (len(set(values)) == len(values)), (trial, values[:20])


@pytest.mark.usefixtures("hashes")
def test_member_mask_matches_a_set() -> None:
    rng = random.Random(8)
    for trial in range(120):
        n = rng.choice([1, 10, 64, 100, 700])
        values = list(dict.fromkeys(_ids(rng, n, pool=4 * n)))
        others = _ids(rng, rng.choice([0, 1, 20, 500]), pool=4 * n)
        expect = [v in set(others) for v in values]
        for arr in _arrays(values):
            b = BatchIds(arr)
            for o in (others, pa.array(others, pa.string()), pa.chunked_array([others[:3], others[3:]], pa.string()),
                      pa.array(others, pa.large_string())):
                assert b.member_mask(o).tolist() == expect, trial


def test_an_overlong_id_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids_mod, "SEGMENT", 3)
    values = [f"e{i}" for i in range(101)] + ["e5"]  # up to "e99": 3 bytes, fine; "e100" is not
    assert id_hashes(pa.array(values[:50])) is not None
    b = BatchIds(pa.array(values))
    assert b.h is None and not b.distinct()
    assert b.member_mask(["e7", "zz"]).tolist() == [v == "e7" for v in values]


@pytest.mark.parametrize("segment", [1, 2, 5, 13, 64])
def test_hashing_in_segments_gives_the_same_hashes(segment: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(segment)
    values = [v for v in _ids(rng, 400, pool=50) if len(v.encode()) <= segment]
    whole = [id_hashes(a) for a in _arrays(values)]
    monkeypatch.setattr(ids_mod, "SEGMENT", segment)
    for a, w in zip(_arrays(values), whole, strict=True):
        got = id_hashes(a)
        assert got is not None and w is not None and np.array_equal(got, w)


# ------------------------------------------------------------------------------------------------------
# the fast path's id registry against the general path and the oracle
# ------------------------------------------------------------------------------------------------------

QUERIES = {
    "tumbling-avg": window_query({"type": "tumbling", "size": 10}, "avg", input="v", group_by=["g"]),
    "hopping-sum-panes": window_query({"type": "hopping", "size": 12, "hop": 4}, "sum", input="v", group_by=["g"]),
    "tumbling-median": window_query({"type": "tumbling", "size": 8}, "median", input="v", group_by=["g"]),
}


def id_stream(rng: random.Random, n: int, *, p_dup: float, p_reuse: float, p_retract: float, cti_every: int,
              reuse_closed: bool) -> list[Element]:
    """In-order inserts whose ids repeat — duplicates of live ids, ids of fully retracted events and, with
    ``reuse_closed``, ids of events a CTI closed (the engine forgot them: a documented decision the oracle,
    which never forgets, does not share) — retractions of earlier events (often held by the fast path's
    columnar store of an earlier batch), CTIs every few elements."""
    out: list[Element] = []
    live: dict[str, tuple[int, int]] = {}  # open events
    free: list[str] = []  # ids a new event may take again
    t = k = 0
    cti = -1
    for i in range(n):
        if i and i % cti_every == 0:
            c = cti = max(cti, t - rng.randrange(3))
            out.append(Cti(c))
            for eid, (_, re) in list(live.items()):
                if re < c:  # closed
                    del live[eid]
                    if reuse_closed:
                        free.append(eid)
            continue
        r = rng.random()
        if r < p_retract and live:
            eid = rng.choice(sorted(live))
            le, re = live[eid]
            new = le if rng.random() < 0.5 else max(le + 1, re - 1 - rng.randrange(3))
            out.append(Retract(eid, le, re, new))
            if min(re, new) < cti:
                continue  # breaks the CTI: dead-lettered by every path
            if new == le:
                del live[eid]
                free.append(eid)
            else:
                live[eid] = (le, new)
            continue
        le, re = t, t + 1 + rng.randrange(6)
        payload = {"g": f"s{rng.randrange(3)}", "v": rng.randrange(100)}
        t += 1
        if r < p_retract + p_dup and live:
            out.append(Insert(rng.choice(sorted(live)), le, re, payload))  # duplicate live id: dead-lettered
            continue
        if r < p_retract + p_dup + p_reuse and free:
            eid = free.pop(rng.randrange(len(free)))
        else:
            k += 1
            eid = f"u{k}"
        out.append(Insert(eid, le, re, payload))
        live[eid] = (le, re)
    return out


def _general(q: dict, stream: list[Element]) -> tuple[list[Element], Any]:
    r = runner(q)
    out: list[Element] = []
    for i, el in enumerate(stream):
        out += r.process(el, i + 1)
    return out + r.finish(), r


def _batched(q: dict, stream: list[Element], rng: random.Random, make: Any) -> tuple[list[Element], Any]:
    r = runner(q)
    out: list[Element] = []
    k = 0
    while k < len(stream):
        m = rng.choice([rng.randrange(1, 40), rng.randrange(60, 400)])
        part = stream[k:k + m]
        out += r.process_batch(make(part, list(range(k + 1, k + 1 + len(part)))))
        k += m
    return out + r.finish(), r


def _same(q: dict, stream: list[Element], rng: random.Random, make: Any, *, with_oracle: bool = True) -> Any:
    general, g = _general(q, stream)
    batched, b = _batched(q, stream, rng, make)
    assert cht(batched) == cht(general)
    check_physical(batched)
    assert [(d.line, d.reason) for d in b.dead_letters] == [(d.line, d.reason) for d in g.dead_letters]
    assert (b.stats.elements_in, b.stats.dead_lettered) == (g.stats.elements_in, g.stats.dead_lettered)
    if with_oracle:
        assert verify(batched, oracle(parse_query(q), stream)).ok
    return b


@pytest.mark.parametrize("min_run", [2, 48])
@pytest.mark.parametrize("make", [ElementBatch.from_elements, struct_batch], ids=["text", "struct"])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_duplicate_and_retracted_ids_equal_the_general_path(name: str, make: Any, min_run: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_driver, "MIN_RUN", min_run)
    q = QUERIES[name]
    for seed in range(12):
        rng = random.Random(seed)
        reuse_closed = seed % 3 == 2
        stream = id_stream(rng, rng.randrange(50, 700), p_dup=rng.choice([0.0, 0.02, 0.2]),
                           p_reuse=rng.choice([0.05, 0.3]), p_retract=rng.choice([0.0, 0.05, 0.3]),
                           cti_every=rng.choice([7, 50, 300]), reuse_closed=reuse_closed)
        _same(q, stream, rng, make, with_oracle=not reuse_closed)


def _stretch(prefix: str, a: int, b: int) -> list[Element]:
    return [Insert(f"{prefix}{i}", i, i + 2, {"g": "s", "v": i % 7}) for i in range(a, b)]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_each_id_case_of_the_fast_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases one by one, each behind a vectorized stretch (the fast path holds its ids columnar)."""
    monkeypatch.setattr(batch_driver, "MIN_RUN", 4)
    q = QUERIES[name]
    base = _stretch("e", 0, 100)
    tail = _stretch("f", 101, 160)

    def ins(eid: str, le: int, v: int = 1) -> Insert:
        return Insert(eid, le, le + 1, {"g": "s", "v": v})

    cases = {
        "duplicate inside one batch": [*base[:50], ins("e3", 50), *base[50:]],
        "duplicate of a live fast-path id": [*base, ins("e98", 100), *tail],
        "reuse after a CTI forgot it": [*base, Cti(90), ins("e10", 100), *tail],
        "reuse after a full retraction": [*base, Retract("e99", 99, 101, 99), ins("e99", 100, 4), *tail],
        "retraction of a fast-path event": [*base, Retract("e97", 97, 99, 98), *tail, Retract("e97", 97, 98, 97),
                                            ins("e97", 160, 2)],
        "mismatched retraction of a fast-path event": [*base, Retract("e96", 96, 97, 96), *tail],
        "retraction of a forgotten event": [*base, Cti(50), Retract("e10", 10, 12, 10), *tail],
        "duplicates in a later stretch": [*base, *tail, *_stretch("e", 95, 99)],
    }
    for label, stream in cases.items():
        for split in (1, 37, 100, 101, 102, 130):
            b = runner(q)
            first, second = stream[:split], stream[split:]
            batched = b.process_batch(struct_batch(first, range(1, 1 + len(first))))
            if second:
                batched += b.process_batch(struct_batch(second, range(1 + len(first), 1 + len(stream))))
            batched += b.finish()
            general, g = _general(q, stream)
            assert cht(batched) == cht(general), (label, split)
            assert [(d.line, d.reason) for d in b.dead_letters] == [(d.line, d.reason) for d in g.dead_letters], \
                (label, split)
            if label == "reuse after a CTI forgot it":  # the engine's documented decision, not the oracle's
                assert not b.dead_letters
            else:
                assert verify(batched, oracle(parse_query(q), stream)).ok, (label, split)


def test_state_stays_bounded_and_ids_are_forgotten() -> None:
    """CTIs close fast-path events: their ids leave the columnar store (and may be reused)."""
    q = QUERIES["tumbling-avg"]
    r = runner(q)
    stream: list[Element] = []
    for i in range(3000):
        stream.append(Insert(f"e{i % 500}", i, i + 2, {"g": "s", "v": 1}))  # ids reused once forgotten
        if i % 100 == 99:
            stream.append(Cti(i))
    out: list[Element] = []
    for a in range(0, len(stream), 700):
        out += r.process_batch(struct_batch(stream[a:a + 700], range(a + 1, a + 1 + len(stream[a:a + 700]))))
        st = r.steps[0]
        assert sum(len(ch) for ch in st.chunks) < 200
        assert len(st.fast_ids) == sum(len(ch) for ch in st.chunks)
    out += r.finish()
    assert not r.dead_letters  # (the oracle never forgets an id: the general path is the reference here)
    assert cht(out) == cht(_general(q, stream)[0])
    assert r.state_size() == {"events": 0, "windows": 0, "groups": 0}


def test_fast_ids_view_and_pull() -> None:
    q = QUERIES["tumbling-avg"]
    r = runner(q)
    r.process_batch(struct_batch(_stretch("e", 0, 100)))
    st = r.steps[0]
    held = set(st.fast_ids)
    assert held and "e50" in st.fast_ids and "zz" not in st.fast_ids and 5 not in st.fast_ids
    assert len(st.fast_ids) == len(held)
    assert st.pull("e50") and "e50" not in st.fast_ids and "e50" in st.live
    assert not st.pull("e50")  # already moved
    assert len(st.fast_ids) == len(held) - 1


def test_rows_read_one_by_one_equal_the_whole_columns() -> None:
    """`Cols.id_at` / `Cols.payload_at` (the per-row path of a mostly vectorized batch) read what the
    whole-column conversions read, before and after they switch to those."""
    rng = random.Random(4)
    payloads: list[dict[str, Any]] = [
        {"g": "s", "v": 1}, {"g": "s", "v": 2.5}, {"g": None, "v": 3}, {"g": "t", "v": -4, "n": {"a": [1, 2]}},
        {"g": "é", "v": 0, "n": {"a": []}},
    ]
    stream: list[Element] = []
    for i in range(300):
        k = rng.random()
        if k < 0.1:
            stream.append(Cti(i))
        elif k < 0.2:
            stream.append(Retract(f"e{i - 1}", i - 1, i + 1, i))
        else:
            stream.append(Insert(f"e{i}", i, i + 2, dict(rng.choice(payloads))))
    for make in (ElementBatch.from_elements, struct_batch):
        batch = make(stream, list(range(1, len(stream) + 1)))
        whole = Cols(batch)
        one = Cols(make(stream, list(range(1, len(stream) + 1))))
        for i in range(len(stream)):
            assert one.id_at(i) == whole.ids[i]
            if isinstance(stream[i], Insert):
                assert one.payload_at(i) == whole.payloads[i] == batch.payload_at(i), i
