"""What one bucket of a streaming stage (`udm.host.spark.stage_bucket.StageBucket`) emits after its
engine(s) ran: the last stage's output rows, an earlier stage's exchange rows with the routes of its live
inserts, dead letters (a copy of an earlier stage's dropped) and the call's stats row.

Why apart from the bucket: which engine layout produced the elements (one engine, or one per key) does
not change how they go out, and the routes kept for retractions are the wire's concern, not the engine's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from udm.host.engine.common import DeadLetter
from udm.host.spark.convert import compact_json
from udm.host.spark.key_state import graph_payload_key
from udm.host.spark.rows import dead_rows, output_rows
from udm.host.spark.stages import Stage, checked_before
from udm.host.spark.stream_wire import BROADCAST, SINK_STAGE, WireRows, route_of
from udm.host.temporal.elements import Cti, Insert

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.temporal.elements import Element

__all__ = ["NO_T", "Consumer", "Produced", "dead_wire", "exchange_wire", "output_wire", "stats_wire"]

#: ``Produced.reached`` before any T
NO_T = -(2**63)
#: a stage reading the emitting stage's sink: (index, routing, width)
Consumer = tuple[int, Any, int]


@dataclass
class Produced:
    """What the stage's engine(s) produced in one call: ``(id prefix, element)`` in order, CTIs included
    (per key: one CTI, the bucket's, after the elements, when it rose)."""

    out: list[tuple[str, Element]]
    cti: int | None
    reached: int
    dead: list[DeadLetter]
    extra_dead: list[DeadLetter]
    reasons: dict[str, int]
    truncated_at: int | None
    lmerge: dict[str, Any] | None = None
    keys: dict[str, int] | None = None


def output_wire(bucket: int, got: Produced, out: WireRows) -> int:
    """The last stage's output rows (ids prefixed with their engine's, no CTIs); returns the next seq."""
    seq = 0
    for prefix, el in got.out:
        if isinstance(el, Cti):
            continue
        for r in output_rows(0, [el]):
            r["id"] = f"{prefix}.{el.id}"
            out.add(stream="out", udm_src=bucket, udm_seq=seq, **r)
            seq += 1
    return seq


def exchange_wire(bucket: int, got: Produced, sink: str, consumers: list[Consumer], routes: dict[str, Any],
                  out: WireRows) -> int:
    """This stage's output on its way to each stage reading it (`udm.host.spark.stream_stages` module doc);
    returns the next seq. A CTI row carries, as ``le``, T so far (``got.reached``): a later stage holds back
    what lies past its T (semantics-notes 2) and must learn T from its producers. ``routes`` (the bucket's
    ``aux``) remembers where each live insert went and with which key, for its retractions."""
    seq = 0
    reached = got.reached
    for prefix, el in got.out:
        if isinstance(el, Cti):
            for c, _, _ in consumers:
                out.add(stream="el", kind="cti", t=el.t, le=reached if reached > NO_T else None,
                        udm_input=sink, udm_stage=c, udm_route=BROADCAST, udm_src=bucket, udm_seq=seq)
            seq += 1
            continue
        rid = f"{prefix}.{el.id}"
        if isinstance(el, Insert):
            dest = [route_of(r, sink, w, "insert", rid, el.payload) for _, r, w in consumers]
            keys = [graph_payload_key(el.payload, r[sink]) if isinstance(r, dict) and r.get(sink)
                    else None for _, r, _ in consumers]
            routes[rid] = [dest, el.re, keys]
            for (c, _, _), b, k in zip(consumers, dest, keys, strict=True):
                out.add(stream="el", kind="insert", id=rid, le=el.le, re=el.re,
                        payload=compact_json(el.payload), udm_input=sink,
                        udm_stage=c, udm_route=b, udm_src=bucket, udm_seq=seq, udm_key=k)
        else:  # to where its insert went, with its key there (None: no live insert, no key's engine)
            rec = routes.get(rid)
            dest, keys = (rec[0], rec[2]) if rec is not None else ([0] * len(consumers), [None] * len(consumers))
            if rec is not None:
                if el.re_new <= el.le:
                    del routes[rid]
                else:
                    rec[1] = el.re_new
            for (c, _, _), b, k in zip(consumers, dest, keys, strict=True):
                out.add(stream="el", kind="retract", id=rid, le=el.le, re=el.re, re_new=el.re_new,
                        udm_input=sink, udm_stage=c, udm_route=b, udm_src=bucket, udm_seq=seq, udm_key=k)
        seq += 1
    if got.cti is not None:  # no retraction of an element that ended before the CTI can come
        for id in [i for i, rec in routes.items() if rec[1] < got.cti]:
            del routes[id]
    return seq


def dead_wire(bucket: int, got: Produced, stage: Stage, read_before: frozenset[str], multi: bool,
              origins: dict[str, str | None], out: WireRows, seq: int) -> int:
    """Dead letters as wire rows; a copy of one an earlier stage reported is dropped (and uncounted in
    ``got.reasons``). Returns the next seq."""
    dead = got.dead
    if read_before:
        for dl in dead:
            if checked_before(dl, stage, read_before):  # reported by the earlier stage
                got.reasons[dl.category] -= 1
                if not got.reasons[dl.category]:
                    del got.reasons[dl.category]
        dead = [dl for dl in dead if not checked_before(dl, stage, read_before)]
    got.dead = dead
    for dl in dead + got.extra_dead:
        name = dl.input if dl.input is not None else (stage.inputs[0] if len(stage.inputs) == 1 else None)
        for r in dead_rows([dl]):
            out.add(stream="dead", udm_src=bucket, udm_seq=seq, udm_stage=SINK_STAGE,
                    payload=origins.get(name) if multi and name is not None else None,
                    line=r["line"], reason=r["reason"], element=r["element"], kind=r["category"])
            seq += 1
    return seq


def stats_wire(bucket: int, index: int, got: Produced, out: WireRows, seq: int) -> None:
    """The call's stats row (the stage, its dead letters' reasons, T, truncation, lmerge, keys touched)."""
    stats: dict[str, Any] = {"stage": index}
    if got.reasons:
        stats["reasons"] = got.reasons
    if got.truncated_at is not None:
        stats["truncated_at"] = got.truncated_at
    if got.reached > NO_T:
        stats["T"] = got.reached
    if got.lmerge:
        stats["lmerge"] = got.lmerge
    if got.keys is not None:
        stats["keys"] = got.keys
    out.add(stream="stats", payload=json.dumps(stats), udm_src=bucket, udm_seq=seq, udm_stage=SINK_STAGE)
