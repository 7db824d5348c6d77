"""`RowList` (the rows family's row list) reaches into `SortedKeyList`'s internals to append whole runs and drop
its front without sorting again; after any mix of its own operations and the plain ones it must be the sorted
list the plain operations alone make, with the invariants sortedcontainers' operations rely on holding (those of
its `_check` but the balance one: a front cut short by `drop_front` may hold fewer than half a load, as
`SortedList` itself tolerates until a delete there merges it)."""

from __future__ import annotations

import random

import pytest
from sortedcontainers import SortedKeyList

from udm.host.engine.common import Ev
from udm.host.engine.window.rows_bulk import RowList


def _check(rows: RowList) -> None:
    assert len(rows._maxes) == len(rows._lists) == len(rows._keys)
    assert rows._len == sum(len(x) for x in rows._lists)
    assert all(rows._lists), "no empty sublist"
    flat = [k for ks in rows._keys for k in ks]
    assert flat == sorted(flat)
    for vals, keys, mx in zip(rows._lists, rows._keys, rows._maxes, strict=True):
        assert [_key(v) for v in vals] == keys and mx == keys[-1]
        assert len(vals) <= 2 * rows._load


def _key(ev: Ev) -> tuple[int, int, int]:
    return (ev.le, ev.re, ev.id)


@pytest.mark.parametrize("seed", range(8))
def test_row_list_equals_a_plain_sorted_list(seed: int) -> None:
    rnd = random.Random(seed)
    rows = RowList(key=_key)
    rows._reset(rnd.choice([4, 16, 1000]))  # (small load factors: many sublists)
    plain = SortedKeyList(key=_key)
    next_id, t = 0, 0
    for _ in range(300):
        op = rnd.random()
        if op < 0.45:  # a run after the last row
            run = []
            for _ in range(rnd.randint(1, 40)):
                t += rnd.randint(0, 2)
                run.append(Ev(next_id, t, t + rnd.randint(1, 5), None))
                next_id += 1
            run.sort(key=_key)
            if rows and _key(run[0]) < _key(rows[-1]):
                continue
            rows.extend_after(run, [_key(ev) for ev in run])
            plain.update(run)
        elif op < 0.7 and len(rows):  # drop a prefix
            k = rnd.randint(1, len(rows))
            assert rows.drop_front(k) == list(plain[:k])
            del plain[:k]
        else:  # a plain insert anywhere
            le = rnd.randint(max(0, t - 20), t + 1)
            ev = Ev(next_id, le, le + rnd.randint(1, 5), None)
            next_id += 1
            rows.add(ev)
            plain.add(ev)
        _check(rows)
        assert list(rows) == list(plain)
        if len(rows):
            i = rnd.randrange(len(rows))
            assert rows[i] is plain[i] and rows.index(rows[i]) == i
