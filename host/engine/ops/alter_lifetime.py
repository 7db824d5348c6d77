"""``alter_lifetime`` (SEMANTICS §10; CEDR's AlterLifetime, seeds/003 §4): each event's lifetime becomes
``[f(LE), f(LE) + duration)``.

``f`` is monotone, so the image of a CTI is a CTI: after ``cti(c)`` no later input can make an output with
sync time below ``f(c)``. A retraction changes the image only when the duration is kept (the image end moves
with the input's end) or when it deletes the event (the image is deleted too).
"""

from __future__ import annotations

from typing import Any

from udm.host.query.plan import BoundStep
from udm.host.query.spec import Const, Shift, Snap
from udm.host.temporal.elements import Cti, Element, Insert, Retract

from ..common import INF
from ..context import Context
from ..operator import Operator

__all__ = ["AlterLifetimeStep"]


class _Image:
    """A live input event (its LE as accepted, its current RE) and its output image (id, LE, RE)."""

    __slots__ = ("le", "out_id", "out_le", "out_re", "re")

    def __init__(self, le: int, re: int, out_id: str, out_le: int, out_re: int) -> None:
        self.le = le
        self.re = re
        self.out_id = out_id
        self.out_le = out_le
        self.out_re = out_re

    def __getstate__(self) -> tuple[int, int, str, int, int]:
        return (self.le, self.re, self.out_id, self.out_le, self.out_re)

    def __setstate__(self, s: tuple[int, int, str, int, int]) -> None:
        self.le, self.re, self.out_id, self.out_le, self.out_re = s


class AlterLifetimeStep(Operator):
    def __init__(self, name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> None:
        super().__init__(name, ctx, reads_input)
        step = bs.step
        self.shift = step.le.shift if isinstance(step.le, Shift) else 0
        self.snap_size = step.le.snap.size if isinstance(step.le, Snap) else 0
        self.snap_offset = step.le.snap.offset if isinstance(step.le, Snap) else 0
        #: "keep", "inf", or the constant duration
        self.duration: str | int = step.duration.const if isinstance(step.duration, Const) else step.duration
        self.next_id = 0

    def start(self, t: int) -> int:
        """``f``: the new LE of an event starting at ``t`` (and the image of a CTI at ``t``)."""
        if t >= INF:
            return INF
        if self.snap_size:
            return t - (t - self.snap_offset) % self.snap_size
        return t + self.shift

    def end(self, le: int, re: int, new_le: int) -> int:
        if self.duration == "inf" or (re >= INF and self.duration == "keep"):
            return INF
        if self.duration == "keep":
            return new_le + (re - le)
        return new_le + int(self.duration)

    def register(self, id: str, le: int, re: int, out_id: str, out_le: int, out_re: int) -> None:
        """Record a valid insert and its image as live (what `ins` does): for the columnar span path
        (`udm.host.engine.span_columnar`), which computes the output itself."""
        self.live[id] = _Image(le, re, out_id, out_le, out_re)
        self.note_re(re, id)

    def feed(self, el: Element) -> list[Element]:
        if isinstance(el, Insert):
            return self.ins(el.id, el.le, el.re, el.payload, el) or []
        if isinstance(el, Retract):
            return self.ret(el.id, el.le, el.re, el.re_new, el) or []
        return self.cti(el.t)

    def ins(self, id: str, le: int, re: int, payload: Any, el: Insert | None = None) -> list[Element] | None:
        el = el if el is not None else Insert(id, le, re, payload)
        adjusted = self.check_insert(el)
        if adjusted is None:
            return None
        if self.reads_input:
            self.ctx.seen(adjusted, re)
        self.next_id += 1
        out_le = self.start(adjusted)
        image = _Image(adjusted, re, f"o{self.next_id}", out_le, self.end(adjusted, re, out_le))
        self.live[id] = image
        self.note_re(re, id)
        return [Insert(image.out_id, image.out_le, image.out_re, payload)]

    def ret(self, id: str, le: int, re: int, rn: int, el: Retract | None = None) -> list[Element] | None:
        el = el if el is not None else Retract(id, le, re, rn)
        image = self.check_retract(el)
        if image is None:
            return None
        if self.reads_input:
            self.ctx.seen(re, rn)
        if rn == re:
            return None
        if rn <= image.le:
            del self.live[id]
            if self.adjusted:
                self.adjusted.pop(id, None)
            return [Retract(image.out_id, image.out_le, image.out_re, image.out_le)]
        image.re = rn
        self.note_re(rn, id)
        new_end = self.end(image.le, rn, image.out_le)
        if new_end == image.out_re:
            return None
        old_end, image.out_re = image.out_re, new_end
        return [Retract(image.out_id, image.out_le, old_end, new_end)]

    def cti(self, t: int) -> list[Element]:
        if not self.pass_cti(t):
            return []
        return [Cti(self.start(t))]
