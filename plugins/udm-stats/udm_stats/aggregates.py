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


def _copied(values: Any, starts: Any, ends: Any) -> tuple[Any, Any]:
    """The ranges ``values[starts[i]:ends[i]]`` copied out one after the other, and their offsets: the
    ``compute_slices`` arguments of ``compute_ranges``'s windows (each value copied once per range)."""
    import numpy as np

    lens = ends - starts
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    total = int(offsets[-1])
    return values[np.repeat(starts - offsets[:-1], lens) + np.arange(total, dtype=np.int64)], offsets


def _running(values: Any) -> Any:
    """The exact int64 running sum of ``values`` from 0 (``len(values) + 1`` entries)."""
    import numpy as np

    return np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(values, dtype=np.int64)))


def _numbers(values: Sequence[object], who: str) -> Sequence[float]:
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{who} needs numeric input, got {v!r}")
    return values  # type: ignore[return-value]


@udm(name="count", version="1.0.0", algebraic=True, value_blind=True, input_type="any", output_type="int")
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

    def compute_ranges(self, values: Any, starts: Any, ends: Any) -> Any:
        import numpy as np

        return np.asarray(ends, dtype=np.int64) - np.asarray(starts, dtype=np.int64)

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

    def compute_ranges(self, values: Any, starts: Any, ends: Any) -> Any:
        """Integer values: differences of one exact int64 running sum (a value costs the same whatever the
        ranges' length); otherwise `compute_slices` over the ranges copied out."""
        import numpy as np

        s = np.asarray(starts, dtype=np.int64)
        e = np.asarray(ends, dtype=np.int64)
        if _kind(values) == "int" and _int_segments_safe(values):
            run = _running(values)
            return run[e] - run[s]
        return self.compute_slices(*_copied(values, s, e))

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

    def compute_ranges(self, values: Any, starts: Any, ends: Any) -> Any:
        """Integer values summing exactly below 2**53: differences of one running sum over the counts (the
        division `compute_slices` does); otherwise `compute_slices` over the ranges copied out."""
        import numpy as np

        s = np.asarray(starts, dtype=np.int64)
        e = np.asarray(ends, dtype=np.int64)
        lens = e - s
        if (_kind(values) == "int" and len(values) and bool((lens > 0).all())
                and int(abs(values).max()) < (1 << 53) // len(values)):
            run = _running(values)
            return (run[e] - run[s]).astype(np.float64) / lens
        return self.compute_slices(*_copied(values, s, e))


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


#: a min/max state: ``()`` before any value, else ``(extreme,)``: one value whatever the number of members, so
#: a slice's partial, a pane's and a whole window's are alike O(1) and ``merge`` is one comparison. There is
#: no ``remove``: one value cannot lose a member exactly. The engine keeps a window's members anyway (its
#: buckets, panes or rows) and treats a UDA without ``remove`` as merge-only: its sweeps keep one partial per
#: slice in two stacks or a finger B-tree, and a retraction folds the changed slice again from the members
#: it keeps (`udm.host.engine.window.sweep`).
#:
#: Among values equal as numbers (``3`` and ``3.0``, ``0.0`` and ``-0.0``) the pick follows one total order,
#: an int below a float and ``-0.0`` below ``0.0`` (`_tie_key`): ``min`` takes the lowest, ``max`` the
#: highest. The pick is then the same whatever the order values and partials are combined in (a finger
#: B-tree combines slices by where they leave, not in canonical order). Inputs are finite numbers
#: (SEMANTICS §1: ``NaN`` is not a payload number).
_Ext = tuple[Any, ...]


def _tie_key(v: Any) -> tuple[bool, bool]:
    """Where ``v`` stands among the values equal to it (see ``_Ext``)."""
    if type(v) is float:
        return True, math.copysign(1.0, v) > 0
    return False, False


class _Extreme(IncrementalUDA):
    """Shared shape of min/max (see ``_Ext``)."""

    #: max picks the highest, min the lowest
    _max = True

    def initial_state(self) -> _Ext:
        return ()

    def _pick(self, vals: list[Any]) -> Any:
        """The extreme of a non-empty list: one C-level pass, a second over the equal ones for the tie."""
        m = max(vals) if self._max else min(vals)
        if vals.count(m) > 1:
            ties = [x for x in vals if x == m]
            m = max(ties, key=_tie_key) if self._max else min(ties, key=_tie_key)
        return m

    def _pick2(self, a: Any, b: Any) -> Any:
        if a == b:
            ka, kb = _tie_key(a), _tie_key(b)
            return a if (ka >= kb if self._max else ka <= kb) else b
        return a if (a > b if self._max else a < b) else b

    def add(self, state: _Ext, delta: Sequence[float]) -> _Ext:
        vals = delta if isinstance(delta, list) else list(delta)
        if not vals:
            return state
        b = self._pick(vals)
        return (self._pick2(state[0], b),) if state else (b,)

    def merge(self, a: _Ext, b: _Ext) -> _Ext:
        if not a:
            return b
        if not b:
            return a
        return (self._pick2(a[0], b[0]),)

    def _column_pick(self, values: Any) -> Any:
        """The extreme of a non-empty int64/float64 column, ties of zeros as ``_pick`` breaks them."""
        import numpy as np

        m = (values.max() if self._max else values.min()).item()
        if m == 0 and type(m) is float:
            neg = np.signbit(values[values == 0])
            m = (0.0 if not neg.all() else -0.0) if self._max else (-0.0 if neg.any() else 0.0)
        return m

    def add_array(self, state: _Ext, values: Any) -> _Ext:
        if not _kind(values):
            return self.add(state, values.tolist() if hasattr(values, "tolist") else list(values))
        if not len(values):
            return state
        b = self._column_pick(values)
        return (self._pick2(state[0], b),) if state else (b,)

    def compute_prefixes(self, state: _Ext, values: Any, ends: Any) -> Any:
        """Numeric values: one running ``maximum``/``minimum.accumulate``, each window's against the state's
        extreme; a running extreme of zero takes its sign as ``_pick`` does (numpy does not order ``-0.0``)."""
        import numpy as np

        kind = _kind(values)
        if not kind:
            raise TypeError("values that do not order: the scalar forms decide")
        e = np.asarray(ends, dtype=np.int64)
        run = (np.maximum if self._max else np.minimum).accumulate(values)
        if kind == "float" and len(run):
            zero = values == 0
            if zero.any():
                neg = np.signbit(values) & zero
                # min: -0.0 once a -0.0 came; max: 0.0 once a 0.0 came
                seen = np.logical_or.accumulate((zero & ~neg) if self._max else neg)
                signed = np.where(seen, 0.0, -0.0) if self._max else np.where(seen, -0.0, 0.0)
                run = np.where(run == 0, signed, run)
        tops = run[np.maximum(e - 1, 0)] if len(run) else np.zeros(len(e), dtype=values.dtype)
        if not state:
            if len(e) and int(e.min()) <= 0:
                raise ValueError("a window without members has no value")
            return tops
        base = state[0]
        if _same_kind(base, values) and not (kind == "float" and base == 0):  # (no tie of kinds or zeros)
            wins = (e > 0) & ((tops > base) if self._max else (tops < base))
            return np.where(wins, tops, base)
        pick = self._pick2
        return [pick(base, t) if x > 0 else base for t, x in zip(tops.tolist(), e.tolist(), strict=True)]

    def compute(self, state: _Ext) -> float:
        return state[0]  # type: ignore[no-any-return]


@udm(name="min", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Min(_Extreme):
    """Smallest input."""

    _max = False


@udm(name="max", version="1.0.0", algebraic=True, input_type="float", output_type="float")
class Max(_Extreme):
    """Largest input."""
