"""The join's per-key index (`ops.join._Key`): an arriving event looks only at the other side's events that
can overlap it, not at the key's whole history (left_anti without CTIs was quadratic: every event scanned
every earlier one with the same key). Checked against the plain definition of overlap, and counted as events
looked at, never time."""

from __future__ import annotations

import random

from udm.host.engine.ops.join import _JoinEvent, _Side
from udm.sdk import INF


class _Seen(_JoinEvent):
    """A join event that counts how often its end is read (each read is one event looked at)."""

    __slots__ = ("_re",)
    reads = 0

    @property  # type: ignore[override]
    def re(self) -> int:
        _Seen.reads += 1
        return self._re

    @re.setter
    def re(self, v: int) -> None:
        self._re = v


def _overlap(ev: _JoinEvent, le: int, re: int) -> bool:
    return ev.le < re and ev._re > le  # type: ignore[attr-defined]


def test_a_long_history_of_point_events_is_not_scanned() -> None:
    side = _Side()
    for i in range(5000):
        side.add(_Seen(i, i, i + 1, {}, ("k",)))
    _Seen.reads = 0
    got = [ev.id for ev in side.overlapping(("k",), 4990, 4991)]
    assert got == [4990]
    assert _Seen.reads <= 5, _Seen.reads


def test_overlap_agrees_with_the_definition_with_long_endless_and_moved_events() -> None:
    rng = random.Random(7)
    side = _Side()
    evs: list[_Seen] = []
    for i in range(400):
        le = rng.randint(0, 300)
        re = INF if rng.random() < 0.1 else le + rng.choice([1, 1, 2, 5, 40])
        ev = _Seen(i, le, re, {}, ("k",) if rng.random() < 0.8 else ("j",))
        side.add(ev)
        evs.append(ev)
        if rng.random() < 0.2:  # an end moves (an extension, a cut, or an endless event that now ends)
            mv = rng.choice(evs)
            if mv.id in side.live:
                old = mv._re
                new = mv.le + rng.randint(1, 60)
                if new != old:
                    mv.re = new
                    side.moved_end(mv, old)
        if rng.random() < 0.1:
            gone = rng.choice(evs)
            if gone.id in side.live:
                side.remove(gone)
        if i % 10 == 0:  # (while a key's events are few, a plain list; past 32, a sorted container)
            _check(side, rng, 5)
    _check(side, rng, 300)


def _check(side: _Side, rng: random.Random, times: int) -> None:
    for _ in range(times):
        le = rng.randint(-10, 320)
        re = INF if rng.random() < 0.1 else le + rng.randint(1, 50)
        for key in (("k",), ("j",)):
            got = sorted(ev.id for ev in side.overlapping(key, le, re))
            want = sorted(ev.id for ev in side.live.values() if ev.key == key and _overlap(ev, le, re))
            assert got == want, (key, le, re)
