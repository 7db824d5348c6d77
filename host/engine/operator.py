"""The operator interface every step of a query graph implements.

An operator takes a `Batch` on one of its input ports and returns the `Batch` it causes (or None); `flush`
releases what it buffered (a window step's output waits for its release point). Its input is valid by
construction (`gate.InputGate` validated it, or an operator made it), except for the payload fields it
reads: those it checks itself with `FieldCheck`, refusing a row as a malformed payload of this step
(semantics-notes 3). A snapshot pickles it, without what `attach` binds again on restore (the context, the
bound UDM).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udm.host.errors import ViolationError
from udm.host.model.plan import BoundStep
from udm.host.temporal.elements import element_to_json

from .batch import Batch
from .common import DeadLetter
from .context import Context
from .rules import INF, UNKNOWN_ID, FieldCheck, unknown_id_reason

__all__ = ["Operator", "UdmOperator"]


class Operator:
    """One step of a query graph: batches in on numbered ports, batches out."""

    #: ports this operator reads (multi-input operators override)
    ports: int = 1

    def __init__(self, name: str, ctx: Context) -> None:
        #: the step's name in the query graph (messages name it)
        self.name = name
        self.ctx = ctx
        #: per port, the query input its stream derives from (None when several); set by the runner
        self.input_names: tuple[str | None, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in self._transient():
            d.pop(k, None)
        return d

    def _transient(self) -> tuple[str, ...]:
        return ("ctx",)

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx

    # -- interface ---------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        raise NotImplementedError

    def flush(self) -> Batch | None:
        """Release buffered output."""
        return None

    def finish_ready(self) -> None:
        """Called before the final ``cti(INF)`` reaches this step (every input has ended)."""

    def fast_forward(self, t: int) -> None:
        """Feedback from the lmerge this step feeds (seeds/001 §V.D): nothing before ``t`` is wanted any
        more. By default ignored."""

    def state_size(self) -> dict[str, int]:
        """What this operator holds (tests of bounded state)."""
        return {}

    def forget_at(self) -> int | None:
        """On this operator's input clock, the earliest CTI at which it forgets an event (INF: it holds
        none); None when what a CTI does to it depends on its state otherwise (`udm.host.engine.progress`)."""
        return INF if not any(self.state_size().values()) else None

    # -- refusing rows -------------------------------------------------------------------------------
    def refuse(self, b: Batch, i: int, category: str, reason: str, port: int = 0) -> None:
        """Row ``i`` of ``b`` is a malformed payload of this step: dead letter (or the error of
        ``on_violation: error``)."""
        ctx = self.ctx
        el = element_to_json(b.element(i))
        line = int(b.line[i])
        ln = line if line >= 0 else None
        text = f"step {self.name}: {reason}"
        if ctx.on_violation == "error":
            where = f" (line {ln})" if ln is not None else ""
            raise ViolationError(f"invalid element{where}: {text}: {el}")
        source = self.input_names[port] if len(self.input_names) > port else None
        ctx.dead(DeadLetter(ln, text, el, input=source), category)

    def checked(self, b: Batch, check: FieldCheck, port: int = 0) -> Batch:
        """``b`` without the inserts this step refuses (each dead-lettered, in row order) and without the
        retractions of events it refused (their ids are unknown here: semantics-notes 3)."""
        if check.empty:
            return b
        data = np.flatnonzero(b.kind != 2)
        bad = check.bad_rows(b.payload, data)
        if bad is None:
            return b
        rows = data[bad]
        for i in rows.tolist():
            if b.kind[i] == 0:
                got = check.reason(b.payload.row(i))
                if got is not None:
                    self.refuse(b, i, got[0], got[1], port)
            else:
                self.refuse(b, i, UNKNOWN_ID, unknown_id_reason(b.id_text(i)), port)
        keep = np.ones(len(b), dtype=bool)
        keep[rows] = False
        return b.take(np.flatnonzero(keep))


class UdmOperator(Operator):
    """An operator calling its step's UDM (``udm``, bound with ``bs``): a snapshot pickles neither, and
    `attach` binds them again on restore."""

    bs: BoundStep | None
    udm: Any

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "udm")

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        self.udm = bs.udm if bs is not None else None
