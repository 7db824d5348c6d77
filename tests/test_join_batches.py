"""The join's batch form (`udm.host.engine.ops.join`): a batch of one input is keyed as a code column, appended
to its side's columns and matched against the other side's events in one sorted search, its pairs written as
one column block; retractions and CTIs follow one by one. It must be the join rule (SEMANTICS §10): the same
output CHT as the graph oracle and as the same elements fed one per batch, on random disordered streams of
two inputs with retractions (cuts, deletions, extensions), CTIs on both ports, endless events, many keys or
a few with long histories, and key values of every JSON kind (``1`` and ``1.0`` meet; ``true``, ``1`` and
``"1"`` do not), for inner (with prefixes and ``where``) and left_anti; the state bounded and a snapshot taken
mid-stream resumed to the same output. `SideStore.find` is checked against the plain definition of overlap."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from test_engine_support import check_physical

from udm.host.engine import QueryRunner
from udm.host.engine.ops import join_store
from udm.host.engine.ops.join_store import SideStore, _Sorted
from udm.host.engine.payload import Payload
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import cht, oracle
from udm.sdk import INF

AB = {"a": {}, "b": {}}
#: key values of every JSON kind: 1 == 1.0 and 2**53 == 2.0**53 meet; true, 1, "1", null, 0, false do not
MIXED: list[Any] = [1, 1.0, 2, 2.5, "1", "a", True, False, None, 0, 0.0, -0.0, 2**53, 2.0**53, 2**53 + 1,
                    {"x": 1}, {"x": 1.0}, [1, "a"], ""]

#: numbers only: a batch's keys are then one int64 or float64 column (1 == 1.0 across batches and inputs)
POOLS: dict[str, list[Any]] = {"mixed": MIXED, "numbers": [0, -0.0, 1, 1.0, 2.5, 3, 3.0, -7, 0.1, 2**40, 2.0**40],
                               "many": list(range(60)), "few": ["x", 7]}


def _stream(rng: random.Random, prefix: str, n: int, keys: list[Any], ctis: bool) -> list[Element]:
    out: list[Element] = []
    live: dict[str, tuple[int, int]] = {}
    cti = -(10**6)
    for i in range(n):
        t = i // 2
        le = t - (rng.randrange(15) if rng.random() < 0.3 else 0)
        r = rng.random()
        re = INF if r < 0.05 else le + (1 if r < 0.5 else rng.randint(2, 8) if r < 0.9 else rng.randint(20, 60))
        if le >= cti:
            eid = f"{prefix}{i}"
            out.append(Insert(eid, le, re, {"k": rng.choice(keys), "v": rng.randrange(100)}))
            live[eid] = (le, re)
        if live and rng.random() < 0.12:
            eid = rng.choice(list(live))
            ole, ore = live[eid]
            c = rng.random()
            if c < 0.35:
                new = ole
            elif c < 0.7 and ore < INF and ore - ole > 1:
                new = rng.randint(ole + 1, ore - 1)
            else:
                new = (ore if ore < INF else ole + 30) + rng.randint(1, 20)
            if min(ore, new) >= cti and new != ore:
                out.append(Retract(eid, ole, ore, new))
                if new == ole:
                    del live[eid]
                else:
                    live[eid] = (ole, new)
        if ctis and rng.random() < 0.04:
            cti = max(cti, t - 20)
            out.append(Cti(cti))
    return out


def _interleave(rng: random.Random, a: list[Element], b: list[Element]) -> list[tuple[str, Element]]:
    out: list[tuple[str, Element]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        run = rng.choice([1, 1, 3, 40, 400])
        if j >= len(b) or (i < len(a) and rng.random() < 0.5):
            out += [("a", e) for e in a[i:i + run]]
            i += run
        else:
            out += [("b", e) for e in b[j:j + run]]
            j += run
    return out


def _run(bq: Any, items: list[tuple[str, Element]], one_by_one: bool, snap_at: int | None = None) -> tuple[Any, ...]:
    r = QueryRunner(bq)
    out: list[Element] = []
    if one_by_one:
        for line, (name, el) in enumerate(items, 1):
            out += r.process(el, line, name)
    else:
        cut = snap_at if snap_at is not None else len(items)
        out += r.process_interleaved((name, line, el) for line, (name, el) in enumerate(items[:cut], 1))
        if snap_at is not None:
            r = QueryRunner.restore(r.snapshot(), bq)
            out += r.process_interleaved((name, line, el) for line, (name, el) in
                                         enumerate(items[cut:], cut + 1))
    out += r.finish()
    check_physical(out)
    return cht(out), sorted((d.line, d.reason) for d in r.dead_letters)


JOINS: list[dict[str, Any]] = [
    {},
    {"left_prefix": "l_", "right_prefix": "r_"},
    {"right_prefix": "r_", "where": {"udf": "in_range", "args": {"field": "r_v"}, "params": {"lo": 20, "hi": 70}}},
    {"type": "left_anti"},
    {"type": "left_anti", "right_prefix": "r_",
     "where": {"udf": "in_range", "args": {"field": "r_v"}, "params": {"lo": 30}}},
]


@pytest.mark.parametrize("join", JOINS, ids=["inner", "prefixes", "where", "left_anti", "left_anti_where"])
@pytest.mark.parametrize("keys", ["mixed", "numbers", "many", "few"])
def test_batches_equal_the_oracle_and_one_by_one(join: dict[str, Any], keys: str) -> None:
    bq = bind(parse_query({"inputs": AB, "steps": [{"op": "join", "from": ["a", "b"], "on": "k", **join}]}))
    for seed in range(3):
        rng = random.Random(f"{seed}:{keys}")
        pool = POOLS[keys]
        a = _stream(rng, "a", 700, pool, ctis=seed != 2)
        b = _stream(rng, "b", 700, pool, ctis=seed != 1)
        if seed == 0:  # (a few inserts without the join key: dead letters, their retractions ignored)
            a.insert(50, Insert("nokey", 200, 210, {"v": 1}))
            a.insert(51, Retract("nokey", 200, 210, 205))
        items = _interleave(rng, a, b)
        batched = _run(bq, items, one_by_one=False)
        assert batched[0] == oracle(bq.spec, {"a": a, "b": b}), seed
        assert batched == _run(bq, items, one_by_one=True), seed
        assert batched == _run(bq, items, one_by_one=False, snap_at=len(items) // 2), seed
        if seed == 0:
            assert batched[1], "the insert without a key is dead-lettered"


def test_state_stays_bounded_under_ctis() -> None:
    bq = bind(parse_query({"inputs": AB, "steps": [{"op": "join", "from": ["a", "b"], "on": "k"}]}))
    r = QueryRunner(bq)
    most = 0
    for i in range(0, 40_000, 400):
        for name in ("a", "b"):
            els: list[Element] = [Insert(f"{name}{j}", j, j + 3, {"k": j % 97}) for j in range(i, i + 400)]
            r.process_many([*els, Cti(i + 395)], input=name)
        most = max(most, sum(r.state_size().values()))
    assert most < 6000, most


@pytest.mark.parametrize("lookup", ["mixed", "order", "scan"])
def test_find_agrees_with_the_definition_of_overlap(monkeypatch: pytest.MonkeyPatch, lookup: str) -> None:
    """``order``: every lookup through the sorted order; ``scan``: every lookup a direct comparison; ``mixed``:
    as the store chooses (the order once probes × unordered events grow)."""
    monkeypatch.setattr(join_store, "_COMPACT_MIN", 8)  # (compactions happen, with and without the id dict)
    if lookup != "mixed":
        monkeypatch.setattr(join_store, "_TAIL_PAIRS", 0 if lookup == "order" else 1 << 40)
        monkeypatch.setattr(join_store, "_TAIL_MOST", 0 if lookup == "order" else 1 << 40)
    compactions = 0
    rng = random.Random(7)
    st = SideStore()
    nid = 0
    for rnd in range(60):
        k = rng.randint(1, 30)
        le = np.array([rng.randint(0, 300) for _ in range(k)], dtype=np.int64)
        re = np.array([INF if rng.random() < 0.1 else int(x) + rng.choice([1, 1, 2, 5, 40]) for x in le],
                      dtype=np.int64)
        code = np.array([rng.randrange(3) for _ in range(k)], dtype=np.int64)
        ids = np.arange(nid, nid + k, dtype=np.int64)
        nid += k
        if rnd == 40:  # (ids that stop ascending: found through a dict from then on)
            ids = ids[::-1].copy()
        st.append(ids, le, re, code, Payload.empty(k), np.arange(k, dtype=np.int64))
        for _ in range(rng.randint(0, 6)):  # ends move (cuts, extensions, an endless event that now ends)
            s = rng.randrange(st.n)
            if st.alive[s]:
                st.set_re(s, int(st.le[s]) + rng.randint(1, 60))
            if rng.random() < 0.3 and st.alive[s]:
                st.kill(s)
        if rnd % 4 == 3:
            st.kill(st.ending_before(rnd * 6))
            if st.compact():
                compactions += 1 if rnd < 40 else 100
        pc = np.array([rng.randrange(3) for _ in range(40)], dtype=np.int64)
        pl = np.array([rng.randint(-10, 320) for _ in range(40)], dtype=np.int64)
        pr = np.array([INF if rng.random() < 0.1 else int(x) + rng.randint(1, 50) for x in pl], dtype=np.int64)
        probe, slot = st.find(pc, pl, pr)
        got = sorted(zip(probe.tolist(), st.id[slot].tolist(), strict=True))
        n = st.n
        want = sorted((p, int(st.id[s])) for p in range(40) for s in range(n)
                      if st.alive[s] and st.code[s] == pc[p] and st.le[s] < pr[p] and st.re[s] > pl[p])
        assert got == want, rnd
        for s in range(st.n):  # every event is found by its id while live, and only then
            assert st.live_slot(int(st.id[s])) == (s if st.alive[s] else None)
        assert st.live_slot(nid + 5) is None
        assert (st.slot is None) == (rnd < 40), rnd
    assert compactions % 100 >= 1 and compactions // 100 >= 1, compactions  # (before and after rnd 40)


def test_a_long_history_of_point_events_is_not_looked_at() -> None:
    """A key's events are ordered by LE, so a probe looks only at those that can overlap it."""
    n = 5000
    le = np.arange(n, dtype=np.int64)
    srt = _Sorted(np.zeros(n, dtype=np.int64), le, np.arange(n, dtype=np.int64))
    span = 1
    _, slot = srt.find(np.zeros(1, dtype=np.int64), np.array([4990 - span + 1]), np.array([4991]))
    assert slot.tolist() == [4990]
