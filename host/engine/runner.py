"""`QueryRunner`: runs a bound query (a chain of steps) over a physical stream, in process."""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from udm.host.errors import BadElement, ViolationError
from udm.host.query.plan import BoundQuery
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from .common import INF, NEG, DeadLetter, RunStats
from .step import FilterStep, MapStep, Step
from .window import make_window_step

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.io.batch import ElementBatch

__all__ = ["Context", "QueryRunner"]

_SNAPSHOT_VERSION = 1
#: process_many releases output at least this often (elements)
FLUSH_EVERY = 2048


class Context:
    """What steps share: the violation policy, the current input line, dead letters and counters."""

    def __init__(self, on_violation: str) -> None:
        self.on_violation = on_violation
        self.line: int | None = None
        self.dead_letters: list[DeadLetter] = []
        self.stats = RunStats()
        self.T = NEG  # largest finite time the (valid) input reached (semantics-notes 2)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def dead(self, dl: DeadLetter, category: str) -> None:
        dl.category = category
        self.dead_letters.append(dl)
        st = self.stats
        st.dead_lettered += 1
        st.reasons[category] += 1

    def seen(self, *times: int) -> None:
        T = self.T
        for t in times:
            if T < t < INF:
                T = t
        self.T = T

    def truncated(self, t: int) -> None:
        self.stats.truncated_at = t


class QueryRunner:
    """Runs a bound query in process.

    ``process`` / ``process_many`` / ``process_batch`` feed input elements and return the output elements
    they caused (inserts, retractions, CTIs; ids chosen by the engine). ``finish`` ends the input
    (``cti(INF)`` unless one was seen). Refused input goes to ``dead_letters`` and ``stats``.
    """

    def __init__(self, bound: BoundQuery, *, on_violation: str | None = None) -> None:
        self.bound = bound
        policy = on_violation if on_violation is not None else bound.spec.on_violation
        if policy not in ("dead_letter", "adjust", "error"):
            raise ValueError(f"on_violation must be dead_letter, adjust or error, got {policy!r}")
        self.ctx = Context(policy)
        self.steps: list[Step] = []
        for i, bs in enumerate(bound.steps):
            op = bs.step.op
            if op == "filter":
                self.steps.append(FilterStep(i, self.ctx, bs))
            elif op == "map":
                self.steps.append(MapStep(i, self.ctx, bs))
            else:
                self.steps.append(make_window_step(i, self.ctx, bs))
        self.finished = False

    # -- public state ---------------------------------------------------------------------------------
    @property
    def dead_letters(self) -> list[DeadLetter]:
        return self.ctx.dead_letters

    @property
    def stats(self) -> RunStats:
        return self.ctx.stats

    def take_dead_letters(self) -> list[DeadLetter]:
        dl = self.ctx.dead_letters
        self.ctx.dead_letters = []
        return dl

    # -- driving ------------------------------------------------------------------------------------------
    def _run(self, i: int, els: list[Element]) -> list[Element]:
        steps = self.steps
        n = len(steps)
        while i < n and els:
            feed = steps[i].feed
            outs: list[Element] = []
            for el in els:
                r = feed(el)
                if r:
                    outs.extend(r)
            els = outs
            i += 1
        return els

    def _flush(self) -> list[Element]:
        result: list[Element] = []
        steps = self.steps
        for k in range(len(steps)):
            outs = steps[k].flush()
            if outs:
                result.extend(self._run(k + 1, outs))
        return result

    def _count(self, out: list[Element]) -> list[Element]:
        self.ctx.stats.elements_out += len(out)
        return out

    def _one(self, el: Element | BadElement, line: int | None) -> list[Element]:
        ctx = self.ctx
        ctx.line = line
        ctx.stats.elements_in += 1
        if self.finished:
            self._after_finish(el)
            return []
        t = type(el)
        first = self.steps[0]
        if t is Insert:
            out = first.ins(el.id, el.le, el.re, el.payload, el)
        elif t is Retract:
            out = first.ret(el.id, el.le, el.re, el.re_new, el)
        elif t is Cti:
            out = first.cti(el.t)
            if el.t >= INF:
                self.finished = True
        elif isinstance(el, BadElement):
            self._bad(el, line)
            return []
        elif isinstance(el, (Insert, Retract, Cti)):  # subclasses
            out = first.feed(el)
        else:
            self._bad(BadElement(f"not an element: {type(el).__name__}"), line)
            return []
        if out:
            return self._run(1, out)
        return []

    def _bad(self, err: BadElement, line: int | None) -> None:
        ctx = self.ctx
        ln = err.line if err.line is not None else line
        if ctx.on_violation == "error":
            where = f" (line {ln})" if ln is not None else ""
            raise ViolationError(f"invalid element{where}: {err.reason}")
        raw = err.raw if isinstance(err.raw, dict) else ({"raw": err.raw} if err.raw is not None else None)
        ctx.dead(DeadLetter(ln, err.reason, raw), "malformed")

    def _after_finish(self, el: Any) -> None:
        if isinstance(el, Cti):
            return
        from udm.host.temporal.elements import element_to_json

        elj = element_to_json(el) if isinstance(el, (Insert, Retract)) else None
        reason = "CTI violation: input already ended (cti inf)"
        if self.ctx.on_violation == "error":
            raise ViolationError(f"invalid element: {reason}: {elj}")
        self.ctx.dead(DeadLetter(self.ctx.line, reason, elj), "cti_violation")

    def process(self, element: Element, line: int | None = None) -> list[Element]:
        """Feed one element; returns the output it caused (released at once)."""
        out = self._one(element, line)
        out.extend(self._flush())
        return self._count(out)

    def process_many(self, elements: Iterable[Element], lines: Iterable[int] | None = None) -> list[Element]:
        """Feed many elements; output is released every few thousand elements and at the end."""
        out: list[Element] = []
        it_lines = iter(lines) if lines is not None else None
        k = 0
        for el in elements:
            line = next(it_lines, None) if it_lines is not None else None
            r = self._one(el, line)
            if r:
                out.extend(r)
            k += 1
            if k >= FLUSH_EVERY:
                k = 0
                out.extend(self._flush())
        out.extend(self._flush())
        return self._count(out)

    def process_batch(self, batch: ElementBatch) -> list[Element]:
        """Feed a columnar batch (`udm.host.io.batch.ElementBatch`). In-order insert-only stretches take
        the vectorized fast path; anything else falls back to the general path, element by element."""
        from .fastpath import run_batch

        return self._count(run_batch(self, batch))

    def finish(self) -> list[Element]:
        """End of input: ``cti(INF)`` unless one was seen; output is then final. Idempotent."""
        if self.finished:
            return []
        out = self._one(Cti(INF), self.ctx.line)
        self.ctx.stats.elements_in -= 1  # the implicit end is not an input element
        out.extend(self._flush())
        self.finished = True
        return self._count(out)

    # -- checkpoints ----------------------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole engine state (picklable; UDM instances are re-bound on restore)."""
        state = {"v": _SNAPSHOT_VERSION, "ctx": self.ctx, "steps": self.steps, "finished": self.finished}
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, data: bytes, bound: BoundQuery) -> QueryRunner:
        state = pickle.loads(data)
        if not isinstance(state, dict) or state.get("v") != _SNAPSHOT_VERSION:
            raise ValueError("not a udmkit engine snapshot (or from an incompatible version)")
        if len(state["steps"]) != len(bound.steps):
            raise ValueError("snapshot was taken for a query with a different number of steps")
        self = cls.__new__(cls)
        self.bound = bound
        self.ctx = state["ctx"]
        self.steps = state["steps"]
        self.finished = state["finished"]
        for st, bs in zip(self.steps, bound.steps, strict=True):
            st.attach(self.ctx, bs)
        return self

    def state_size(self) -> dict[str, int]:
        """Events, windows and groups held, summed over steps (for tests of bounded state)."""
        tot = {"events": 0, "windows": 0, "groups": 0}
        for st in self.steps:
            sz = st.state_size() if hasattr(st, "state_size") else {"events": len(st.live)}
            for k, v in sz.items():
                tot[k] = tot.get(k, 0) + v
        return tot
