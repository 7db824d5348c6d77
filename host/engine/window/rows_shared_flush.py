"""The shared rows store's flush (`rows_shared.RowStore.prepare`): every window a flush releases of every group
in the store, valued in one `grid_closed.window_values` call per kind — final ones written as one column block
without output records, those released before they are final each with its record (`rows_fresh`), and those
a sorted-in row renumbered after their release valued again and diffed (`RowsFamily.rewrite`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .grid_closed import spans, usable_column, window_values, write_closed
from .rows_fresh import put_fresh
from .rows_shared_arrays import StoreArrays

__all__ = ["StoreFlush", "range_values"]

_I64 = np.int64


def range_values(wu: Any, V: np.ndarray, st: np.ndarray, en: np.ndarray, wle: np.ndarray, wre: np.ndarray) -> Any:
    """Each window's value, its members ``V[st[i]:en[i]]`` (starts and ends never go back): the UDA's sliding
    form ``compute_ranges`` over the column as it is, when it declares one and ``V`` is one numeric kind —
    each row read once, whatever the windows' length (semantics-notes 79); else `window_values` over the
    ranges copied out one after the other (each row once per window holding it). A form that raises or gives
    no column of plain values of the windows' number is not used (the copied route then decides, per window
    when it must, as always)."""
    fn = getattr(wu, "compute_ranges", None)
    if fn is not None and V.dtype.kind in "if":
        blind = wu.bs.entry.manifest.properties.value_blind  # (placeholders, in every form: int64 zeros)
        try:
            got = usable_column(fn(np.zeros(len(V), dtype=_I64) if blind else V, st, en), len(st))
        except Exception:
            got = None
        if got is not None:
            return got
    lens = en - st
    offs, at = spans(st, lens)
    return window_values(wu, V[at], offs[:-1], lens, wle, wre)


class StoreFlush(StoreArrays):
    """`rows_shared.RowStore`'s flush: the windows it releases, valued as arrays."""

    redo: dict[int, int]
    seen: tuple[int, int] | None
    _look: Callable[[int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    _below: Callable[[np.ndarray, np.ndarray, Any], np.ndarray]

    def prepare(self, fam: Any, out: Any, em: Any) -> None:
        """Value and write every window of a group in the store that the flush releases: those final at the
        CTI as one block, with no output record (nothing valid can change them); those released before they
        are final with their output records, for a later diff (`rows_fresh`)."""
        step = fam.step
        c, rp = step.effective_cti, step.rp
        if not self.groups or self.seen == (c, rp):
            return
        self.seen = (c, rp)
        self._settle()
        if not len(self.G):
            return
        heads, cnt, u, fixed = self._look(c)
        P, D, F = self.P[u], self.D[u], self.F[u]
        lo = fam.yield_at(np.maximum(D + 1, F))
        slide = fam.slide
        hi = (P + fixed) // slide * slide  # the last window whose rows are all fixed
        if self.redo:  # first the released windows sorted-in rows renumbered
            D = self._redo(fam, out, em, heads, u, P, lo)
            lo = fam.yield_at(np.maximum(D + 1, F))
        take = hi >= lo
        D = np.where(take, hi, D)
        self.D[u] = D
        if take.any():
            self._write(fam, out, em, heads[take], u[take], P[take], lo[take], hi[take])
        # released (its last row's LE below the release point), not final: emitted with output records
        hr = fam.up(P + self._below(heads, cnt, rp) + 1) - slide
        lo = fam.yield_at(np.maximum(D + 1, F))
        early = hr >= lo
        if early.any():
            self.D[u[early]] = hr[early]
            self._put(fam, out, em, heads[early], u[early], P[early], lo[early], hr[early])

    def _redo(self, fam: Any, out: Any, em: Any, heads: np.ndarray, u: np.ndarray, P: np.ndarray,
              lo: np.ndarray) -> np.ndarray:
        """The ``redo`` groups' windows valued again (`_again`); returns ``D`` of the runs after it."""
        sel = np.flatnonzero(np.isin(u, np.fromiter(self.redo, dtype=_I64, count=len(self.redo))))
        top = np.array([self.redo.pop(x) for x in u[sel].tolist()], dtype=_I64)
        ok = top >= lo[sel]  # (else cleanup found them final)
        sel, top = sel[ok], top[ok]
        if len(sel):
            self.D[u[sel]] = np.maximum(self.D[u[sel]], top)
            self._again(fam, out, em, heads[sel], u[sel], P[sel], lo[sel], top)
        return self.D[u]

    def _windows(self, fam: Any, heads: np.ndarray, u: np.ndarray, P: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[np.ndarray, ...]:
        """The windows of yield rows ``lo, lo + slide, .. hi`` of each run: group number, yield row, W.LE,
        W.RE and value each."""
        slide = fam.slide
        m = (hi - lo) // slide + 1
        J = np.repeat(np.arange(len(u), dtype=_I64), m)
        firsts = np.concatenate(([0], np.cumsum(m)[:-1]))
        K = lo[J] + slide * (np.arange(len(J), dtype=_I64) - firsts[J])
        base = heads[J] - P[J] - 1  # row number r is at position base + r
        st = base + fam.first(K)
        en = base + K + 1
        L = self.L
        wle = L[st]
        wre = L[en - 1] + 1
        return u[J], K, wle, wre, range_values(fam.step.udm, self.V, st, en, wle, wre)

    def _write(self, fam: Any, out: Any, em: Any, *runs: np.ndarray) -> None:
        """Final windows never emitted (see `_windows`), written as one block."""
        nums, _K, wle, wre, res = self._windows(fam, *runs)
        write_closed(fam.step, out, em, self.fields.take(nums), wle, wre, res)

    def _put(self, fam: Any, out: Any, em: Any, *runs: np.ndarray) -> None:
        """Windows released before they are final (see `_windows`), emitted each with its output record
        (`rows_fresh.put_fresh`)."""
        nums, K, wle, wre, res = self._windows(fam, *runs)
        xs = nums.tolist()
        gs = list(map(self.groups.__getitem__, xs))
        put_fresh(fam, out, em, gs, self.fields.take(nums), K, wle, wre, res)
        self.out.update(zip(xs, gs, strict=True))

    def _again(self, fam: Any, out: Any, em: Any, *runs: np.ndarray) -> None:
        """Windows of the ``redo`` groups (see `_windows`) that a sorted-in row renumbered after they were
        released: each group's diffed as one against what they emitted (`RowsFamily.rewrite`)."""
        nums, K, wle, wre, res = self._windows(fam, *runs)
        outputs = fam.step.udm.outputs
        vals = res.tolist() if isinstance(res, np.ndarray) else res
        gs = self.groups
        news: dict[int, list[tuple[Any, int, int, list]]] = {}
        for x, k, le, re, v in zip(nums.tolist(), K.tolist(), wle.tolist(), wre.tolist(), vals, strict=True):
            news.setdefault(x, []).append((k, le, re, outputs(v, le, re, gs[x].fields)))
        for x, ws in news.items():
            g = gs[x]
            fam.rewrite(g, ws[0][0], ws[-1][0], ws, out, em)
            if g.out:
                self.out[x] = g

