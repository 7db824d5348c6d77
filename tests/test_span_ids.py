"""`udm.host.engine.span_ids.ids_distinct` and ``ids_new`` against Python's own answer
(``len(set(ids)) == len(ids)``; none among the ids live before the batch) on counter ids in order, out
of order, repeated, mixed prefixes, leading zeros, long and non-ASCII ids."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from udm.host.engine.span_ids import MAX_WIDTH, ids_distinct, ids_new


def _check(ids: list[str | None], rows: list[int] | None = None) -> None:
    arr = pa.array(ids, pa.string())
    if rows is None:
        rows = [i for i, v in enumerate(ids) if v is not None]
    picked = [ids[i] for i in rows]
    assert ids_distinct(arr, np.array(rows, dtype=np.int64)) == (len(set(picked)) == len(picked)), picked


def test_counter_ids_in_order_across_widths() -> None:
    _check([f"b{k}" for k in range(90, 1200)])


def test_a_repeat_is_found_in_order_or_not() -> None:
    ids = [f"e{k}" for k in range(500)]
    _check([*ids[:300], "e120", *ids[300:]])
    _check([*ids, "e499"])  # the last id twice: the counters do not rise, the exact check answers


def test_out_of_order_counters_are_checked_exactly() -> None:
    ids = [f"b{k}" for k in range(1000)]
    random.Random(3).shuffle(ids)
    _check(ids)
    _check([*ids, ids[17]])


def test_leading_zeros_and_signs_are_different_ids() -> None:
    _check(["x5", "x05", "x005"])  # equal numbers, different ids: not proven by the counters
    _check(["x5", "x6", "x05"])
    _check(["x1", "x+2", "x-3", "x3"])
    _check(["x5", "x5"])


def test_mixed_prefixes_and_no_digits() -> None:
    _check(["a1", "b2", "c3", "a3"])
    _check(["a1", "b2", "c3", "a1"])
    _check(["p", "q", "r"])
    _check(["p", "q", "p"])
    _check(["", "0", "1"])


def test_nulls_between_rows_are_skipped() -> None:
    _check(["b1", None, "b2", None, "b3"])
    _check(["b1", None, "b2", None, "b2"])


def test_long_and_non_ascii_ids() -> None:
    long = "z" * MAX_WIDTH
    _check([f"{long}{k}" for k in range(20)])
    _check([f"{long}1", f"{long}1"])
    _check(["é1", "é2", "é3"])
    _check(["é1", "é2", "é1"])
    _check(["1" * 30, "1" * 31, "1" * 30])  # int64 wraps: a fixed function still, never a false "distinct"


@pytest.mark.parametrize("seed", range(20))
def test_random_ids_against_set(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(2, 400)
    start = rng.randrange(0, 10**rng.randrange(1, 19))
    ids: list[str | None] = [f"{rng.choice(['b', 'id-', ''])}{start + k * rng.randrange(1, 3)}" for k in range(n)]
    for _ in range(rng.randrange(0, 3)):  # a repeat or a swap now and then
        i, j = rng.randrange(n), rng.randrange(n)
        if rng.random() < 0.5:
            ids[i] = ids[j]
        else:
            ids[i], ids[j] = ids[j], ids[i]
    for i in rng.sample(range(n), rng.randrange(0, 5)):
        ids[i] = None
    _check(ids)


def test_sliced_array() -> None:
    arr = pa.array([f"b{k}" for k in range(100)] + ["b60", "b3"], pa.string()).slice(50)
    assert ids_distinct(arr, np.arange(50)) is True
    assert ids_distinct(arr, np.arange(51)) is False  # b60 twice
    assert ids_distinct(arr, np.array([0, 1, 51])) is True  # b50, b51, b3


# -- ids_new: distinct, and none among the ids live before the batch ------------------------------------


def _check_new(ids: list[str | None], before: list[str]) -> None:
    rows = [i for i, v in enumerate(ids) if v is not None]
    picked = [ids[i] for i in rows]
    want = len(set(picked)) == len(picked) and not set(picked) & set(before)
    got = ids_new(pa.array(ids, pa.string()), np.array(rows, dtype=np.int64),
                  pa.array(before, pa.string()) if before else None)
    assert got == want, (picked, before)


def test_new_counters_after_the_held_ones() -> None:
    _check_new([f"e{k}" for k in range(100, 400)], [f"e{k}" for k in range(60, 100)])
    _check_new([f"e{k}" for k in range(100, 400)], [f"e{k}" for k in range(60, 101)])  # e100 is held
    _check_new([f"e{k}" for k in range(100, 400)], ["e5", "e250"])
    _check_new([f"e{k}" for k in range(100, 400)], ["x99", "e0099"])  # (other shapes: the exact check)
    _check_new([f"e{k}" for k in range(100, 400)], ["e099"])  # (a smaller counter, another id)
    _check_new([f"e{k}" for k in range(8, 12)], ["e9"])


@settings(max_examples=200, deadline=None)
@given(ids=hs.lists(hs.one_of(hs.integers(0, 60).map(lambda k: f"e{k}"), hs.sampled_from(["", "e", "x1", "e01", "é2"]),
                              hs.none()), max_size=40),
       before=hs.lists(hs.one_of(hs.integers(0, 60).map(lambda k: f"e{k}"), hs.sampled_from(["e01", "x1", ""])),
                       max_size=10),
       rising=hs.booleans())
def test_new_agrees_with_python_sets(ids: list[str | None], before: list[str], rising: bool) -> None:
    if rising:  # (counters that rise: the cheap proof's shape)
        ids = [f"e{k}" for k in sorted({int(x[1:]) for x in ids if x and x[1:].isdigit() and x[0] == "e"})]
    _check_new(ids, before)
