"""What a window step keeps: its events, its groups, and the output records it emitted.

Slots are pickled by name (a dict), so a snapshot never restores a value into the wrong field after a slot is
added, removed or reordered; the runner's snapshot format version guards renames.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from sortedcontainers import SortedDict

from udm.host.temporal.strict import canonical_json

from ..common import Ev

__all__ = ["NO_OUT", "Ev", "Group", "OutputRecord", "by_identity", "group_key", "group_keys"]

#: a group's ``out`` until it emits (shared, never changed: `Emitter` gives the group its own on the first
#: output; most groups of a session or grid step never keep an output record, and groups come and go)
NO_OUT: SortedDict = SortedDict()


def _slots_state(obj: Any) -> dict[str, Any]:
    return {s: getattr(obj, s) for s in type(obj).__slots__}


def _restore_slots(obj: Any, state: dict[str, Any]) -> None:
    for k, v in state.items():
        setattr(obj, k, v)


def by_identity(saved: Any) -> list[Any]:
    """The values of a dict keyed by ``id(obj)`` as a snapshot keeps it. Ids change across a restore, so such a
    dict travels as a list of its values and is keyed again on load (a stale key would keep a window held, or
    drop another object's entry once a new object gets the old address); an older snapshot's dict gives its
    values."""
    return list(saved.values()) if isinstance(saved, dict) else list(saved)


def group_key(v: Any) -> Any:
    """A group key part: strings as they are; other values tagged by type so that 1, 1.0 and True (equal in
    Python, different in JSON) are different groups; unhashable values by canonical JSON."""
    if type(v) is str:
        return v
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return ("\x00json", canonical_json(v))


def group_keys(values: list[Any]) -> list[Any]:
    """`group_key` of each value: a column's distinct values, made at C speed when they are all of one
    kind whose key `group_key` gives without a look at the value (strings, ints, floats, bools)."""
    kinds = set(map(type, values))
    if len(kinds) == 1:
        kind = next(iter(kinds))
        if kind is str:
            return values
        if kind in (int, float, bool):
            return list(zip(repeat(kind.__name__), values))
    return [group_key(v) for v in values]


class OutputRecord:
    """One live output event: engine id, lifetime, payload and its canonical JSON (which output diffs compare)."""

    __slots__ = ("_pj", "id", "le", "payload", "re")

    def __init__(self, id: int, le: int, re: int, payload: dict[str, Any], payload_json: str | None) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.payload = payload
        #: the canonical JSON, or None until first asked for (`payload_json`)
        self._pj = payload_json

    @property
    def payload_json(self) -> str:
        pj = self._pj
        if pj is None:
            pj = self._pj = canonical_json(self.payload)
        return pj

    def __getstate__(self) -> dict[str, Any]:
        return _slots_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_slots(self, state)

    def __repr__(self) -> str:  # pragma: no cover
        return f"Out(o{self.id}, [{self.le}, {self.re}), {self.payload!r})"


class Group:
    """One group of a window step (SEMANTICS §6): its key fields, its events and what it emitted.

    ``out`` maps a window's key (the family's: a window index, a first endpoint, a yield row) to the outputs
    it emitted; ``data`` is the family's own structure (panes, endpoints, buckets, rows)."""

    __slots__ = ("data", "events", "fields", "key", "out", "sweep", "swept")

    def __init__(self, key: Any, fields: dict[str, Any] | None) -> None:
        self.key = key
        self.fields = fields
        #: live events of the group by engine id
        self.events: dict[int, Ev] = {}
        #: window key -> output records it emitted (`NO_OUT` until the first)
        self.out: SortedDict = NO_OUT
        self.data: Any = None
        #: the sweep carrying the last evaluated window's aggregate (None: members are evaluated directly)
        self.sweep: Any = None
        #: the key of the window the sweep holds (None: the sweep is empty / must be rebuilt)
        self.swept: Any = None

    def __getstate__(self) -> dict[str, Any]:
        st = _slots_state(self)
        if st["out"] is NO_OUT:  # (restored, the shared one would be one object shared by the groups)
            st["out"] = None
        return st

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_slots(self, state)
        if self.out is None:
            self.out = NO_OUT
