"""Algebraic UDAs on tumbling/hopping/cumulate windows as a two-phase Spark aggregate (SEMANTICS §9,
seeds/004); with ``aggregates``, every UDA algebraic, their states travel together (one state tuple per pane).
One holistic UDA (time-insensitive, not incremental: median) takes the same plan with its members as the
pane states (`_Collected`). `final_on_driver` runs phase 2 on the driver (``udm run --engine spark``).

One Spark job, no pre-passes:

Phase 1 (partial, ``mapInArrow``: one Python call per input partition, no shuffle before it; small
partitions are coalesced first, `python_tasks`) reads the whole element DataFrame, folds each insert into
the state of its (group, pane) with the UDA's ``add``/``add_array`` (panes are ``gcd(size, hop)`` wide, a
cumulate window's ``step``: the engine's `geometry`)
and, per key bucket, emits one row holding all that bucket's pane states (one pickle per bucket, not per
state), one row of id hashes, and one row of *facts* (is this partition simple, its range of insert
lines, its least insert LE, and each of its CTIs with the least LE of its own inserts after it).
Phase 2 (final, ``groupBy(bucket).applyInArrow``: one call per key bucket) receives every partition's facts
(they are copied into each bucket) and decides eligibility itself: every partition simple, no CTI that an
insert after it could violate, no id hash seen twice (ids hash to buckets, so equal ids meet in one
bucket). It then merges the pane states of each (group, pane), each window's ``size / pane`` pane states
(a cumulate window: the window before it and its new pane), and calls ``compute`` once per non-empty window
inside that one call. No group or window is ever
materialized as a list of members, and no Python UDF runs per window.

This is the engine's answer only when nothing depends on physical order or validity: inserts only, no bad
rows, no CTI an insert could violate, unique ids, finite lifetimes that each fit in one pane (point events
do), every needed field present. When that fails (or the UDM raises), the final phase returns a single
``_ineligible`` marker row instead (or raises `NotEligible` with ``strict``) and the caller runs the engine
path, which reports exactly what the engine reports. Validating lazily like this costs nothing on the input
the plan is for; the price is one wasted job on input it is not for.
"""

from __future__ import annotations

import json
import math
import pickle
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.engine.window.geometry import geometry_of
from udm.host.input_types import InputType, step_checks
from udm.host.io.jsonl import struct_payloads
from udm.host.model.plan import bind
from udm.host.model.spec import Cumulate, Hopping, QuerySpec, Tumbling, WindowStep, parse_query
from udm.host.spark.convert import compact_json
from udm.host.spark.file_source import range_batches, ranges_df
from udm.host.spark.partition import python_tasks
from udm.host.temporal.strict import canonical_json
from udm.sdk import Event

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from udm.host.spark.file_source import FileScan

__all__ = ["INELIGIBLE", "NotEligible", "eligible_step", "final_on_driver", "id_hashes", "run_algebraic"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

_PARTIAL_DDL = "_bucket int, tag tinyint, blob binary"
_PARTIAL_ARROW = pa.schema([("_bucket", pa.int32()), ("tag", pa.int8()), ("blob", pa.binary())])
_OUT_DDL = "kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, line bigint"
_OUT_ARROW = pa.schema([(c.split(" ")[0], pa.int64() if c.endswith("bigint") else pa.string())
                        for c in _OUT_DDL.split(", ")])
_STATES, _IDS, _FACTS = 0, 1, 2
_NOT_ELIGIBLE = "udm-not-eligible-for-partial-aggregation"
_INF = 2**63 - 1
#: ``kind`` of the one row the final phase returns when the input does not fit the plan.
INELIGIBLE = "_ineligible"


class NotEligible(Exception):
    """The input is not simple enough for the two-phase plan; run the engine path instead."""


def eligible_step(spec: QuerySpec, *, holistic: bool = False) -> WindowStep | None:
    """The query's single window step if its shape allows the two-phase plan, else None.

    ``holistic``: also a step with one time-insensitive, non-incremental UDA (median): its pane states are
    the members themselves (`_Collected`)."""
    if len(spec.steps) != 1 or not isinstance(spec.steps[0], WindowStep) or spec.uses_repair:
        return None
    step = spec.steps[0]
    if not isinstance(step.window, (Tumbling, Hopping, Cumulate)) or step.max_memory_time < _INF:
        return None
    bs = bind(spec).steps[0]
    if holistic and not bs.parts and _collects(bs):
        return step
    for part in bs.parts or (bs,):  # every UDA of ``aggregates``
        man = part.entry.manifest
        if man.kind != "uda" or not (man.properties.algebraic and man.properties.incremental):
            return None
    return step


def _collects(bs: Any) -> bool:
    """Whether a bound step's one UDA is holistic (the engine calls ``compute`` on a window's members)."""
    man = bs.entry.manifest
    props = man.properties
    return man.kind == "uda" and not props.incremental and not props.time_sensitive and not props.algebraic


class _Combined:
    """The UDAs of ``aggregates`` as one algebraic UDA: a state per UDA, each fed its own input value (an
    event's value is the list of them), ``compute`` -> one value per UDA, in order."""

    def __init__(self, udas: list[Any]) -> None:
        self.udas = udas

    def initial_state(self) -> tuple[Any, ...]:
        return tuple(u.initial_state() for u in self.udas)

    def add(self, state: tuple[Any, ...], values: list[list[Any]]) -> tuple[Any, ...]:
        return tuple(u.add(s, [v[i] for v in values]) for i, (u, s) in enumerate(zip(self.udas, state, strict=True)))

    def merge(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(u.merge(x, y) for u, x, y in zip(self.udas, a, b, strict=True))

    def compute(self, state: tuple[Any, ...]) -> list[Any]:
        return [u.compute(s) for u, s in zip(self.udas, state, strict=True)]


class _Collected:
    """A holistic UDA (time-insensitive, not incremental: the engine calls ``compute`` on a window's
    members) as a mergeable one, for the two-phase plan.

    Phase 1 keeps a partition's members as runs of arrays (`runs`: key JSON texts and, per member, key
    index, pane, LE, RE, value), packed per key bucket into one blob of arrays (`pack`: no per-member
    Python object is pickled). Phase 2 sorts every member of its bucket by (group, pane, LE, RE) at once
    (`states`); a (group, pane) state is its range of them, in canonical order (SEMANTICS §5: by
    ``(LE, RE)``), with ``tie``: two members share ``(LE, RE)`` (the engine orders those by the canonical
    JSON of their values). A window's panes are consecutive ranges, so merging them is a longer range (any
    other merge makes lists ``(LEs, REs, values, ordered, tie)``); ``compute`` orders a window's members as
    the engine does (`udm.host.engine.invoke.WindowUDM.ordered`; every member fits one pane, so none is
    clipped) and calls the UDA's ``compute`` on their values."""

    def __init__(self, uda: Any) -> None:
        self.uda = uda
        #: phase 1: (key texts, key index, pane, LE, RE, values) of each folded batch
        self.runs: list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def pack(self, n: int) -> list[tuple[int, bytes]]:
        """(bucket, blob) of this partition's members, per key bucket (`key_bucket`)."""
        if not self.runs:
            return []
        index: dict[str, int] = {}
        codes = []
        for names, group, *_ in self.runs:
            remap = np.asarray([index.setdefault(kj, len(index)) for kj in names], dtype=np.int64)
            codes.append(remap[group] if len(group) else group)
        code = np.concatenate(codes)
        pane, le, re = (np.concatenate([r[i] for r in self.runs]) for i in (2, 3, 4))
        values = np.concatenate([r[5] for r in self.runs])
        names = list(index)
        bucket_of = np.asarray([key_bucket(kj, n) for kj in names], dtype=np.int64)
        mb = bucket_of[code]
        out = []
        for b in np.unique(bucket_of).tolist():
            sel = mb == b
            used = np.flatnonzero(bucket_of == b)
            local = np.full(len(names), -1, dtype=np.int64)
            local[used] = np.arange(len(used))
            blob = pickle.dumps(([names[i] for i in used.tolist()], local[code[sel]], pane[sel], le[sel], re[sel],
                                 values[sel]), protocol=pickle.HIGHEST_PROTOCOL)
            out.append((b, blob))
        return out

    @staticmethod
    def states(blobs: list[bytes]) -> dict[str, dict[int, tuple[Any, ...]]]:
        """{group key JSON: {pane: state}} of every member in ``blobs`` (`pack`)."""
        index: dict[str, int] = {}
        parts = []
        for blob in blobs:
            names, code, pane, le, re, values = pickle.loads(blob)
            remap = np.asarray([index.setdefault(kj, len(index)) for kj in names], dtype=np.int64)
            parts.append((remap[code] if len(code) else code, pane, le, re, values))
        per_key: dict[str, dict[int, tuple[Any, ...]]] = {}
        if not parts:
            return per_key
        code, pane, le, re, values = (np.concatenate([p[i] for p in parts]) for i in range(5))
        order = np.lexsort([re, le, pane, code])
        code, pane, le, re, values = code[order], pane[order], le[order], re[order], values[order]
        n = len(code)
        change = np.ones(n, dtype=bool)
        change[1:] = (code[1:] != code[:-1]) | (pane[1:] != pane[:-1])
        tie = np.zeros(n, dtype=bool)
        tie[1:] = (le[1:] == le[:-1]) & (re[1:] == re[:-1]) & ~change[1:]
        starts = np.flatnonzero(change)
        ends = np.append(starts[1:], n).tolist()
        ties = np.logical_or.reduceat(tie, starts).tolist()
        shared = (le, re, values.tolist())
        names = list(index)
        for a, b, c, q, t in zip(starts.tolist(), ends, code[starts].tolist(), pane[starts].tolist(), ties,
                                 strict=True):
            kj = names[c]
            panes = per_key.get(kj)
            if panes is None:
                panes = per_key[kj] = {}
            panes[q] = (shared, a, b, t)
        return per_key

    @staticmethod
    def _lists(st: tuple[Any, ...]) -> tuple[Any, ...]:
        """A state as ``(LEs, REs, values, ordered, tie)`` (a range of the sorted members: as its lists)."""
        if len(st) == 5:
            return st
        (le, re, vs), a, b, tie = st
        return le[a:b].tolist(), re[a:b].tolist(), vs[a:b], True, tie

    @staticmethod
    def merge(x: tuple[Any, ...], y: tuple[Any, ...]) -> tuple[Any, ...]:
        """``y``'s members after ``x``'s. The panes of a group are consecutive in the sorted members, so a
        window's panes merge into one range of them (its members in canonical order)."""
        if len(x) == 4 and len(y) == 4 and x[0] is y[0] and x[2] == y[1]:
            le, re, _ = x[0]
            edge = bool(le[x[2] - 1] == le[y[1]] and re[x[2] - 1] == re[y[1]])
            return x[0], x[1], y[2], x[3] or y[3] or edge
        a, b = _Collected._lists(x), _Collected._lists(y)
        last, first = (a[0][-1], a[1][-1]), (b[0][0], b[1][0])
        return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] and b[3] and last <= first,
                a[4] or b[4] or last == first)

    def compute(self, state: tuple[Any, ...]) -> Any:
        if len(state) == 4 and not state[3]:
            vs, a, b = state[0][2], state[1], state[2]
            values = vs[a:b]
        else:
            les, res, values, ordered, tie = self._lists(state)
            keys = list(zip(les, res, strict=True))
            pairs = sorted(zip(keys, range(len(keys)), strict=True))
            if not ordered:
                tie = any(pairs[i][0] == pairs[i - 1][0] for i in range(1, len(pairs)))
            if tie:  # ties on (LE, RE): by the canonical JSON of the value (a stable sort, as the engine's)
                pairs = sorted(pairs, key=lambda p: (p[0], canonical_json(values[p[1]])))
            values = [values[i] for _, i in pairs]
        result = self.uda.compute(values)
        # what the engine refuses as an aggregate's value (`WindowUDM.outputs`): it reports it, not this plan
        if isinstance(result, (Event, Iterable)) and not isinstance(result, (str, bytes, list, dict, tuple)):
            raise TypeError("an aggregate must return one value")
        return result


def _input_check(bs: Any) -> InputType | None:
    """The declared input type a bound window step's UDA checks its value against (None: unchecked)."""
    checks = step_checks(bs)
    return checks[0][1] if checks else None


def _uda_and_input(bs: Any) -> tuple[Any, Any]:
    """The bound step's UDA (several combined, for ``aggregates``) and its input mapping (a list of them)."""
    step = bs.step
    if bs.parts:
        return _Combined([p.udm for p in bs.parts]), [a.input for a in step.aggregates]
    if _collects(bs):
        return _Collected(bs.udm), step.input
    return bs.udm, step.input


def _geometry(step: WindowStep) -> Any:
    """The window step's panes and windows (`udm.host.engine.window.geometry`, the engine's own)."""
    return geometry_of(step.window)


def _window_states(geo: Any, panes: dict[int, Any], merge: Callable[[Any, Any], Any]) -> list[tuple[int, Any]]:
    """(window index, merged state) of every window holding a pane state, in window order. A window that
    extends the one before it by a pane (cumulate, within a period) is that one's state merged with the new
    pane's: one merge per window, whatever the period's length; any other window merges its panes."""
    if geo.width == 1:  # (every window is one pane)
        return [(k, st) for s, st in sorted(panes.items()) for k in range(geo.first_window(s), geo.last_window(s) + 1)]
    windows: set[int] = set()
    for s in panes:
        windows.update(range(geo.first_window(s), geo.last_window(s) + 1))
    out: list[tuple[int, Any]] = []
    prev_k, prev_span, prev_state = None, (0, 0), None
    for k in sorted(windows):
        a, b = geo.span(k)
        if prev_k == k - 1 and prev_span == (a, b - 1):
            q = panes.get(b - 1)
            state = prev_state if q is None else q if prev_state is None else merge(prev_state, q)
        else:
            state = None
            for q in range(a, b):
                if q in panes:
                    state = panes[q] if state is None else merge(state, panes[q])
        prev_k, prev_span, prev_state = k, (a, b), state
        if state is not None:
            out.append((k, state))
    return out


def key_bucket(kj: str, n: int) -> int:
    """The bucket of a group (its key as JSON text); any stable hash does, Spark never sees it."""
    return zlib.crc32(kj.encode()) % n


def _columns(rb: pa.RecordBatch | pa.Table, names: list[str]) -> list[Any] | None:
    """The payload fields ``names`` of a batch as Arrow columns, parsed in one pyarrow call; None when
    the payloads do not make a faithful struct (`struct_payloads`: an int written as an int must stay one)
    with every field present and of a plain type."""
    texts = rb.column("payload")
    if texts.null_count:
        return None
    if len(texts) == 0:
        return [pa.chunked_array([], pa.null()) for _ in names]
    # (a file read in the same task brings the reader's own struct, faithful by construction)
    struct = texts if pa.types.is_struct(texts.type) else struct_payloads(texts)
    if struct is None:
        return None
    if isinstance(struct, pa.ChunkedArray):
        struct = struct.combine_chunks()
    out = []
    for name in names:
        if struct.type.get_field_index(name) < 0:
            return None
        col = struct.field(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_string(col.type)):
            return None
        out.append(col)
    return out


def _key_json(values: list[Any]) -> str:
    """A group's key as text: canonical (SEMANTICS §5), so two equal keys are one group, as in the engine."""
    return canonical_json(values)


def _value_json(value: Any) -> str:
    """``json.dumps(value)``, without its per-call overhead for the common plain numbers."""
    t = type(value)
    if t is int:
        return str(value)
    if t is float and math.isfinite(value):
        return repr(value)
    return compact_json(value)  # strict: a non-finite result makes the plan ineligible, the engine path refuses it


def _fold_vectorized(tb: pa.Table, keys: list[str], field: str, pane_w: int, off: int,
                     uda: Any, acc: dict[tuple[str, int], Any], tp: InputType | None = None) -> bool | None:
    """Fold inserts into per-(group, pane) states with one ``add_array``/``add`` call per (group, pane).
    False: the batch needs the per-row path; None: it does not fit the plan (a value not of the UDM's
    declared input type is a dead letter of the engine path, semantics-notes 17)."""
    cols = _columns(tb, [*keys, field])
    if cols is None or any(c.null_count for c in cols):
        return False  # (a missing field, or a null: the per-row fold decides)
    if tp is not None and tp.bad_mask(cols[-1].to_numpy(zero_copy_only=False)) is not None:
        return None
    le = tb.column("le").to_numpy()
    re = tb.column("re").to_numpy()
    pane = (le - off) // pane_w
    if not np.array_equal((re - 1 - off) // pane_w, pane):
        return None
    n = len(pane)
    if keys:
        codes, uniques = [], []
        for c in cols[:-1]:  # hash-encode each key column (sorting strings would cost more than the fold)
            enc = c.dictionary_encode().combine_chunks() if isinstance(c, pa.ChunkedArray) else c.dictionary_encode()
            uniques.append(enc.dictionary.to_pylist())
            codes.append(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        if len(codes) == 1:
            group, names = codes[0], [_key_json([u]) for u in uniques[0]]
        else:
            combos, group = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
            group = group.reshape(-1)
            names = [_key_json([u[i] for u, i in zip(uniques, row.tolist(), strict=True)]) for row in combos]
    else:
        group, names = np.zeros(n, dtype=np.int64), ["[]"]
    if isinstance(uda, _Collected):  # the members themselves (sorted in phase 2)
        uda.runs.append((names, group, pane, le, re, cols[-1].to_numpy(zero_copy_only=False)))
        return True
    order = np.lexsort([pane, group])
    values = cols[-1].to_numpy(zero_copy_only=False)[order]
    sp, sg = pane[order], group[order]
    change = np.ones(n, dtype=bool)
    if n:
        change[1:] = (sp[1:] != sp[:-1]) | (sg[1:] != sg[:-1])
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], n)
    numeric = values.dtype.kind in "if"
    add_array = getattr(uda, "add_array", None) if numeric else None
    init = uda.initial_state
    merge = uda.merge
    try:
        for a, b, g, p in zip(starts.tolist(), ends.tolist(), sg[starts].tolist(), sp[starts].tolist(),
                              strict=True):
            chunk = values[a:b]
            state = add_array(init(), chunk) if add_array is not None else uda.add(init(), chunk.tolist())
            k = (names[g], p)
            acc[k] = merge(acc[k], state) if k in acc else state
    except Exception:  # the engine path reports the UDM's failure with its full context
        return None
    return True


def _fold_rows(tb: pa.Table, keys: list[str], field: Any, pane_w: int, off: int, uda: Any,
               acc: dict[tuple[str, int], Any], tp: Any = None) -> bool:
    """The general per-row fold (nested payloads, mixed types); False when an event does not fit. ``tp``:
    the declared input type to check (for ``aggregates``, a list: one per UDA, None where unchecked)."""
    groups: dict[tuple[str, int], list[Any]] = {}
    members: list[tuple[str, int, int, int, Any]] = []  # (a holistic UDA's: `_Collected`)
    for le, re, text in zip(tb.column("le").to_pylist(), tb.column("re").to_pylist(),
                            tb.column("payload").to_pylist(), strict=True):
        try:
            p = text if isinstance(text, dict) else json.loads(text) if text else {}
        except ValueError:
            return False
        if not isinstance(p, dict) or any(k not in p for k in keys):
            return False
        pane = (le - off) // pane_w
        if (re - 1 - off) // pane_w != pane:
            return False
        if isinstance(field, list):  # ``aggregates``: each UDA's own input
            value: Any = []
            for f in field:
                if f is None:
                    value.append(p)
                elif isinstance(f, str):
                    if f not in p:
                        return False
                    value.append(p[f])
                else:
                    if any(x not in p for x in f.values()):
                        return False
                    value.append({u: p[x] for u, x in f.items()})
            if any(t is not None and not t.accepts(v) for t, v in zip(tp, value, strict=True)):
                return False
        elif field is None:
            value = p
        elif isinstance(field, str):
            if field not in p:
                return False
            value = p[field]
        else:
            if any(f not in p for f in field.values()):
                return False
            value = {u: p[f] for u, f in field.items()}
        if tp is not None and not isinstance(field, list) and not tp.accepts(value):
            return False
        kj = canonical_json([p[k] for k in keys])
        if isinstance(uda, _Collected):
            members.append((kj, pane, le, re, value))
        else:
            groups.setdefault((kj, pane), []).append(value)
    if isinstance(uda, _Collected):
        names = list(dict.fromkeys(m[0] for m in members))
        at = {kj: i for i, kj in enumerate(names)}
        vals = np.empty(len(members), dtype=object)
        vals[:] = [m[4] for m in members]
        pane_a, le_a, re_a = (np.asarray([m[i] for m in members], dtype=np.int64) for i in (1, 2, 3))
        uda.runs.append((names, np.asarray([at[m[0]] for m in members], dtype=np.int64), pane_a, le_a, re_a, vals))
        return True
    try:
        for k, values in groups.items():
            state = uda.add(uda.initial_state(), values)
            acc[k] = uda.merge(acc[k], state) if k in acc else state
    except Exception:
        return False
    return True


def _partial(spec_json: dict[str, Any], n: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Phase 1 over element rows from Spark (JSON-text payloads, ``idh`` hashed by Spark)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield _fold_partition(spec_json, n, (pa.Table.from_batches([rb]) for rb in batches))

    return run


def _range_partial(spec_json: dict[str, Any], n: int, scan: FileScan | None = None
                   ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Phase 1 fused with the read of a file's byte ranges (`udm.host.spark.file_source`): the elements
    never cross to the JVM and back, and their payloads stay the reader's structs. Its input rows are
    `ranges_df`'s, or with ``scan`` ``spark.range``'s: row ``i`` reads ``scan``'s range ``i`` (a plan without
    the ranges as literals, which a cold JVM takes longer to plan)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        def tables(path: str, start: int, stop: int, first: int) -> Iterator[pa.Table]:
            for b in range_batches(path, start, stop, first):
                tb = b.table
                mask = tb.column("id").is_null().to_numpy(zero_copy_only=False)
                yield tb.append_column("idh", pa.array(id_hashes(tb.column("id")), pa.int64(), mask=mask))

        for rb in batches:  # (each range its own facts: `_ctis_respected` compares runs of lines)
            rows = (((scan.path, *scan.ranges[i]) for i in rb.column(0).to_pylist()) if scan is not None
                    else zip(*(rb.column(c).to_pylist() for c in range(4)), strict=True))
            for path, start, stop, first in rows:
                yield _fold_partition(spec_json, n, tables(path, start, stop, first))

    return run


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit FNV-1a hash of each string (null: an arbitrary value), vectorized over the bytes: the
    fused read has no Spark ``xxhash64``, and only equal ids must meet (any stable 64-bit hash does)."""
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    n = len(arr)
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    if n == 0:
        return h.view(np.int64)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    start, length = offsets[:-1], offsets[1:] - offsets[:-1]
    prime = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for j in range(int(length.max())):
            longer = length > j
            if longer.all():
                h = (h ^ data[start + j].astype(np.uint64)) * prime
            else:
                idx = np.flatnonzero(longer)
                h[idx] = (h[idx] ^ data[start[idx] + j].astype(np.uint64)) * prime
        h = (h ^ length.astype(np.uint64)) * prime  # ("a" + "" and "" + "a" differ by length)
    return h.view(np.int64)


def _fold_partition(spec_json: dict[str, Any], n: int, tables: Iterator[pa.Table]) -> pa.RecordBatch:
    """One partition's phase 1: its (group, pane) states per key bucket, id hashes and facts (module doc).
    ``tables``: element rows (``payload`` as JSON text or the reader's struct) with ``idh``."""
    spec = parse_query(spec_json)
    step = spec.steps[0]
    assert isinstance(step, WindowStep)
    bound = bind(spec).steps[0]
    uda, field = _uda_and_input(bound)
    # declared input types (semantics-notes 17): one per UDA (a list for ``aggregates``)
    tp: Any = ([_input_check(p) for p in bound.parts] if bound.parts else _input_check(bound))
    geo = _geometry(step)
    pane_w, off = geo.p, geo.off
    keys = step.group_by
    folded: dict[tuple[str, int], Any] = {}
    ids: list[np.ndarray] = []
    ctis: list[tuple[int, int]] = []
    ins_lines: list[np.ndarray] = []
    ins_les: list[np.ndarray] = []
    ok = True
    for tb in tables:
        if not ok:
            continue  # drain: the answer is already "not eligible"
        kind = tb.column("kind")
        if tb.column("error").null_count != tb.num_rows or kind.null_count:
            ok = False  # bad rows: the engine dead-letters them
            continue
        is_ins = pc.equal(kind, "insert")
        is_cti = pc.equal(kind, "cti")
        if not pc.all(pc.or_(is_ins, is_cti)).as_py():
            ok = False  # retractions
            continue
        if pc.any(is_cti).as_py():
            c = tb.filter(is_cti)
            if c.column("t").null_count:
                ok = False
                continue
            ctis.extend(zip(c.column("line").to_pylist(), c.column("t").to_pylist(), strict=True))
            tb = tb.filter(is_ins)
        if tb.num_rows == 0:
            continue
        le, re = tb.column("le"), tb.column("re")
        if le.null_count or re.null_count or tb.column("idh").null_count:
            ok = False
            continue
        le_np, re_np = le.to_numpy(), re.to_numpy()
        if not (bool((re_np > le_np).all()) and bool((re_np < _INF).all())):
            ok = False  # invalid or infinite lifetimes: the engine's rules (dead letters, truncation)
            continue
        ins_lines.append(tb.column("line").to_numpy())
        ins_les.append(le_np)
        ids.append(tb.column("idh").to_numpy())
        done = (_fold_vectorized(tb, keys, field, pane_w, off, uda, folded, tp)
                if isinstance(field, str) else False)
        if done is None or (done is False and not _fold_rows(tb, keys, field, pane_w, off, uda, folded, tp)):
            ok = False
    buckets: list[int] = []
    tags: list[int] = []
    blobs: list[bytes] = []
    facts = pickle.dumps(_facts(ok, ins_lines, ins_les, ctis))
    for b in range(n):
        buckets.append(b)
        tags.append(_FACTS)
        blobs.append(facts)
    if ok and isinstance(uda, _Collected):
        for b, blob in uda.pack(n):
            buckets.append(b)
            tags.append(_STATES)
            blobs.append(blob)
    elif ok:
        per_bucket: dict[int, dict[tuple[str, int], Any]] = {}
        bucket_of: dict[str, int] = {}
        for k, state in folded.items():
            kb = bucket_of.get(k[0])
            if kb is None:
                kb = bucket_of[k[0]] = key_bucket(k[0], n)
            per_bucket.setdefault(kb, {})[k] = state
        for b, states in per_bucket.items():
            buckets.append(b)
            tags.append(_STATES)
            blobs.append(pickle.dumps(states, protocol=pickle.HIGHEST_PROTOCOL))
    if ok and ids:
        allh = np.concatenate(ids).astype(np.int64)
        hb = allh % n
        for b in range(n):
            part = allh[hb == b]
            if len(part):
                buckets.append(b)
                tags.append(_IDS)
                blobs.append(part.tobytes())
    return pa.RecordBatch.from_pydict({"_bucket": buckets, "tag": tags, "blob": blobs}, schema=_PARTIAL_ARROW)


_Facts = tuple[bool, int, int, int, np.ndarray]


def _facts(ok: bool, ins_lines: list[np.ndarray], ins_les: list[np.ndarray], ctis: list[tuple[int, int]]
           ) -> _Facts:
    """What the final phase needs of a partition to rule out CTI violations: (ok, least and greatest
    insert line, least insert LE, and for each of its CTIs (line, t, least LE of *this partition's*
    inserts after it)). An insert violates CTI ``(line, t)`` iff it comes after ``line`` with ``LE < t``
    (SEMANTICS §1), so the partition holding the CTI checks it exactly against its own inserts."""
    checks = np.empty((len(ctis), 3), dtype=np.int64)
    if not ins_lines:
        if ctis:
            checks[:, :2] = np.asarray(ctis, dtype=np.int64)
            checks[:, 2] = _INF
        return ok, _INF, -1, _INF, checks
    lines, les = np.concatenate(ins_lines), np.concatenate(ins_les)
    order = np.argsort(lines, kind="stable")
    lines, les = lines[order], les[order]
    if ctis:
        suffix_min = np.append(np.minimum.accumulate(les[::-1])[::-1], _INF)
        checks[:, :2] = np.asarray(ctis, dtype=np.int64)
        checks[:, 2] = suffix_min[np.searchsorted(lines, checks[:, 0], side="right")]
    return ok, int(lines[0]), int(lines[-1]), int(les.min()), checks


def _ctis_respected(facts: list[_Facts]) -> bool:
    """No insert after a CTI has ``LE <`` its time. Exact within the partition of the CTI; against another
    partition exact when that partition's inserts all come before or all after the CTI (partitions of a
    file or an in-memory table are runs of lines), else refused (the engine path decides)."""
    for i, (_, _, _, _, checks) in enumerate(facts):
        if not len(checks):
            continue
        line, t = checks[:, 0], checks[:, 1]
        if bool((checks[:, 2] < t).any()):
            return False
        for j, (_, lo, hi, least_le, _) in enumerate(facts):
            if j == i or lo > hi:  # (no inserts there)
                continue
            if bool(((line >= lo) & (line <= hi)).any()) or bool(((line < lo) & (t > least_le)).any()):
                return False
    return True


def _eligible(facts: list[_Facts], id_blobs: list[bytes]) -> bool:
    """The global checks, from every partition's facts and this bucket's id hashes."""
    if not all(f[0] for f in facts) or not _ctis_respected(facts):
        return False
    if id_blobs:
        hashes = np.concatenate([np.frombuffer(b, dtype=np.int64) for b in id_blobs])
        hashes.sort()
        if len(hashes) > 1 and bool((hashes[1:] == hashes[:-1]).any()):
            return False  # maybe a duplicate id (or a 64-bit hash collision): let the engine decide
    return True


def _final(spec_json: dict[str, Any], strict: bool) -> Callable[[pa.Table], pa.Table]:
    def run(table: pa.Table) -> pa.Table:
        spec = parse_query(spec_json)
        step = spec.steps[0]
        assert isinstance(step, WindowStep)
        uda, _ = _uda_and_input(bind(spec).steps[0])
        geo = _geometry(step)
        tags = table.column("tag").to_pylist()
        blobs = table.column("blob").to_pylist()
        facts = [pickle.loads(b) for t, b in zip(tags, blobs, strict=True) if t == _FACTS]
        id_blobs = [b for t, b in zip(tags, blobs, strict=True) if t == _IDS]

        def ineligible() -> pa.Table:
            if strict:
                raise NotEligible(_NOT_ELIGIBLE)
            return pa.table({"kind": [INELIGIBLE], "id": [None], "le": [None], "re": [None], "re_new": [None],
                             "t": [None], "payload": [None], "line": [None]}, schema=_OUT_ARROW)

        if not _eligible(facts, id_blobs):
            return ineligible()
        merge = uda.merge
        per_key: dict[str, dict[int, Any]] = {}
        if isinstance(uda, _Collected):
            per_key = uda.states([b for t, b in zip(tags, blobs, strict=True) if t == _STATES])
        for t, b in zip(tags, blobs, strict=True):
            if t != _STATES or isinstance(uda, _Collected):
                continue
            for (kj, pane), st in pickle.loads(b).items():
                panes = per_key.get(kj)
                if panes is None:
                    panes = per_key[kj] = {}
                panes[pane] = merge(panes[pane], st) if pane in panes else st
        ids: list[str] = []
        les: list[int] = []  # (window indexes)
        payloads: list[str] = []
        alias = json.dumps(step.alias)
        compute = uda.compute
        try:
            for kj, panes in per_key.items():
                key_vals = json.loads(kj)
                # {**keys, alias: value} as text; an alias equal to a key field replaces it
                prefix = "{" + "".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))},"
                                       for k, v in zip(step.group_by, key_vals, strict=True)
                                       if k != step.alias) + alias + ":"
                items = _window_states(geo, panes, merge)
                for k, state in items:
                    value = compute(state)
                    ids.append(f"a{len(ids)}:{kj}")
                    les.append(k)
                    if step.aggregates is not None:  # {**keys, alias_1: v_1, ...} (aliases are not keys)
                        payloads.append(compact_json({**dict(zip(step.group_by, key_vals, strict=True)),
                                                      **dict(zip(step.aliases, value, strict=True))}))
                    else:
                        payloads.append(prefix + _value_json(value) + "}")
        except Exception:  # the engine path reports the UDM's failure with its full context
            return ineligible()
        m = len(ids)
        le_arr, re_arr = geo.extent(np.asarray(les, dtype=np.int64))
        return pa.table({"kind": pa.array(["insert"] * m, pa.string()), "id": pa.array(ids, pa.string()),
                         "le": le_arr, "re": re_arr, "re_new": pa.nulls(m, pa.int64()),
                         "t": pa.nulls(m, pa.int64()), "payload": pa.array(payloads, pa.string()),
                         "line": np.arange(m, dtype=np.int64)}, schema=_OUT_ARROW)

    return run


def run_algebraic(spec: QuerySpec, elements: DataFrame, n_buckets: int, *, strict: bool = True,
                  scan: FileScan | None = None) -> DataFrame:
    """Output elements (without the final CTI) of the two-phase plan over an element DataFrame.

    ``strict``: the job raises `NotEligible` when the input does not fit the plan; otherwise it returns a
    single row of kind `INELIGIBLE` (which the caller checks when it materializes the result).
    ``scan``: ``elements`` is that file's (`udm.host.spark.file_source`); phase 1 then reads the file's
    ranges itself (`_range_partial`) instead of taking rows from the JVM."""
    from pyspark.sql import functions as F

    n = max(1, n_buckets)
    js = spec.to_json_dict()
    if scan is not None:
        partial = ranges_df(elements.sparkSession, scan).mapInArrow(_range_partial(js, n), _PARTIAL_DDL)
        return partial.groupBy("_bucket").applyInArrow(_final(js, strict), _OUT_DDL)
    cols = [F.col(c) if c in elements.columns else F.lit(None).cast(t).alias(c)
            for c, t in (("kind", "string"), ("le", "bigint"), ("re", "bigint"), ("t", "bigint"),
                         ("payload", "string"), ("line", "bigint"), ("error", "string"))]
    idh = F.when(F.col("id").isNotNull(), F.xxhash64(F.col("id"))).alias("idh")
    # few large partial tasks (`python_tasks`): the partial states shrink a partition to its (group, pane)s
    partial = (elements.select(*cols, idh).coalesce(python_tasks(elements.sparkSession))
               .mapInArrow(_partial(js, n), _PARTIAL_DDL))
    # ids embed the group key, which lives in exactly one bucket: unique across buckets
    return partial.groupBy("_bucket").applyInArrow(_final(js, strict), _OUT_DDL)


def final_on_driver(spec: QuerySpec, spark: SparkSession, scan: FileScan) -> pa.Table | None:
    """The two-phase plan over an element file (`udm.host.spark.file_source`) with its final phase on the
    driver: phase 1 (the fused read and fold, `_range_partial`) runs on Spark, one task per range, in one
    bucket; its rows (pane states, id hashes, facts) come back in one Arrow collect and `_final` merges
    them here. Output rows (`_OUT_ARROW`, without the final CTI; ``line`` numbers their order), or None
    when the input does not fit the plan.

    For ``udm run --engine spark`` on an input small enough (`udm.host.spark.engine`): it writes every
    output row on the driver anyway, and the shuffle, the final tasks and a second collect of the
    persisted result that the Spark-side final phase needs cost more than merging here (bench_spark_cli)."""
    js = spec.to_json_dict()
    k = len(scan.ranges)
    partial = spark.range(0, k, 1, k).mapInArrow(_range_partial(js, 1, scan), _PARTIAL_DDL).toArrow()
    out = _final(js, False)(partial)
    if out.num_rows == 1 and out.column("kind")[0].as_py() == INELIGIBLE:
        return None
    return out
