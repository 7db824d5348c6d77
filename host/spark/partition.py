"""How the batch path splits a query across Spark tasks without changing its meaning.

A window step computes per group (SEMANTICS §6), so a query can be split by any set of payload fields
that every window step groups by — as long as no map step rewrites one of them first (the group would
then not be the input's). Filter/map steps are span-based and split freely.

A query with no such field (keyless) can still be split by *time range* when its windows are fixed in
time (`time_split`): each range owns the windows that start in it and gets every event that overlaps one
of them; the output of windows it does not own is dropped. Otherwise it runs in one bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from udm.host.model.graph import resolve
from udm.host.model.spec import (
    AlignStep,
    AlterLifetimeStep,
    Cumulate,
    FilterStep,
    FinalizeStep,
    FlatMapStep,
    Hopping,
    JoinStep,
    MapStep,
    ProjectStep,
    QuerySpec,
    Tumbling,
    UnionStep,
    WindowStep,
)
from udm.host.spark.stream_buckets import murmur3_long

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.model.graph import GraphNode

__all__ = ["BY_ID", "bucket_groups", "graph_routing", "one_row", "partition_keys", "python_tasks",
           "routing_of", "time_split", "whole_input"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

_INF = 2**63 - 1


def whole_input(spec: QuerySpec) -> bool:
    """The query must see each input whole, in one bucket: a horizon measured on an input's watermark
    (retraction-chain repair, semantics-notes 20) or on a stream's (a ``finalize`` with a finite
    ``max_memory_time``: which corrections it refuses follows the largest LE of everything it reads, which a
    bucket does not know)."""
    return spec.uses_repair or any(s.op == "finalize" and s.max_memory_time < _INF for s in spec.steps)


def partition_keys(spec: QuerySpec) -> list[str]:
    """Payload fields to hash into key buckets ([] = the query must see the whole stream at once).

    A chain with any other op than filter/map/window (project, alter_lifetime, ...) is planned as a graph
    (`graph_routing`), which knows what they do to fields. An input with retraction-chain repair runs
    in one bucket: its horizon is measured on the whole input's watermark (semantics-notes 20); so does a
    finite ``finalize`` (`whole_input`)."""
    if whole_input(spec):
        return []
    if any(not isinstance(s, (FilterStep, MapStep, WindowStep)) for s in spec.steps):
        routing = graph_routing(spec)
        return list(routing[spec.input_names[0]]) if isinstance(routing, dict) and len(routing) == 1 else []
    keys: list[str] | None = None
    rewritten: set[str] = set()
    for step in spec.steps:
        if isinstance(step, MapStep):
            rewritten.add(step.as_)
        elif isinstance(step, WindowStep):
            group = [k for k in step.group_by if k not in rewritten]
            keys = group if keys is None else [k for k in keys if k in group]
            # a UDA's output replaces the payload with {keys, alias}: a later alias equal to a key rewrites it
            if step.as_ is not None or step.aggregates is not None:
                rewritten.update(step.aliases)
    return keys or []


def time_split(spec: QuerySpec) -> int | None:
    """The window size when the query may be split into time ranges (overlapping by that size), else None.

    Sound only when every piece of the answer can be computed from the events near it, and attributed to
    exactly one range:

    - the query ends with its only window step, a `tumbling`, `hopping` or `cumulate` one: such a window
      is fixed in time (``[offset + k*hop, ... + size)``; a cumulate window lies inside its period
      ``[offset + k*size, ... + size)`` and starts where it does), so a range owning the windows with
      ``W.LE`` in ``[a, b)`` needs exactly the events overlapping ``[a, b - 1 + size)``. Snapshot windows
      are cut at *every* event endpoint of the group and count windows at every n-th start/end, so which
      windows exist near a time depends on the whole stream: a range would see other windows than the whole
      stream has;
    - its output policy is ``window``: every output then has ``LE = W.LE``, which says which window, hence
      which range, it belongs to (a retraction quotes the same ``LE``). Other policies give lifetimes
      that do not name their window. Steps *after* a window step would see, and possibly dead-letter,
      outputs of windows a range does not own, so none are allowed;
    - ``max_memory_time`` is infinite: Finalize's effective CTI follows the largest ``LE`` seen, which a
      range does not know.

    Filter/map steps before the window step are span-based. Validity (duplicate ids, retractions, CTI
    violations) is decided per id against the CTIs: the batch path routes every element of an id, and
    every CTI, to each range that needs any version of that id, so each range decides as the whole
    stream would.
    """
    *before, last = spec.steps
    if whole_input(spec):
        return None  # one bucket (see `partition_keys`)
    if not isinstance(last, WindowStep) or any(not isinstance(s, (FilterStep, MapStep)) for s in before):
        return None
    if (not isinstance(last.window, (Tumbling, Hopping, Cumulate)) or last.output != "window"
            or last.max_memory_time < _INF):
        return None
    return last.window.size


def python_tasks(spark: Any, per_slot: int = 2) -> int:
    """How many input partitions a pass that runs Python over *every* element should have at most.

    Each Python task has a fixed cost in the tens of milliseconds (the Arrow stream to a Python worker and
    back, plus the UDM's setup), so the many small partitions Spark makes from an in-memory table (one per
    ``arrow.maxRecordsPerBatch`` rows: 100 per million elements) would cost more than the work itself;
    coalescing them (narrow, no shuffle) to a few tasks per core keeps every core busy. Larger partitions
    are left as they are (``coalesce`` never splits). The price is memory per task: a pass that keeps
    state per (group, pane) holds that of more rows, about what a final task holds for its key bucket."""
    try:
        slots = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        slots = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    return max(1, slots) * per_slot


def bucket_partitions(n: int) -> list[int]:
    """For each bucket ``b`` of ``n``, a bigint whose hash partition among ``n`` is ``b`` (the smallest)."""
    found: dict[int, int] = {}
    v = 0
    while len(found) < n:
        found.setdefault(murmur3_long(v) % n, v)
        v += 1
    return [found[b] for b in range(n)]


def bucket_groups(df: Any, n: int) -> Any:
    """``df`` (with a bigint ``_bucket`` in ``[0, n)``) grouped by bucket, bucket ``b`` in shuffle partition ``b``:
    one Python task per bucket. Grouping by ``_bucket`` alone hashes the bucket ids, which may share a
    partition (two buckets in one task, run one after the other), and adaptive execution coalesces small
    shuffle partitions (4 buckets ran as 3 tasks on ``local[2]``: one core ran two buckets while the other
    idled). So the rows are repartitioned to exactly ``n`` partitions (a repartition to a number of
    partitions is one adaptive execution leaves as it is) by ``_part``, a value per bucket whose hash
    partition is that bucket (`bucket_partitions`), and grouped by ``(_part, _bucket)``, which that
    partitioning already satisfies (no second shuffle). The group key a bucket's function receives is
    ``(_part, _bucket)``."""
    from pyspark.sql import functions as F

    parts = F.array(*[F.lit(v).cast("bigint") for v in bucket_partitions(n)])
    with_part = df.withColumn("_part", F.element_at(parts, F.col("_bucket").cast("int") + 1))
    return with_part.repartition(n, "_part").groupBy("_part", "_bucket")


def one_row(spark: Any, ddl: str, values: Sequence[Any]) -> Any:
    """A one-row DataFrame of ``ddl`` (``"name type, ..."``) holding ``values``, made of literals on
    ``spark.range(1)``: ``createDataFrame`` of a Python list is a Python task per partition of the session's
    default parallelism (its rows are unpickled by a Python worker), seconds of worker start-up on a busy
    machine for a row a plan adds to its result (the final ``cti(INF)``). One partition: ``spark.range(1)``
    has the session's default parallelism of them, all but one empty, and every scan of a result the row
    is unioned into runs a Spark task per partition (a persisted result is scanned three to four times)."""
    from pyspark.sql import functions as F

    fields = [c.split(" ") for c in ddl.split(", ")]
    return spark.range(0, 1, 1, numPartitions=1).select(
        *[F.lit(v).cast(t).alias(name) for (name, t), v in zip(fields, values, strict=True)])


#: `graph_routing` for a graph where no step needs its rows together: each element goes by its (input, id).
BY_ID = "by_id"


def graph_routing(spec: QuerySpec) -> dict[str, list[str]] | str | None:
    """How to route the elements of a non-linear query graph (SEMANTICS §10) into key buckets, when one
    partitioning is valid for the whole graph (`routing_of` its steps)."""
    if whole_input(spec):
        return None  # one bucket (see `partition_keys`)
    graph = resolve(spec)
    return routing_of(graph.nodes, graph.inputs)


def routing_of(nodes: Sequence[GraphNode], inputs: Sequence[str]) -> dict[str, list[str]] | str | None:
    """How to route the streams ``inputs`` read by ``nodes`` (a sub-graph in topological order: the whole
    query, or one stage of `udm.host.spark.stages`) into key buckets.

    Returns ``{input: [field, ...]}`` (every input hashed by its own fields, slot by slot, into the same
    buckets), `BY_ID` (no step needs rows of different ids together: union/project/alter_lifetime/filter/
    map/flat_map only) or None (the graph must run in one bucket).

    Fields are tracked as (stream, field) pairs joined into classes wherever a step passes a value on
    unchanged: filter/alter_lifetime/union pass every field, map every field but ``as``, project what it
    keeps (renamed), a window its group fields (not its alias), a join its left fields (prefixed) and
    joins ``(left, l)`` with ``(right, r)`` for each ``on`` pair, align and finalize every field (they pass
    elements on or hold them back, payloads untouched). A class can be a routing slot when every
    stream that feeds a stateful step (window, join, distinct union; all their ancestors too) has exactly
    one field in it, each window's input has one of its group fields in it, and each join's left input one
    of its ``on`` fields: rows that must meet then have equal values in every slot, and every derived row
    carries its input row's value. lmerge, keyless windows and anything else give None. A flat_map passes
    no field (its UDO may rewrite any), but needs no rows together: an event's outputs depend on it alone.
    """
    universe: set[str] = set()
    for node in nodes:
        s = node.step
        if isinstance(s, WindowStep):
            universe.update(s.group_by)
        elif isinstance(s, JoinStep):
            for lf, rf in s.on:
                universe.update((lf, rf, s.left_prefix + lf, s.right_prefix + rf))
        elif isinstance(s, ProjectStep):
            universe.update(s.keep or [])
            universe.update(s.rename)
            universe.update(s.rename.values())
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def link(a: tuple[str, str], b: tuple[str, str]) -> None:
        parent[find(a)] = find(b)

    stateful: list[str] = []  # sources of steps that need their rows together
    needs: list[tuple[str, list[str]]] = []  # (stream, fields): each slot must hold one of them
    for node in nodes:
        s, name, src = node.step, node.name, node.sources
        if isinstance(s, (FilterStep, AlterLifetimeStep, UnionStep, AlignStep, FinalizeStep)):
            for f in universe:
                for x in src:
                    link((x, f), (name, f))
            if isinstance(s, UnionStep) and s.distinct:
                stateful.extend(src)
        elif isinstance(s, MapStep):
            for f in universe - {s.as_}:
                link((src[0], f), (name, f))
        elif isinstance(s, FlatMapStep):
            pass  # span-based and per event (routed by id, it runs anywhere), but no field is known to pass
        elif isinstance(s, ProjectStep):
            targets = [s.rename.get(f, f) for f in universe]
            for f in universe:
                t = s.rename.get(f, f)
                kept = (s.keep is None or f in s.keep) and f not in s.drop
                if kept and t not in s.set and targets.count(t) == 1:
                    link((src[0], f), (name, t))
        elif isinstance(s, WindowStep):
            if not s.group_by:
                return None
            stateful.append(src[0])
            needs.append((src[0], list(s.group_by)))
            for g in s.group_by:
                if g not in s.aliases:  # a UDA's result field equal to a key rewrites it
                    link((src[0], g), (name, g))
        elif isinstance(s, JoinStep):
            left, right = src
            stateful.extend(src)
            needs.append((left, [lf for lf, _ in s.on]))
            for lf, rf in s.on:
                link((left, lf), (right, rf))
            for f in universe:
                link((left, f), (name, s.left_prefix + f))
        else:  # lmerge and anything new: one bucket
            return None
    if not stateful:
        return BY_ID
    # every ancestor (inclusive) of a stateful step's source must carry the slot
    sources = {n.name: n.sources for n in nodes}
    relevant: set[str] = set()
    todo = list(stateful)
    while todo:
        x = todo.pop()
        if x not in relevant:
            relevant.add(x)
            todo.extend(sources.get(x, ()))
    classes: dict[tuple[str, str], dict[str, list[str]]] = {}
    for f in universe:
        for x in relevant:
            if (x, f) in parent:
                classes.setdefault(find((x, f)), {}).setdefault(x, []).append(f)
    slots: list[dict[str, list[str]]] = []
    for members in classes.values():
        if any(len(members.get(x, [])) != 1 for x in relevant):
            continue
        if all(members[x][0] in fields for x, fields in needs):
            slots.append(members)
    if not slots or any(x not in m for m in slots for x in inputs):
        return None  # (an input that feeds no stateful step has no slot field: it is not routed by key)
    slots.sort(key=lambda m: [m[x][0] for x in inputs])
    return {x: [m[x][0] for m in slots] for x in inputs}
