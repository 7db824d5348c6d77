"""What a window family does for `WindowOp`, and the evaluation every family shares.

A family keeps, per group, the structure its windows are defined by (panes, endpoints, buckets, rows, runs)
and knows which windows a change touches. `WindowOp` calls `insert` / `change` per event, `evaluate` per
group at a flush, then `cleanup` and `bound` at a new CTI. `value` turns a window's members (or the sweep's
aggregate of them) into its outputs, the same way for every family.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..rules import INF, final_end
from .emit import New, first_emission
from .state import Ev, Group
from .sweep import make_sweep

__all__ = ["Family", "merged"]

#: `Family.value`'s default: the state is the sweep's
_SWEEP: Any = object()


class Family:
    """Base of the window families (see the module docstring)."""

    #: does the ``time_bound`` output policy give liveliness here (SEMANTICS §7)?
    time_bound_ok = True
    #: can `due` say exactly when a CTI alone changes something (`udm.host.engine.progress`)?
    exact = False
    #: does `bulk_insert` take a batch's inserts at once?
    bulk = False
    #: do members leave a sweep in the order they entered (a merge sweep then uses two stacks)?
    fifo = False
    #: does the step keep every inserted event in ``Group.events`` for this family (False: the family
    #: keeps there the events it holds as objects, and a retraction of another one gets a stand-in)
    tracks_events = True

    def __init__(self, step: Any, spec: Any) -> None:
        self.step = step

    # -- per event -------------------------------------------------------------------------------------
    def new_sweep(self) -> Any:
        """The sweep a new group starts with (None: its windows are valued from their members)."""
        step = self.step
        return make_sweep(step.sweep_kind, step.udm, self.fifo)

    def new_group(self, g: Group) -> None:
        raise NotImplementedError

    def new_groups(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> list[Group] | list[int]:
        """The groups of new ``keys`` (a batch's, at once), with their key ``fields``, as the step keeps them
        by key: a `Group` each (with its sweep, and `new_group`), or, for a family that keeps some groups as
        codes alone, an int code each (`group_of` gives its object when one is needed)."""
        gs = list(map(Group, keys, fields))
        for g in gs:
            g.sweep = self.new_sweep()
            self.new_group(g)
        return gs

    def group_of(self, code: int) -> Group:
        """The object of the group the step keeps as ``code`` (made now, and kept by key from now on)."""
        raise NotImplementedError

    def insert(self, g: Group, ev: Ev) -> None:
        raise NotImplementedError

    def change(self, g: Group, ev: Ev, old: int, new: int) -> None:
        """``ev``'s end moves from ``old`` to ``new`` (``new == ev.le``: it is deleted); the family sets
        ``ev.re``."""
        raise NotImplementedError

    def bulk_insert(self, groups: list[Group], codes: Any, ids: Any, le: Any, re: Any, vals: list[Any],
                    closing: int | None = None) -> None:
        """A batch's inserts at once (row ``j`` in group ``groups[codes[j]]``); only when `bulk`."""
        raise NotImplementedError

    def to_evaluate(self, groups: list[Group]) -> list[Group]:
        """Of the groups a bulk insert changed, those the next flush evaluates one by one (`evaluate`; a family
        valuing some groups' windows together in `after` leaves them out, and says it is `busy`)."""
        return groups

    def bulk_held(self, g: Group) -> int:
        """Events the group holds without an event object (inserted in bulk)."""
        return 0

    def advanced(self, m: int) -> None:
        """The watermark moved to ``m``."""

    def finish_ready(self) -> None:
        """End of input is next."""

    # -- per flush ---------------------------------------------------------------------------------------
    def prepare(self, out: Any, em: Any) -> None:
        """At a flush, before any group's evaluation (the release point is set); a family may add groups to
        the step's ``touched``."""

    def evaluate(self, g: Group, out: Any, em: Any) -> None:
        raise NotImplementedError

    def cleanup(self, c: int) -> Iterable[Group]:
        """Drop what can no longer change at CTI ``c``; returns groups that may now hold nothing."""
        raise NotImplementedError

    def idle(self, g: Group) -> bool:
        """Does ``g`` hold nothing a future element could still need?"""
        return True

    def bound(self, c: int) -> int:
        """Smallest LE any future output change can have, given input CTI ``c`` (SEMANTICS §7)."""
        raise NotImplementedError

    def final_point(self, g: Group, c: int) -> int:
        """Strong consistency (semantics-notes 72): the group's windows ending at or below this are final at
        CTI ``c``, so the CTI releases them. By default every window ending at ``c`` is, unless the UDM sees a
        member end that can still move (`rules.final_end`); a family whose windows also hang on other
        things (an endpoint at ``c``, a block of equal LEs) says so."""
        if not self.step.sees_open_ends:
            return c
        p = c
        for ev in g.events.values():
            e = final_end(c, ev.le, ev.re)
            if e < p:
                p = e
        return p

    def final_state(self) -> None:
        """End of input: drop family-wide state."""

    def windows(self, g: Group) -> int:
        return len(g.out)

    def sizes(self, groups: Iterable[Group]) -> tuple[int, int]:
        """``state_size``'s windows and events over ``groups`` (a family holding some as columns sums those
        at once)."""
        gs = list(groups)
        return (sum(self.windows(g) for g in gs), sum(len(g.events) + self.bulk_held(g) for g in gs))

    def after(self, out: Any, em: Any) -> None:
        """After every group's evaluation at a flush."""

    def closing(self, c: int) -> int | None:
        """For `bulk_insert`: the last window the flush at CTI ``c`` releases and closes (None: no such
        notion)."""
        return None

    def busy(self) -> bool:
        """Windows wait to be evaluated again at the next flush."""
        return False

    def due(self) -> int:
        """For an `exact` family: the earliest CTI at which cleanup (or the frontier) changes state."""
        return INF

    # -- evaluation ------------------------------------------------------------------------------------
    def value(self, g: Group, wle: int, wre: int, members: Iterable[Ev] | None, state: Any = _SWEEP) -> list[New]:
        """The outputs of window ``[wle, wre)``: from a UDM state (``state``, else the sweep's aggregate,
        when ``members`` is None) or from the members (canonical order, SEMANTICS §5)."""
        step = self.step
        wu = step.udm
        if members is None:
            st = g.sweep.state() if state is _SWEEP else state
            if st is None:
                return []
            res = wu.compute_state(st, wle, wre)
        else:
            items = wu.ordered(members, wle, wre)
            if not items:
                return []
            if wu.incremental:
                res = wu.compute_state(wu.add(wu.initial_state(), items, (wle, wre)), wle, wre)
            else:
                res = wu.compute_items(items, wle, wre)
        return wu.outputs(res, wle, wre, g.fields)

    def put(self, g: Group, key: Any, wle: int, wre: int, news: list[New], out: Any, em: Any) -> None:
        """Window ``key``'s outputs become ``news`` (minimal diff against what it emitted)."""
        olds = g.out.get(key)
        if not olds:
            if not news:
                return
            first_emission(self.step, wre)
            em.emit(self.step, g, [], [(key, wle, wre, news)], out)
            return
        em.emit(self.step, g, olds, [(key, wle, wre, news)], out)


def merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted inclusive index ranges ``(lo, hi)`` with the overlapping and adjacent ones merged (the windows a
    family evaluates again; one helper for every family)."""
    if len(ranges) <= 1:
        return ranges
    ranges = sorted(ranges)
    out = [ranges[0]]
    for lo, hi in ranges[1:]:
        plo, phi = out[-1]
        if lo <= phi + 1:
            if hi > phi:
                out[-1] = (plo, hi)
        else:
            out.append((lo, hi))
    return out
