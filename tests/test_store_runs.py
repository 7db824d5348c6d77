"""Per-run searches and copies of the shared rows store (`udm.host.engine.window.store_runs`): each against a
brute-force computation over Python lists, by both routes (few runs: a slice each; many: one vectorised step),
on random runs (empty ones, repeated values, times at the int64 ends and beyond them)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from udm.host.engine.window import store_runs
from udm.host.engine.window.store_runs import gather_runs, interleave, longest, run_lower

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _runs(rng: random.Random, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``k`` runs of 0-12 ascending values (many repeats), one after another: column, heads, counts."""
    col: list[int] = []
    heads, cnt = [], []
    for _ in range(k):
        n = rng.choice((0, 1, 3, 7, 12))
        heads.append(len(col))
        cnt.append(n)
        col += sorted(rng.choice((rng.randrange(-4, 5), I64_MIN, I64_MAX)) for _ in range(n))
    return np.array(col, dtype=np.int64), np.array(heads, dtype=np.int64), np.array(cnt, dtype=np.int64)


@pytest.fixture(params=["few", "many"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(store_runs, "FEW", 10**9 if request.param == "few" else 0)
    return str(request.param)


@pytest.mark.parametrize("seed", range(20))
def test_run_lower(seed: int, route: str) -> None:
    rng = random.Random(seed)
    col, heads, cnt = _runs(rng, rng.randrange(0, 9))
    runs = [col[a:a + n].tolist() for a, n in zip(heads.tolist(), cnt.tolist(), strict=True)]
    for t in (-5, -1, 0, 3, 6, I64_MIN, I64_MIN + 1, I64_MAX, I64_MAX + 1, -(2**64), 2**64):
        want = [sum(1 for x in r if x < t) for r in runs]
        assert run_lower(col, heads, cnt, t).tolist() == want, t
    ts = [rng.randrange(-5, 6) for _ in runs]
    want = [sum(1 for x in r if x < t) for r, t in zip(runs, ts, strict=True)]
    assert run_lower(col, heads, cnt, np.array(ts, dtype=np.int64)).tolist() == want


@pytest.mark.parametrize("seed", range(20))
def test_gather_runs(seed: int, route: str) -> None:
    rng = random.Random(seed)
    col, heads, cnt = _runs(rng, rng.randrange(0, 9))
    drop = np.array([rng.randrange(n + 1) for n in cnt.tolist()], dtype=np.int64)
    got = gather_runs(col, heads + drop, cnt - drop)
    want = [x for a, n, d in zip(heads.tolist(), cnt.tolist(), drop.tolist(), strict=True)
            for x in col.tolist()[a + d:a + n]]
    assert got.dtype == col.dtype and got.tolist() == want
    obj = col.astype(object)
    assert gather_runs(obj, heads + drop, cnt - drop).tolist() == want


@pytest.mark.parametrize("seed", range(20))
def test_interleave(seed: int, route: str) -> None:
    rng = random.Random(seed)
    old = [rng.randrange(100) for _ in range(rng.randrange(0, 30))]
    k = rng.randrange(0, 6)
    pos = sorted(rng.randrange(len(old) + 1) for _ in range(k))  # (repeats: groups with no rows held yet)
    sizes = [rng.randrange(1, 4) for _ in pos]
    new = [1000 + i for i in range(sum(sizes))]
    cuts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)
    want = list(old)
    for p, a, b in reversed(list(zip(pos, cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))):
        want[p:p] = new[a:b]
    got = interleave(np.array(old, dtype=np.int64), np.array(new, dtype=np.int64),
                     np.array(pos, dtype=np.int64), cuts)
    assert got.tolist() == want


def test_longest() -> None:
    le = np.array([0, 5, -3], dtype=np.int64)
    assert longest(le, le + np.array([1, 9, 2])) == 9
    assert longest(le[:0], le[:0]) == 0
    wide = np.array([I64_MIN, 0], dtype=np.int64), np.array([I64_MIN + 1, I64_MAX], dtype=np.int64)
    assert longest(*wide) >= I64_MAX  # (a difference past int64: still an upper bound)
