"""Algebraic UDAs on tumbling/hopping windows as a two-phase Spark aggregate (SEMANTICS §9, seeds/004).

Phase 1 (partial, ``mapInArrow``: one Python call per input partition, no shuffle before it) folds each
event into the state of its (group, pane) with the UDA's ``add``; panes are ``gcd(size, hop)`` wide.
Phase 2 (final, ``groupBy(bucket).applyInArrow``: one call per key bucket) merges the partial states of
each (group, pane) with ``merge``, then each window's ``size / pane`` pane states, and calls ``compute``
once per non-empty window. No group or window is ever materialized as a list of members.

This is only the same query as the engine's when nothing depends on physical order or validity, so it
is taken only for *simple* input (checked natively before, and per event in phase 1): inserts only, no
bad rows, no CTIs before the last insert, unique ids, finite lifetimes that each fit in one pane (point
events do), every needed field present. Otherwise `NotEligible` sends the query to the engine path.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.query.plan import bind
from udm.host.query.spec import Hopping, QuerySpec, Tumbling, WindowStep, parse_query

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["NotEligible", "eligible_step", "is_not_eligible", "run_algebraic"]

_PARTIAL_DDL = "key string, pane bigint, state binary"
_NOT_ELIGIBLE = "udm-not-eligible-for-partial-aggregation"


class NotEligible(Exception):
    """The input is not simple enough for the two-phase plan; run the engine path instead."""


def eligible_step(spec: QuerySpec) -> WindowStep | None:
    """The query's single window step if its shape allows the two-phase plan, else None."""
    if len(spec.steps) != 1 or not isinstance(spec.steps[0], WindowStep):
        return None
    step = spec.steps[0]
    if not isinstance(step.window, (Tumbling, Hopping)) or step.max_memory_time < 2**63 - 1:
        return None
    man = bind(spec).steps[0].entry.manifest
    if man.kind != "uda" or not (man.properties.algebraic and man.properties.incremental):
        return None
    return step


def _geometry(step: WindowStep) -> tuple[int, int, int, int]:
    """(pane width, size, hop, offset)."""
    w = step.window
    size, hop = (w.size, w.size) if isinstance(w, Tumbling) else (w.size, w.hop)
    return math.gcd(size, hop), size, hop, w.offset


def _columns(rb: pa.RecordBatch, names: list[str]) -> list[Any] | None:
    """The payload fields ``names`` of a batch as numpy/Python columns, parsed in one pyarrow call;
    None when the payloads are not flat objects with every field present and of a plain type."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.json as pj

    texts = rb.column("payload")
    if texts.null_count:
        return None
    joined = pc.binary_join_element_wise(texts, pa.scalar(""), "\n")  # every text + "\n", contiguous
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset: joined.offset + len(joined) + 1]
    data = joined.buffers()[2][offsets[0]: offsets[-1]]
    try:
        table = pj.read_json(pa.BufferReader(data))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(texts):
        return None
    out = []
    for name in names:
        if name not in table.column_names:
            return None
        col = table.column(name)
        if col.null_count or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                                  or pa.types.is_string(col.type)):
            return None
        out.append(col.to_numpy())
    return out


def _fold_vectorized(rb: pa.RecordBatch, keys: list[str], field: str, pane_w: int, off: int,
                     uda: Any, acc: dict[tuple[str, int], Any]) -> bool:
    """Fold a batch into per-(group, pane) states with one ``add`` call per (group, pane); False when
    the batch needs the per-row path."""
    import numpy as np

    cols = _columns(rb, [*keys, field])
    if cols is None:
        return False
    le = rb.column("le").to_numpy()
    re = rb.column("re").to_numpy()
    pane = (le - off) // pane_w
    if not np.array_equal((re - 1 - off) // pane_w, pane):
        raise NotEligible(_NOT_ELIGIBLE)
    codes, uniques = [], []
    for c in cols[:-1]:
        u, inv = np.unique(c, return_inverse=True)
        uniques.append(u)
        codes.append(inv)
    order = np.lexsort([pane, *reversed(codes)]) if codes else np.argsort(pane, kind="stable")
    values = cols[-1][order]
    sp = pane[order]
    sc = [c[order] for c in codes]
    change = np.zeros(len(order), dtype=bool)
    if len(order):
        change[0] = True
        change[1:] |= sp[1:] != sp[:-1]
        for c in sc:
            change[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(change).tolist()
    ends = [*starts[1:], len(order)]
    for a, b in zip(starts, ends, strict=True):
        key = [u[c[a]] for u, c in zip(uniques, sc, strict=True)]
        kj = json.dumps([x.item() if hasattr(x, "item") else x for x in key], separators=(",", ":"))
        k = (kj, int(sp[a]))
        try:
            state = uda.add(uda.initial_state(), values[a:b].tolist())
            acc[k] = uda.merge(acc[k], state) if k in acc else state
        except Exception:  # let the engine path report the UDM's failure with its full context
            raise NotEligible(_NOT_ELIGIBLE) from None
    return True


def _partial(spec_json: dict[str, Any]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = parse_query(spec_json)
        step = spec.steps[0]
        assert isinstance(step, WindowStep)
        uda: Any = bind(spec).steps[0].udm
        pane_w, _, _, off = _geometry(step)
        keys, field = step.group_by, step.input
        buckets: dict[tuple[str, int], list[Any]] = {}
        folded: dict[tuple[str, int], Any] = {}
        loads = json.loads
        for rb in batches:
            if isinstance(field, str) and _fold_vectorized(rb, keys, field, pane_w, off, uda, folded):
                continue
            les = rb.column("le").to_pylist()
            res = rb.column("re").to_pylist()
            for le, re, text in zip(les, res, rb.column("payload").to_pylist(), strict=True):
                p = loads(text) if text else {}
                if not isinstance(p, dict) or any(k not in p for k in keys):
                    raise NotEligible(_NOT_ELIGIBLE)
                pane = (le - off) // pane_w
                if (re - 1 - off) // pane_w != pane:
                    raise NotEligible(_NOT_ELIGIBLE)
                if field is None:
                    value: Any = p
                elif isinstance(field, str):
                    if field not in p:
                        raise NotEligible(_NOT_ELIGIBLE)
                    value = p[field]
                else:
                    if any(f not in p for f in field.values()):
                        raise NotEligible(_NOT_ELIGIBLE)
                    value = {u: p[f] for u, f in field.items()}
                kj = json.dumps([p[k] for k in keys], separators=(",", ":"))
                buckets.setdefault((kj, pane), []).append(value)
        for k, values in buckets.items():
            try:
                state = uda.add(uda.initial_state(), values)
                folded[k] = uda.merge(folded[k], state) if k in folded else state
            except Exception:  # let the engine path report the UDM's failure with its full context
                raise NotEligible(_NOT_ELIGIBLE) from None
        out_k, out_p, out_s = [], [], []
        for (kj, pane), state in folded.items():
            out_k.append(kj)
            out_p.append(pane)
            out_s.append(pickle.dumps(state))
        yield pa.RecordBatch.from_pydict({"key": out_k, "pane": out_p, "state": out_s},
                                         schema=pa.schema([("key", pa.string()), ("pane", pa.int64()),
                                                           ("state", pa.binary())]))

    return run


def _final(spec_json: dict[str, Any]) -> Callable[[pa.Table], pa.Table]:
    def run(table: pa.Table) -> pa.Table:
        spec = parse_query(spec_json)
        step = spec.steps[0]
        assert isinstance(step, WindowStep)
        uda: Any = bind(spec).steps[0].udm
        pane_w, size, hop, off = _geometry(step)
        per_key: dict[str, dict[int, Any]] = {}
        for kj, pane, blob in zip(table.column("key").to_pylist(), table.column("pane").to_pylist(),
                                  table.column("state").to_pylist(), strict=True):
            panes = per_key.setdefault(kj, {})
            st = pickle.loads(blob)
            panes[pane] = uda.merge(panes[pane], st) if pane in panes else st
        n_panes, hop_panes = size // pane_w, hop // pane_w
        ids: list[str] = []
        les: list[int] = []
        res: list[int] = []
        payloads: list[str] = []
        for kj, panes in per_key.items():
            key_vals = dict(zip(step.group_by, json.loads(kj), strict=True))
            windows: set[int] = set()
            for pane in panes:  # window k covers panes [k*hop_panes, k*hop_panes + n_panes)
                lo = -((n_panes - 1 - pane) // hop_panes)  # ceil((pane - n_panes + 1) / hop_panes)
                windows.update(range(lo, pane // hop_panes + 1))
            for k in sorted(windows):
                first = k * hop_panes
                state = None
                for q in range(first, first + n_panes):
                    if q in panes:
                        state = panes[q] if state is None else uda.merge(state, panes[q])
                if state is None:
                    continue
                w_le = off + k * hop
                ids.append(f"a{len(ids)}:{kj}")
                les.append(w_le)
                res.append(w_le + size)
                try:
                    value = uda.compute(state)
                except Exception:
                    raise NotEligible(_NOT_ELIGIBLE) from None
                payloads.append(json.dumps({**key_vals, step.alias: value}, separators=(",", ":")))
        n = len(ids)
        return pa.table({"kind": ["insert"] * n, "id": ids, "le": les, "re": res, "re_new": [None] * n,
                         "t": [None] * n, "payload": payloads, "line": list(range(n))},
                        schema=pa.schema([("kind", pa.string()), ("id", pa.string()), ("le", pa.int64()),
                                          ("re", pa.int64()), ("re_new", pa.int64()), ("t", pa.int64()),
                                          ("payload", pa.string()), ("line", pa.int64())]))

    return run


def run_algebraic(spec: QuerySpec, inserts: DataFrame, n_buckets: int) -> DataFrame:
    """Output elements (without the final CTI) of the two-phase plan over a DataFrame of inserts.
    Raises `NotEligible` (from the job) when an event does not fit the plan."""
    from pyspark.sql import functions as F

    js = spec.to_json_dict()
    partial = inserts.select("le", "re", "payload").mapInArrow(_partial(js), _PARTIAL_DDL)
    bucketed = partial.withColumn("_bucket", F.pmod(F.xxhash64("key"), F.lit(max(1, n_buckets))))
    out = bucketed.groupBy("_bucket").applyInArrow(
        _final(js), "kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, "
                    "line bigint")
    return out  # ids embed the group key, which lives in exactly one bucket: unique across buckets


def is_not_eligible(exc: BaseException) -> bool:
    return _NOT_ELIGIBLE in str(exc)
