"""The pane store's groups (`grid_store`): a number (*code*) each, and an object only for those that need one.

A group whose events are all in the store needs no `Group` object: its code, its key and its key fields (as
columns, `key_columns.CodeFields`) are all the store writes its windows with, and the step finds it by key as
its code (``WindowIntake.groups`` maps the key to the int). A q5-like step meets a new group every few
events, and two objects per group (the group and its panes) cost more than its events did. A group gets its
object (`GridFamily.group_of`) when something needs one: a retraction, an event spanning panes or a late one
(it then leaves the store), or an output record of a window released before the CTI closed it.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any

import numpy as np

from .key_columns import CodeFields
from .state import Group

__all__ = ["GroupCodes", "numbers"]


def numbers(groups: list[Any]) -> np.ndarray:
    """The store number of each of ``groups`` (an int code, or an object: its ``data.num``, -1 when out of
    the store), with no Python step per code (the objects are few)."""
    nums = np.array(groups, dtype=object)
    obj = ~np.array(list(map(isinstance, groups, repeat(int))), dtype=bool)
    if obj.any():
        nums[obj] = [g.data.num for g in nums[obj].tolist()]
    return nums.astype(np.int64)


class GroupCodes:
    """Codes ``0 .. n-1`` in order of arrival: the key and key fields of each, whether it is in the store
    (``live``, past ``n`` spare room), and the objects of the live ones that have one (``objs``)."""

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.fields = CodeFields()
        self.live = np.zeros(0, dtype=bool)
        self.objs: dict[int, Group] = {}

    @classmethod
    def of(cls, groups: dict[int, Group], n: int) -> GroupCodes:
        """Codes ``0 .. n-1`` of which ``groups`` are live, each with its object (a snapshot from before codes)."""
        gc = cls()
        gc.keys = [groups[c].key if c in groups else None for c in range(n)]
        gc.fields = CodeFields.of(groups, n)
        gc.live = np.zeros(n, dtype=bool)
        gc.live[list(groups)] = True
        gc.objs = dict(groups)
        return gc

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> range:
        """New groups join the store; returns their codes."""
        n = len(self.keys)
        m = n + len(keys)
        self.keys += keys
        self.fields.add(fields)
        if m > len(self.live):  # (grown by doubling: groups made one at a time cost no copy each)
            live = np.zeros(max(m, 2 * len(self.live)), dtype=bool)
            live[:n] = self.live[:n]
            self.live = live
        self.live[n:m] = True
        return range(n, m)

    def add_objects(self, gs: list[Group]) -> range:
        """Groups with their objects join the store; returns their codes."""
        codes = self.add([g.key for g in gs], [g.fields for g in gs])
        self.objs.update(zip(codes, gs, strict=True))
        return codes

    def leave(self, code: int) -> None:
        """Group ``code`` leaves the store (its code is not used again)."""
        self.live[code] = False
        self.objs.pop(code, None)

    def drop_empty(self, held: np.ndarray, groups: dict[Any, Any]) -> list[Group]:
        """The live codes not ``held`` (a mask by code) hold nothing: a group without an object leaves the store
        and the step's ``groups`` at once; one with an object leaves the store if it holds no output record
        and no event, and is returned (the step drops it if idle)."""
        empty = self.live[:len(self.keys)] & ~held
        gone: list[Group] = []
        if self.objs:
            o = np.fromiter(self.objs, dtype=np.int64, count=len(self.objs))
            for c in o[empty[o]].tolist():
                g = self.objs[c]
                if not g.out and not g.events:
                    self.leave(c)
                    g.data.num = -1  # (it holds nothing: the step drops it)
                    gone.append(g)
            empty[o] = False
        idx = np.flatnonzero(empty)
        if len(idx):
            self.live[idx] = False
            # (the keys stay in ``keys`` until `compact`; a C-level loop: a q5-like step drops a group per few
            # events)
            deque(map(groups.__delitem__, map(self.keys.__getitem__, idx.tolist())), maxlen=0)
        return gone

    def compact(self, groups: dict[Any, Any]) -> np.ndarray | None:
        """When most codes are dead, the live ones are numbered again from 0 (in order, so rows sorted by code
        stay sorted), in the step's ``groups`` and the objects too; returns the new code of each old one (-1:
        dead), or None when nothing changed."""
        n = len(self.keys)
        live = np.flatnonzero(self.live[:n])
        if n <= 4096 + 4 * len(live):
            return None
        remap = np.full(n, -1, dtype=np.int64)
        remap[live] = np.arange(len(live), dtype=np.int64)
        keys = self.keys
        self.keys = [keys[c] for c in live.tolist()]
        self.fields.keep(live)
        self.live = np.ones(len(live), dtype=bool)
        objs = self.objs
        self.objs = {}
        for c, m in zip(live.tolist(), range(len(live)), strict=True):
            g = objs.get(c)
            if g is None:
                groups[self.keys[m]] = m
            else:
                g.data.num = m
                self.objs[m] = g
        return remap

