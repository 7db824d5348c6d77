"""`Batch`: what every operator consumes and produces — a columnar run of valid elements, CTIs in place.

Trill's shape (the seeds' engines, one element at a time, cost a Python call per element per step): a batch
is a few numpy columns and a `Payload`, and an operator handles a whole batch per call. A single element
is a batch of one; there is no other route through the engine.

Columns, one entry per row:

* ``kind``: `INSERT`, `RETRACT` or `CTI` (int8).
* ``id``: the event's engine id (int64). Input gates number the events they accept; an operator that makes
  events of its own (a window, a join) numbers those. Ids are never reused, so no operator after a gate
  needs an id registry to tell events apart.
* ``le``, ``re``: the lifetime an insert gives, or the one a retraction names; a CTI's time in both.
* ``rn``: a retraction's new end (``RE_new``); an insert's ``re``; a CTI's time.
* ``line``: the input line of the element the row comes from (-1 unknown), for dead letters.
* ``payload``: the event's payload, for retractions too (a gate attaches the live event's), so a span step
  needs no state to pass a retraction on and a window finds the group and value of what leaves it.
* ``src``: for rows straight from a query input (through span steps only), the input's own ids: a step
  that refuses such a row names the element as it was read. A string array, or a list for a few rows made
  one by one (a pyarrow array of a short list costs ~10 µs, more than the rest of the row's way).

Every row of a batch is valid for the operator it enters, except for the payload fields that operator
reads (semantics-notes 3), which it checks itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from udm.host.temporal.elements import Cti, Element, Insert, Retract, inserts

from .payload import Payload
from .payload_merge import concat_payloads

__all__ = ["CTI", "INSERT", "RETRACT", "Batch", "RowsOut", "out_id"]

INSERT, RETRACT, CTI = 0, 1, 2

_I64 = np.int64


def out_id(i: int) -> str:
    """An engine id as output files spell it."""
    return f"o{i}"


class Batch:
    """A columnar run of elements (see the module docstring)."""

    __slots__ = ("id", "kind", "le", "line", "payload", "re", "rn", "src")

    def __init__(self, kind: np.ndarray, id: np.ndarray, le: np.ndarray, re: np.ndarray, rn: np.ndarray,
                 line: np.ndarray, payload: Payload, src: pa.Array | list[str | None] | None = None) -> None:
        self.kind = kind
        self.id = id
        self.le = le
        self.re = re
        self.rn = rn
        self.line = line
        self.payload = payload
        self.src = src

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Batch:
        z = np.zeros(0, dtype=_I64)
        return cls(np.zeros(0, dtype=np.int8), z, z, z, z, z, Payload.empty(0))

    @classmethod
    def cti(cls, t: int, line: int = -1) -> Batch:
        tt = np.array([t], dtype=_I64)
        return cls(np.array([CTI], dtype=np.int8), np.zeros(1, dtype=_I64), tt, tt, tt,
                   np.array([line], dtype=_I64), Payload.empty(1))

    @classmethod
    def of(cls, kind: Sequence[int], id: Sequence[int], le: Sequence[int], re: Sequence[int],
           rn: Sequence[int], payloads: list[Any], line: Sequence[int] | None = None) -> Batch:
        """A batch from Python lists (operators that make their rows one by one)."""
        n = len(kind)
        return cls(np.array(kind, dtype=np.int8), np.array(id, dtype=_I64), np.array(le, dtype=_I64),
                   np.array(re, dtype=_I64), np.array(rn, dtype=_I64),
                   np.array(line, dtype=_I64) if line is not None else np.full(n, -1, dtype=_I64),
                   Payload.from_rows(payloads))

    # -- views ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.kind)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Batch({len(self)} rows: {self.to_elements()!r})"

    @property
    def all_inserts(self) -> bool:
        return bool(len(self.kind)) and not bool(self.kind.any())

    def take(self, idx: np.ndarray) -> Batch:
        src = self.src
        if isinstance(src, list):
            src = [src[i] for i in idx.tolist()]
        elif src is not None:
            src = src.take(pa.array(idx, pa.int64()))
        return Batch(self.kind[idx], self.id[idx], self.le[idx], self.re[idx], self.rn[idx], self.line[idx],
                     self.payload.take(idx), src)

    def with_payload(self, payload: Payload) -> Batch:
        return Batch(self.kind, self.id, self.le, self.re, self.rn, self.line, payload, self.src)

    @staticmethod
    def concat(parts: Sequence[Batch]) -> Batch:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Batch.empty()
        if len(parts) == 1:
            return parts[0]
        src: pa.Array | list[str | None] | None = None
        srcs = [p.src for p in parts if p.src is not None]
        if len(srcs) == len(parts):
            if all(isinstance(x, list) for x in srcs):
                src = [i for x in srcs for i in x]
            else:
                src = pa.concat_arrays([pa.array(x, pa.string()) if isinstance(x, list) else x for x in srcs])
        return Batch(np.concatenate([p.kind for p in parts]), np.concatenate([p.id for p in parts]),
                     np.concatenate([p.le for p in parts]), np.concatenate([p.re for p in parts]),
                     np.concatenate([p.rn for p in parts]), np.concatenate([p.line for p in parts]),
                     concat_payloads([p.payload for p in parts]), src)

    def id_text(self, i: int) -> str:
        """Row ``i``'s id as the element that made it was spelled (the input's own id, else the engine's)."""
        src = self.src
        if src is not None:
            s = src[i] if isinstance(src, list) else src[i].as_py()
            if s is not None:
                return str(s)
        return out_id(int(self.id[i]))

    def element(self, i: int) -> Element:
        """Row ``i`` as an element (dead letters; the element API)."""
        k = int(self.kind[i])
        if k == CTI:
            return Cti(int(self.le[i]))
        if k == INSERT:
            return Insert(self.id_text(i), int(self.le[i]), int(self.re[i]), self.payload.row(i))
        return Retract(self.id_text(i), int(self.le[i]), int(self.re[i]), int(self.rn[i]))

    def to_elements(self) -> list[Element]:
        """Output rows as elements (ids ``o<n>``; retractions without payload), as `QueryRunner` returns them."""
        n = len(self.kind)
        if n == 0:
            return []
        kinds = self.kind.tolist()
        ids = self.id.tolist()
        le = self.le.tolist()
        re = self.re.tolist()
        if 1 not in kinds and 2 not in kinds:
            return inserts([f"o{i}" for i in ids], le, re, self.payload.rows())
        rn = self.rn.tolist()
        rows: list[Any] | None = self.payload.rows() if 0 in kinds else None
        out: list[Element] = []
        for j, k in enumerate(kinds):
            if k == INSERT:
                assert rows is not None
                out.append(Insert(f"o{ids[j]}", le[j], re[j], rows[j]))
            elif k == RETRACT:
                out.append(Retract(f"o{ids[j]}", le[j], re[j], rn[j]))
            else:
                out.append(Cti(le[j]))
        return out


class RowsOut:
    """Output an operator makes: rows one by one (a join's pairs, a window's diffs) and whole column blocks
    (a window's windows valued at once), in order, as one `Batch`."""

    __slots__ = ("blocks", "id", "kind", "le", "line", "payloads", "re", "rn")

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.id: list[int] = []
        self.le: list[int] = []
        self.re: list[int] = []
        self.rn: list[int] = []
        self.payloads: list[Any] = []
        self.line: list[int] = []
        #: finished batches, in order, before the rows listed above
        self.blocks: list[Batch] = []

    def insert(self, eid: int, le: int, re: int, payload: Any, line: int = -1) -> None:
        self.row(INSERT, eid, le, re, re, payload, line)

    def retract(self, eid: int, le: int, re: int, rn: int, payload: Any, line: int = -1) -> None:
        """A retraction carries its event's payload (operators after this one read it)."""
        self.row(RETRACT, eid, le, re, rn, payload, line)

    def cti(self, t: int) -> None:
        self.row(CTI, 0, t, t, t, {}, -1)

    def row(self, k: int, eid: int, le: int, re: int, rn: int, payload: Any, line: int = -1) -> None:
        self.kind.append(k)
        self.id.append(eid)
        self.le.append(le)
        self.re.append(re)
        self.rn.append(rn)
        self.payloads.append(payload)
        self.line.append(line)

    def block(self, b: Batch) -> None:
        """A column block joins the output after everything so far."""
        self._close()
        self.blocks.append(b)

    def _close(self) -> None:
        if self.kind:
            b = Batch.of(self.kind, self.id, self.le, self.re, self.rn, self.payloads, self.line)
            if CTI in self.kind and all(k == CTI for k in self.kind):
                b.payload = Payload.absent(len(self.kind))  # (CTIs only: no payload to keep as dicts)
            self.blocks.append(b)
            self.kind, self.id, self.le, self.re, self.rn, self.payloads, self.line = [], [], [], [], [], [], []

    def __len__(self) -> int:
        return len(self.kind) + sum(len(b) for b in self.blocks)

    def batch(self) -> Batch | None:
        self._close()
        if not self.blocks:
            return None
        return Batch.concat(self.blocks)
