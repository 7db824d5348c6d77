"""``join`` (SEMANTICS §10): the temporal equijoin of two inputs, ``inner`` or ``left_anti``.

CEDR's symmetric hash join (seeds/003 §4.2–4.3) in batch form: each side keeps its live events as columns
(`join_store.SideStore`), keyed by an integer code per join key (`join_keys.KeyCodes`: numbers by value,
``1 == 1.0``, never ``true == 1``). A batch of one input is taken whole: its inserts' keys become a code
column, they are appended to their side, and the other side's events of the same code that overlap them in
time are found in one sorted search; for *inner*, every such pair (``where`` filters pairs) is one output in a
single column block, lifetime ``[max LE, min RE)``, payload ``{**right', **left'}`` (prefixed field names).
The other side cannot change during a batch of one input, and a CTI among its rows only drops events that no
later row can meet, so every insert of a batch is matched at once, before its retractions and CTIs are taken
in their order; the outputs come out before those CTIs, never after one they could violate.

Each pair's output is kept (per event id, its partners' records), so a retraction on either side moves or
deletes exactly the pair outputs whose lifetime changed, and an extension adds the pairs it creates (minimal
diffs). *Left anti* is `join_anti.LeftAnti`.

State is bounded under advancing CTIs on both inputs: an event is dropped once it is final (``RE <`` its own
side's CTI) and no future event of the other side can overlap it (``RE <=`` the other side's CTI); neither
the pairs it formed nor the coverage it gave can change after that (a later change of the other event has
sync time ``>=`` that CTI, beyond this event's end). Both sides drop such events by CTI as arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udm.host.errors import ContractViolation
from udm.host.model.plan import BoundStep

from ..batch import CTI, INSERT, Batch, RowsOut
from ..context import Context
from ..invoke import contract
from ..operator import Operator
from ..payload import Payload
from ..rules import INF, MISSING_FIELD
from .join_anti import LeftAnti
from .join_keys import KeyCodes
from .join_store import SideStore
from .ports import PortClock

__all__ = ["JoinOp"]

LEFT, RIGHT = 0, 1
_I64 = np.int64


class JoinOp(LeftAnti, Operator):
    ports = 2

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        step = bs.step
        self.anti = step.type == "left_anti"
        #: the join fields of the left and of the right input
        self.key_fields = (tuple(a for a, _ in step.on), tuple(b for _, b in step.on))
        self.prefixes = (step.left_prefix, step.right_prefix)
        self.where_args: dict[str, str] = dict(step.where.args) if step.where is not None else {}
        self.sources = tuple(step.sources)
        self.clock = PortClock(2)
        self.keys = KeyCodes()
        self.sides = (SideStore(), SideStore())
        #: inner: per side, event id -> {partner id: its pair output ``[out_id, le, re, payload]``}
        self.pairs: tuple[dict[int, dict[int, list[Any]]], dict[int, dict[int, list[Any]]]] = ({}, {})
        self.parts = {}
        self.next_id = 0
        self.attach(ctx, bs)

    def _transient(self) -> tuple[str, ...]:
        return ("ctx", "bs", "where")

    def attach(self, ctx: Context, bs: BoundStep | None) -> None:
        self.ctx = ctx
        self.bs = bs
        self.where = bs.udm if bs is not None else None

    # -- payloads ---------------------------------------------------------------------------------
    def joined(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        lp, rp = self.prefixes
        out = {rp + k: v for k, v in right.items()} if rp else dict(right)
        if lp:
            out.update((lp + k, v) for k, v in left.items())
        else:
            out.update(left)
        return out

    def matches(self, left: dict[str, Any], right: dict[str, Any]) -> bool:
        if self.where is None:
            return True
        payload = self.joined(left, right)
        try:
            kwargs = {a: payload[f] for a, f in self.where_args.items()}
        except KeyError as exc:
            raise ContractViolation(f"{self.bs.label if self.bs else self.name}: join 'where' reads field "
                                    f"{exc.args[0]!r}, which the joined payload {payload!r} lacks") from None
        try:
            return bool(self.where.compute(**kwargs))
        except ContractViolation:
            raise
        except Exception as exc:
            label = self.bs.label if self.bs is not None else self.name
            raise contract(label, None, f"compute raised {type(exc).__name__} on {kwargs!r}", exc) from exc

    # -- elements ---------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        out = RowsOut()
        kind = b.kind
        ins = np.flatnonzero(kind == INSERT)
        if len(ins):
            self._inserts(port, b, ins, out)
        if len(ins) < len(kind):
            rest = np.flatnonzero(kind != INSERT)
            for i, k in zip(rest.tolist(), kind[rest].tolist(), strict=True):
                if k == CTI:
                    t = self.clock.advance(port, int(b.le[i]))
                    if t is not None:
                        out.cti(t)
                    self._cleanup()
                else:
                    self._retract(port, int(b.id[i]), int(b.rn[i]), out)
        return out.batch()

    def _inserts(self, port: int, b: Batch, rows: np.ndarray, out: RowsOut) -> None:
        """The batch's inserts (rows ``rows``): keys as codes, appended to their side, matched in bulk."""
        codes, miss, lacking = self.keys.encode(b.payload, rows, self.key_fields[port])
        if miss is not None:  # (a refused insert's retractions find no live event: ignored)
            side = "left" if port == LEFT else "right"
            for i, f in zip(rows[miss].tolist(), lacking, strict=True):
                self.refuse(b, i, MISSING_FIELD, f"missing join field {f!r} in the {side} input "
                                                 f"{self.sources[port]!r}", port)
            rows, codes = rows[~miss], codes[~miss]
            if not len(rows):
                return
        le, re = b.le[rows], b.re[rows]
        slots = self.sides[port].append(b.id[rows], le, re, codes, b.payload, rows)
        if self.anti:
            self._anti_inserts(port, slots, out)
            return
        probe, other = self.sides[1 - port].find(codes, le, re)
        self._pairs(port, slots[probe], other, out)

    def _pairs(self, port: int, mine: np.ndarray, other: np.ndarray, out: RowsOut) -> None:
        """The pairs of slots ``mine`` (of ``port``'s side) and ``other`` (of the other side), overlapping and
        of one key: each, where ``where`` holds, one output, all in one column block."""
        if not len(mine):
            return
        ms, os = self.sides[port], self.sides[1 - port]
        mp, op = ms.payloads(mine), os.payloads(other)
        lps, rps = (mp, op) if port == LEFT else (op, mp)
        if self.where is not None:
            keep = np.array([self.matches(lp, rp) for lp, rp in zip(lps, rps, strict=True)], dtype=bool)
            if not keep.all():
                mine, other = mine[keep], other[keep]
                kl = keep.tolist()
                lps = [p for p, k in zip(lps, kl, strict=True) if k]
                rps = [p for p, k in zip(rps, kl, strict=True) if k]
                if not len(mine):
                    return
        n = len(mine)
        le = np.maximum(ms.le[mine], os.le[other])
        re = np.minimum(ms.re[mine], os.re[other])
        oids = np.arange(self.next_id + 1, self.next_id + 1 + n, dtype=_I64)
        self.next_id += n
        joined = self.joined
        payloads = [joined(lp, rp) for lp, rp in zip(lps, rps, strict=True)]
        mpairs, opairs = self.pairs[port], self.pairs[1 - port]
        for mid, oid_, o, a, z, p in zip(ms.id[mine].tolist(), os.id[other].tolist(), oids.tolist(), le.tolist(),
                                         re.tolist(), payloads, strict=True):
            record = [o, a, z, p]
            mpairs.setdefault(mid, {})[oid_] = record
            opairs.setdefault(oid_, {})[mid] = record
        out.block(Batch(np.full(n, INSERT, dtype=np.int8), oids, le, re, re.copy(), np.full(n, -1, dtype=_I64),
                        Payload.from_rows(payloads)))

    def _retract(self, port: int, eid: int, new_re: int, out: RowsOut) -> None:
        side = self.sides[port]
        s = side.live_slot(eid)
        if s is None:
            return
        le, old_re = int(side.le[s]), int(side.re[s])
        if new_re == old_re:
            return
        sync = min(old_re, new_re)
        if new_re <= le:
            side.kill(s)
            cur = le
        else:
            side.set_re(s, new_re)
            cur = new_re
        code = int(side.code[s])
        if self.anti:
            self._anti_retract(port, s, code, le, cur, sync, max(old_re, new_re), out)
            return
        other = self.sides[1 - port]
        mine = self.pairs[port].get(eid)
        if mine:
            theirs = self.pairs[1 - port]
            for pid, record in list(mine.items()):
                ps = other.live_slot(pid)
                end = min(cur, int(other.re[ps])) if ps is not None else cur
                if end <= record[1]:
                    out.retract(record[0], record[1], record[2], record[1], record[3])
                    del mine[pid]
                    t = theirs.get(pid)
                    if t is not None:
                        t.pop(eid, None)
                        if not t:
                            del theirs[pid]
                elif end != record[2]:
                    out.retract(record[0], record[1], record[2], end, record[3])
                    record[2] = end
            if not mine:
                del self.pairs[port][eid]
        if new_re > old_re:
            _, found = other.find(np.array([code], dtype=_I64), np.array([old_re], dtype=_I64),
                                  np.array([new_re], dtype=_I64))
            have = self.pairs[port].get(eid, {})
            fresh = [o for o in found.tolist() if int(other.id[o]) not in have]
            if fresh:
                self._pairs(port, np.full(len(fresh), s, dtype=_I64), np.array(fresh, dtype=_I64), out)

    # -- cleanup ----------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        ctis = self.clock.ctis
        if min(ctis) >= INF:
            self.sides = (SideStore(), SideStore())
            self.keys = KeyCodes()
            self.pairs = ({}, {})
            self.parts = {}
            return
        for port in (LEFT, RIGHT):
            side = self.sides[port]
            bound = min(ctis[port], ctis[1 - port] + 1, INF)  # final (RE < own CTI), unreachable (RE <= other's)
            dead = side.ending_before(bound)
            if not len(dead):
                continue
            side.kill(dead)
            if self.anti:
                if port == LEFT and self.parts:
                    for eid in side.id[dead].tolist():
                        self.parts.pop(eid, None)
            else:
                mine, theirs = self.pairs[port], self.pairs[1 - port]
                if mine:
                    dead_ids = side.id[dead]
                    if 4 * len(mine) < len(dead_ids):  # (few events hold pairs: those among the dead ones)
                        dead_ids = dead_ids[np.isin(dead_ids, np.fromiter(mine, dtype=_I64, count=len(mine)))]
                    ids = dead_ids.tolist()
                    for eid in ids:
                        got = mine.pop(eid, None)
                        if got:
                            for pid in got:
                                t = theirs.get(pid)
                                if t is not None:
                                    t.pop(eid, None)
                                    if not t:
                                        del theirs[pid]
            side.compact()
        live = self.sides[LEFT].live + self.sides[RIGHT].live
        if len(self.keys) > 4 * live + 65536:  # (dead keys pile up: renumber the live ones)
            remap = self.keys.compact([s.code[:s.n][s.alive[:s.n]] for s in self.sides])
            for side in self.sides:
                side.recode(remap)

    def forget_at(self) -> int | None:
        """An event is gone once both ports' CTIs pass its end (`_cleanup`)."""
        ends = [e + 1 for e in (side.first_end() for side in self.sides) if e < INF]
        return min(ends, default=INF)

    def state_size(self) -> dict[str, int]:
        return {"events": self.sides[LEFT].live + self.sides[RIGHT].live}
