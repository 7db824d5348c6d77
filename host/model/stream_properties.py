"""Stream properties through a query graph, and the ``lmerge`` algorithm they allow (seeds/001 §III.C, §IV.G).

Inputs declare what their physical stream promises (`StreamProperties`); a step's output keeps what the
step cannot break. The derivation is deliberately conservative: a property is kept only where it holds for
every physical stream the step can emit, because ``algorithm: auto`` trusts it and a cheaper algorithm on
input that breaks its assumption gives a wrong answer, not an error.

- ``filter`` keeps every property (it removes rows, and a removed row's retractions with it);
- ``map`` and ``project`` keep order, insert-only and tie order but may make two rows equal (duplicates);
- a ``window`` step computing a UDA over tumbling, hopping or snapshot windows with the ``window`` output
  policy holds at most one live row per group and window, and those windows have distinct starts per group:
  ``(LE, payload)`` is a key (seeds/001 §IV.G item 6: R3), whatever its input. It is *not* ordered even on
  ordered input: at the end of input the last windows of several groups come out in no particular LE order;
- anything else promises nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from .graph import QueryGraph
from .spec import (
    FilterStep,
    Hopping,
    MapStep,
    ProjectStep,
    QuerySpec,
    Snapshot,
    StreamProperties,
    Tumbling,
    WindowStep,
)

__all__ = ["NOTHING", "choose_algorithm", "derive_properties"]

NOTHING = StreamProperties()


def _window_output(step: WindowStep, uda: bool) -> StreamProperties:
    if uda and isinstance(step.window, (Tumbling, Hopping, Snapshot)) and step.output == "window":
        return StreamProperties(duplicates=False)
    return NOTHING


def derive_properties(spec: QuerySpec, graph: QueryGraph, uda_steps: frozenset[str] = frozenset()
                      ) -> dict[str, StreamProperties]:
    """The properties of every input and step output (``uda_steps``: window steps whose UDMs are UDAs)."""
    props: dict[str, StreamProperties] = {}
    for name in graph.inputs:
        declared = spec.inputs.get(name) if spec.inputs else None
        props[name] = declared.properties if declared is not None else NOTHING
    for node in graph.nodes:
        step = node.step
        src = props[node.sources[0]] if len(node.sources) == 1 else NOTHING
        if isinstance(step, FilterStep):
            props[node.name] = src
        elif isinstance(step, (MapStep, ProjectStep)):
            props[node.name] = src.model_copy(update={"duplicates": True})
        elif isinstance(step, WindowStep):
            props[node.name] = _window_output(step, node.name in uda_steps)
        else:
            props[node.name] = NOTHING
    return props


def choose_algorithm(inputs: Sequence[StreamProperties]) -> str:
    """The cheapest LMerge algorithm every input's properties allow (seeds/001 Table IV)."""
    def every(test: object) -> bool:
        return all(test(p) for p in inputs)  # type: ignore[operator]

    if every(lambda p: p.insert_only and p.ordered == "strict"):
        return "R0"
    if every(lambda p: p.insert_only and p.ordered and p.deterministic_ties):
        return "R1"
    if every(lambda p: p.insert_only and p.ordered and not p.duplicates):
        return "R2"
    if every(lambda p: not p.duplicates):
        return "R3"
    return "R4"
