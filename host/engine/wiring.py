"""How `QueryRunner` connects a query graph's inputs and operators: who reads each input and each
operator's output, which input each operator port carries, and which step may take an lmerge's feedback.

Transient: rebuilt from the graph on every start and restore (a snapshot holds none of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from udm.host.model.graph import QueryGraph

from .operator import Operator
from .ops.lmerge import LmergeOp
from .ops.span import FilterOp, MapOp, ProjectOp

__all__ = ["Wiring", "wire"]


@dataclass
class Wiring:
    #: per operator, the (operator position, port) pairs that read its output
    consumers: list[list[tuple[int, int]]]
    #: per input, the (operator position, port) pairs that read it
    readers: dict[str, list[tuple[int, int]]]
    #: inputs whose end goes down the plan at once (they reach only lmerges: semantics-notes 23)
    ends_early: set[str]


def wire(graph: QueryGraph, ops: list[Operator], gates: Mapping[str, Any]) -> Wiring:
    """The edges of ``graph`` over ``ops`` (topological order); also tells each operator the input each of
    its ports carries (``input_names``) and each lmerge the steps that feed it (``feeders``)."""
    position = {op.name: i for i, op in enumerate(ops)}
    w = Wiring([[] for _ in ops], {name: [] for name in graph.inputs},
               {name for name in graph.inputs if graph.ends_early(name)})
    for node in graph.nodes:
        for port, src in enumerate(node.sources):
            if src in graph.inputs:
                w.readers[src].append((position[node.name], port))
            else:
                w.consumers[position[src]].append((position[node.name], port))
    upstream: dict[str, set[str]] = {name: {name} for name in graph.inputs}
    for node in graph.nodes:
        upstream[node.name] = set().union(*(upstream[src] for src in node.sources))
    for op in ops:
        sources = graph.node(op.name).sources
        op.input_names = tuple(next(iter(upstream[s])) if len(upstream[s]) == 1 else None for s in sources)
    for op in ops:
        if isinstance(op, LmergeOp):
            op.feeders = [_feeder(graph, op, port, position, ops, gates, w) for port in range(op.ports)]
    return w


def _feeder(graph: QueryGraph, merge: Any, port: int, position: dict[str, int], ops: list[Operator],
            gates: Mapping[str, Any], w: Wiring) -> Any:
    """The span step or input gate whose output only ``merge``'s ``port`` reads: it may take the lmerge's
    feedback (seeds/001 §V.D)."""
    src = graph.node(merge.name).sources[port]
    if src in gates:
        return gates[src] if len(w.readers[src]) == 1 else None
    k = position[src]
    op = ops[k]
    if len(w.consumers[k]) != 1 or not isinstance(op, (FilterOp, MapOp, ProjectOp)):
        return None
    return op
