"""The kit's reference for retraction-chain repair (semantics-notes 20), written from the note, naively.

After each arriving element: a waiting retraction is released as soon as it applies to the events the
repaired stream has made live so far (recomputed from scratch each time), first-come first; then every
waiting retraction whose sync time is below ``max(latest CTI, watermark - horizon)`` (everything at the
end of the input) is refused. Shares no code with the engine's `udm.host.engine.repair`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from udm.host.temporal.elements import Cti, Insert, Retract, sync_time
from udm.sdk import INF

from .cht import Rejected

__all__ = ["repair_stream"]


def _live(stream: Sequence[Any]) -> dict[str, tuple[int, int]]:
    """Lifetimes of the events a stream leaves live, by id (validity left to the CHT construction)."""
    live: dict[str, tuple[int, int]] = {}
    for el in stream:
        if isinstance(el, Insert):
            if el.id not in live and el.re > el.le:
                live[el.id] = (el.le, el.re)
        elif isinstance(el, Retract) and live.get(el.id) == (el.le, el.re):
            if el.re_new <= el.le:
                del live[el.id]
            else:
                live[el.id] = (el.le, el.re_new)
    return live


def repair_stream(elements: Sequence[Any], horizon: int) -> tuple[list[Any], list[Rejected]]:
    """The stream as repair hands it on, and the retractions it refuses (index = arrival position)."""
    out: list[Any] = []
    waiting: list[tuple[int, Retract]] = []
    refused: list[Rejected] = []
    cti: int | None = None
    mark: int | None = None
    for i, el in enumerate(elements):
        if isinstance(el, Retract):
            sync = sync_time(el)
            now = _live(out).get(el.id) == (el.le, el.re)
            beyond = (cti is not None and sync < cti) or el.re_new < el.le or el.re <= el.le
            if now or beyond:
                out.append(el)
            else:
                waiting.append((i, el))
            mark = sync if mark is None else max(mark, sync)
        else:
            out.append(el)
            if isinstance(el, Insert):
                mark = el.le if mark is None else max(mark, el.le)
            elif isinstance(el, Cti):
                cti = el.t if cti is None else max(cti, el.t)
                mark = el.t if mark is None else max(mark, el.t)
        released = True
        while released:  # release until nothing more applies
            released = False
            live = _live(out)
            for k, (_, r) in enumerate(waiting):
                if live.get(r.id) == (r.le, r.re):
                    out.append(waiting.pop(k)[1])
                    released = True
                    break
        ended = isinstance(el, Cti) and el.t >= INF
        limits = [x for x in (cti, None if mark is None or horizon >= INF else mark - horizon) if x is not None]
        limit = max(limits) if limits else None
        keep = []
        for j, r in waiting:
            if ended or (limit is not None and sync_time(r) < limit):
                refused.append(Rejected(j, r, "retraction unmatched by repair"))
            else:
                keep.append((j, r))
        waiting = keep
    refused.extend(Rejected(j, r, "retraction unmatched by repair (end of input)") for j, r in waiting)
    return out, refused
