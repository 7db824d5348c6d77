"""A query graph cut into stages, one partitioning each, for the Spark paths (SEMANTICS §10 on Spark).

When one partitioning is valid for the whole graph (`udm.host.spark.partition.graph_routing`: a join's two
``on`` sides and every window's group keys share a routing slot), the graph runs whole inside each key
bucket: one stage. When the key changes along the way (bids joined to persons by bidder, then counted per
auction), no single partitioning works; instead of running everything in one bucket, the graph is cut
into *stages*. Each stage is a sub-graph with one partitioning of its own, fed by query inputs and by the
outputs of earlier stages, which Spark shuffles to it by *its* key (an exchange).

How stages are formed (`plan_stages`), walking the steps from the output backwards: a step joins the
stage of its consumers when all its consumers are in one stage and that stage, with it, still has a
routing (`routing_of`); a stateless step (filter, map, project, alter_lifetime, flat_map, union all) also joins a
consumer stage that must run in one bucket anyway. Otherwise the step is the *sink* of a new stage. So
every stage has exactly one output stream read outside it (its sink), the stages form a DAG in the order
they are listed, and a graph with one valid partitioning is one stage, planned exactly as before.

Each stage is a query of its own (`Stage.spec`): its inputs are the query inputs it reads (with their
``on_violation``) and the sinks of earlier stages it reads; its steps keep their ids. An exchange stream
is the union of what every bucket of the producing stage emitted, so its CTI is the minimum over those
buckets (`merge_exchange`), as SEMANTICS §10 says of a multi-input operator.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.model.graph import GraphNode, resolve
from udm.host.model.spec import QuerySpec, parse_query
from udm.host.spark.partition import routing_of, whole_input

__all__ = ["STATELESS_OPS", "Stage", "checked_before", "merge_exchange", "plan_stages", "read_before"]

#: ops whose output elements depend on one input event only (a union without ``distinct`` too; a flat_map
#: keeps a record per event, which any routing keeps together: an event's elements go to one bucket)
STATELESS_OPS = frozenset({"filter", "map", "project", "alter_lifetime", "flat_map"})


def _stateless(node: GraphNode) -> bool:
    return node.op in STATELESS_OPS or (node.op == "union" and not getattr(node.step, "distinct", False))


@dataclass(frozen=True)
class Stage:
    """One stage: its steps (topological order), the streams it reads, its sink and its routing."""

    index: int
    nodes: tuple[GraphNode, ...]
    #: streams the stage reads: query inputs and the sinks of earlier stages, in first-read order
    inputs: tuple[str, ...]
    #: the one step of the stage read outside it (the query output for the last stage)
    sink: str
    #: `udm.host.spark.partition.routing_of` the stage: ``{stream: fields}``, ``BY_ID`` or None (one bucket)
    routing: dict[str, list[str]] | str | None
    #: the stage as a query of its own (inputs: ``inputs``; output: ``sink``)
    spec: QuerySpec
    #: per stream read, the query inputs it derives from (dead letters of a later stage name them)
    origins: dict[str, frozenset[str]] = field(default_factory=dict)

    def exchanges(self, query_inputs: Sequence[str]) -> tuple[str, ...]:
        """The streams this stage reads from earlier stages (not query inputs)."""
        return tuple(s for s in self.inputs if s not in query_inputs)


def plan_stages(spec: QuerySpec, *, split: bool = True) -> list[Stage]:
    """The stages of ``spec``'s graph, producers before consumers; one stage when `graph_routing` finds a
    partitioning for the whole graph, or when ``split`` is false (a plan that runs in one bucket)."""
    graph = resolve(spec)
    whole = routing_of(graph.nodes, graph.inputs)
    groups: list[list[GraphNode]] = []
    stage_of: dict[str, int] = {}
    if whole_input(spec):  # retraction-chain repair, a finite finalize: one bucket (`partition_keys`)
        return [Stage(0, graph.nodes, graph.inputs, graph.output, None, spec,
                      {name: frozenset({name}) for name in graph.inputs})]
    if whole is not None or not split:
        groups = [list(graph.nodes)]
    else:
        for node in reversed(graph.nodes):
            consumers = {stage_of[c.name] for c, _ in graph.consumers(node.name)}
            if node.name != graph.output and len(consumers) == 1:
                s = consumers.pop()
                candidate = [node, *groups[s]]
                current = routing_of(groups[s], _reads(groups[s]))
                if (routing_of(candidate, _reads(candidate)) is not None
                        or (current is None and _stateless(node))):
                    groups[s] = candidate
                    stage_of[node.name] = s
                    continue
            stage_of[node.name] = len(groups)
            groups.append([node])
        groups.reverse()  # built from the output back: producers last
    origins: dict[str, frozenset[str]] = {name: frozenset({name}) for name in graph.inputs}
    for node in graph.nodes:
        origins[node.name] = frozenset().union(*(origins[s] for s in node.sources))
    stages: list[Stage] = []
    for index, nodes in enumerate(groups):
        reads = _reads(nodes)
        sink = nodes[-1].name
        stages.append(Stage(index, tuple(nodes), reads, sink, routing_of(nodes, reads),
                            _stage_spec(spec, nodes, reads, sink), {s: origins[s] for s in reads}))
    return stages


def _reads(nodes: Sequence[GraphNode]) -> tuple[str, ...]:
    """The streams ``nodes`` read from outside themselves, in first-read order."""
    inside = {n.name for n in nodes}
    seen: dict[str, None] = {}
    for n in nodes:
        for src in n.sources:
            if src not in inside:
                seen.setdefault(src)
    return tuple(seen)


def _stage_spec(spec: QuerySpec, nodes: Sequence[GraphNode], reads: Sequence[str], sink: str) -> QuerySpec:
    data = spec.to_json_dict()
    declared = data.get("inputs") or {}
    steps = []
    for node in nodes:
        step = dict(data["steps"][node.index])
        step["id"] = node.name
        step["from"] = list(node.sources)
        steps.append(step)
    inputs = {name: declared.get(name, {}) for name in reads}
    query: dict[str, Any] = {"inputs": inputs, "steps": steps, "output": sink}
    if "on_violation" in data:
        query["on_violation"] = data["on_violation"]
    return parse_query(query)


def merge_exchange(table: pa.Table) -> pa.Table:
    """One exchange stream from what the producing stage's buckets emitted: ``table`` holds element rows
    (``kind, id, le, re, re_new, t, payload``), ``_src`` (the producing bucket) and ``line`` (the row's
    position in that bucket's output, CTIs included; ids are unique across buckets).

    Returns the element rows in a valid order, with no line (an intermediate element has none): each CTI
    row carries the new merged CTI (the minimum over the buckets' latest CTIs: no bucket's later element
    can be below it) or is left out when it does not raise the minimum. Rows are interleaved by the CTI
    their bucket had reached before them, so the merged CTI advances as the buckets do and a consumer's
    state stays bounded."""
    neg = -(2**63)
    n = table.num_rows
    if n == 0:
        return table.drop_columns(["_src"])
    src = table.column("_src").to_numpy(zero_copy_only=False).astype(np.int64)
    seq = table.column("line").to_numpy(zero_copy_only=False).astype(np.int64)
    is_cti = pc.fill_null(pc.equal(table.column("kind"), "cti"), False).to_numpy(zero_copy_only=False)
    t = pc.fill_null(table.column("t"), neg).to_numpy(zero_copy_only=False).astype(np.int64)
    by_bucket = np.lexsort((seq, src))
    src_o = src[by_bucket]
    cti_t = np.where(is_cti, t, neg)[by_bucket]
    epoch = np.empty(n, dtype=np.int64)
    starts = [0, *(np.flatnonzero(src_o[1:] != src_o[:-1]) + 1).tolist(), n]
    for a, b in itertools.pairwise(starts):
        epoch[a:b] = np.maximum.accumulate(cti_t[a:b])  # the bucket's CTI so far, its own included
    order = by_bucket[np.lexsort((seq[by_bucket], src_o, epoch))]
    latest = {int(b): neg for b in np.unique(src)}
    heap = [(neg, b) for b in latest]
    low = neg
    keep = ~is_cti[order]
    new_t = t[order].copy()
    for pos in np.flatnonzero(is_cti[order]).tolist():
        b = int(src[order[pos]])
        if new_t[pos] > latest[b]:
            latest[b] = int(new_t[pos])
            heapq.heappush(heap, (latest[b], b))
        while heap[0][0] != latest[heap[0][1]]:  # stale entries of buckets that moved on
            heapq.heappop(heap)
        if heap[0][0] > low:
            low = heap[0][0]
            new_t[pos] = low
            keep[pos] = True
    out = table.take(pa.array(order)).drop_columns(["_src"])
    out = out.set_column(out.column_names.index("t"), "t", pa.array(np.where(is_cti[order], new_t, 0), pa.int64(),
                                                                      mask=~is_cti[order]))
    out = out.set_column(out.column_names.index("line"), "line", pa.nulls(n, pa.int64()))
    return out.filter(pa.array(keep))


def read_before(stages: Sequence[Stage], stage: Stage, query_inputs: Sequence[str]) -> frozenset[str]:
    """The query inputs ``stage`` reads that an earlier stage reads too (and checks first)."""
    earlier = {x for s in stages if s.index < stage.index for x in s.inputs}
    return frozenset(x for x in stage.inputs if x in query_inputs and x in earlier)


def checked_before(dead_letter: Any, stage: Stage, read_before: frozenset[str]) -> bool:
    """Whether a dead letter of ``stage`` is an input-level one (a bad line, a CTI violation, an id error:
    its reason has no ``step`` prefix) of a query input an earlier stage reads too. That stage reported
    it already; one engine reports it once, so the copy is dropped."""
    dl = dead_letter
    name = dl.input if dl.input is not None else (stage.inputs[0] if len(stage.inputs) == 1 else None)
    return name in read_before and not str(dl.reason).startswith("step ")
