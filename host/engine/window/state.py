"""The state a window operator keeps: windows, groups and the output records it emitted.

Slots are pickled by name (a dict), so a snapshot never restores a value into the wrong field after a
slot is added, removed or reordered; the runner's snapshot format version guards renames.
"""

from __future__ import annotations

from typing import Any

from ..common import Ev, cjson

__all__ = ["Group", "OutputRecord", "Window"]


def _slots_state(obj: Any) -> dict[str, Any]:
    return {s: getattr(obj, s) for s in type(obj).__slots__}


def _restore_slots(obj: Any, state: dict[str, Any]) -> None:
    for k, v in state.items():
        setattr(obj, k, v)


class OutputRecord:
    """One live output event: engine id, lifetime, payload and its canonical JSON (which output diffs compare)."""

    __slots__ = ("_pj", "id", "le", "payload", "re")

    def __init__(self, id: str, le: int, re: int, payload: dict[str, Any], payload_json: str | None) -> None:
        self.id = id
        self.le = le
        self.re = re
        self.payload = payload
        #: the canonical JSON, or None until first asked for (`payload_json`)
        self._pj = payload_json

    @property
    def payload_json(self) -> str:
        """The payload's canonical JSON: made when an output diff first compares it (an output that is
        emitted once and closed never is), unless the step made it already."""
        pj = self._pj
        if pj is None:
            pj = self._pj = cjson(self.payload)
        return pj

    @payload_json.setter
    def payload_json(self, value: str) -> None:  # (snapshots taken before it was lazy)
        self._pj = value

    def __getstate__(self) -> dict[str, Any]:
        return _slots_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_slots(self, state)


class Window:
    """One window of one group: extent, members (or their count and incremental state), what it emitted."""

    __slots__ = ("alive", "count", "dirty", "early", "emitted", "fresh", "group", "key", "le", "members",
                 "outputs", "pending", "re", "rebuild", "state", "waiting")

    def __init__(self, group: Group, key: int, le: int, re: int, members: dict[str, Ev] | None) -> None:
        self.group = group
        #: the window's key in its group (grid: window index; snapshot / count: its first endpoint / value)
        self.key = key
        self.le = le
        self.re = re
        #: member events by id (None when an incremental UDM needs only deltas)
        self.members = members
        #: how many members it has
        self.count = 0
        #: the incremental UDM's state
        self.state: Any = None
        #: member changes not yet applied to ``state``: id -> [old item, new item]
        self.pending: dict[str, list[Any]] | None = None
        #: the output events it has now
        self.outputs: list[OutputRecord] = []
        #: changed since last computed
        self.dirty = False
        #: queued in the operator's list of windows touched since the last flush
        self.fresh = False
        #: queued until the release point passes its end
        self.waiting = False
        self.alive = True
        #: has been output once: later changes are released at once
        self.emitted = False
        #: its incremental state must be rebuilt from the members (its extent changed)
        self.rebuild = False
        #: emitted while still open (progressive output): later changes wait for the next early tick
        self.early = False

    def __getstate__(self) -> dict[str, Any]:
        return _slots_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_slots(self, state)

    def __repr__(self) -> str:  # pragma: no cover
        return f"Window([{self.le}, {self.re}), count={self.count})"


class Group:
    """The windows and events of one group (SEMANTICS §6), with the structures its window family keeps."""

    __slots__ = ("buckets", "endless", "endpoints", "event_count", "fields", "key", "panes", "purged",
                 "retired", "rows", "settled", "spill", "windows")

    def __init__(self, key: Any, fields: dict[str, Any] | None) -> None:
        self.key = key
        #: the group key fields, as output payloads carry them
        self.fields = fields
        #: its windows by key (a dict, or a SortedDict where the family walks them in order)
        self.windows: Any = None
        #: its events in the operator's registry
        self.event_count = 0
        #: outputs of destroyed windows, retracted at the next flush
        self.retired: list[OutputRecord] = []
        #: grid: events reaching past the frontier, by id
        self.spill: Any = None
        #: snapshot: how many events have each finite endpoint
        self.endpoints: Any = None
        #: count windows: events by distinct value (LE or RE), in value order
        self.buckets: Any = None
        #: count_by_end: events with an infinite RE (members of no window)
        self.endless: Any = None
        #: pane evaluation: pane states by pane index
        self.panes: Any = None
        #: rows / session windows: the group's events in the family's order
        self.rows: Any = None
        #: count / rows windows: how many leading distinct values / rows were purged (keeps the numbering)
        self.purged = 0
        #: rows windows: the stamp of its entry in the step's settled heap (None: visited every CTI)
        self.settled: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return _slots_state(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.settled = None  # (a snapshot from before the slot existed)
        _restore_slots(self, state)
