"""What a window step does with its input (`step.WindowOp`'s first half): each event's group and value,
handed to the family — a batch's inserts at once where the family takes them so — and the watermark, the
effective CTI and ``max_memory_time``'s refusals as the batch goes.

Nothing is evaluated here: the family records what changed, and `step.WindowOp.flush` evaluates it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import is_
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.arrow_numpy import arrow_of

from ..batch import CTI, INSERT, Batch
from ..operator import Operator
from ..rules import CTI_VIOLATION, INF, UNKNOWN_ID, FieldCheck, cti_reason, effective_cti, sync_time, unknown_id_reason
from .state import Ev, Group, group_key, group_keys

__all__ = ["WindowIntake"]

#: fewest inserts in a batch worth the family's bulk insert
_BULK_MIN = 16


class WindowIntake(Operator):
    """The input side of `step.WindowOp` (see the module docstring); the step sets every field below."""

    group_by: tuple[str, ...]
    #: every group by key: its object, or its int code while its family keeps it without one
    #: (`Family.new_groups`)
    groups: dict[Any, Group | int]
    touched: dict[int, Group]
    family: Any
    udm: Any
    mapper: Any
    sweep_kind: str
    check: FieldCheck
    max_memory_time: int
    max_le: int
    watermark: int
    input_cti: int
    effective_cti: int
    refused: dict[int, int]

    # -- groups --------------------------------------------------------------------------------------
    def group(self, key: Any, fields: dict[str, Any] | None) -> Group:
        """The object of the group of ``key``, made on first sight with its key ``fields`` (None: no
        ``group_by``)."""
        g = self.groups.get(key)
        if g is None:
            g = self.new_groups([key], [fields])[0]
        return g if isinstance(g, Group) else self.family.group_of(g)

    def new_groups(self, keys: list[Any], fields: list[dict[str, Any] | None]) -> list[Group] | list[int]:
        """The groups of ``keys``, none seen yet, made at once (a batch's new keys: `Family.new_groups`), as
        the step keeps them."""
        gs = self.family.new_groups(keys, fields)
        self.groups.update(zip(keys, gs, strict=True))
        return gs

    def _key_fields(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        gb = self.group_by
        return {f: payload[f] for f in gb} if gb else None

    def _keys(self, b: Batch, rows: np.ndarray) -> list[Any]:
        gb = self.group_by
        if not gb:
            return [()] * len(rows)
        cols = []
        for f in gb:
            vals, _ = b.payload.column(f, rows)
            cols.append(vals.tolist() if isinstance(vals, np.ndarray) else vals)
        if len(gb) == 1:
            return group_keys(list(cols[0]))
        return [tuple(group_key(v) for v in t) for t in zip(*cols, strict=True)]

    def _values(self, b: Batch, rows: np.ndarray, numeric: bool = False) -> Any:
        """What the UDM receives of each row (``numeric``: an int64/float64 column is given as such); a
        value-blind UDA's placeholders (`invoke.Mapper`) as an int64 column, no payload read."""
        m = self.mapper
        if m.kind == 4:
            zeros = np.zeros(len(rows), dtype=np.int64)
            return zeros if numeric else zeros.tolist()
        if m.kind == 1:
            vals, _ = b.payload.column(m.spec, rows)
            if isinstance(vals, np.ndarray):
                return vals if numeric else vals.tolist()
            return vals
        pls = b.payload.rows()
        if m.kind == 0:  # (the payload itself)
            return [pls[i] for i in rows.tolist()]
        return [m(pls[i]) for i in rows.tolist()]

    # -- input ---------------------------------------------------------------------------------------
    def process(self, port: int, b: Batch) -> Batch | None:
        b = self.checked(b, self.check)
        if self.max_memory_time < INF:
            b = self._finalized(b)
        kind = b.kind
        is_cti = kind == CTI
        data = np.flatnonzero(~is_cti)
        if len(data):
            upcoming = self.effective_cti
            if is_cti.any():
                upcoming = max(upcoming, int(b.le[is_cti].max()))
            self._data(b, data, upcoming)
        for i in np.flatnonzero(kind == CTI).tolist():
            self._cti(int(b.le[i]))
        return None

    def _group_codes(self, b: Batch, rows: np.ndarray) -> tuple[np.ndarray, list[Any]]:
        """Per row a group code, and the group of each code (made on first sight) as the step keeps it: its
        object or the family's int code (`Family.new_groups`)."""
        gb = self.group_by
        if not gb:
            return np.zeros(len(rows), dtype=np.int64), [self.group((), None)]
        arr = b.payload.arrow(gb[0]) if len(gb) == 1 else None
        sub = None
        if isinstance(arr, pa.Array) and not pa.types.is_nested(arr.type):
            sub = arr if len(rows) == len(arr) else arr.take(arrow_of(rows, np.int64))
            if sub.null_count:
                sub = None
        if sub is not None:
            enc = pc.dictionary_encode(sub)
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            f0 = gb[0]
            vals = enc.dictionary.to_pylist()
            keys = group_keys(vals)
            # (a key's value is its field's: the new groups' fields made in one comprehension, no call per
            # group; a batch of a q5-like step meets thousands of new groups)
            return codes, self._known(keys, lambda new: [{f0: v} for v in map(vals.__getitem__, new)])
        keys = self._keys(b, rows)
        index: dict[Any, int] = {}
        codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))
        first = {}
        for j, code in enumerate(codes.tolist()):
            if code not in first:
                first[code] = j
        rl = rows.tolist()
        return codes, self._known(list(index), lambda new: [self._key_fields(b.payload.row(rl[first[j]])) for j in new])

    def _known(self, keys: list[Any], fields_of: Callable[[list[int]], list[dict[str, Any] | None]]) -> list[Any]:
        """The groups of distinct ``keys`` as the step keeps them, the new ones made at once (key fields of
        ``keys[j]`` for each ``j`` of ``new``: ``fields_of(new)``)."""
        groups: list[Any] = list(map(self.groups.get, keys))
        new = np.flatnonzero(np.array(list(map(is_, groups, repeat(None))), dtype=bool)).tolist()
        if new:
            made = self.new_groups(list(map(keys.__getitem__, new)), fields_of(new))
            deque(map(groups.__setitem__, new, made), maxlen=0)  # (at C speed: thousands per batch)
        return groups

    def _data(self, b: Batch, rows: np.ndarray, upcoming: int) -> None:
        """The data rows of a batch; ``upcoming``: the CTI in force once its CTIs are taken."""
        fam = self.family
        touched = self.touched
        kinds = b.kind[rows]
        ins = kinds == INSERT
        if fam.bulk and int(ins.sum()) >= _BULK_MIN:
            # inserts first, all at once (they commute with each other, and every retraction of the batch
            # follows its own insert), then the retractions in order
            irows = rows[ins]
            codes, groups = self._group_codes(b, irows)
            le = b.le[irows]
            only = bool(ins.all()) and self.max_memory_time >= INF
            fam.bulk_insert(groups, codes, b.id[irows], le, b.re[irows], self._values(b, irows, True),
                            fam.closing(upcoming) if only else None)
            evaluate = fam.to_evaluate(groups)
            touched.update(zip(map(id, evaluate), evaluate, strict=True))
            m = int(le.max())
            if m > self.max_le:
                self.max_le = m
                if m > self.watermark:
                    self._advance(m)
            rows = rows[~ins]
            if not len(rows):
                return
            kinds = b.kind[rows]
        keys = self._keys(b, rows)
        vals = self._values(b, rows)
        pls = b.payload
        ids = b.id[rows].tolist()
        les = b.le[rows].tolist()
        res = b.re[rows].tolist()
        rns = b.rn[rows].tolist()
        refused = self.refused
        for j, (k, eid, le, re, rn, key, val) in enumerate(zip(kinds.tolist(), ids, les, res, rns, keys, vals,
                                                                strict=True)):
            found = self.groups.get(key)
            g = found if isinstance(found, Group) else self.group(
                key, None if found is not None else self._key_fields(pls.row(int(rows[j]))))
            touched[id(g)] = g
            if k == INSERT:
                ev = Ev(eid, le, re, val)
                if fam.tracks_events:
                    g.events[eid] = ev
                fam.insert(g, ev)
                if le > self.max_le:
                    self.max_le = le
                    if le > self.watermark:
                        self._advance(le)
                continue
            if refused and eid in refused:  # its insert was refused here: an unknown id (semantics-notes 8)
                self.refuse(b, int(rows[j]), UNKNOWN_ID, unknown_id_reason(b.id_text(int(rows[j]))))
                if rn <= le:
                    del refused[eid]
                else:
                    refused[eid] = rn
                continue
            held = g.events.get(eid)
            # (inserted in bulk when not held: the row says all the family needs)
            ev = held if held is not None else Ev(eid, le, re, val)
            if rn == ev.re:
                continue
            old = ev.re
            if rn <= ev.le:
                g.events.pop(eid, None)
                fam.change(g, ev, old, ev.le)
            else:
                fam.change(g, ev, old, rn)

    def _finalized(self, b: Batch) -> Batch:
        """Finalize (semantics-notes 8): elements whose sync time is below ``m - max_memory_time`` are
        refused (as CTI violations of this step), row by row as the watermark moves."""
        keep = np.ones(len(b), dtype=bool)
        wm = self.watermark
        mmt = self.max_memory_time
        ceff = self.effective_cti
        for i in range(len(b)):
            k = int(b.kind[i])
            if k == CTI:
                t = int(b.le[i])
                if t > wm:
                    wm = t
                ceff = max(ceff, t, effective_cti(t, wm, mmt))
                continue
            sync = sync_time(k, int(b.le[i]), int(b.re[i]), int(b.rn[i]))
            if sync < ceff:
                keep[i] = False
                self.refuse(b, i, CTI_VIOLATION, cti_reason(sync, ceff))
                if k == INSERT:
                    self.refused[int(b.id[i])] = int(b.re[i])
                continue
            if k == INSERT and b.le[i] > wm:
                wm = int(b.le[i])
                ceff = max(ceff, effective_cti(ceff, wm, mmt))
        return b if keep.all() else b.take(np.flatnonzero(keep))

    def _advance(self, m: int) -> None:
        """The watermark moved to ``m``."""
        self.watermark = m
        e = effective_cti(self.effective_cti, m, self.max_memory_time)
        if e > self.effective_cti:
            self.effective_cti = e
        self.family.advanced(m)

    def _cti(self, t: int) -> None:
        if t <= self.input_cti:
            return
        if t >= INF:
            self.family.finish_ready()
        self.input_cti = t
        if t > self.effective_cti:
            self.effective_cti = t
        if t > self.watermark:
            self._advance(t)
