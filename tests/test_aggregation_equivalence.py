"""Every ordered aggregator answers what a sorted dict folded per query answers (`SortedFold`, the oracle),
after any sequence of inserts, replaces, removes and evictions, in and out of order, with a combine that
is not commutative (string and tuple concatenation: any entry out of key order shows) and with min and sum.
A pickled aggregator, given its combine back with ``attach``, goes on giving the same answers; before
``attach`` it says so. The finger B-tree's own invariants (aggregates as the paper defines them, spine
flags, fingers, node sizes) are checked after every operation, so a wrong aggregate kept but not yet
queried is caught too."""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable
from functools import reduce
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from udm.host.engine.aggregation import NOTHING, CombineNotAttached, FingerBTree, FingerStacks, SortedFold, TwoStacks

# name -> (combine, value made from (key, op number))
COMBINES: dict[str, tuple[Callable[[Any, Any], Any], Callable[[int, int], Any]]] = {
    "concat": (operator.add, lambda k, n: f"[{k}:{n}]"),
    "tuple": (lambda a, b: (*a, *b), lambda k, n: ((k, n),)),
    "min": (min, lambda k, n: (k * 7919 + n * 31) % 97),
    "sum": (operator.add, lambda k, n: (k * 13 + n) % 23 - 11),
}

FACTORIES: dict[str, Callable[[Callable[[Any, Any], Any]], Any]] = {
    "fiba2": lambda c: FingerBTree(c, min_arity=2),
    "fiba3": lambda c: FingerBTree(c, min_arity=3),
    "fiba4": lambda c: FingerBTree(c),
    "two_stacks": TwoStacks,
    "finger_stacks2": lambda c: FingerStacks(c, min_arity=2),
    "finger_stacks4": FingerStacks,
}

# an operation: (name, key or offset, extra); "append"/"young" are keys relative to the largest key
OPS = hs.one_of(
    hs.tuples(hs.just("insert"), hs.integers(0, 400), hs.just(0)),
    hs.tuples(hs.just("replace"), hs.integers(0, 400), hs.just(0)),
    hs.tuples(hs.just("remove"), hs.integers(0, 10_000), hs.just(0)),  # the n-th live key (mod len)
    hs.tuples(hs.just("evict_before"), hs.integers(0, 420), hs.just(0)),
    hs.tuples(hs.just("append"), hs.integers(0, 3), hs.integers(1, 40)),  # a run of in-order inserts
    hs.tuples(hs.just("young"), hs.integers(0, 6), hs.just(0)),  # near the young end, often on an entry
    hs.tuples(hs.just("range"), hs.integers(-5, 420), hs.integers(0, 200)),
    hs.tuples(hs.just("pickle"), hs.just(0), hs.just(0)),
)


def check_fiba(t: FingerBTree[Any], c: Callable[[Any, Any], Any]) -> None:
    """The finger B-tree's invariants, each aggregate recomputed from its definition (FiBA, VLDB 2019 §4)."""
    root = t._root
    assert root.parent is None and not root.lsp and not root.rsp

    def fold(xs: list[Any]) -> Any:
        return reduce(c, xs) if xs else NOTHING

    def subtree(n: Any) -> list[Any]:  # the values under n in key order
        if n.kids is None:
            return list(n.vals)
        out: list[Any] = []
        for i, k in enumerate(n.kids):
            out += subtree(k)
            if i < len(n.vals):
                out.append(n.vals[i])
        return out

    keys: list[int] = []

    def walk(n: Any, depth: int, leaf_depth: list[int]) -> None:
        assert len(n.keys) == len(n.vals)
        if n is not root:
            assert t._min - 1 <= len(n.keys) <= 2 * t._min - 1, "node size out of bounds"
        assert len(n.keys) <= 2 * t._min - 1
        if n.kids is None:
            leaf_depth.append(depth)
            keys.extend(n.keys)
        else:
            assert len(n.kids) == len(n.keys) + 1
            for i, k in enumerate(n.kids):
                assert k.parent is n
                assert k.lsp == (i == 0 and (n is root or n.lsp))
                assert k.rsp == (i == len(n.kids) - 1 and (n is root or n.rsp))
                walk(k, depth + 1, leaf_depth)
                if i < len(n.keys):
                    keys.append(n.keys[i])
        # the aggregate by its definition
        if n is root or (n.lsp and n.rsp):
            seq = subtree(n)
            if n.kids is not None:
                first, last = subtree(n.kids[0]), subtree(n.kids[-1])
                seq = seq[len(first):len(seq) - len(last)]
            expect = fold(seq)
        elif n.lsp:
            seq = subtree(n)[len(subtree(n.kids[0])) if n.kids is not None else 0:]
            expect = fold(seq + ([n.parent.agg] if n.parent is not root else []))
        elif n.rsp:
            seq = subtree(n)
            if n.kids is not None:
                seq = seq[:len(seq) - len(subtree(n.kids[-1]))]
            expect = fold(([n.parent.agg] if n.parent is not root else []) + seq)
        else:
            expect = fold(subtree(n))
        assert n.agg == expect, f"stale aggregate at node {n.keys}"
        if n.suf is not None:
            assert n.lsp and n.kids is None and n.suf[0] == n.agg and len(n.suf) == len(n.vals)

    depths: list[int] = []
    walk(root, 0, depths)
    assert len(set(depths)) == 1, "leaves at different depths"
    assert keys == sorted(set(keys)) and len(keys) == len(t)
    lf = rf = root
    while lf.kids is not None:
        lf = lf.kids[0]
    while rf.kids is not None:
        rf = rf.kids[-1]
    assert t._lf is lf and t._rf is rf


def check_finger_stacks(t: FingerStacks[Any], c: Callable[[Any, Any], Any]) -> None:
    """Its tree holds keys below every key of its stacks, and is a valid finger B-tree."""
    old, young = list(t._old), list(t._young)
    if old and young:
        assert old[-1][0] < young[0][0], "the tree and the stacks overlap"
    check_fiba(t._old, c)


def run(name: str, combine_name: str, ops: list[tuple[str, int, int]]) -> None:
    c, value = COMBINES[combine_name]
    t = FACTORIES[name](c)
    ref: SortedFold[Any] = SortedFold(c)
    for n, (op, a, b) in enumerate(ops):
        if op in ("insert", "replace"):
            getattr(t, op)(a, value(a, n))
            getattr(ref, op)(a, value(a, n))
        elif op == "remove":
            live = [k for k, _ in ref]
            if not live:
                with pytest.raises(KeyError):
                    t.remove(a)
                continue
            k = live[a % len(live)]
            t.remove(k)
            ref.remove(k)
        elif op == "evict_before":
            assert t.evict_before(a) == ref.evict_before(a)
        elif op in ("append", "young"):
            start = ref.max_key() if len(ref) else 0
            for i in range(b or 1):
                k = start + a + i * (a or 1) if op == "append" else max(0, start - a)
                t.insert(k, value(k, n))
                ref.insert(k, value(k, n))
        elif op == "range":
            assert t.query_range(a, a + b) == ref.query_range(a, a + b), (a, a + b)
            continue
        elif op == "pickle":
            t = pickle.loads(pickle.dumps(t))
            t.attach(c)
        assert list(t) == list(ref)
        assert len(t) == len(ref)
        assert t.query() == ref.query()
        if len(ref):
            assert (t.min_key(), t.max_key()) == (ref.min_key(), ref.max_key())
            k = ref.max_key()
            assert t.get(k) == ref.get(k) and t.get(k + 1) is None
        else:
            assert t.query() is None
        if isinstance(t, FingerBTree):
            check_fiba(t, c)
        if isinstance(t, FingerStacks):
            check_finger_stacks(t, c)


@pytest.mark.parametrize("combine_name", sorted(COMBINES))
@pytest.mark.parametrize("name", sorted(FACTORIES))
@settings(max_examples=60, deadline=None)
@given(ops=hs.lists(OPS, max_size=80))
def test_random_operations_equal_the_reference(name: str, combine_name: str, ops: list[tuple[str, int, int]]
                                               ) -> None:
    run(name, combine_name, ops)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_deep_trees_in_and_out_of_order(name: str) -> None:
    """Long sequences with deep trees: a sliding window in order, then out-of-order churn at all depths."""
    ops: list[tuple[str, int, int]] = [("append", 1, 40)] * 30
    ops += [("evict_before", k, 0) for k in range(0, 600, 37)]
    ops += [("insert", (k * 7919) % 1300, 0) for k in range(200)]
    ops += [("remove", k * 104_729, 0) for k in range(150)]
    ops += [("replace", (k * 31) % 1300, 0) for k in range(100)]
    ops += [("range", (k * 53) % 1300, 17 * k % 400) for k in range(60)]
    ops += [("pickle", 0, 0), ("evict_before", 1100, 0), ("append", 2, 30), ("evict_before", 10_000, 0)]
    for combine_name in ("concat", "min"):
        run(name, combine_name, ops)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_pickled_aggregator_needs_attach(name: str) -> None:
    t = FACTORIES[name](operator.add)
    for k in range(50):
        t.insert(k, str(k))
    blob = pickle.dumps(t)
    with pytest.raises(CombineNotAttached, match="attach"):
        pickle.loads(blob).insert(49, "x")  # into the youngest entry: a combine
    back = pickle.loads(blob)
    back.attach(operator.add)
    assert back.query() == t.query() == "".join(str(k) for k in range(50))
    assert list(back) == list(t)


def test_pickle_carries_no_function() -> None:
    """The combine is a bound method of a UDM: pickling one that cannot be pickled still works."""
    unpicklable = lambda a, b: a + b  # noqa: E731 (a lambda cannot be pickled)
    for name, make in FACTORIES.items():
        t = make(unpicklable)
        for k in range(30):
            t.insert(k, (k,))
        back = pickle.loads(pickle.dumps(t))
        back.attach(unpicklable)
        assert back.query() == tuple(range(30)), name


def test_errors_name_what_is_wrong() -> None:
    for name, make in FACTORIES.items():
        t = make(operator.add)
        with pytest.raises(KeyError):
            t.remove(3)
        with pytest.raises(IndexError, match="empty"):
            t.min_key()
        assert t.query() is None and t.query_range(0, 10) is None and t.get(1) is None, name
    with pytest.raises(ValueError, match="min_arity"):
        FingerBTree(operator.add, min_arity=1)
