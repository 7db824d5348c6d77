"""External CTIs of one query input (SEMANTICS §11; seeds/003 Finalize, its ``CTILifetimes``).

``ecti(le, re, count)`` says that exactly ``count`` data elements (inserts and retractions) of the input have
their sync time in ``[le, re)``; it may come before, between or after them. `EctiLedger` sits in front of
the input's gate (and of its retraction-chain repair) and turns ECTIs into what the engine already knows:
plain CTIs, put right after the element that completed them, so "the output is as if each effective CTI had
arrived as a plain ``cti`` right after the element that completed it".

* Each ECTI is a range with ``count`` expected and ``received`` so far. Data elements that arrive before
  any ECTI covers them are remembered by sync time (*loose*); an ECTI takes the loose ones in its range.
* A data element (a valid insert or retraction: one a file could hold) counts unless it is below the CTI
  (plain or effective: it is a CTI violation, which the gate refuses) or its range is complete (a *surplus*
  element: dead-lettered here).
* The effective CTI: from ``s``, the smallest LE of the ECTIs received (or from the CTI, once past it), as far
  as complete, contiguous ranges reach; never lowered; a plain CTI of the input counts too (the larger wins).
* Dead letters (`rules.ECTI`): an ECTI overlapping an earlier one, or starting below the effective CTI, or
  (semantics-notes 69) counting fewer elements than its range already received.

State: the ranges the effective CTI has not passed, and the sync times of loose elements above it (kept as
numpy chunks, so an input that never sends an ECTI pays one array reference per batch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sortedcontainers import SortedDict

from udm.host.temporal.elements import Cti, Ecti, Insert, Retract, element_to_json

from .rules import (
    ECTI,
    INF,
    NEG,
    SURPLUS,
    ecti_range,
    ecti_ranges,
    format_time,
    insert_lifetime_bad,
    retract_lifetime_bad,
)

__all__ = ["EctiLedger"]

#: reject(line, category, reason, element as JSON): the gate's dead-letter call
Reject = Callable[[int, str, str, dict[str, Any]], None]


def _t(x: int) -> str:
    return format_time(x)


class _Ends:
    """The ends of a `SortedDict` of ranges by position (what `rules.ecti_range` indexes)."""

    __slots__ = ("rg",)

    def __init__(self, rg: SortedDict) -> None:
        self.rg = rg

    def __getitem__(self, i: int) -> int:
        return int(self.rg.peekitem(i)[1][0])


class EctiLedger:
    """One input's ECTI ranges and what they have received (see the module docstring)."""

    def __init__(self) -> None:
        #: the input's CTI as far as ECTIs are concerned: the latest plain CTI or effective CTI
        self.cti = NEG
        #: smallest LE of the ECTIs received (NEG: none yet)
        self.start = NEG
        #: le -> [re, count, received] of ranges the effective CTI has not passed
        self.ranges: SortedDict = SortedDict()
        #: sync times of data elements no range covered when they came, above the CTI (chunks, and the
        #: latest ones one by one)
        self.loose: list[np.ndarray] = []
        self.tail: list[int] = []

    @property
    def active(self) -> bool:
        """Some range is open: every element must be counted one by one."""
        return bool(self.ranges)

    # -- the fast path ---------------------------------------------------------------------------------
    def unaffected(self, sync: np.ndarray, has_cti: bool) -> bool:
        """Can a batch without ECTIs, whose data elements have these sync times, skip the row path? Yes when
        no range is open, or when it has no CTI (which could extend the effective CTI) and none of its
        elements falls in an open range."""
        if not self.ranges:
            return True
        if has_cti:
            return False
        ends = np.fromiter((v[0] for v in self.ranges.values()), dtype=np.int64, count=len(self.ranges))
        starts = np.fromiter(self.ranges.keys(), dtype=np.int64, count=len(self.ranges))
        return bool((ecti_ranges(sync, starts, ends) < 0).all())

    def note(self, sync: np.ndarray, last_cti: int) -> None:
        """A batch `unaffected` by the ranges: remember its data elements' sync times, then take its last CTI.
        (An element below the CTI in force is a CTI violation and must count for nothing: it can never fall in
        a range, which starts at or above that CTI, and the CTI's rise forgets it.)"""
        if len(sync):
            self.loose.append(sync)
        self._plain(last_cti)

    # -- the row path --------------------------------------------------------------------------------------
    def items(self, items: list[tuple[int | None, Any]], reject: Reject) -> list[tuple[int | None, Any]]:
        """``items`` (``(line, element)``) with ECTIs taken out, surplus elements dead-lettered and each
        effective CTI put right after the element that made it."""
        out: list[tuple[int | None, Any]] = []
        for line, el in items:
            if self.cti >= INF:
                out.append((line, el))  # the input ended: the gate refuses what follows
                continue
            if isinstance(el, Ecti):
                self._external(el, -1 if line is None else line, reject)
                self._advance(line, out)
                continue
            if isinstance(el, Cti):
                out.append((line, el))
                self._plain(el.t)
                self._advance(line, out)
                continue
            if isinstance(el, Insert) and not insert_lifetime_bad(el.le, el.re):
                sync = el.le
            elif isinstance(el, Retract) and not retract_lifetime_bad(el.le, el.re, el.re_new):
                sync = min(el.re, el.re_new)
            else:  # a bad line, or an element no file could hold (a bad lifetime): not a data element
                out.append((line, el))
                continue
            if sync < self.cti:  # a CTI violation: the gate says so; it counts for nothing
                out.append((line, el))
                continue
            if self._data(sync, el, -1 if line is None else line, reject):
                out.append((line, el))
                self._advance(line, out)
        return out

    def _data(self, sync: int, el: Any, line: int, reject: Reject) -> bool:
        """Count a data element; False when it is surplus (dead-lettered)."""
        rg = self.ranges
        keys = rg.keys()
        i = ecti_range(sync, keys, _Ends(rg)) if rg else -1
        if i < 0:
            self.tail.append(sync)
            return True
        r = rg[keys[i]]
        if r[2] >= r[1]:
            reject(line, SURPLUS, f"surplus for the ECTI [{_t(keys[i])}, {_t(r[0])}) (count {r[1]}): its "
                                  f"elements have all arrived", element_to_json(el))
            return False
        r[2] += 1
        return True

    def _external(self, e: Ecti, line: int, reject: Reject) -> None:
        rg = self.ranges
        what = f"ECTI [{_t(e.le)}, {_t(e.re)})"
        if e.le < self.cti:
            reject(line, ECTI, f"{what} starts below the effective CTI {_t(self.cti)}", element_to_json(e))
            return
        i = rg.bisect_left(e.re) - 1
        if i >= 0:
            le = rg.keys()[i]
            if rg[le][0] > e.le:
                reject(line, ECTI, f"{what} overlaps the earlier ECTI [{_t(le)}, {_t(rg[le][0])})",
                       element_to_json(e))
                return
        self._chunk()
        have = sum(int(((c >= e.le) & (c < e.re)).sum()) for c in self.loose)
        if have > e.count:
            reject(line, ECTI, f"{what} says count {e.count}, but {have} elements with a sync time in it have "
                               f"arrived already", element_to_json(e))
            return
        if have:
            self.loose = [k for k in (c[(c < e.le) | (c >= e.re)] for c in self.loose) if len(k)]
        rg[e.le] = [e.re, e.count, have]
        if self.start == NEG or e.le < self.start:
            self.start = e.le

    def _chunk(self) -> None:
        if self.tail:
            self.loose.append(np.array(self.tail, dtype=np.int64))
            self.tail = []

    def _plain(self, t: int) -> None:
        if t > self.cti:
            self.cti = t
            self._forget()

    def _advance(self, line: int | None, out: list[tuple[int | None, Any]]) -> None:
        """The effective CTI after the element just handled: complete contiguous ranges from ``max(CTI, s)``;
        a rise goes out as a plain CTI right here."""
        if self.start == NEG:
            return
        base = self.cti if self.cti > self.start else self.start
        t = base
        rg = self.ranges
        while rg:
            i = rg.bisect_right(t) - 1
            if i < 0:
                break
            le = rg.keys()[i]
            re, count, got = rg[le]
            if not (le <= t < re) or got < count:
                break
            t = re
        if t > base:
            self.cti = t
            self._forget()
            out.append((line, Cti(t)))

    def _forget(self) -> None:
        """Ranges and loose elements the CTI has passed can no longer matter."""
        c = self.cti
        rg = self.ranges
        while rg:
            le = rg.keys()[0]
            if rg[le][0] > c:
                break
            del rg[le]
        self._chunk()
        if self.loose:
            self.loose = [k for k in (x if x.min() >= c else x[x >= c] for x in self.loose) if len(k)]

    def state_size(self) -> int:
        return len(self.ranges) + sum(len(c) for c in self.loose) + len(self.tail)
