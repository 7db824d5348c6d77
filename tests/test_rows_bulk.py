"""`RowColumns` (a rows group's rows as columns) against a brute-force list re-sorted by the full canonical
key after every operation (SEMANTICS §9: LE, RE, the canonical JSON of the value, the id): runs appended
after the last row, inserts anywhere (many ties of LE and RE, values whose canonical JSON orders them),
rows found by id and taken out, prefixes dropped, pickling."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from udm.host.engine.window.rows_store import RowColumns
from udm.host.temporal.strict import canonical_json


def _key(row: tuple[int, int, int, Any]) -> tuple[int, int, str, int]:
    eid, le, re, val = row
    return (le, re, canonical_json(val), eid)


def _same(rows: RowColumns, plain: list[tuple[int, int, int, Any]]) -> None:
    assert list(zip(rows.ids, rows.le, rows.re, rows.vals, strict=True)) == plain
    assert len(rows) == len(plain)


@pytest.mark.parametrize("seed", range(8))
def test_row_columns_equal_a_sorted_list(seed: int) -> None:
    rnd = random.Random(seed)
    rows = RowColumns()
    plain: list[tuple[int, int, int, Any]] = []
    next_id, t = 0, 0

    def val() -> Any:
        return rnd.choice([rnd.randint(-3, 3), rnd.randint(-3, 3) / 2, "a", "b", {"x": rnd.randint(0, 2)}])

    for _ in range(400):
        op = rnd.random()
        if op < 0.35:  # a run after the last row
            run = []
            for _ in range(rnd.randint(1, 20)):
                t += rnd.randint(0, 1)
                run.append((next_id, t, t + rnd.randint(1, 3), val()))
                next_id += 1
            run.sort(key=_key)
            if plain and _key(run[0]) < _key(plain[-1]):
                continue
            rows.extend(*(list(c) for c in zip(*run, strict=True)))
            plain += run
        elif op < 0.5 and plain:  # drop a prefix
            k = rnd.randint(1, len(plain))
            rows.drop_front(k)
            del plain[:k]
        elif op < 0.7 and plain:  # a row found by id, taken out, maybe put back with another end
            eid, le, re, v = plain[rnd.randrange(len(plain))]
            p = rows.find(eid, le, re)
            assert p is not None and rows.ids[p] == eid
            assert rows.vals[p] == v
            rows.pop(p)
            plain.remove((eid, le, re, v))
            if rnd.random() < 0.5:
                row = (eid, le, le + rnd.randint(1, 4), v)
                q = rows.add(*row)
                plain.append(row)
                plain.sort(key=_key)
                assert plain[q] == row
        else:  # an insert anywhere
            le = rnd.randint(max(0, t - 6), t + 1)
            row = (next_id, le, le + rnd.randint(1, 3), val())
            next_id += 1
            q = rows.add(*row)
            plain.append(row)
            plain.sort(key=_key)
            assert plain[q] == row
        _same(rows, plain)
        if plain:
            i = rnd.randrange(len(plain))
            assert rows.find(plain[i][0], plain[i][1], plain[i][2] + 1) is None  # (ids are unique here)
            c = rnd.randint(0, t + 1)
            assert rows.lower(c) == sum(1 for r in plain if r[1] < c)
    _same(pickle.loads(pickle.dumps(rows)), plain)


def test_a_snapshot_of_rows_as_events_restores_as_columns() -> None:
    """A group's state pickled before the columns (its rows a list of events) restores to the same rows."""
    from udm.host.engine.common import Ev
    from udm.host.engine.window.rows import _Data

    evs = [Ev(3, 1, 2, 5), Ev(1, 1, 4, 2.5), Ev(7, 2, 3, "x")]
    d = _Data.__new__(_Data)
    d.__setstate__((evs, 4, 6, [], 5, 2, None))
    assert (d.rows.ids, d.rows.le, d.rows.re, d.rows.vals) == ([3, 1, 7], [1, 1, 2], [2, 4, 3], [5, 2.5, "x"])
    assert (d.purged, d.done, d.floor, d.fixed) == (4, 6, 5, 2)
    again = pickle.loads(pickle.dumps(d))
    assert (again.rows.ids, again.rows.vals, again.purged) == ([3, 1, 7], [5, 2.5, "x"], 4)
