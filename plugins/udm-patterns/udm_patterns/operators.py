"""Operators (UDOs): a time-insensitive top-k and two time-sensitive ones."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from itertools import groupby
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from udm.sdk import UDO, Event, TimeSensitiveUDO, WindowDescriptor, time_json, udm

__all__ = ["Follows", "Members", "TopK"]


def _as_dict(payload: Any) -> dict[str, Any]:
    """Operators work on payload objects; a scalar input (``"input": "field"``) becomes ``{"value": x}``."""
    return dict(payload) if isinstance(payload, Mapping) else {"value": payload}


def _canonical(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


class TopKParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: int = Field(3, ge=1, description="how many payloads to keep")
    by: str = Field("value", description="numeric payload field to rank by (largest first)")


@udm(name="topk", version="1.0.0", input_type="payload", output_type="payload")
class TopK(UDO):
    """The k payloads with the largest ``by`` field, each with its ``rank`` (1..k).

    Ties are broken by the canonical payload text, ascending, so the result is deterministic.
    """

    Params = TopKParams

    def compute(self, payloads: Sequence[Any]) -> list[dict[str, Any]]:
        by = self.params.by
        rows = [_as_dict(p) for p in payloads]
        for r in rows:
            v = r.get(by)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"topk ranks by {by!r}, which must be a number; got {v!r} in {r}")
        rows.sort(key=lambda r: (-r[by], _canonical(r)))
        return [{**r, "rank": i} for i, r in enumerate(rows[: self.params.k], start=1)]


@udm(name="members", version="1.0.0", input_type="event", output_type="event")
class Members(TimeSensitiveUDO):
    """One output per member: its clipped ``le``, ``re`` and payload fields, lifetime as clipped.

    A debugging tool: it shows exactly what a UDM sees under a given window and clipping policy.
    """

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> Iterator[Event]:
        for e in events:
            # a payload time is JSON-encoded like an element time: an endless member's re is "inf"
            yield Event(e.le, e.re, {"le": e.le, "re": time_json(e.re), **_as_dict(e.payload)})


class FollowsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str = Field("type", description="payload field holding the event type")
    a: Any = Field("A", description="value of `field` for the first event")
    b: Any = Field("B", description="value of `field` for the following event")


@udm(name="follows", version="1.0.0", time_bound=True, input_type="event", output_type="event")
class Follows(TimeSensitiveUDO):
    """Pattern "A followed by B".

    For each member ``y`` with ``y[field] == b`` and ``y.LE >= W.LE`` that has a member ``x`` with
    ``x[field] == a`` and ``x.LE < y.LE``: one output with lifetime ``[y.LE, min(y.RE, W.RE))`` and
    ``y``'s payload plus ``a_le``, the largest such ``x.LE``. Outputs start at their ``y``, never before
    the element that caused them, hence time-bound.
    """

    Params = FollowsParams

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> Iterator[tuple[int, int, dict]]:
        f, a, b = self.params.field, self.params.a, self.params.b
        best_a: int | None = None
        for le, group in groupby(sorted(events, key=lambda e: e.le), key=lambda e: e.le):
            same_le = list(group)
            if best_a is not None and le >= window.le:
                for y in same_le:
                    if _as_dict(y.payload).get(f) == b:
                        yield y.le, min(y.re, window.re), {**_as_dict(y.payload), "a_le": best_a}
            if any(_as_dict(x.payload).get(f) == a for x in same_le):
                best_a = le
