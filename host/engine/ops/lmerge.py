"""``lmerge`` (SEMANTICS §8, seeds/001): one output stream compatible with several logically equivalent
inputs that differ physically (order, retractions, timing, ids).

The merge itself is an algorithm core (`lmerge_algorithms`, R0–R4, chosen when the query is bound). This
operator adds what is per port: attach and detach at run time (seeds/001 §V.B), the chattiness counters of
Theorem 1, and the end: unlike every other multi-input operator the output CTI follows the *largest* input
CTI, so ``cti(INF)`` comes out when the first attached input ends.

A port is ``attached`` (its CTIs drive the output), ``joining`` (attached at time ``t``: its rows are
recorded, its CTIs ignored until the output CTI reaches ``t``; from then on it can carry the stream alone)
or ``detached`` (ignored). Elements of a lagging port below the output CTI change nothing (dropped, not
dead-lettered: they are not wrong, only late).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from udm.host.model.plan import BoundStep
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from ..batch import CTI, INSERT, Batch, RowsOut
from ..context import Context
from ..operator import Operator
from ..rules import NEG
from .lmerge_algorithms import InsertOnlyViolation, MergeCore, make_core

__all__ = ["ATTACHED", "DETACHED", "JOINING", "LmergeOp"]

ATTACHED = "attached"
JOINING = "joining"
DETACHED = "detached"

#: dead-letter category of a retraction that an insert-only algorithm (R0–R2) cannot take
NOT_INSERT_ONLY = "lmerge_not_insert_only"


class LmergeOp(Operator):
    """The lmerge step: ports with their membership and counters around one algorithm core."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        step = bs.step
        self.sources: tuple[str, ...] = tuple(step.sources)
        self.ports = len(self.sources)
        self.algorithm = str(step.algorithm)
        self.core: MergeCore = make_core(self.algorithm, self.ports)
        #: per port: attached / joining / detached, and the join time of a joining port
        self.status = [ATTACHED] * self.ports
        self.join_at = [NEG] * self.ports
        for src, t in (step.join_at or {}).items():
            self.attach_port(self.sources.index(src), t)
        #: Theorem 1 counters (`QueryRunner.chattiness`, `RunResult.lmerge`)
        self.counts: Counter[str] = Counter()
        #: the port's latest CTI (a joining port's are held back)
        self.port_cti = [NEG] * self.ports
        #: seeds/001 §V.D: signal lagging ports' feeders; per port the step feeding only it (set by the runner)
        self.feedback = bool(step.feedback)
        self.feeders: list[Any] = [None] * self.ports

    # -- run-time membership (seeds/001 §V.B) ------------------------------------------------------------
    def port_of(self, source: str) -> int:
        if source not in self.sources:
            raise ValueError(f"lmerge step {self.name!r} reads no {source!r} (it reads {', '.join(self.sources)})")
        return self.sources.index(source)

    def attach_port(self, port: int, at: int = NEG) -> None:
        """The port joins: it is guaranteed to carry every event with ``RE >= at``; it counts once the output
        CTI reaches ``at`` (at once when it already has)."""
        if at <= self.core.stable:
            self.status[port] = ATTACHED
        else:
            self.status[port] = JOINING
            self.join_at[port] = at

    def detach_port(self, port: int) -> None:
        """The port leaves: from now on its elements are ignored and what only it held is dropped."""
        self.status[port] = DETACHED
        self.core.forget_port(port)

    # -- elements --------------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        out = RowsOut()
        counts = self.counts
        kinds = b.kind.tolist()
        for i, k in enumerate(kinds):
            if k == INSERT:
                counts["inserts_in"] += 1
                if self.status[port] == DETACHED:
                    continue
                got = self.core.insert(port, str(int(b.id[i])), int(b.le[i]), int(b.re[i]), b.payload.row(i))
            elif k == CTI:
                counts["ctis_in"] += 1
                got = self._cti(port, int(b.le[i]))
            else:
                counts["retractions_in"] += 1
                if self.status[port] == DETACHED:
                    continue
                try:
                    got = self.core.retract(port, str(int(b.id[i])), int(b.le[i]), int(b.re[i]), int(b.rn[i]))
                except InsertOnlyViolation as exc:
                    self.refuse(b, i, NOT_INSERT_ONLY, f"{exc} (declare the inputs' properties truthfully or use "
                                                       f"algorithm R3/R4)", port)
                    continue
            if got:
                self._counted(got)
                for el in got:
                    _row(out, el)
        return out.batch()

    def _cti(self, port: int, t: int) -> list[Element]:
        if t > self.port_cti[port]:
            self.port_cti[port] = t
        status = self.status[port]
        if status == DETACHED or (status == JOINING and self.core.stable < self.join_at[port]):
            return []
        out = self.core.cti(port, t)
        self._joined()
        if out and self.feedback:
            self._fast_forward(self.core.stable)
        return out

    def _fast_forward(self, t: int) -> None:
        """Tell the feeders of the ports behind the output CTI that nothing before it is needed any more."""
        for p, feeder in enumerate(self.feeders):
            if feeder is not None and self.port_cti[p] < t and self.status[p] != DETACHED:
                feeder.fast_forward(t)
                self.counts["feedback_signals"] += 1

    def _joined(self) -> None:
        """Joining ports whose join time the output CTI reached are attached now."""
        stable = self.core.stable
        for p, s in enumerate(self.status):
            if s == JOINING and stable >= self.join_at[p]:
                self.status[p] = ATTACHED

    def _counted(self, out: list[Element]) -> list[Element]:
        counts = self.counts
        for el in out:
            if isinstance(el, Insert):
                counts["inserts_out"] += 1
            elif isinstance(el, Retract):
                counts["full_retractions_out" if el.re_new <= el.le else "partial_retractions_out"] += 1
            elif isinstance(el, Cti):
                counts["ctis_out"] += 1
        return out

    def chattiness(self) -> dict[str, int]:
        """The Theorem 1 counters: elements in and out by kind."""
        keys = ("inserts_in", "retractions_in", "ctis_in", "inserts_out", "partial_retractions_out",
                "full_retractions_out", "ctis_out")
        data = {k: self.counts.get(k, 0) for k in keys}
        if self.feedback:
            data["feedback_signals"] = self.counts.get("feedback_signals", 0)
        inconsistent = getattr(self.core, "inconsistent", 0)
        if inconsistent:
            data["inconsistent"] = inconsistent
        return data

    def state_size(self) -> dict[str, int]:
        return {"events": self.core.held()}

    def forget_at(self) -> int | None:
        return None  # (its ports' progress is state that no size counts)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "feeders")


def _row(out: RowsOut, el: Element) -> None:
    """A core's output element as a row (its ids are ``m<n>``)."""
    if isinstance(el, Insert):
        out.insert(int(el.id[1:]), el.le, el.re, el.payload)
    elif isinstance(el, Retract):
        out.retract(int(el.id[1:]), el.le, el.re, el.re_new, el.payload or {})
    else:
        assert isinstance(el, Cti)
        out.cti(el.t)
