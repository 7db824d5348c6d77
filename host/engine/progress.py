"""What a CTI alone would do to an engine, read off its operators' public progress properties: when it must
be fed again, and what its output CTI is held at until then.

Spark's per-key streaming state (`udm.host.spark.key_state`, semantics-notes 41, 52) keeps one engine per key
and loads a key only when it has elements or is *due*: the earliest input CTI at which a CTI alone would
make its engine emit output or change state. `QueryRunner.due`, `QueryRunner.graph_due` and
`QueryRunner.hold` are those answers; every operator states its own part:

* ``forget_at()`` — on its own input clock, the earliest CTI at which it forgets an event (INF: holds none),
  or None when what a CTI does to it depends on its state in a way not stated here;
* a window step's ``due(c)`` — exact for tumbling/hopping windows released at their end, the next CTI for
  any other window state — and ``out_bound(c)``, its output CTI after input CTI ``c``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from .ops.alter_lifetime import AlterLifetimeOp
from .ops.span import FilterOp, MapOp, ProjectOp
from .rules import INF, NEG

if TYPE_CHECKING:
    from .window.step import WindowOp

__all__ = ["engine_due", "graph_due", "hold"]

_SPAN = (FilterOp, MapOp, ProjectOp)


@cache
def _window_op() -> type[WindowOp]:
    """The window operator's class, imported on the first question about one: a local run never asks (these
    answers are Spark's key state's), and only a query with a window step needs the window families."""
    # lazy: the window families load numpy and pyarrow kernels a filter/map/project run does not need
    from .window.step import WindowOp

    return WindowOp


def engine_due(runner: Any, c: int) -> int:
    """The earliest input CTI after ``c`` at which ``runner`` must be fed again; INF when no CTI alone would
    ever make it emit or change."""
    if runner.finished:
        return INF
    best = INF
    forget = min((g.forget_at() for g in runner.gates.values()), default=INF)
    for op in runner.ops:
        if isinstance(op, _window_op()):
            best = min(best, op.due(c))
            continue
        f = op.forget_at()
        if f is None:
            best = c + 1
        else:
            forget = min(forget, f)
    # Forgetting ended events changes no output, and a key is brought to the bucket's CTI (so forgets them)
    # before it judges anything; a window holding an event ends after it, so only a key without windows is
    # loaded just to forget (its state would otherwise stay until it is touched again).
    if best >= INF:
        best = forget
    return best if best >= INF else max(best, c + 1)


def _lone_window(runner: Any) -> WindowOp | None:
    """The query's one window step when it is of the exact kind (`WindowOp.exact`) and every other step
    passes CTIs through unchanged (filter, map, project)."""
    wins = [op for op in runner.ops if not isinstance(op, _SPAN)]
    if len(wins) != 1 or not isinstance(wins[0], _window_op()) or not wins[0].exact() or wins[0].busy():
        return None
    return wins[0]


def hold(runner: Any, due: int) -> int | None:
    """The output CTI the engine reports after input CTI ``due - 1`` when it is held by one exact window
    (the window's own rule, without running it); None: only a run of the engine tells."""
    w = _lone_window(runner)
    if w is None:
        return None
    return min(due - 1, w.out_bound(due - 1))


def _reach(runner: Any) -> dict[str, dict[str, int]]:
    """Per operator, the graph inputs its input clock derives from, each with the CTI shift on the way
    (``alter_lifetime``'s ``shift``): the operator's input CTI reaches ``D`` only once input ``x``'s reaches
    ``D - shift``. (A window or a snap only lowers a clock: no shift; several paths: the least.)"""
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
        shift = op.shift if isinstance(op, AlterLifetimeOp) else 0
        out[node.name] = {x: sh + shift for x, sh in got.items()}
    return into


def _last_window(runner: Any) -> WindowOp | None:
    """The graph's one window step holding state when it is exact, not busy, and only filter/map/project
    steps lead from it to the output (so the key's output CTI is its output CTI); else None."""
    held = [op for op in runner.ops if isinstance(op, _window_op()) and any(op.state_size().values())]
    if len(held) != 1 or not held[0].exact() or held[0].busy():
        return None
    w = held[0]
    graph = runner.bound.graph
    after = {op.name for op in runner.ops[runner.ops.index(w) + 1:]}
    name = runner.ops[-1].name
    chain = set()
    while name != w.name:  # back from the output through one-source span steps
        op = next(o for o in runner.ops if o.name == name)
        if not isinstance(op, _SPAN):
            return None
        chain.add(name)
        name = graph.node(name).sources[0]
    return w if chain == after else None


def graph_due(runner: Any, ctis: Mapping[str, int]) -> tuple[dict[str, int], int] | None:
    """A query graph's key (semantics-notes 52): per input, the CTI of that input at which the key must be
    loaded again (``{}``: never by a CTI alone), and the key's *hold* (INF: its output CTI is the idle
    engine's). None when an operator's output CTI or CTI-time output depends on its state in a way not read
    here: then the key is loaded on every CTI advance.

    Exact for graphs of joins, unions (not ``distinct``), ``alter_lifetime`` and span steps: their output CTI
    is a function of the input CTIs alone, and a CTI only lets them forget ended events. An operator's
    earliest forget time ``F`` is on its input clock, the minimum over the inputs it derives from: it is
    reached only once *each* of them reaches ``F - shift``, so the key waits on the one furthest from it.
    Also exact with one tumbling/hopping window holding state (`_last_window`): its due, on its own input
    clock, is waited on the same way, and the hold is its output CTI bound until then."""
    if runner.finished:
        return {}, INF
    into = _reach(runner)
    window = _last_window(runner)
    dues: dict[str, int] = {}
    held = INF

    def wait(name: str, f: int) -> None:
        paths = into.get(name) or {name: 0}
        x = max(paths, key=lambda n: (f - paths[n]) - ctis.get(n, NEG))
        t = max(f - paths[x], ctis.get(x, NEG) + 1)
        dues[x] = min(dues.get(x, INF), t)

    for name, g in runner.gates.items():
        f = g.forget_at()
        if f < INF:
            wait(name, f)
    for op in runner.ops:
        if window is not None and op is window:
            d = window.due(window.input_cti)
            if d < INF:
                wait(window.name, d)
                held = min(d - 1, window.out_bound(d - 1))
            continue
        f = op.forget_at()
        if f is None:
            return None
        if f < INF:
            wait(op.name, f)
    return dues, held
