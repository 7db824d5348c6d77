"""Incremental, algebraic aggregates.

States are small tuples/lists so they pickle fast into engine checkpoints. ``merge`` never mutates its
arguments: the engine reuses pane states across the overlapping windows of a hopping window.
Floating-point sums are compensated (Neumaier) so add/remove chains stay within rounding of a fresh sum.

Each aggregate also implements the SDK's optional vectorized hook ``add_array(state, values)`` (a 1-d
numpy int64/float64 array; see `udm.sdk.IncrementalUDA`), used by the engine's fast path. It has the
effect of ``add(state, values.tolist())``, up to float rounding (chunk sums are exactly rounded with
``math.fsum`` before joining the compensated accumulator); any other dtype falls back to ``add``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from sortedcontainers import SortedList

from udm.sdk import IncrementalUDA, udm

__all__ = ["Avg", "Count", "Max", "Min", "Sum", "Variance"]

# A compensated sum: (count, sum, compensation).
_Acc = tuple[int, float, float]


def _acc_add(acc: _Acc, values: Sequence[float], sign: int) -> _Acc:
    n, s, c = acc
    for v in values:
        x = sign * v
        t = s + x
        if abs(s) >= abs(x):
            c += (s - t) + x
        else:
            c += (x - t) + s
        s = t
    return n + sign * len(values), s, c


def _acc_merge(a: _Acc, b: _Acc) -> _Acc:
    _, s, c = _acc_add(a, (b[1],), 1)
    return a[0] + b[0], s, c + b[2]


def _total(acc: _Acc) -> float:
    return acc[1] + acc[2]


def _acc_add_total(acc: _Acc, total: float, count: int) -> _Acc:
    """Join ``count`` values whose exact-rounded sum is ``total`` into a compensated accumulator."""
    n, s, c = acc
    t = s + total
    if abs(s) >= abs(total):
        c += (s - t) + total
    else:
        c += (total - t) + s
    return n + count, t, c


def _kind(values: Any) -> str:
    """'int' / 'float' for a numeric 1-d numpy array the vectorized hooks can take, else ''."""
    k = getattr(getattr(values, "dtype", None), "kind", "")
    if k in ("i", "u"):
        return "int"
    if k == "f" and (len(values) == 0 or math.isfinite(float(values.sum()))):
        return "float"  # NaN / inf take the element-wise path, which defines how they propagate
    return ""


def _same_kind(x: Any, values: Any) -> bool:
    """Is ``x`` a Python int of int64 range and ``values`` an int64 column, or a float and a float64 one (a
    column holding ``x`` and the values gives each back as it is)?"""
    dt = values.dtype
    if type(x) is int:
        return bool(dt == "int64") and -(1 << 63) <= x < (1 << 63)
    return type(x) is float and bool(dt == "float64")


def _int_sum(values: Any) -> int:
    if len(values) == 0:
        return 0
    if int(abs(values).max()) < (1 << 62) // max(len(values), 1):
        return int(values.sum())
    return sum(values.tolist())


def _segments(values: Any, offsets: Any) -> Any:
    """Per-slice sums of ``values`` cut at ``offsets`` (``len(offsets) - 1`` slices, empty ones sum to 0)."""
    import numpy as np

    off = np.asarray(offsets, dtype=np.int64)
    n = len(off) - 1
    if n <= 0:
        return np.zeros(0, dtype=values.dtype)
    starts = off[:-1]
    nonempty = off[1:] > starts
    sums = np.zeros(n, dtype=values.dtype)
    if nonempty.any() and len(values):
        sums[nonempty] = np.add.reduceat(values, starts[nonempty])
    return sums


def _int_segments_safe(values: Any) -> bool:
    """Can int64 slice sums not overflow (whatever the cut)?"""
    return len(values) == 0 or int(abs(values).max()) < (1 << 62) // max(len(values), 1)


def _numbers(values: Sequence[object], who: str) -> Sequence[float]:
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{who} needs numeric input, got {v!r}")
    return values  # type: ignore[return-value]


@udm(name="count", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class Count(IncrementalUDA):
    """Number of members."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[object]) -> int:
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[object]) -> int:
        return state - len(delta)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def add_array(self, state: int, values: Any) -> int:
        return state + len(values)

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        import numpy as np

        lens = np.diff(np.asarray(offsets, dtype=np.int64)).tolist()
        return [s + k for s, k in zip(states, lens, strict=True)]

    def compute(self, state: int) -> int:
        return state

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        import numpy as np

        return np.diff(np.asarray(offsets, dtype=np.int64))

    def compute_prefixes(self, state: int, values: Any, ends: Any) -> Any:
        import numpy as np

        return np.asarray(ends, dtype=np.int64) + state


@udm(name="sum", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Sum(IncrementalUDA):
    """Sum of the numeric input (an all-integer input sums exactly to an int)."""

    def initial_state(self) -> tuple[int, _Acc, int]:
        return 0, (0, 0.0, 0.0), 0  # (exact int part, float accumulator, number of floats)

    def add(self, state: tuple[int, _Acc, int], delta: Sequence[float]) -> tuple[int, _Acc, int]:
        return self._apply(state, _numbers(delta, "sum"), 1)

    def remove(self, state: tuple[int, _Acc, int], delta: Sequence[float]) -> tuple[int, _Acc, int]:
        return self._apply(state, _numbers(delta, "sum"), -1)

    @staticmethod
    def _apply(state: tuple[int, _Acc, int], delta: Sequence[float], sign: int) -> tuple[int, _Acc, int]:
        ints, acc, nfloat = state
        floats = [v for v in delta if isinstance(v, float)]
        ints += sign * sum(v for v in delta if not isinstance(v, float))
        if floats:
            acc = _acc_add(acc, floats, sign)
            nfloat += sign * len(floats)
        return ints, acc, nfloat

    def merge(self, a: tuple[int, _Acc, int], b: tuple[int, _Acc, int]) -> tuple[int, _Acc, int]:
        return a[0] + b[0], _acc_merge(a[1], b[1]), a[2] + b[2]

    def add_array(self, state: tuple[int, _Acc, int], values: Any) -> tuple[int, _Acc, int]:
        k = _kind(values)
        if k == "int":
            return state[0] + _int_sum(values), state[1], state[2]
        if k == "float":
            ints, acc, nfloat = state
            return ints, _acc_add_total(acc, math.fsum(values.tolist()), len(values)), nfloat + len(values)
        return self.add(state, values.tolist() if hasattr(values, "tolist") else list(values))

    def add_batch(self, states: list[tuple[int, _Acc, int]], values: Any, offsets: Any
                  ) -> list[tuple[int, _Acc, int]]:
        """Integer slices: one ``reduceat`` (exact); float slices: each exactly rounded (``fsum``)."""
        k = _kind(values)
        if k == "int" and _int_segments_safe(values):
            sums = _segments(values, offsets).tolist()
            return [(s[0] + t, s[1], s[2]) for s, t in zip(states, sums, strict=True)]
        off = [int(x) for x in offsets]
        if k == "float":  # each slice exactly rounded, as add_array does (one list conversion for all)
            vals = values.tolist()
            fsum = math.fsum
            return [(s[0], _acc_add_total(s[1], fsum(vals[a:b]), b - a), s[2] + b - a) if b > a else s
                    for s, a, b in zip(states, off[:-1], off[1:], strict=True)]
        return [self.add_array(s, values[a:b]) for s, a, b in zip(states, off[:-1], off[1:], strict=True)]

    def compute(self, state: tuple[int, _Acc, int]) -> float:
        ints, acc, nfloat = state
        return ints if nfloat == 0 else ints + _total(acc)

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        """Integer slices: the exact int64 sums of one ``reduceat``; otherwise ``add_batch`` from fresh
        states (immutable tuples: one serves every slice) and ``compute``."""
        if _kind(values) == "int" and _int_segments_safe(values):
            return _segments(values, offsets)
        n = len(offsets) - 1
        return [self.compute(s) for s in self.add_batch([self.initial_state()] * n, values, offsets)]

    def compute_prefixes(self, state: tuple[int, _Acc, int], values: Any, ends: Any) -> Any:
        """Integer values onto an int state: one exact int64 ``cumsum``; otherwise the state (an immutable
        tuple) fed slice after slice by ``add``, as the running windows would be."""
        import numpy as np

        e = np.asarray(ends, dtype=np.int64)
        ints, _acc, nfloat = state
        if _kind(values) == "int" and nfloat == 0 and _int_segments_safe(values) and abs(ints) < (1 << 62):
            return np.concatenate(([0], np.cumsum(values)))[e] + ints
        vals = values.tolist()
        out = []
        prev = 0
        for x in e.tolist():
            if x > prev:
                state = self._apply(state, _numbers(vals[prev:x], "sum"), 1)
                prev = x
            out.append(self.compute(state))
        return out


@udm(name="avg", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Avg(IncrementalUDA):
    """Arithmetic mean of the input."""

    def initial_state(self) -> _Acc:
        return 0, 0.0, 0.0

    def add(self, state: _Acc, delta: Sequence[float]) -> _Acc:
        return _acc_add(state, _numbers(delta, "avg"), 1)

    def remove(self, state: _Acc, delta: Sequence[float]) -> _Acc:
        return _acc_add(state, _numbers(delta, "avg"), -1)

    def merge(self, a: _Acc, b: _Acc) -> _Acc:
        return _acc_merge(a, b)

    def add_array(self, state: _Acc, values: Any) -> _Acc:
        k = _kind(values)
        if k == "int" and len(values) and int(abs(values).max()) < (1 << 53) // max(len(values), 1):
            return _acc_add_total(state, float(int(values.sum())), len(values))
        if k == "float":
            return _acc_add_total(state, math.fsum(values.tolist()), len(values))
        return self.add(state, values.tolist() if hasattr(values, "tolist") else list(values))

    def add_batch(self, states: list[_Acc], values: Any, offsets: Any) -> list[_Acc]:
        """Integer slices: one ``reduceat`` (exact below 2**53); otherwise slice by slice."""
        import numpy as np

        off = np.asarray(offsets, dtype=np.int64)
        if (_kind(values) == "int" and (len(values) == 0
                                        or int(abs(values).max()) < (1 << 53) // max(len(values), 1))):
            sums = _segments(values, off).tolist()
            lens = np.diff(off).tolist()
            return [_acc_add_total(s, float(t), k) if k else s
                    for s, t, k in zip(states, sums, lens, strict=True)]
        o = off.tolist()
        if _kind(values) == "float":  # each slice exactly rounded, as add_array does
            vals = values.tolist()
            fsum = math.fsum
            return [_acc_add_total(s, fsum(vals[a:b]), b - a) if b > a else s
                    for s, a, b in zip(states, o[:-1], o[1:], strict=True)]
        return [self.add_array(s, values[a:b]) for s, a, b in zip(states, o[:-1], o[1:], strict=True)]

    def compute(self, state: _Acc) -> float:
        return _total(state) / state[0]

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        """Integer slices summing exactly below 2**53: the sums over the counts, one vector division (the
        float division ``compute`` does); otherwise ``add_batch`` from fresh states and ``compute``."""
        import numpy as np

        off = np.asarray(offsets, dtype=np.int64)
        lens = np.diff(off)
        if (_kind(values) == "int" and len(values) and bool((lens > 0).all())
                and int(abs(values).max()) < (1 << 53) // len(values)):
            return _segments(values, off).astype(np.float64) / lens
        return [self.compute(s) for s in self.add_batch([self.initial_state()] * len(lens), values, off)]


# Exact moments: (n, Σx, Σx², non-finite count). Floats are dyadic rationals, so Σx and Σx² kept as
# ``Fraction`` (ints stay ints) are exact: any chain of adds, removes and merges gives the very state a
# fresh pass over the same members gives, and ``compute`` rounds once. A running (Welford) update drifts
# under removals, so an incremental window could disagree with itself after its CTI (a snapshot window
# recomputed from a neighbour's state changed its final value).
_Moments = tuple[int, "int | Fraction", "int | Fraction", int]


def _moments(state: _Moments, values: Sequence[float], sign: int) -> _Moments:
    n, s1, s2, bad = state
    for x in values:
        if isinstance(x, float) and not math.isfinite(x):
            bad += sign
            continue
        f = x if isinstance(x, int) else Fraction(x)
        s1 += sign * f
        s2 += sign * f * f
    return n + sign * len(values), s1, s2, bad


@udm(name="variance", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Variance(IncrementalUDA):
    """Population variance of the input, from exact moments (see ``_Moments``); NaN when a member is not
    finite, as a fresh float computation would give."""

    def initial_state(self) -> _Moments:
        return 0, 0, 0, 0

    def add(self, state: _Moments, delta: Sequence[float]) -> _Moments:
        return _moments(state, _numbers(delta, "variance"), 1)

    def remove(self, state: _Moments, delta: Sequence[float]) -> _Moments:
        return _moments(state, _numbers(delta, "variance"), -1)

    def add_array(self, state: _Moments, values: Any) -> _Moments:
        if _kind(values) == "int" and len(values):
            n, s1, s2, bad = state
            xs = values.tolist()
            return n + len(xs), s1 + sum(xs), s2 + sum(x * x for x in xs), bad
        return self.add(state, values.tolist() if hasattr(values, "tolist") else list(values))

    def merge(self, a: _Moments, b: _Moments) -> _Moments:
        return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]

    def compute(self, state: _Moments) -> float:
        n, s1, s2, bad = state
        if bad:
            return math.nan
        return float(Fraction(s2 * n - s1 * s1, n * n))


#: a min/max state: [sorted values, pending values, the pending values' extreme (None: none), exact]. Values
#: that only enter wait in ``pending`` (one ``list.extend`` and one C-level min/max per call); they are sorted
#: into the `SortedList` only when something leaves (``remove``), so a window that only grows (cumulate, a
#: running aggregate) never pays the sorted insert. ``exact``: a value that does not order (NaN, a non-number)
#: entered, so every value goes straight into the sorted list, as before the pending part existed.
_Ext = list[Any]


class _Extreme(IncrementalUDA):
    """Shared shape of min/max: a sorted multiset, so removals are exact, with the values that only entered
    kept aside until something leaves (see ``_Ext``)."""

    #: Max: the last of equal extremes entered wins (a sorted list's last); Min: the first
    _max = True

    def initial_state(self) -> _Ext:
        return [SortedList(), [], None, False]

    def _pick(self, vals: list[Any]) -> Any:
        return max(reversed(vals)) if self._max else min(vals)

    def _beats(self, a: Any, b: Any) -> bool:
        """Does ``a``, entered after ``b``, become the extreme?"""
        return a >= b if self._max else a < b  # type: ignore[no-any-return]

    def add(self, state: _Ext, delta: Sequence[float]) -> _Ext:
        vals = list(delta)
        if not vals:
            return state
        if not state[3]:
            try:
                total = sum(vals)
                ok = total == total  # (NaN, or inf - inf: the sorted list decides, as before)
            except TypeError:
                ok = False
            if ok:
                self._pend(state, vals)
                return state
            state[3] = True
        self._settle(state)
        state[0].update(vals)
        return state

    def _pend(self, state: _Ext, vals: list[Any]) -> None:
        b = self._pick(vals)
        state[1].extend(vals)
        if state[2] is None or self._beats(b, state[2]):
            state[2] = b

    @staticmethod
    def _settle(state: _Ext) -> SortedList:
        """The pending values join the sorted list."""
        sl = state[0]
        if state[1]:
            sl.update(state[1])
            state[1] = []
            state[2] = None
        return sl

    def remove(self, state: _Ext, delta: Sequence[float]) -> _Ext:
        sl = self._settle(state)
        for v in delta:
            sl.remove(v)
        return state

    def merge(self, a: _Ext, b: _Ext) -> _Ext:
        if a[3] or b[3]:
            out = SortedList(a[0])
            out.update(a[1])
            out.update(b[0])
            out.update(b[1])
            return [out, [], None, True]
        vals = [*a[0], *a[1], *b[0], *b[1]]
        st = self.initial_state()
        if vals:
            self._pend(st, vals)
        return st

    def add_array(self, state: _Ext, values: Any) -> _Ext:
        if _kind(values) and not state[3]:
            if len(values):
                self._pend(state, values.tolist())
            return state
        return self.add(state, values.tolist() if hasattr(values, "tolist") else list(values))

    def compute_prefixes(self, state: _Ext, values: Any, ends: Any) -> Any:
        """Numeric values: one running ``maximum``/``minimum.accumulate``, each window's against the state's
        extreme (the values entered after it: ties as ``add`` breaks them)."""
        import numpy as np

        if not _kind(values) or state[3]:
            raise TypeError("values that do not order: the scalar forms decide")
        e = np.asarray(ends, dtype=np.int64)
        run = (np.maximum if self._max else np.minimum).accumulate(values)
        tops = run[np.maximum(e - 1, 0)] if len(run) else np.zeros(len(e), dtype=values.dtype)
        if not state[0] and not state[1]:
            if len(e) and int(e.min()) <= 0:
                raise ValueError("a window without members has no value")
            return tops
        base = self._extreme(state)
        if _same_kind(base, values):  # (one column: the windows' extremes are of the values' kind either way)
            wins = (e > 0) & ((tops >= base) if self._max else (tops < base))
            return np.where(wins, tops, base)
        beats = self._beats
        return [t if x > 0 and beats(t, base) else base for t, x in zip(tops.tolist(), e.tolist(), strict=True)]

    def _extreme(self, state: _Ext) -> Any:
        sl, pend, pb, _exact = state
        if not pend:
            return sl[-1] if self._max else sl[0]
        if not sl:
            return pb
        top = sl[-1] if self._max else sl[0]
        return pb if self._beats(pb, top) else top


@udm(name="min", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Min(_Extreme):
    """Smallest input."""

    _max = False

    def compute(self, state: _Ext) -> float:
        return self._extreme(state)  # type: ignore[no-any-return]


@udm(name="max", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Max(_Extreme):
    """Largest input."""

    def compute(self, state: _Ext) -> float:
        return self._extreme(state)  # type: ignore[no-any-return]
