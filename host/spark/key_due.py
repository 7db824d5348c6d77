"""When a key's engine must be loaded again, and what it holds the output CTI at until then
(`udm.host.spark.key_state`, semantics-notes 41): read off the engine's operators, never by running it.

Why apart: it is the one place that knows the window operator's internals (release heap, frontier,
registry); the per-key store itself only asks `engine_due` and `lone_grid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.engine.common import INF, NEG

__all__ = ["engine_due", "graph_due", "lone_grid"]


def _min_re(op: Any, c: int) -> int:
    """The earliest CTI at which ``op``'s id registry forgets an event (``RE < CTI``), or INF."""
    best = INF
    h = getattr(op, "end_heap", None)
    if h:
        best = min(best, h[0][0] + 1)
    for res, _ in getattr(op, "reruns", ()) or ():
        if len(res):
            best = min(best, int(res[0]) + 1)
    for ch in getattr(op, "chunks", ()) or ():
        if len(ch):
            rows = ch.held()
            if len(rows):
                best = min(best, int(ch.re[rows].min()) + 1)
    return best


def _exact_grid(op: Any) -> bool:
    """A tumbling/hopping window step whose windows are released at their end and nothing else: its due is
    read off its heaps exactly."""
    from udm.host.engine.window.grid import GridStep

    return (isinstance(op, GridStep) and op.early is None and not op.time_bound and op.max_memory_time >= INF
            and not op.sees_open_ends)


def _busy(op: Any) -> bool:
    """A window step with work queued for the next flush (fresh, early, retired or held windows)."""
    return bool(op.fresh or op.early_wait or op.grave_groups or getattr(op, "held", None))


def _window_due(op: Any, c: int) -> int:
    """A window step's due (module doc): exact for tumbling/hopping windows released at their end; the
    next CTI for anything else that holds state."""
    simple = _exact_grid(op)
    busy = _busy(op)
    if not simple or busy:
        size = op.state_size()
        return c + 1 if (busy or any(size.values()) or op.chunks) else INF
    best = INF
    if op.close_heap:
        best = min(best, op.close_heap[0][0])
    if op.spill_groups:  # events past the frontier: windows are made when the watermark reaches the next
        best = min(best, op._next_front)
    if op.wait:  # windows waiting for the release point: out by cti(W.RE) at the latest
        best = min(best, op.wait[0][0])
    for g in op.groups.values():
        if g.windows:
            for w in g.windows.values():
                if w.alive:
                    best = min(best, w.re)
        if g.retired:
            return c + 1
    return best


def engine_due(runner: QueryRunner, c: int) -> int:
    """The earliest input CTI after ``c`` at which ``runner`` must be fed again (module doc); INF when
    no CTI alone would ever make it emit or change."""
    from udm.host.engine.ops.span import FilterStep, InputGate, MapStep, ProjectStep
    from udm.host.engine.window.base import WindowStep

    if runner.finished:
        return INF
    best = INF
    forget = INF
    for op in runner.ops:
        if isinstance(op, WindowStep):
            best = min(best, _window_due(op, c))
        elif not isinstance(op, (FilterStep, MapStep, ProjectStep, InputGate)) and any(op.state_size().values()):
            best = c + 1
        forget = min(forget, _min_re(op, c))
    # Forgetting ended events changes no output, and a key is brought to the bucket's CTI (so forgets them)
    # before it judges anything; a window holding an event ends after it, so only a key without windows
    # is loaded just to forget (its state would otherwise stay until it is touched again).
    if best >= INF:
        best = forget
    return best if best >= INF else max(best, c + 1)


def lone_grid(runner: QueryRunner) -> Any:
    """The query's one window step when it is a tumbling/hopping one of the exact kind (`_window_due`) and
    every other step passes CTIs through unchanged (filter, map, project, input gate); else None."""
    from udm.host.engine.ops.span import FilterStep, InputGate, MapStep, ProjectStep

    grids = [op for op in runner.ops if not isinstance(op, (FilterStep, MapStep, ProjectStep, InputGate))]
    if len(grids) != 1 or not _exact_grid(grids[0]) or _busy(grids[0]):
        return None
    return grids[0]


def _reach(runner: QueryRunner) -> dict[str, dict[str, int]]:
    """Per operator, the graph inputs its input clock derives from, each with the CTI shift on the way
    (``alter_lifetime``'s ``shift``): the operator's input CTI reaches ``D`` only once input ``x``'s
    reaches ``D - shift``. (A window or a snap only lowers a clock: no shift; several paths: the least.)"""
    from udm.host.engine.ops.alter_lifetime import AlterLifetimeStep

    graph = runner.bound.graph
    out: dict[str, dict[str, int]] = {x: {x: 0} for x in graph.inputs}
    into: dict[str, dict[str, int]] = {x: {x: 0} for x in graph.inputs}
    ops = {op.name: op for op in runner.ops}
    for node in graph.nodes:
        got: dict[str, int] = {}
        for src in node.sources:
            for x, sh in out[src].items():
                got[x] = min(got.get(x, sh), sh)
        into[node.name] = got
        op = ops.get(node.name)
        shift = op.shift if isinstance(op, AlterLifetimeStep) else 0
        out[node.name] = {x: sh + shift for x, sh in got.items()}
    return into


def _forget_at(op: Any) -> int | None:
    """When a join, a union or a span operator forgets its earliest event, on its own input clock (INF:
    holds none); None for an operator whose output CTI or output at a CTI depends on its state (windows
    holding state, ``distinct`` unions, lmerge, anything else)."""
    from udm.host.engine.ops.alter_lifetime import AlterLifetimeStep
    from udm.host.engine.ops.join import JoinStep
    from udm.host.engine.ops.span import FilterStep, InputGate, MapStep, ProjectStep
    from udm.host.engine.ops.union import UnionStep

    if isinstance(op, (FilterStep, MapStep, ProjectStep, InputGate, AlterLifetimeStep)):
        return _min_re(op, 0)
    if isinstance(op, JoinStep):  # an event is gone once both ports' CTIs pass its end (`JoinStep._cleanup`)
        ends = [side.ends[0][0] + 1 for side in op.sides if side.ends]
        return min(ends, default=INF)
    if isinstance(op, UnionStep) and not op.distinct:
        ends = [h[0][0] + 1 for h in op.ends if h]
        return min(ends, default=INF)
    from udm.host.engine.ops.lmerge import LmergeStep

    if isinstance(op, LmergeStep):  # (its ports' progress is state that no size counts)
        return None
    return INF if not any(op.state_size().values()) and not getattr(op, "chunks", None) else None


def _last_window(runner: QueryRunner) -> Any:
    """The graph's one window step holding state when it is of the exact tumbling/hopping kind, not busy,
    and only filter/map/project steps lead from it to the output (so the key's output CTI is its output
    CTI); else None."""
    from udm.host.engine.ops.span import FilterStep, MapStep, ProjectStep
    from udm.host.engine.window.base import WindowStep

    held = [op for op in runner.ops if isinstance(op, WindowStep)
            and (any(op.state_size().values()) or getattr(op, "chunks", None))]
    if len(held) != 1 or not _exact_grid(held[0]) or _busy(held[0]):
        return None
    w = held[0]
    graph = runner.bound.graph
    after = {op.name for op in runner.ops[runner.ops.index(w) + 1:]}
    name = runner.ops[-1].name
    chain = set()
    while name != w.name:  # back from the output through one-source span steps
        op = next(o for o in runner.ops if o.name == name)
        if not isinstance(op, (FilterStep, MapStep, ProjectStep)):
            return None
        chain.add(name)
        name = graph.node(name).sources[0]
    return w if chain == after else None


def graph_due(runner: QueryRunner, ctis: Mapping[str, int]) -> tuple[dict[str, int], int] | None:
    """A query graph's key (semantics-notes 52): per input, the CTI of that input at which the key must be
    loaded again — it is loaded when any input reaches its threshold; ``{}``: never by a CTI alone — and
    the key's *hold* (INF: its output CTI is the idle engine's). None when an operator's output CTI or
    CTI-time output depends on its state in a way not read here: then the key is loaded on every CTI
    advance.

    Exact for graphs of joins, unions (not ``distinct``), ``alter_lifetime`` and span steps: their output
    CTI is a function of the input CTIs alone (the idle engine's), and a CTI only lets them forget ended
    events. Such an operator's earliest forget time ``F`` is on its input clock, the minimum over the
    inputs it derives from: it is reached only once *each* of them reaches ``F - shift``, so the key waits
    on the one furthest from it (when that one gets there, the key is loaded and waits on the next). Also
    exact with one tumbling/hopping window holding state (`_last_window`: only span steps after it): its
    due (`_window_due`, on its own input clock) is waited on the same way, and the hold is its output CTI
    bound until then (`lone_grid`'s rule)."""
    if runner.finished:
        return {}, INF
    into = _reach(runner)
    window = _last_window(runner)
    dues: dict[str, int] = {}
    hold = INF

    def wait(name: str, f: int) -> None:
        paths = into.get(name) or {name: 0}
        x = max(paths, key=lambda n: (f - paths[n]) - ctis.get(n, NEG))
        t = max(f - paths[x], ctis.get(x, NEG) + 1)
        dues[x] = min(dues.get(x, INF), t)

    for op in runner.ops:
        if op is window:
            d = _window_due(op, op.input_cti)
            if d < INF:
                wait(op.name, d)
                hold = min(d - 1, op._bound(d - 1))
            continue
        f = _forget_at(op)
        if f is None:
            return None
        if f < INF:
            wait(op.name, f)
    return dues, hold
