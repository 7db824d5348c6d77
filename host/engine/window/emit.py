"""Output of re-evaluated windows as minimal diffs (SEMANTICS §7), and the output-CTI guard.

The windows a group re-evaluates at a flush are diffed together against what they emitted before (and what
windows that no longer exist emitted): outputs are matched by ``(LE, payload)``; an unchanged output stays,
one whose end moved is one retraction to the new end, the rest are full retractions and inserts. Output
rows of a retraction carry the payload (the operators after this one read it).
"""

from __future__ import annotations

from typing import Any

from sortedcontainers import SortedDict

from udm.host.errors import ContractViolation
from udm.host.temporal.strict import canonical_json

from ..batch import RowsOut
from ..invoke import contract
from ..rules import INF
from .state import NO_OUT, Group, OutputRecord

__all__ = ["Emitter", "first_emission", "first_emissions"]

#: a new output: (le, re, payload, canonical JSON or None)
New = tuple[int, int, dict[str, Any], str | None]


class Emitter:
    """Diffs and writes a window step's output; numbers its output events."""

    def __init__(self) -> None:
        self.oid = 0
        #: the latest output CTI (set by the step)
        self.out_cti = -(2**64)

    def __getstate__(self) -> dict[str, Any]:
        return {"oid": self.oid, "out_cti": self.out_cti}

    def __setstate__(self, s: dict[str, Any]) -> None:
        self.oid = s["oid"]
        self.out_cti = s["out_cti"]

    def emit(self, step: Any, g: Group, olds: list[OutputRecord], news: list[tuple[Any, int, int, list[New]]],
             out: RowsOut) -> None:
        """Windows ``news`` — (key, W.LE, W.RE, outputs) — replace the outputs ``olds`` of group ``g``; each
        window's records are stored under its key in ``g.out`` (an empty one is removed)."""
        if g.out is NO_OUT:
            g.out = SortedDict()
        if not olds:
            for key, wle, wre, outs in news:
                recs = self._all_new(step, wle, wre, outs, out)
                if recs:
                    g.out[key] = recs
                else:
                    g.out.pop(key, None)
            return
        by_key: dict[tuple[int, str], list[OutputRecord]] = {}
        for r in olds:
            by_key.setdefault((r.le, r.payload_json), []).append(r)
        later: list[tuple[list[OutputRecord], int, int, New]] = []
        per: list[tuple[Any, list[OutputRecord]]] = []
        for key, wle, wre, outs in news:
            recs = []
            for o in outs:
                le, re, p, pj = o
                lst = by_key.get((le, pj if pj is not None else canonical_json(p)))
                if lst:
                    for i, r in enumerate(lst):
                        if r.re == re:
                            recs.append(lst.pop(i))
                            break
                    else:
                        later.append((recs, wle, wre, o))
                else:
                    later.append((recs, wle, wre, o))
            per.append((key, recs))
        chg = RowsOut()
        ins = RowsOut()
        for recs, wle, wre, o in later:
            le, re, p, pj = o
            lst = by_key.get((le, pj if pj is not None else canonical_json(p)))
            if lst:
                r = lst.pop(0)
                self.check(step, min(r.re, re), (wle, wre), o)
                chg.retract(r.id, r.le, r.re, re, r.payload)
                r.re = re
                recs.append(r)
            else:
                self.check(step, le, (wle, wre), o)
                self.oid += 1
                r = OutputRecord(self.oid, le, re, p, pj)
                ins.insert(r.id, le, re, p)
                recs.append(r)
        for lst in by_key.values():
            for r in lst:
                self.check(step, r.le, None, (r.le, r.re, r.payload))
                out.retract(r.id, r.le, r.re, r.le, r.payload)
        for src in (chg, ins):
            for j in range(len(src)):
                out.row(src.kind[j], src.id[j], src.le[j], src.re[j], src.rn[j], src.payloads[j])
        for key, recs in per:
            if recs:
                g.out[key] = recs
            else:
                g.out.pop(key, None)

    def _all_new(self, step: Any, wle: int, wre: int, outs: list[New], out: RowsOut) -> list[OutputRecord]:
        recs: list[OutputRecord] = []
        oc = self.out_cti
        for o in outs:
            le, re, p, pj = o
            if le < oc:
                self.check(step, le, (wle, wre), o)
            self.oid += 1
            r = OutputRecord(self.oid, le, re, p, pj)
            out.insert(r.id, le, re, p)
            recs.append(r)
        return recs

    def records(self, gs: list[Group], keys: list[Any], first: int, wle: list[int], wre: list[int],
                payloads: list[dict[str, Any]]) -> None:
        """`_all_new`'s column form: windows never emitted, whose outputs — one each, ``(W.LE, W.RE, payload)``
        — went out as one column block of inserts with ids ``first, first + 1, ..`` in window order
        (`rows_fresh`); each window's record is stored under its key in its group's ``out``."""
        for i, (g, key, le, re, p) in enumerate(zip(gs, keys, wle, wre, payloads, strict=True), first):
            o = g.out
            if o is NO_OUT:
                o = g.out = SortedDict()
            o[key] = [OutputRecord(i, le, re, p, None)]

    def check(self, step: Any, sync: int, win: tuple[int, int] | None, value: Any) -> None:
        """Never violate the step's own output CTI (SEMANTICS §7)."""
        if sync < self.out_cti:
            if step.time_bound:
                raise contract(step.udm.label, win, f"output policy 'time_bound' broken: output changes before the "
                                                    f"CTI {self.out_cti} already emitted", value)
            raise ContractViolation(f"internal error: step {step.name!r} would violate its output CTI "
                                    f"{self.out_cti} with {value!r} (window {win})")


def first_emission(step: Any, wre: int) -> None:
    """Run statistics: how far past its end (watermark - W.RE) a window first comes out."""
    wm = step.watermark
    if wre < INF and wm < INF:  # (at the end of input every window comes out: not timed)
        st = step.ctx.stats
        st.windows_emitted += 1
        st.emission_delay += wm - wre


def first_emissions(step: Any, wre: Any) -> None:
    """`first_emission` of a column of windows' ends (a numpy int64 array) that come out together."""
    wm = step.watermark
    if wm < INF:
        fin = wre < INF
        st = step.ctx.stats
        st.windows_emitted += int(fin.sum())
        st.emission_delay += int((wm - wre[fin]).sum())
