"""The reference oracle for query graphs (SEMANTICS §10), by brute force from the definitions.

Like `oracle`, it imports nothing from ``udm.host.engine``. Per input: the CHT under that input's
``on_violation`` (SEMANTICS §1, validated on its own). Then, per node in topological order, the node's
output from its sources' outputs:

- ``union``: multiset sum of the sources' CHTs (``distinct``: each distinct row once);
- ``project``: ``keep`` (a row lacking a kept field is dropped: a malformed payload), ``drop``, ``rename``
  (a renamed field overwrites a field of the target name), ``set``;
- ``alter_lifetime``: ``[f(LE), f(LE) + duration)`` per row;
- ``join`` inner: every pair by nested loops (keys equal as JSON values, lifetimes overlapping, ``where``),
  ``[max LE, min RE)``, ``{**right', **left'}``; ``left_anti``: per left row, the maximal parts of its
  lifetime no matching right row covers (a right row matches when its ``on`` fields are equal and
  ``where``, if any, holds on the joined payload);
- ``lmerge``: the common CHT of its inputs (SEMANTICS §8; those in ``join_at`` carry only a suffix and are
  not consulted). Inputs that are not logically equivalent have no common CHT: `OracleUndecidable`;
- ``flat_map``: per row of the node's input CHT, the span UDO's outputs (time-insensitive: each payload
  with the row's lifetime; time-sensitive: the ``(LE, RE, payload)`` it gives for ``Event(LE, RE, payload)``,
  which must lie inside it); a row whose payload it refuses (`udm.sdk.MalformedPayload`) gives none;
- ``filter``/``map``/``window``: as in `oracle`, on the node's input;
- ``align``: its input's CHT (it only holds output back, SEMANTICS §10);
- ``finalize``: on a physical stream, the elements valid against ``max(CTI, m - max_memory_time)`` (as a
  window step's ``max_memory_time``); on a CHT, the CHT itself with ``max_memory_time: "inf"`` and
  `OracleUndecidable` otherwise (which corrections come too late depends on the physical stream).

A node's output is kept as a physical stream while that is cheap and exact (inputs, filter, map, project:
they keep lifetimes and ids), so a window step's ``max_memory_time`` on such a stream is exact; anything
else is a CHT (rows), and a finite ``max_memory_time`` there is `OracleUndecidable`.

T (the truncation time of SEMANTICS §3) is one value per run: the largest finite time reached, over all
inputs, by what the steps reading the inputs accept (an input read by one single-input step: that step's
field checks; otherwise every valid element).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from udm.host.errors import ContractViolation
from udm.host.model.plan import BoundQuery, BoundStep
from udm.host.model.spec import (
    AlignStep,
    AlterLifetimeStep,
    Const,
    FilterStep,
    FinalizeStep,
    FlatMapStep,
    JoinStep,
    LmergeStep,
    MapStep,
    ProjectStep,
    Shift,
    Snap,
    UnionStep,
    WindowStep,
)
from udm.host.temporal.elements import Element, Insert, canonical_json
from udm.sdk import INF, Event, MalformedPayload

from .cht import CHT, Row, StreamState, apply_stream
from .oracle_steps import (
    MISSING,
    OracleResult,
    OracleUndecidable,
    map_physical,
    map_rows,
    span_physical,
    span_reach,
    span_rows,
    window_input,
    window_step,
)
from .repair import repair_stream

__all__ = ["graph_oracle_run", "json_key"]



def json_key(value: Any) -> Any:
    """A hashable form of a JSON value under JSON equality: numbers by value (``1 == 1.0``), ``true != 1``,
    objects by their items, arrays element-wise."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", value)  # Python: 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, Mapping):
        return ("obj", tuple(sorted((str(k), json_key(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(json_key(v) for v in value))
    return ("other", repr(value))


# ---------------------------------------------------------------------------------------------------
# operators on rows (le, re, canonical payload text)


def _project_payload(step: ProjectStep, p: Mapping[str, Any]) -> Any:
    if step.keep is not None:
        if any(f not in p for f in step.keep):
            return MISSING
        out = {f: p[f] for f in step.keep}
    else:
        out = dict(p)
    for f in step.drop:
        out.pop(f, None)
    if step.rename:
        renamed = {step.rename[k]: v for k, v in out.items() if k in step.rename}
        out = {k: v for k, v in out.items() if k not in step.rename}
        out.update(renamed)  # a renamed field overwrites an existing field of the target name
    out.update(step.set)
    return out




def _alter_rows(step: AlterLifetimeStep, rows: list[Row]) -> list[Row]:
    out = []
    for le, re, text in rows:
        if isinstance(step.le, Shift):
            nle = le + step.le.shift
        elif isinstance(step.le, Snap):
            g = step.le.snap
            nle = g.offset + ((le - g.offset) // g.size) * g.size
        else:
            nle = le
        if isinstance(step.duration, Const):
            nre = nle + step.duration.const
        elif step.duration == "inf" or re >= INF:
            nre = INF
        else:
            nre = nle + (re - le)
        out.append((nle, nre, text))
    return out


def _flat_map_rows(bs: BoundStep, rows: list[Row]) -> list[Row]:
    """SEMANTICS §10 ``flat_map``: the multiset union over the input rows of the span UDO's outputs."""
    props = bs.entry.manifest.properties

    def bad(le: int, re: int, p: Any, what: str) -> ContractViolation:
        re_text = "inf" if re >= INF else re
        return ContractViolation(f"UDM {bs.label} on event [{le}, {re_text}) {p!r}: {what}")

    out: list[Row] = []
    for le, re, text in rows:
        p = json.loads(text)  # a fresh object per call: a mutating UDO cannot corrupt the rows
        try:
            items = list(bs.udm.compute(Event(le, re, p) if props.time_sensitive else p))
        except MalformedPayload:
            continue  # dead-lettered by the step
        except Exception as exc:
            raise bad(le, re, p, f"raised {type(exc).__name__}: {exc}") from exc
        for item in items:
            if props.time_sensitive:
                if isinstance(item, Event):
                    a, b, q = item.le, item.re, item.payload
                elif isinstance(item, tuple) and len(item) == 3:
                    a, b, q = item
                else:
                    raise bad(le, re, p, f"yields Event or (le, re, payload), got {item!r}")
                if (isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int)
                        or not le <= a < b <= re):
                    raise bad(le, re, p, f"output {item!r} does not lie inside the event")
            else:
                a, b, q = le, re, item
            if not isinstance(q, Mapping):
                raise bad(le, re, p, f"an output payload must be an object, got {q!r}")
            try:
                out.append((a, b, canonical_json(dict(q))))
            except (TypeError, ValueError):
                raise bad(le, re, p, f"output {q!r} is not JSON-serializable") from None
    return out


def _union_rows(step: UnionStep, sources: list[list[Row]]) -> list[Row]:
    if step.distinct:
        return sorted({r for rows in sources for r in rows})
    return [r for rows in sources for r in rows]


def _prefixed(p: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {prefix + k: v for k, v in p.items()}


def _join_rows(bs: BoundStep, left: list[Row], right: list[Row]) -> list[Row]:
    step = bs.step
    assert isinstance(step, JoinStep)
    lf = [a for a, _ in step.on]
    rf = [b for _, b in step.on]

    def keyed(rows: list[Row], fields: list[str]) -> list[tuple[int, int, dict[str, Any], Any]]:
        out = []
        for le, re, text in rows:
            p = json.loads(text)
            if any(f not in p for f in fields):
                continue  # a malformed payload of that input: dead-lettered
            out.append((le, re, p, tuple(json_key(p[f]) for f in fields)))
        return out

    ls, rs = keyed(left, lf), keyed(right, rf)

    def joined(lp: dict[str, Any], rp: dict[str, Any]) -> dict[str, Any]:
        return {**_prefixed(rp, step.right_prefix), **_prefixed(lp, step.left_prefix)}  # left wins

    def where(payload: dict[str, Any]) -> bool:
        if step.where is None:
            return True
        args = {}
        for a, f in step.where.args.items():
            if f not in payload:
                raise ContractViolation(f"{bs.label}: join 'where' reads field {f!r}, which the joined payload "
                                        f"{payload!r} lacks")
            args[a] = payload[f]
        try:
            return bool(bs.udm.compute(**args))
        except ContractViolation:
            raise
        except Exception as exc:
            raise ContractViolation(f"{bs.label}: raised {type(exc).__name__}: {exc} on {args!r}") from exc

    out: list[Row] = []
    for lle, lre, lp, lk in ls:
        if step.type == "inner":
            for rle, rre, rp, rk in rs:
                if lk != rk:
                    continue
                le, re = max(lle, rle), min(lre, rre)
                if le >= re:
                    continue
                p = joined(lp, rp)
                if where(p):
                    out.append((le, re, canonical_json(p)))
        else:  # left_anti: the maximal parts of [lle, lre) no matching right row covers
            cover = sorted((max(rle, lle), min(rre, lre)) for rle, rre, rp, rk in rs
                           if rk == lk and rle < lre and rre > lle and where(joined(lp, rp)))
            at = lle
            text = canonical_json(lp)
            for cle, cre in cover:
                if cle > at:
                    out.append((at, cle, text))
                at = max(at, cre)
            if at < lre:
                out.append((at, lre, text))
    return out


def _lmerge_rows(name: str, step: LmergeStep, sources: Sequence[str], rows: list[list[Row]],
                 undecidable: type[Exception]) -> list[Row]:
    full = [(src, sorted(r)) for src, r in zip(sources, rows, strict=True) if src not in step.join_at]
    first, common = full[0]
    for src, other in full[1:]:
        if other != common:
            raise undecidable(f"lmerge step {name!r}: its inputs are not logically equivalent ({first!r} and "
                              f"{src!r} have different CHTs), so there is no common CHT to merge")
    return common


# ---------------------------------------------------------------------------------------------------
# the graph


def _rows_of(value: list[Element] | list[Row], physical: bool) -> list[Row]:
    if physical:
        return list(apply_stream(value).cht().elements())
    return list(value)


def _input_reach(bq: BoundQuery, name: str, stream: list[Element], policy: str) -> int | None:
    """T's contribution of one input: the largest finite time of what the step reading it accepts."""
    readers = bq.graph.consumers(name)
    if len(readers) == 1:
        bs = bq.step(readers[0][0].name)
        step = bs.step
        if isinstance(step, (FilterStep, MapStep)):
            return span_reach(bs, stream)
        if isinstance(step, WindowStep):
            return window_input(bs, stream, policy).max_finite
        if isinstance(step, ProjectStep) and step.keep:
            st = StreamState()
            for el in stream:
                if isinstance(el, Insert) and any(f not in el.payload for f in step.keep):
                    continue
                st.apply(el)
            return st.max_finite
    return apply_stream(stream).max_finite


def graph_oracle_run(bq: BoundQuery, inputs: Mapping[str, Sequence[Element]]) -> Any:
    """The `OracleResult` of a query graph over named input streams (missing inputs are empty)."""
    graph = bq.graph
    spec = bq.spec
    unknown = sorted(set(inputs) - set(graph.inputs))
    if unknown:
        raise ValueError(f"the query has no input(s) {', '.join(unknown)} (inputs: {', '.join(graph.inputs)})")
    result = OracleResult(CHT())
    # name -> (physical?, elements or rows)
    values: dict[str, tuple[bool, Any]] = {}
    reached: int | None = None
    for name in graph.inputs:
        policy = spec.input_policy(name)
        els: Sequence[Element] = inputs.get(name, ())
        refused: list[Any] = []
        rep = spec.input_repair(name)
        if rep is not None:  # semantics-notes 20
            els, refused = repair_stream(list(els), rep.horizon)
        st = apply_stream(els, on_violation=policy)
        result.rejected.extend([*refused, *st.rejected])
        result.rejected_by_input[name] = [*refused, *st.rejected]
        values[name] = (True, list(st.accepted))
        r = _input_reach(bq, name, list(st.accepted), policy)
        if r is not None:
            reached = r if reached is None else max(reached, r)

    for node in graph.nodes:
        bs = bq.step(node.name)
        step = bs.step
        srcs = [values[s] for s in node.sources]
        out: tuple[bool, Any]
        if isinstance(step, (FilterStep, MapStep)):
            phys, val = srcs[0]
            out = (True, span_physical(bs, val)) if phys else (False, span_rows(bs, val))
        elif isinstance(step, ProjectStep):
            phys, val = srcs[0]
            # an insert without a kept field is dead-lettered; its retractions are then unknown ids
            project = functools.partial(_project_payload, step)
            out = (True, map_physical(val, project)) if phys else (False, map_rows(val, project))
        elif isinstance(step, AlterLifetimeStep):
            out = (False, _alter_rows(step, _rows_of(srcs[0][1], srcs[0][0])))
        elif isinstance(step, FlatMapStep):
            out = (False, _flat_map_rows(bs, _rows_of(srcs[0][1], srcs[0][0])))
        elif isinstance(step, UnionStep):
            out = (False, _union_rows(step, [_rows_of(v, p) for p, v in srcs]))
        elif isinstance(step, JoinStep):
            out = (False, _join_rows(bs, _rows_of(srcs[0][1], srcs[0][0]), _rows_of(srcs[1][1], srcs[1][0])))
        elif isinstance(step, LmergeStep):
            out = (False, _lmerge_rows(node.name, step, node.sources, [_rows_of(v, p) for p, v in srcs],
                                       OracleUndecidable))
        elif isinstance(step, AlignStep):
            out = (False, _rows_of(srcs[0][1], srcs[0][0]))
        elif isinstance(step, FinalizeStep):
            phys, val = srcs[0]
            if phys:
                fst = apply_stream(val, max_memory_time=step.max_memory_time)
                result.rejected.extend(fst.rejected)
                out = (True, list(fst.accepted))
            elif step.max_memory_time < INF:
                raise OracleUndecidable(
                    f"max_memory_time={step.max_memory_time} on finalize step {node.name!r}, fed by a step whose "
                    "physical output the oracle does not model; the oracle only knows its CHT")
            else:
                out = (False, list(val))
        elif isinstance(step, WindowStep):
            phys, val = srcs[0]
            if phys:
                policy = spec.input_policy(node.sources[0]) if node.sources[0] in graph.inputs else "dead_letter"
                wst = window_input(bs, val, policy)
                events = list(wst.events())
            else:
                if step.max_memory_time < INF:
                    raise OracleUndecidable(
                        f"max_memory_time={step.max_memory_time} on step {node.name!r}, fed by a step whose "
                        "physical output the oracle does not model; the oracle only knows its CHT")
                events = [(le, re, json.loads(p)) for le, re, p in val]
            rows, cut = window_step(bs, events, reached)
            if cut:
                result.truncated_at = reached
            out = (False, rows)
        else:
            raise TypeError(f"the oracle has no rule for op {step.op!r}")
        values[node.name] = out
        result.step_chts.append(CHT.from_rows(_rows_of(out[1], out[0])))
    phys, val = values[graph.output]
    result.cht = CHT.from_rows(_rows_of(val, phys))
    return result
