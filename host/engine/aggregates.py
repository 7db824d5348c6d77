"""Several UDAs over one window membership (SEMANTICS §9 ``aggregates``): one output per window.

`MultiUDM` stands where a window step's `WindowUDM` stands, so every window family (and its membership,
release, diff and cleanup code) serves ``aggregates`` unchanged. A member's value is the list of what
each UDA receives (its own input mapping, `MultiMapper`); a member item is ``(LE, RE, values)`` with the
lifetime clipped as the step says. Each UDA is handed its own component, in its own canonical order
(semantics-notes 5: clipped ``(LE, RE)``, ties by the canonical JSON of *its* value), as ``Event``s when it
is time-sensitive. The state of the step is the tuple of the UDAs' states; the output payload holds
every alias once, next to the group keys.
"""

from __future__ import annotations

from typing import Any

from udm.host.model.plan import BoundStep
from udm.host.temporal.strict import canonical_json
from udm.sdk import Event

from .common import Ev
from .invoke import Mapper, WindowUDM, contract

__all__ = ["MultiMapper", "MultiUDM", "mergeable", "window_udm"]


class MultiMapper(Mapper):
    """The list of every UDA's input value (semantics-notes 4 per UDA); ``fields`` are all it reads."""

    __slots__ = ("parts",)

    def __init__(self, specs: list[str | dict[str, str] | None]) -> None:
        super().__init__(None)
        self.parts = [Mapper(s) for s in specs]
        self.kind = 3
        self.fields = tuple(dict.fromkeys(f for m in self.parts for f in m.fields))

    def __call__(self, payload: dict[str, Any]) -> Any:
        return [m(payload) for m in self.parts]


def _order(items: list[Any], i: int) -> list[tuple[int, int, list[Any]]]:
    """Items in the canonical order of UDA ``i``: (LE, RE), ties by its own value's canonical JSON. A
    bare value list (pane evaluation hands time-insensitive UDAs values, not lifetimes) sorts by value."""
    its = [it if type(it) is tuple else (0, 0, it) for it in items]
    return sorted(its, key=lambda it: (it[0], it[1], canonical_json(it[2][i])))


class MultiUDM:
    """The UDAs of one window step, behind `WindowUDM`'s interface."""

    def __init__(self, bs: BoundStep) -> None:
        step = bs.step
        self.parts = [WindowUDM(p) for p in bs.parts]
        self.label = bs.label
        self.is_uda = True
        self.time_sensitive = any(p.time_sensitive for p in self.parts)
        self.incremental = all(p.incremental for p in self.parts)
        self.algebraic = all(p.algebraic for p in self.parts)
        self.invertible = all(p.invertible for p in self.parts)
        self.clip = step.clip
        self.policy = "window"  # a UDA's output lifetime is its window
        self.aliases = [p.alias for p in self.parts]
        self.alias = self.aliases[0]
        self.clip_left = self.clip in ("left", "full")
        self.clip_right = self.clip in ("right", "full")
        self.add_array = None

    def _call(self, fn: Any, args: tuple, window: tuple[int, int] | None, what: str) -> Any:
        """Call UDM code with `WindowUDM`'s contract-violation wrapping (named by this step's label)."""
        return WindowUDM._call(self, fn, args, window, what)  # type: ignore[arg-type]

    # -- member items -------------------------------------------------------------------------
    def item(self, ev: Ev, le: int, re: int, wle: int, wre: int) -> Any:
        if self.clip_left and le < wle:
            le = wle
        if self.clip_right and re > wre:
            re = wre
        return (le, re, ev.val)

    def ordered(self, members: Any, wle: int, wre: int) -> list[Any]:
        items = [self.item(e, e.le, e.re, wle, wre) for e in members]
        items.sort(key=lambda it: (it[0], it[1], canonical_json(it[2])))
        return items

    def _feed(self, i: int, items: list[tuple[int, int, list[Any]]]) -> list[Any]:
        """What UDA ``i`` receives of ``items``."""
        if self.parts[i].time_sensitive:
            return [Event(le, re, v[i]) for le, re, v in items]
        return [v[i] for _, _, v in items]

    # -- state ----------------------------------------------------------------------------------
    def initial_state(self) -> Any:
        return tuple(p.initial_state() for p in self.parts)

    def add(self, state: Any, items: list[Any], window: tuple[int, int]) -> Any:
        return tuple(p.add(s, self._feed(i, _order(items, i)), window)
                     for i, (p, s) in enumerate(zip(self.parts, state, strict=True)))

    def add_values(self, state: Any, items: list[Any], window: tuple[int, int] | None) -> Any:
        """`WindowUDM.add_values` of each UDA, on its own values."""
        return tuple(p.add_values(s, self._feed(i, _order(items, i)), window)
                     for i, (p, s) in enumerate(zip(self.parts, state, strict=True)))

    def remove(self, state: Any, items: list[Any], window: tuple[int, int]) -> Any:
        return tuple(p.remove(s, self._feed(i, _order(items, i)), window)
                     for i, (p, s) in enumerate(zip(self.parts, state, strict=True)))

    def merge(self, a: Any, b: Any) -> Any:
        return tuple(p.merge(x, y) for p, x, y in zip(self.parts, a, b, strict=True))

    def compute_state(self, state: Any, wle: int, wre: int) -> Any:
        return [p.compute_state(s, wle, wre) for p, s in zip(self.parts, state, strict=True)]

    def compute_items(self, items: list[Any], wle: int, wre: int) -> Any:
        out = []
        for i, p in enumerate(self.parts):
            feed = self._feed(i, _order(items, i))
            if p.incremental:  # a non-incremental run of an incremental UDA: one add of every member
                win = (wle, wre)
                out.append(p.compute_state(p.add(p.initial_state(), feed, win), wle, wre))
            else:
                out.append(p.compute_items(feed, wle, wre))
        return out

    # -- outputs -------------------------------------------------------------------------------
    def outputs(self, result: Any, wle: int, wre: int, gfields: dict[str, Any] | None) -> list[tuple]:
        """One output event holding every alias (SEMANTICS §9), each value checked as its UDA's."""
        payload: dict[str, Any] = dict(gfields) if gfields else {}
        for p, value in zip(self.parts, result, strict=True):
            payload[p.alias] = p.outputs(value, wle, wre, None)[0][2][p.alias]
        try:
            pj = canonical_json(payload)
        except (TypeError, ValueError) as exc:
            raise contract(self.label, (wle, wre), f"output is not JSON-serializable ({exc})", payload) from None
        return [(wle, wre, payload, pj)]


def mergeable(bs: BoundStep) -> bool:
    """Does every UDA of the step (its one UDM, or each of ``aggregates``) allow pane evaluation: a
    time-insensitive incremental UDA that declares ``algebraic`` and has ``merge`` (SEMANTICS §9)?"""
    for p in bs.parts or (bs,):
        if p.entry is None:
            return False
        man = p.entry.manifest
        props = man.properties
        if (man.kind != "uda" or props.time_sensitive or not props.incremental or not props.algebraic
                or not hasattr(p.udm, "merge")):
            return False
    return True


def window_udm(bs: BoundStep) -> WindowUDM | MultiUDM:
    """The UDM side of a window step: its one UDA/UDO, or its ``aggregates``."""
    return MultiUDM(bs) if bs.parts else WindowUDM(bs)
