"""The grid family's closed windows, valued and written together: the vector form of the sweep's values.

Most windows a flush releases are also *closed* by it: the CTI has passed their end, so no valid element can
change them again (SEMANTICS §7, a time-insensitive UDA), and none was emitted before, so there is nothing to
diff. Such windows need no sweep step, no output record and no entry in their group's ``out``. The pane store
(`grid_store`) hands over every group's windows at once as slices of its sorted values; `window_values` values
them — the UDA's fresh-window batch form ``compute_slices(values, offsets)`` (note 62) over one numeric column
when it has one, else ``add`` and ``compute`` per window — and `write_closed` writes the outputs, one column
block in window order (per row when a value is not a plain JSON kind or an output would fall below the output
CTI). tests/test_grid_closed.py holds them to the window-by-window sweep's output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..batch import INSERT, Batch, RowsOut
from ..invoke import PLAIN_TYPES
from ..payload import Payload, as_column, value_array
from .emit import first_emission, first_emissions
from .key_columns import KeyColumns
from .state import Group

__all__ = ["FlushJobs", "column_payload", "fresh_slices", "one_block", "spans", "usable_column", "window_values",
           "write_closed"]

def window_values(wu: Any, V: np.ndarray, st: np.ndarray, lens: np.ndarray, wle: np.ndarray, wre: np.ndarray,
                  flat: list[Any] | None = None) -> Any:
    """Each window's value: its members are ``lens`` values of ``V`` (a column) from ``st``; ``flat``: the same
    values as ``add`` takes them, when ``V`` is a converted column (an int among floats stays an int)."""
    # (several aggregates: no batch form; numbers of two kinds: ``add`` alone keeps an int among floats one)
    mixed = V.dtype == object and len(V) > 0 and type(V[0]) in (int, float)
    if getattr(wu, "compute_slices", None) is not None and not mixed:
        # (one numeric kind: a column; whole payloads, text: entries as ``add`` has them)
        total = int(lens.sum())
        offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
        # (the windows are the values, in order, nothing between: tumbling; else the slices copied out, so
        # they may overlap; a value-blind UDA's values are its placeholders, 0 each: none is copied)
        if wu.bs.entry.manifest.properties.value_blind:
            values = np.zeros(total, dtype=np.int64)
        elif total == len(V) and bool((st == offsets[:-1]).all()):
            values = V
        else:
            values = V[spans(st, lens)[1]]
        got = fresh_slices(wu, values, offsets)
        if got is not None:
            return got
    if flat is None:
        flat = V.tolist()
    return [wu.compute_state(wu.add(wu.initial_state(), flat[a:a + n], (le, re)), le, re)
            for a, n, le, re in zip(st.tolist(), lens.tolist(), wle.tolist(), wre.tolist(), strict=True)]


def spans(a: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of rows ``a[i] .. a[i] + lens[i] - 1``, one after another: their offsets in the result (one more
    than runs) and the rows."""
    st = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    return st, np.repeat(a - st[:-1], lens) + np.arange(int(st[-1]), dtype=np.int64)


def fresh_slices(wu: Any, values: np.ndarray, offsets: np.ndarray) -> Any:
    """Each slice's value by the UDA's ``compute_slices``, when it gives one plain JSON kind of the right
    length; None when it has none, raises or gives something else (the caller then takes the scalar forms,
    so an error is reported for its window, as always)."""
    fn = getattr(wu, "compute_slices", None)
    if fn is None:
        return None
    try:
        got = fn(values, offsets)
    except Exception:
        return None
    return usable_column(got, len(offsets) - 1)


def usable_column(got: Any, n: int) -> Any:
    """A batch form's result as the engine takes it: ``n`` values of one plain JSON kind (an 8-byte int or
    float array, or a list), else None (the caller then values the windows another way)."""
    if got is None or len(got) != n:
        return None
    if isinstance(got, np.ndarray):
        return got if got.ndim == 1 and got.dtype.kind in "if" and got.dtype.itemsize == 8 else None
    kinds = set(map(type, got))
    if len(kinds) == 1 and next(iter(kinds)) in PLAIN_TYPES:
        return list(got)
    return None


def column_payload(fields: dict[str, Any], n: int) -> Payload:
    """Output fields (a column or list each, ``n`` rows) as a payload: typed columns, else rows."""
    cols = {}
    for name, vals in fields.items():
        col = as_column(vals)
        if col is None:
            rows = [dict(zip(fields, t, strict=True)) for t in zip(*(
                (v.tolist() if isinstance(v, np.ndarray) else v) for v in fields.values()), strict=True)]
            return Payload.from_rows(rows)
        cols[name] = col
    return Payload(n, fields=cols)


def one_block(step: Any, em: Any, wle: np.ndarray, res: Any) -> bool:
    """Do the windows go out as one column block of inserts: one plain value each, as the UDA's only output
    field (what `WindowUDM.outputs` makes of it: one output per window), none before the output CTI?"""
    wu = step.udm
    alias = None if hasattr(wu, "aliases") else getattr(wu, "alias", None)  # (several aggregates: outputs)
    plain = isinstance(res, np.ndarray) or all(type(r) in PLAIN_TYPES for r in res)
    return alias is not None and plain and int(wle.min()) >= em.out_cti


def write_closed(step: Any, out: RowsOut, em: Any, groups: list[Group] | KeyColumns, wle: np.ndarray,
                 wre: np.ndarray, res: Any) -> None:
    """The windows' outputs in order: one column block of inserts when each is one plain value at or after
    the output CTI (what `WindowUDM.outputs` makes of it), else row by row through ``outputs``. ``groups``:
    each window's group, or their key fields as columns (`key_columns`)."""
    wu = step.udm
    keys = groups if isinstance(groups, KeyColumns) else KeyColumns.of_groups(groups)
    n = keys.n
    if not n:
        return
    if one_block(step, em, wle, res):
        first_emissions(step, wre)
        fields: dict[str, Any] = dict(keys.cols)
        fields[wu.alias] = res
        ids = np.arange(em.oid + 1, em.oid + 1 + n, dtype=np.int64)
        em.oid += n
        out.block(Batch(np.full(n, INSERT, dtype=np.int8), ids, wle, wre, wre.copy(),
                        np.full(n, -1, dtype=np.int64), column_payload(fields, n)))
        return
    oc = em.out_cti
    rl = res.tolist() if isinstance(res, np.ndarray) else res
    for kf, le0, re0, r in zip(keys.dicts(), wle.tolist(), wre.tolist(), rl, strict=True):
        first_emission(step, re0)
        for o in wu.outputs(r, le0, re0, kf):
            le, re, p, _pj = o
            if le < oc:
                em.check(step, le, (le0, re0), o)
            em.oid += 1
            out.insert(em.oid, le, re, p)


class FlushJobs:
    """Windows a flush values together at its end (`grid_closed`, `grid_prefix`, `rows_closed`): their values
    (`_values`) and their outputs (`_write`). ``jobs`` are empty between flushes, when snapshots are taken, so
    a snapshot keeps only the step and whether the path is on."""

    __slots__ = ("jobs", "on", "step")

    jobs: list[Any]

    def __getstate__(self) -> tuple:
        assert not self.jobs  # (a snapshot is taken between flushes)
        return (self.step, self.on)

    def __setstate__(self, s: tuple) -> None:
        self.step, self.on = s
        self.jobs = []

    def _values(self, flat: list[Any], st: np.ndarray, lens: np.ndarray, wle: np.ndarray, wre: np.ndarray) -> Any:
        """Each window's value (its members: ``lens`` values from ``st`` in ``flat``): `window_values` over one
        numeric column when the values are one (the slices copied out, so they may overlap)."""
        # (not one numeric kind: an int among floats, whole payloads, text: entries as ``add`` has them)
        return window_values(self.step.udm, value_array(flat), st, lens, wle, wre, flat)

    def _write(self, out: RowsOut, em: Any, groups: list[Group], wle: np.ndarray, wre: np.ndarray, res: Any) -> None:
        write_closed(self.step, out, em, groups, wle, wre, res)
