"""`udm.host.engine.span_ids.ids_distinct` against Python's own answer (``len(set(ids)) == len(ids)``) on
counter ids in order, out of order, repeated, mixed prefixes, leading zeros, long and non-ASCII ids."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from udm.host.engine.span_ids import MAX_WIDTH, ids_distinct


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
