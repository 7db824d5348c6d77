"""The shape of a query graph (SEMANTICS §10, INTERFACES §2): names, edges, order — checked before any event.

A spec lists steps; each reads named inputs or other steps. `resolve` turns that into a `QueryGraph`:
every step gets its name (``id`` or ``s<index>``) and its sources (``from``, or the step before it, or the
only input), and the graph is refused, with a message naming the step, when a name is unknown, reused or
unused, when an op gets the wrong number of inputs, or when the edges form a cycle. A linear spec (no
``inputs``, no ``id``/``from``) resolves to the chain it always meant, reading the single input ``main``.

The engine, the oracle and the Spark planner all walk the same `QueryGraph`, so they agree on what a spec
means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from udm.host.errors import QuerySpecError

from .spec import SINGLE_INPUT_OPS, QuerySpec

__all__ = ["GraphNode", "QueryGraph", "resolve"]


@dataclass(frozen=True)
class GraphNode:
    """One step of the graph: its name, its position in ``spec.steps``, the spec step and what it reads."""

    name: str
    index: int
    step: Any
    sources: tuple[str, ...]

    @property
    def op(self) -> str:
        return str(self.step.op)

    @property
    def label(self) -> str:
        """How messages name the step: ``step 'j' (join)``."""
        return f"step {self.name!r} ({self.op})"


@dataclass(frozen=True)
class QueryGraph:
    """A validated query graph: inputs, steps in a topological order, the output step."""

    inputs: tuple[str, ...]
    #: steps in an order where every step comes after everything it reads (the spec's order when it is one)
    nodes: tuple[GraphNode, ...]
    output: str

    def node(self, name: str) -> GraphNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def consumers(self, name: str) -> list[tuple[GraphNode, int]]:
        """The steps reading ``name`` (an input or a step), each with the port it reads it on."""
        return [(n, port) for n in self.nodes for port, src in enumerate(n.sources) if src == name]

    def ends_early(self, name: str) -> bool:
        """True when input ``name``'s ``cti(INF)`` goes down the plan before the other inputs end: it reaches
        an lmerge (whose output ends with its first input, SEMANTICS §8) and no window step (which needs T
        over every input at its end, semantics-notes 11 and 22)."""
        seen: set[str] = set()
        todo = [name]
        merges = False
        while todo:
            x = todo.pop()
            for node, _port in self.consumers(x):
                if node.name in seen:
                    continue
                seen.add(node.name)
                if node.op == "window":
                    return False
                merges = merges or node.op == "lmerge"
                todo.append(node.name)
        return merges

    @property
    def is_linear(self) -> bool:
        """One input and a chain of single-input steps, each reading the one before (the pre-graph shape)."""
        prev = self.inputs[0] if len(self.inputs) == 1 else None
        for n in self.nodes:
            if n.sources != (prev,):
                return False
            prev = n.name
        return prev == self.output


def _arity_problem(op: str, count: int) -> str | None:
    if op in SINGLE_INPUT_OPS:
        return None if count == 1 else f"reads exactly one input, got {count}"
    if op == "join":
        return None if count == 2 else f"reads exactly two inputs (left, right), got {count}"
    return None if count >= 2 else f"reads two or more inputs, got {count}"


def resolve(spec: QuerySpec) -> QueryGraph:
    """Check the graph of ``spec`` and put its steps in topological order."""
    inputs = spec.input_names
    names: dict[str, int] = {}
    for i, step in enumerate(spec.steps):
        name = step.id if step.id is not None else f"s{i}"
        where = f"steps[{i}] ({step.op})"
        if name in inputs:
            raise QuerySpecError(f"{where}: id {name!r} is also the name of an input; names must be unique")
        if name in names:
            raise QuerySpecError(f"{where}: id {name!r} is already the name of steps[{names[name]}]")
        names[name] = i
    nodes: list[GraphNode] = []
    for i, step in enumerate(spec.steps):
        name = step.id if step.id is not None else f"s{i}"
        where = f"steps[{i}] {name!r} ({step.op})"
        sources = step.sources
        if sources is None:
            if i > 0:
                sources = [nodes[i - 1].name]
            elif len(inputs) == 1:
                sources = [inputs[0]]
            else:
                raise QuerySpecError(f"{where}: the query has several inputs ({', '.join(inputs)}); say which "
                                     f"this step reads with 'from'")
        for src in sources:
            if src == name:
                raise QuerySpecError(f"{where}: reads itself")
            if src not in names and src not in inputs:
                known = ", ".join([*inputs, *names])
                raise QuerySpecError(f"{where}: 'from' names {src!r}, which is neither an input nor a step "
                                     f"(known: {known})")
        problem = _arity_problem(step.op, len(sources))
        if problem is not None:
            raise QuerySpecError(f"{where}: {step.op} {problem}")
        nodes.append(GraphNode(name, i, step, tuple(sources)))
    output = spec.output if spec.output is not None else nodes[-1].name
    if output not in names:
        what = "an input, not a step" if output in inputs else "not a step"
        raise QuerySpecError(f"output {output!r} is {what} (steps: {', '.join(names)})")
    ordered = _topological(nodes)
    _check_used(nodes, inputs, output)
    return QueryGraph(tuple(inputs), tuple(ordered), output)


def _topological(nodes: list[GraphNode]) -> list[GraphNode]:
    """Kahn's algorithm, taking ready steps in spec order (so a spec already in order keeps its order)."""
    by_name = {n.name: n for n in nodes}
    waiting = {n.name: {s for s in n.sources if s in by_name} for n in nodes}
    done: list[GraphNode] = []
    placed: set[str] = set()
    while len(done) < len(nodes):
        ready = [n for n in nodes if n.name not in placed and waiting[n.name] <= placed]
        if not ready:
            stuck = [n for n in nodes if n.name not in placed]
            cycle = " -> ".join(_cycle(stuck, by_name))
            raise QuerySpecError(f"the query graph has a cycle: {cycle}")
        done.append(ready[0])
        placed.add(ready[0].name)
    return done


def _cycle(stuck: list[GraphNode], by_name: dict[str, GraphNode]) -> list[str]:
    """One cycle among the steps that could not be ordered, for the message."""
    path: list[str] = []
    seen: dict[str, int] = {}
    node = stuck[0]
    while node.name not in seen:
        seen[node.name] = len(path)
        path.append(node.name)
        node = next(by_name[s] for s in node.sources if s in by_name and by_name[s] in stuck)
    return [*path[seen[node.name]:], node.name]


def _check_used(nodes: list[GraphNode], inputs: list[str], output: str) -> None:
    """Every input and every step must lead to the output: anything else is a mistake in the spec."""
    by_name = {n.name: n for n in nodes}
    needed: set[str] = set()
    todo = [output]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        if name in by_name:
            todo.extend(by_name[name].sources)
    for n in nodes:
        if n.name not in needed:
            raise QuerySpecError(f"steps[{n.index}] {n.name!r} ({n.op}): unused — its output reaches neither "
                                 f"the query output {output!r} nor any step that does")
    for name in inputs:
        if name not in needed:
            raise QuerySpecError(f"input {name!r} is declared but no step that reaches the output reads it")
