"""The window operator of seeds/000 §V (SEMANTICS §3–7): group & apply a UDA/UDO over windows.

`make_window_step` picks the family once, when the query is built: tumbling/hopping (`grid`, with pane
evaluation for algebraic UDAs in `panes`), `snapshot`, `count` (count_by_start / count_by_end), and the
SEMANTICS §9 families `rows` (pane evaluation for algebraic UDAs in `row_panes`) and `session`. The
family-independent operator (membership deltas, release, recompute, minimal-diff output, CTIs, cleanup)
is `base.WindowStep`; the state it keeps is in `state`.
"""

from __future__ import annotations

from udm.host.query.plan import BoundStep

from ..context import Context
from .base import WindowStep
from .count import CountByEndStep, CountByStartStep
from .grid import GridStep
from .panes import PaneStep, pane_step
from .row_panes import RowPaneStep, row_pane_step
from .rows import RowsStep
from .session import SessionStep
from .snapshot import SnapshotStep

__all__ = ["CountByEndStep", "CountByStartStep", "GridStep", "PaneStep", "RowPaneStep", "RowsStep", "SessionStep",
           "SnapshotStep", "WindowStep", "make_window_step"]


def make_window_step(name: str, ctx: Context, bs: BoundStep, reads_input: bool = True) -> WindowStep:
    t = bs.step.window.type
    if t in ("tumbling", "hopping"):
        st = pane_step(name, ctx, bs, reads_input)
        return st if st is not None else GridStep(name, ctx, bs, reads_input)
    if t == "snapshot":
        return SnapshotStep(name, ctx, bs, reads_input)
    if t == "rows":
        rp = row_pane_step(name, ctx, bs, reads_input)
        return rp if rp is not None else RowsStep(name, ctx, bs, reads_input)
    if t == "session":
        return SessionStep(name, ctx, bs, reads_input)
    if t == "count_by_start":
        return CountByStartStep(name, ctx, bs, reads_input)
    return CountByEndStep(name, ctx, bs, reads_input)
