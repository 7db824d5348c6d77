"""How the batch path splits a query across Spark tasks without changing its meaning.

A window step computes per group (SEMANTICS §6), so a query can be split by any set of payload fields
that every window step groups by — as long as no map step rewrites one of them first (the group would
then not be the input's). Filter/map steps are span-based and split freely. A query with no such field
(keyless) runs in one bucket.
"""

from __future__ import annotations

from udm.host.query.spec import MapStep, QuerySpec, WindowStep

__all__ = ["partition_keys"]


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
