"""Building a run's operators from a bound query: one operator per step, and which step's payload checks
its input's gate takes over (an input read by one single-input step is checked at the gate, so a refused
element reads as an input element did: semantics-notes 3)."""

from __future__ import annotations

from udm.host.model.plan import BoundQuery

from .context import Context
from .operator import Operator
from .ops.alter_lifetime import AlterLifetimeOp
from .ops.lmerge import LmergeOp
from .ops.span import FilterOp, MapOp, ProjectOp
from .rules import INF, FieldCheck

__all__ = ["delegated_checks", "make_operator"]

#: ops whose single input the gate may check for them
_SINGLE = ("filter", "map", "window", "project", "alter_lifetime")


def make_operator(bound: BoundQuery, name: str, ctx: Context) -> Operator:
    bs = bound.step(name)
    op = bs.step.op
    if op == "filter":
        return FilterOp(name, ctx, bs)
    if op == "map":
        return MapOp(name, ctx, bs)
    if op == "project":
        return ProjectOp(name, ctx, bs)
    if op == "alter_lifetime":
        return AlterLifetimeOp(name, ctx, bs)
    if op == "union":
        from .ops.union import UnionOp  # lazy: only a query with that step loads it (start-up, issue #26)

        return UnionOp(name, ctx, bs)
    if op == "join":
        from .ops.join import JoinOp  # lazy: a join's stores and key codes (~1.5 ms), only for a join step

        return JoinOp(name, ctx, bs)
    if op == "lmerge":
        return LmergeOp(name, ctx, bs)
    if op == "window":
        # a filter/map/project run starts without the window families and their aggregation structures
        from .window import make_window_op  # lazy: ~10 ms of start-up only a window step needs (issue #26)

        return make_window_op(name, ctx, bs)
    if op == "flat_map":
        from .ops.flat_map import FlatMapOp  # lazy: with sortedcontainers ~4 ms, only for a flat_map step

        return FlatMapOp(name, ctx, bs)
    if op == "align":
        from .ops.align import AlignOp  # lazy: only a query with an align step loads it (issue #26)

        return AlignOp(name, ctx, bs)
    if op == "finalize":
        from .ops.finalize import FinalizeOp  # lazy: only a query with a finalize step loads it (issue #26)

        return FinalizeOp(name, ctx, bs)
    raise ValueError(f"no operator for op {op!r}")  # bind() refuses every other op


def delegated_checks(bound: BoundQuery, ops: list[Operator]) -> dict[str, tuple[FieldCheck | None, int]]:
    """Per input read by exactly one single-input step: that step's payload checks and ``max_memory_time``,
    which the input's gate applies instead (the step's own check is emptied)."""
    graph = bound.graph
    by_name = {op.name: op for op in ops}
    out: dict[str, tuple[FieldCheck | None, int]] = {}
    for name in graph.inputs:
        readers = graph.consumers(name)
        if len(readers) != 1 or readers[0][0].op not in _SINGLE:
            continue
        op = by_name[readers[0][0].name]
        check = getattr(op, "check", None)
        mmt = getattr(op, "max_memory_time", INF)
        if check is not None:
            op.check = FieldCheck()  # type: ignore[attr-defined]
        out[name] = (check, mmt)
    return out
