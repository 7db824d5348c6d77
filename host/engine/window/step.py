"""The window operator of seeds/000 §V (SEMANTICS §3–7): group & apply a UDA/UDO over windows.

`WindowOp` is family-independent: it takes a batch (`intake.WindowIntake`, its input half: checking the
payload fields it reads, refusing late elements under ``max_memory_time``), finds each event's group and the
value its UDM receives, and hands the event to its family (`family.Family`: tumbling/hopping/cumulate,
snapshot, count, rows, session), which keeps the group's structure and knows which windows a change touches.
Nothing is computed then: at a flush the family evaluates, group by group and in window order, the windows
that are *released* (``W.RE`` at or below the release point, ``W.LE`` below the CTI under ``time_bound``, open
windows on a progressive-output tick) and new or changed, carrying one window's aggregate to the next
(`sweep`), and the `Emitter` writes the minimal diff against what each window emitted. Then the output CTI
(the family's liveliness bound, SEMANTICS §7) and cleanup: windows that can no longer change are dropped with
the events only they held.

Strong consistency (``max_delay`` INF, semantics-notes 72): the CTI releases a window only once it is final,
which the family says per group (`Family.final_point`: a member end at or after the CTI can still move, an
endpoint at the CTI can still go away, a block of equal LEs can still reorder); a group whose due window
waits is visited again when the CTI moves or an element touches it, and ``time_bound`` gives no early output.
"""

from __future__ import annotations

import heapq
from typing import Any

from udm.host.input_types import step_checks
from udm.host.model.plan import BoundStep

from ..aggregates import MultiMapper, window_udm
from ..batch import Batch, RowsOut
from ..context import Context
from ..invoke import Mapper
from ..rules import INF, NEG, FieldCheck, release_point, strong
from .emit import Emitter
from .intake import WindowIntake
from .state import Group, by_identity
from .sweep import sweep_kind

__all__ = ["WindowOp"]


class WindowOp(WindowIntake):
    """Family-independent part of the window operator (see the module docstring)."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep, family_cls: Any) -> None:
        super().__init__(name, ctx)
        step = bs.step
        self.group_by: tuple[str, ...] = tuple(step.group_by)
        self.max_delay: int = step.max_delay
        self.max_memory_time: int = step.max_memory_time
        #: progressive output (None: off): emit open windows holding the watermark, every ``early`` ticks
        self.early: int | None = step.early
        self.early_next = NEG
        self.max_le = NEG
        self.watermark = NEG
        self.input_cti = NEG
        self.effective_cti = NEG
        self.cleaned = NEG
        self.groups: dict[Any, Group | int] = {}
        #: groups changed since the last flush (by id)
        self.touched: dict[int, Group] = {}
        #: (W.RE of a group's first pending window, seq, group), and by W.LE under time_bound
        self.release_heap: list[tuple[int, int, Group]] = []
        self.release_le: list[tuple[int, int, Group]] = []
        self.seq = 0
        #: strong consistency: groups whose window due by the CTI waits to be final (by key), and the CTI
        #: they were last judged at
        self.waiting: dict[Any, Group] = {}
        self.waited_at = NEG
        #: engine ids of inserts refused here under ``max_memory_time``, with their ends: their
        #: retractions name an unknown id (semantics-notes 8)
        self.refused: dict[int, int] = {}
        self.emitter = Emitter()
        #: the release point, the time_bound limit and the progressive-output tick of the current flush
        self.rp = NEG
        self.tb = NEG
        self.tick = False
        self.attach(ctx, bs)
        self.check = FieldCheck(tuple(dict.fromkeys(self.group_by + self.mapper.fields)), step_checks(bs),
                                      bs.label)
        self.family = family_cls(self, bs.step.window)
        if not self.family.time_bound_ok:
            self.time_bound = False

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "udm", "mapper")

    def __getstate__(self) -> dict[str, Any]:
        d = super().__getstate__()
        d["touched"] = list(self.touched.values())  # keyed by id(group), which a restore changes
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        d["touched"] = {id(g): g for g in by_identity(d.get("touched", ()))}
        self.__dict__.update(d)

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        assert bs is not None
        self.udm = window_udm(bs)
        self.mapper = (MultiMapper([p.step.input for p in bs.parts]) if bs.parts
                       else Mapper(bs.step.input, bs.entry.manifest.properties.value_blind))
        udm = self.udm
        self.time_sensitive = udm.time_sensitive
        self.incremental = udm.incremental
        #: time-sensitive without right clipping: a member's open end matters to the UDM
        self.sees_open_ends = udm.time_sensitive and not udm.clip_right
        #: strong consistency (``max_delay`` INF): the CTI releases final windows only
        self.strong = strong(bs.step.max_delay)
        self.policy_time_bound = udm.policy == "time_bound"
        #: ``time_bound`` liveliness (SEMANTICS §7): windows starting before the CTI come out, the output CTI
        #: is the input's; not where the family cannot give it, nor under strong consistency (semantics-notes
        #: 72: an output that comes out before it is final may have to be retracted)
        self.time_bound = self.policy_time_bound and not self.strong
        fam = self.__dict__.get("family")
        if fam is not None and not fam.time_bound_ok:
            self.time_bound = False
        #: does a member end that can still move hold the output CTI back (`Family.bound`)? Not under the
        #: ``time_bound`` promise, which covers end changes, unless windows wait for them (strong)
        self.ends_hold_cti = self.sees_open_ends and not (self.policy_time_bound and not self.strong)
        self.__dict__.setdefault("waiting", {})  # (a snapshot taken before strong consistency existed)
        self.__dict__.setdefault("waited_at", NEG)
        self.sweep_kind = sweep_kind(udm)
        for g in self.__dict__.get("groups", {}).values():
            if type(g) is not int and g.sweep is not None:  # (a group kept as a code has none)
                g.sweep.attach(udm)

    def pending(self, g: Group, re: int, le: int) -> None:
        """Group ``g``'s first window still to release ends at ``re`` and starts at ``le``."""
        if self.strong and re <= self.effective_cti < INF:  # due, but not final yet: judged again at a new CTI
            self.waiting[g.key] = g
            return
        self.seq += 1
        if re < INF:
            heapq.heappush(self.release_heap, (re, self.seq, g))
        if self.time_bound and le < INF:
            heapq.heappush(self.release_le, (le, self.seq, g))

    # -- release ------------------------------------------------------------------------------------------
    def release_point(self) -> int:
        return release_point(self.effective_cti, self.watermark, self.max_delay)

    def releasable(self, wle: int, wre: int, emitted: bool) -> bool:
        """Is window ``[wle, wre)`` output now (``emitted``: it has output already)?"""
        if wre <= self.rp or wle < self.tb:
            return True
        early = self.early
        if emitted:  # an emitted window's changes go out at once, except an open one under a rate limit
            return early is None or early == 0 or self.tick
        return early is not None and self.tick and wle <= self.watermark

    def flush(self) -> Batch | None:
        out = RowsOut()
        self.rp = self.release_point()
        self.tb = self.effective_cti if self.time_bound else NEG
        early = self.early
        self.tick = early is not None and self.watermark >= self.early_next
        self.family.prepare(out, self.emitter)
        visit = self.touched
        self.touched = {}
        rp = self.rp
        due = self.release_heap
        while due and due[0][0] <= rp:
            g = heapq.heappop(due)[2]
            visit[id(g)] = g
        if self.time_bound:
            dl = self.release_le
            tb = self.tb
            while dl and dl[0][0] < tb:
                g = heapq.heappop(dl)[2]
                visit[id(g)] = g
        if self.tick or rp >= INF:  # (at the end of input every window is released; a group kept as a code
            for x in self.groups.values():  # is the family's to value: `Family.new_groups`)
                if isinstance(x, Group):
                    visit[id(x)] = x
        if self.tick:
            self.early_next = self.watermark + early if early else self.watermark
        groups = self.groups
        fam = self.family
        em = self.emitter
        judge = self.strong and rp < INF
        if judge and self.effective_cti > self.waited_at:  # the CTI moved: waiting windows may be final now
            self.waited_at = self.effective_cti
            for g in self.waiting.values():
                visit[id(g)] = g
            self.waiting = {}
        for g in visit.values():
            if groups.get(g.key) is g:
                if judge:  # (the CTI releases this group's windows up to its own final point)
                    self.rp = fam.final_point(g, rp)
                fam.evaluate(g, out, em)
        self.rp = rp
        fam.after(out, em)
        c = self.effective_cti
        held = em.out_cti < c and bool(visit)  # data may end a window that held the output CTI back
        if c > self.cleaned:
            held = True
            self.cleaned = c
            if self.refused:
                self.refused = {e: r for e, r in self.refused.items() if r >= c}
            gone = fam.cleanup(c)
            if c >= INF:  # end of input: everything is final
                self.groups = {}
                self.release_heap = []
                self.release_le = []
                self.touched = {}
                self.waiting = {}
                fam.final_state()
            else:
                for g in gone:
                    if self.groups.get(g.key) is g and not g.events and not g.out and fam.idle(g):
                        del self.groups[g.key]
        if held:
            t = c if c >= INF or self.time_bound else min(c, fam.bound(c))
            if t > em.out_cti:
                em.out_cti = t
                out.cti(t)
        return out.batch()

    # -- progress (`udm.host.engine.progress`) ---------------------------------------------------------------
    def exact(self) -> bool:
        """Tumbling/hopping windows released at their end and nothing else: `due` is exact."""
        return (self.family.exact and self.early is None and not self.time_bound
                and self.max_memory_time >= INF and not self.sees_open_ends)

    def busy(self) -> bool:
        """Work is queued for the next flush."""
        return bool(self.touched) or self.family.busy()

    def due(self, c: int) -> int:
        """The earliest input CTI after ``c`` at which this step emits or changes state by a CTI alone."""
        holds = bool(self.groups)
        if not self.exact() or self.busy():
            return c + 1 if holds else INF
        best = self.release_heap[0][0] if self.release_heap else INF
        return min(best, self.family.due())

    def out_bound(self, c: int) -> int:
        """The output CTI after input CTI ``c`` (SEMANTICS §7 liveliness), state unchanged."""
        return c if c >= INF or self.time_bound else min(c, self.family.bound(c))

    def state_size(self) -> dict[str, int]:
        nwin, events = self.family.sizes(self.groups.values())
        return {"events": events, "groups": len(self.groups), "windows": nwin}
