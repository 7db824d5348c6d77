"""The reference oracle (seeds/002 §6): the expected output CHT of a query, by brute force.

Written from SEMANTICS.md and docs/semantics-notes.md directly, and kept independent of the engine: it
imports nothing from ``udm.host.engine`` and shares no window, clipping or output-policy code with it.
The shape is deliberately naive, like the SQL translation of seeds/002: for each group, take the group's
CHT, enumerate every window it defines, collect the members of each window by testing every event,
clip, sort canonically, call the UDM non-incrementally (an incremental UDM gets ``initial_state``, one
``add`` of all members, ``compute``), and stamp the outputs per the output policy.

Where the result depends on the physical stream rather than on its CHT (``max_memory_time``; T, the
largest finite time the input reached, which cuts endless events on tumbling/hopping/cumulate windows — one T
per run, taken from what the query's first step accepts), the oracle follows the physical input up to
the first window step; after a window step only the CHT is known, so a finite ``max_memory_time``
there is undecidable and raises `OracleUndecidable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import FilterStep, MapStep, QuerySpec, WindowStep
from udm.host.temporal.elements import Element
from udm.sdk import INF

from .cht import CHT, Rejected, apply_stream
from .oracle_graph import graph_oracle_run
from .oracle_steps import (
    OracleResult,
    OracleUndecidable,
    group_windows,
    span_physical,
    span_reach,
    span_rows,
    window_input,
    window_step,
)
from .repair import repair_stream

__all__ = ["OracleResult", "OracleUndecidable", "group_windows", "oracle", "oracle_run"]


Inputs = Sequence[Element] | Mapping[str, Sequence[Element]]


def oracle_run(query: QuerySpec | BoundQuery, elements: Inputs, catalog: Any = None) -> OracleResult:
    """`oracle` with details: truncation point, the elements the query dead-letters, per-step CHTs.

    ``elements`` is one stream (the single input) or a dict of streams by input name (a query graph,
    SEMANTICS §10; see `udm.host.testing.oracle_graph`)."""
    bq = build_plan(query, catalog)
    spec = bq.spec
    graph = bq.graph
    other_ops = any(not isinstance(bs.step, (FilterStep, MapStep, WindowStep)) for bs in bq.steps)
    if isinstance(elements, Mapping) or not graph.is_linear or spec.inputs is not None or other_ops:
        if not isinstance(elements, Mapping):
            if len(graph.inputs) != 1:
                raise ValueError(f"the query has several inputs ({', '.join(graph.inputs)}): pass a dict of "
                                 f"streams by input name")
            elements = {graph.inputs[0]: elements}
        return graph_oracle_run(bq, elements)
    refused: list[Rejected] = []
    rep = spec.input_repair(graph.inputs[0])
    if rep is not None:  # semantics-notes 20
        elements, refused = repair_stream(list(elements), rep.horizon)
    state = apply_stream(elements, on_violation=spec.on_violation)
    result = OracleResult(CHT(), rejected=[*refused, *state.rejected])
    stream: list[Element] | None = list(state.accepted)  # physical until the first window step
    rows: list[tuple[int, int, str]] = []
    # T of semantics-notes 2: one value per run, the largest finite time of the elements the query's
    # first step accepts (its validity and field checks; a filter's rejects still count, it saw them)
    reached: int | None = None
    for i, bs in enumerate(bq.steps):
        step = bs.step
        if i == 0 and isinstance(step, (FilterStep, MapStep)):
            assert stream is not None
            reached = span_reach(bs, stream)
        if isinstance(step, (FilterStep, MapStep)):
            if stream is not None:
                stream = span_physical(bs, stream)
                result.step_chts.append(apply_stream(stream).cht())
            else:
                rows = span_rows(bs, rows)
                result.step_chts.append(CHT.from_rows(rows))
            continue
        assert isinstance(step, WindowStep)
        if stream is not None:
            st = window_input(bs, stream, spec.on_violation)
            events = [(le, re, p) for le, re, p in st.events()]
            if i == 0:
                reached = st.max_finite
            stream = None
        else:
            if step.max_memory_time < INF:
                raise OracleUndecidable(
                    f"max_memory_time={step.max_memory_time} on a window step fed by another window step "
                    "depends on that step's physical output; the oracle only knows its CHT")
            events = [(le, re, json.loads(p)) for le, re, p in rows]
        rows, cut = window_step(bs, events, reached)
        if cut:
            result.truncated_at = reached
        result.step_chts.append(CHT.from_rows(rows))
    result.cht = apply_stream(stream).cht() if stream is not None else CHT.from_rows(rows)
    return result


def oracle(query: QuerySpec | BoundQuery, elements: Inputs, catalog: Any = None) -> CHT:
    """The expected output CHT of ``query`` over ``elements`` (a finite input: it ends as if ``cti(INF)``
    arrived, semantics-notes 1; a dict of streams by input name for a query graph). Raises
    `ContractViolation` where the engine must fail the run, and `ViolationError` for
    ``on_violation: error`` on a bad element."""
    return oracle_run(query, elements, catalog).cht

