"""Binding a query spec to catalog UDMs — every check that can fail before any event is read.

`build_plan` is the one way to get the bound plan of a query from any of its forms (a `QuerySpec`, its
JSON object as Spark tasks receive it, a spec file, or a plan already bound); every Spark path, the
oracle and the kit start from it, and `udm.host.query.runners.make_runner` runs what it builds.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udm.host.catalog import Catalog, CatalogEntry, default_catalog
from udm.host.errors import ParamError, PolicyError, QuerySpecError
from udm.host.model.graph import QueryGraph, resolve
from udm.host.model.spec import (
    FilterStep,
    FlatMapStep,
    JoinStep,
    LmergeStep,
    MapStep,
    QuerySpec,
    UdfCall,
    WindowStep,
    load_query,
    parse_query,
)
from udm.host.model.stream_properties import choose_algorithm, derive_properties
from udm.sdk import UDM

__all__ = ["BoundQuery", "BoundStep", "bind", "build_plan"]


@dataclass(frozen=True)
class BoundStep:
    """A spec step with the UDM it calls resolved (``entry``/``udm`` are None for ops that call none)."""

    step: Any
    entry: CatalogEntry | None
    udm: UDM | None
    #: the step's name in the query graph (``id`` or ``s<index>``)
    name: str = ""
    #: a window step with ``aggregates``: one bound single-UDA step per aggregate (``entry``/``udm`` None)
    parts: tuple[BoundStep, ...] = ()

    @property
    def label(self) -> str:
        """How errors name this UDM: name and version."""
        if self.parts:
            return "aggregates (" + ", ".join(p.label for p in self.parts) + ")"
        if self.entry is None:
            return f"step {self.name!r} ({self.step.op})"
        return f"{self.entry.name} {self.entry.version}"


@dataclass(frozen=True)
class BoundQuery:
    spec: QuerySpec
    #: one per spec step, in the spec's order
    steps: tuple[BoundStep, ...]
    graph: QueryGraph

    def step(self, name: str) -> BoundStep:
        """The bound step named ``name``."""
        return self.steps[self.graph.node(name).index]


def _check_udf_args(entry: CatalogEntry, step: FilterStep | MapStep | UdfCall) -> None:
    sig = inspect.signature(entry.cls.compute)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params}
    unknown = sorted(set(step.args) - names)
    if unknown:
        raise ParamError(f"UDF {entry.name!r} has no argument(s) {', '.join(unknown)}; its arguments: "
                         f"{', '.join(sorted(names)) or '(none)'}")
    missing = sorted(p.name for p in params if p.default is inspect.Parameter.empty and p.name not in step.args)
    if missing:
        raise ParamError(f"UDF {entry.name!r} needs argument(s) {', '.join(missing)} mapped in 'args'")


def _bind_step(step: Any, cat: Catalog, index: int, name: str) -> BoundStep:
    where = f"steps[{index}] ({step.op})"
    if isinstance(step, (FilterStep, MapStep)):
        entry = cat.resolve(step.udf, step.version, kind="udf")
        _check_udf_args(entry, step)
        return BoundStep(step, entry, cat.instantiate(entry, step.params), name)
    if isinstance(step, JoinStep):
        if step.where is None:
            return BoundStep(step, None, None, name)
        entry = cat.resolve(step.where.udf, step.where.version, kind="udf")
        _check_udf_args(entry, step.where)
        return BoundStep(step, entry, cat.instantiate(entry, step.where.params), name)
    if isinstance(step, LmergeStep):
        return BoundStep(step, None, None, name)  # its algorithm is resolved once the graph is bound
    if isinstance(step, FlatMapStep):
        return _bind_flat_map(step, cat, where, name)
    if not isinstance(step, WindowStep):
        return BoundStep(step, None, None, name)
    if step.aggregates is not None:
        parts = []
        for i, agg in enumerate(step.aggregates):
            part = _bind_window(step.part(agg), cat, f"{where}.aggregates[{i}]", name)
            if part.entry is not None and part.entry.manifest.kind != "uda":
                raise PolicyError(f"{where}.aggregates[{i}]: {agg.udm!r} is a {part.entry.manifest.kind.upper()}; "
                                  f"aggregates are UDAs (one value per window): {', '.join(cat.names_of_kind('uda'))}")
            parts.append(part)
        return BoundStep(step, None, None, name, tuple(parts))
    return _bind_window(step, cat, where, name)


def _bind_flat_map(step: FlatMapStep, cat: Catalog, where: str, name: str) -> BoundStep:
    entry = cat.resolve(step.udm, step.version)
    if not entry.manifest.span:
        spans = ", ".join(cat.names_of_kind("udo", span=True)) or "(none)"
        raise PolicyError(f"{where}: {step.udm!r} is a {entry.kind_label.upper()}; a flat_map step runs a span "
                          f"UDO once per event (span UDOs: {spans})")
    return BoundStep(step, entry, cat.instantiate(entry, step.params), name)


def _bind_window(step: WindowStep, cat: Catalog, where: str, name: str) -> BoundStep:
    assert step.udm is not None
    entry = cat.resolve(step.udm, step.version)
    man = entry.manifest
    if man.kind == "udf":
        raise PolicyError(f"{where}: {step.udm!r} is a UDF; a window step needs a UDA or UDO "
                          f"(UDAs: {', '.join(cat.names_of_kind('uda'))}; UDOs: "
                          f"{', '.join(cat.names_of_kind('udo', span=False))})")
    if man.span:
        raise PolicyError(f"{where}: {step.udm!r} is a span UDO, run once per event: use it in a flat_map step "
                          f"(window UDOs: {', '.join(cat.names_of_kind('udo', span=False)) or '(none)'})")
    if step.clip not in man.allowed_clip:
        raise PolicyError(f"{where}: UDM {entry.name!r} does not allow clip {step.clip!r}; "
                          f"allowed: {', '.join(man.allowed_clip)}")
    if step.output not in man.allowed_output:
        raise PolicyError(f"{where}: UDM {entry.name!r} does not allow output {step.output!r}; "
                          f"allowed: {', '.join(man.allowed_output)}")
    if man.kind == "udo" and step.as_ is not None:
        raise PolicyError(f"{where}: 'as' names the result field of an aggregate; {entry.name!r} is a UDO")
    return BoundStep(step, entry, cat.instantiate(entry, step.params), name)


def bind(spec: QuerySpec, catalog: Catalog | None = None) -> BoundQuery:
    """Resolve the graph and every UDM it calls: all that can fail before any event is read fails here."""
    graph = resolve(spec)
    cat = catalog if catalog is not None else default_catalog()
    names = {n.index: n.name for n in graph.nodes}
    steps = tuple(_bind_step(s, cat, i, names[i]) for i, s in enumerate(spec.steps))
    return BoundQuery(spec, _bind_lmerge(spec, graph, steps), graph)


def build_plan(query: BoundQuery | QuerySpec | Mapping[str, Any] | str | Path,
               catalog: Catalog | None = None) -> BoundQuery:
    """The bound plan of ``query``: bound as it is, a `QuerySpec` bound (`bind`), a spec's JSON object
    parsed and bound, or a spec file (JSON or YAML, a path) loaded and bound."""
    if isinstance(query, BoundQuery):
        return query
    if isinstance(query, QuerySpec):
        return bind(query, catalog)
    if isinstance(query, Mapping):
        return bind(parse_query(query), catalog)
    if isinstance(query, (str, Path)):
        return bind(load_query(query), catalog)
    raise QuerySpecError(f"a query is a query spec, its JSON object, a spec file or a bound plan, "
                         f"got {type(query).__name__}")


def _bind_lmerge(spec: QuerySpec, graph: QueryGraph, steps: tuple[BoundStep, ...]) -> tuple[BoundStep, ...]:
    """Each lmerge step with a concrete algorithm (``auto``: the cheapest its inputs' properties allow) and
    its ``join_at`` checked against what it reads."""
    merges = [n for n in graph.nodes if isinstance(n.step, LmergeStep)]
    if not merges:
        return steps
    udas = frozenset(n.name for n, bs in ((n, steps[n.index]) for n in graph.nodes)
                     if isinstance(n.step, WindowStep) and bs.entry is not None and bs.entry.manifest.kind == "uda")
    props = derive_properties(spec, graph, udas)
    out = list(steps)
    for node in merges:
        step = node.step
        unknown = sorted(set(step.join_at) - set(node.sources))
        if unknown:
            raise QuerySpecError(f"steps[{node.index}] {node.name!r} (lmerge): join_at names {', '.join(unknown)}, "
                                 f"which it does not read (from: {', '.join(node.sources)})")
        if set(step.join_at) >= set(node.sources):
            raise QuerySpecError(f"steps[{node.index}] {node.name!r} (lmerge): join_at names every input; at "
                                 f"least one must carry the stream from the start")
        algorithm = step.algorithm
        if algorithm == "auto":
            algorithm = choose_algorithm([props[s] for s in node.sources])
        resolved = step.model_copy(update={"algorithm": algorithm})
        out[node.index] = BoundStep(resolved, None, None, node.name)
    return tuple(out)
