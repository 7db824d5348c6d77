"""The span-based operators (semantics-notes 7, 12, SEMANTICS §10): filter, map, project.

Each maps an event to at most one event under the same engine id; lifetimes pass through unchanged. A
retraction carries its event's payload, so it is mapped exactly as its insert was (UDFs are deterministic,
SEMANTICS §5): a filter passes it when it passed the insert, a map gives it the insert's output payload,
and the step keeps no state per event. A UDF with a batch form (`udm.sdk.UDF` ``compute_batch``, note 35)
gets a whole batch's numeric argument columns in one call; otherwise ``compute`` runs per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from udm.host.errors import ContractViolation
from udm.host.input_types import step_checks
from udm.host.model.plan import BoundStep

from ..batch import CTI, Batch
from ..context import Context
from ..feedback import FastForward
from ..invoke import contract
from ..operator import UdmOperator
from ..payload import Payload
from ..rules import INF, FieldCheck

__all__ = ["FilterOp", "MapOp", "ProjectOp", "udf_values"]


def udf_values(udm: Any, label: str, args: dict[str, str], b: Batch, rows: np.ndarray) -> np.ndarray | list[Any]:
    """The UDF's result for each row in ``rows`` (every argument field present): one ``compute_batch``
    call over numeric columns where the UDF has it (a raise there falls back to ``compute``, which then
    reports the failing row), else ``compute`` per row. A batch form's numeric or boolean array comes back
    as it is (a span step keeps it a column: no Python value per row); anything else as a list of values."""
    if len(rows) == 0:
        return []
    fn = getattr(udm, "compute_batch", None)
    if fn is not None and args:
        cols: dict[str, np.ndarray] = {}
        for arg, field in args.items():
            vals, _ = b.payload.column(field, rows)
            if not isinstance(vals, np.ndarray):
                break
            cols[arg] = vals
        if len(cols) == len(args):
            try:
                res = fn(**cols)
            except Exception:
                res = None
            if res is not None:
                if isinstance(res, np.ndarray) and res.ndim == 1 and res.dtype.kind in "bif":
                    out: np.ndarray | list[Any] = res
                else:
                    out = res.tolist() if isinstance(res, np.ndarray) else [
                        v.item() if isinstance(v, np.generic) else v for v in res]
                if len(out) != len(rows):
                    shown = out.tolist() if isinstance(out, np.ndarray) else out
                    raise contract(label, None, f"compute_batch returned {len(out)} values for {len(rows)} rows",
                                   shown)
                return out
    compute = udm.compute
    columns = {arg: _plain(b.payload.column(field, rows)[0]) for arg, field in args.items()}
    results = []
    for i in range(len(rows)):
        kwargs = {a: c[i] for a, c in columns.items()}
        try:
            results.append(compute(**kwargs))
        except ContractViolation:
            raise
        except Exception as exc:
            raise contract(label, None, f"compute raised {type(exc).__name__} on {kwargs!r}", exc) from exc
    return results


def _plain(vals: Any) -> list[Any]:
    out: list[Any] = vals.tolist() if isinstance(vals, np.ndarray) else vals
    return out


class _SpanOp(UdmOperator):
    """filter / map / project: the field checks, lmerge feedback, and the per-row mapping."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx)
        self.args: dict[str, str] = dict(getattr(bs.step, "args", {}))
        self.check = FieldCheck(tuple(self.args.values()), step_checks(bs), bs.label)
        #: lmerge feedback (seeds/001 §V.D): inserts ending before its time are not computed
        self.feedback = FastForward()
        self.attach(ctx, bs)

    def fast_forward(self, t: int) -> None:
        self.feedback.signal(t)

    def process(self, port: int, b: Batch) -> Batch | None:
        b = self.checked(b, self.check)
        if len(b) == 0:
            return None
        if self.feedback.active:
            b = self.feedback.apply(b)
        return self.apply(b)

    def apply(self, b: Batch) -> Batch | None:
        raise NotImplementedError

    def state_size(self) -> dict[str, int]:
        return {"events": len(self.feedback.skipped)}

    def forget_at(self) -> int | None:
        skipped = self.feedback.skipped
        return min(skipped.values()) + 1 if skipped else INF


class FilterOp(_SpanOp):
    """Keeps the events whose UDF result is truthy."""

    def apply(self, b: Batch) -> Batch | None:
        data = np.flatnonzero(b.kind != CTI)
        if len(data) == 0:
            return b
        res = udf_values(self.udm, self.bs.label, self.args, b, data)  # type: ignore[union-attr]
        keep = np.ones(len(b), dtype=bool)
        if isinstance(res, np.ndarray):
            keep[data] = res.astype(bool)  # (a number's truth, as bool() of it: NaN is true)
        else:
            keep[data] = np.fromiter((bool(v) for v in res), dtype=bool, count=len(res))
        return b if keep.all() else b.take(np.flatnonzero(keep))


class MapOp(_SpanOp):
    """Sets ``payload[as]`` to the UDF result."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx, bs)
        self.as_: str = bs.step.as_

    def apply(self, b: Batch) -> Batch | None:
        data = np.flatnonzero(b.kind != CTI)
        if len(data) == 0:
            return b
        res = udf_values(self.udm, self.bs.label, self.args, b, data)  # type: ignore[union-attr]
        if len(data) == len(b):
            values: Any = res
        elif isinstance(res, np.ndarray) and b.payload.columnar:
            # CTI rows carry no payload: the first result stands in there, so the column keeps one kind
            values = np.full(len(b), res[0], dtype=res.dtype)
            values[data] = res
        else:
            if isinstance(res, np.ndarray):
                res = res.tolist()
            values = [None] * len(b)
            for j, v in zip(data.tolist(), res, strict=True):
                values[j] = v
            if b.payload.columnar:  # CTI rows hold nulls: a column of one kind stays one
                fill = next((v for v in res if v is not None), None)
                if fill is not None:
                    values = [fill if v is None else v for v in values]
                    for j in np.flatnonzero(b.kind == CTI).tolist():
                        values[j] = fill
        return b.with_payload(b.payload.with_field(self.as_, values))


class ProjectOp(_SpanOp):
    """``project`` (semantics-notes 12): ``keep`` (a missing kept field is a malformed payload), ``drop``,
    ``rename``, ``set``, in that order."""

    def __init__(self, name: str, ctx: Context, bs: BoundStep) -> None:
        super().__init__(name, ctx, bs)
        step = bs.step
        self.keep: tuple[str, ...] | None = tuple(step.keep) if step.keep is not None else None
        self.drop = frozenset(step.drop)
        self.rename = dict(step.rename)
        self.set_fields = dict(step.set)
        self.check = FieldCheck(self.keep or ())

    def apply(self, b: Batch) -> Batch | None:
        names = b.payload.names
        if b.all_inserts or (names is not None and (self.keep is None or set(self.keep) <= set(names))):
            p = b.payload.reshape(self.keep, self.drop, self.rename, self.set_fields)
            return b.with_payload(p)
        # CTI rows carry empty payloads that have no kept field: reshape the data rows only
        data = np.flatnonzero(b.kind != CTI)
        rows = b.payload.rows()
        sub = Payload.from_rows([rows[i] for i in data.tolist()]).reshape(
            self.keep, self.drop, self.rename, self.set_fields).rows()
        out = list(rows)
        for j, p in zip(data.tolist(), sub, strict=True):
            out[j] = p
        return b.with_payload(Payload.from_rows(out))

