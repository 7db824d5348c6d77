"""How the batch path splits a query across Spark tasks without changing its meaning.

A window step computes per group (SEMANTICS §6), so a query can be split by any set of payload fields
that every window step groups by — as long as no map step rewrites one of them first (the group would
then not be the input's). Filter/map steps are span-based and split freely.

A query with no such field (keyless) can still be split by *time range* when its windows are fixed in
time (`time_split`): each range owns the windows that start in it and gets every event that overlaps one
of them; the output of windows it does not own is dropped. Otherwise it runs in one bucket.
"""

from __future__ import annotations

from typing import Any

from udm.host.query.spec import Hopping, MapStep, QuerySpec, Tumbling, WindowStep

__all__ = ["partition_keys", "python_tasks", "time_split"]

_INF = 2**63 - 1


def partition_keys(spec: QuerySpec) -> list[str]:
    """Payload fields to hash into key buckets ([] = the query must see the whole stream at once)."""
    keys: list[str] | None = None
    rewritten: set[str] = set()
    for step in spec.steps:
        if isinstance(step, MapStep):
            rewritten.add(step.as_)
        elif isinstance(step, WindowStep):
            group = [k for k in step.group_by if k not in rewritten]
            keys = group if keys is None else [k for k in keys if k in group]
            # a UDA's output replaces the payload with {keys, alias}: a later alias equal to a key rewrites it
            if step.as_ is not None:
                rewritten.add(step.as_)
    return keys or []


def time_split(spec: QuerySpec) -> int | None:
    """The window size when the query may be split into time ranges (overlapping by that size), else None.

    Sound only when every piece of the answer can be computed from the events near it, and attributed to
    exactly one range:

    - the query ends with its only window step, a `tumbling` or `hopping` one: such a window is fixed in
      time (``[offset + k*hop, ... + size)``), so a range owning the windows with ``W.LE`` in ``[a, b)``
      needs exactly the events overlapping ``[a, b - 1 + size)``. Snapshot windows are cut at *every*
      event endpoint of the group and count windows at every n-th start/end, so which windows exist near
      a time depends on the whole stream: a range would see other windows than the whole stream has;
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
    if not isinstance(last, WindowStep) or any(isinstance(s, WindowStep) for s in before):
        return None
    if not isinstance(last.window, (Tumbling, Hopping)) or last.output != "window" or last.max_memory_time < _INF:
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
