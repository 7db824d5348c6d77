"""The window operator of seeds/000 §V (SEMANTICS §3–7): group & apply a UDA/UDO over windows.

`make_window_op` picks the family once, when the query is built: tumbling/hopping/cumulate (`grid`),
`snapshot`, `count` (count_by_start / count_by_end), and the SEMANTICS §9 families `rows` and `session`. The
family-independent operator (batch intake, release, evaluation order, minimal-diff output, CTIs, cleanup)
is `step.WindowOp`.
"""

from __future__ import annotations

from udm.host.model.plan import BoundStep

from ..context import Context
from .step import WindowOp

__all__ = ["WindowOp", "make_window_op"]


def make_window_op(name: str, ctx: Context, bs: BoundStep) -> WindowOp:
    # each family is imported when a query has its window type: the five are ~45 modules, and a run needs one
    # or two of them (start-up of every window query, issue #26)
    t = bs.step.window.type
    if t in ("tumbling", "hopping", "cumulate"):
        from .grid import GridFamily  # lazy: only this window type's family
        return WindowOp(name, ctx, bs, GridFamily)
    if t == "snapshot":
        from .snapshot import SnapshotFamily  # lazy: only this window type's family
        return WindowOp(name, ctx, bs, SnapshotFamily)
    if t in ("count_by_start", "count_by_end"):
        from .count import CountFamily  # lazy: only this window type's family
        return WindowOp(name, ctx, bs, CountFamily)
    if t == "rows":
        from .rows import RowsFamily  # lazy: only this window type's family
        return WindowOp(name, ctx, bs, RowsFamily)
    if t == "session":
        from .session import SessionFamily  # lazy: only this window type's family
        return WindowOp(name, ctx, bs, SessionFamily)
    raise ValueError(f"window type {t!r} is not supported yet")
