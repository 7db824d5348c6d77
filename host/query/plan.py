"""Binding a query spec to catalog UDMs — every check that can fail before any event is read."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from udm.host.catalog import Catalog, CatalogEntry, default_catalog
from udm.host.errors import ParamError, PolicyError
from udm.host.query.spec import FilterStep, MapStep, QuerySpec, WindowStep
from udm.sdk import UDM

__all__ = ["BoundQuery", "BoundStep", "bind"]


@dataclass(frozen=True)
class BoundStep:
    step: FilterStep | MapStep | WindowStep
    entry: CatalogEntry
    udm: UDM

    @property
    def label(self) -> str:
        """How errors name this UDM: name and version."""
        return f"{self.entry.name} {self.entry.version}"


@dataclass(frozen=True)
class BoundQuery:
    spec: QuerySpec
    steps: tuple[BoundStep, ...]


def _check_udf_args(entry: CatalogEntry, step: FilterStep | MapStep) -> None:
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


def _bind_step(step: FilterStep | MapStep | WindowStep, cat: Catalog, index: int) -> BoundStep:
    where = f"steps[{index}] ({step.op})"
    if isinstance(step, (FilterStep, MapStep)):
        entry = cat.resolve(step.udf, step.version, kind="udf")
        _check_udf_args(entry, step)
        return BoundStep(step, entry, cat.instantiate(entry, step.params))
    entry = cat.resolve(step.udm, step.version)
    man = entry.manifest
    if man.kind == "udf":
        raise PolicyError(f"{where}: {step.udm!r} is a UDF; a window step needs a UDA or UDO "
                          f"(UDAs: {', '.join(cat.names_of_kind('uda'))}; UDOs: {', '.join(cat.names_of_kind('udo'))})")
    if step.clip not in man.allowed_clip:
        raise PolicyError(f"{where}: UDM {entry.name!r} does not allow clip {step.clip!r}; "
                          f"allowed: {', '.join(man.allowed_clip)}")
    if step.output not in man.allowed_output:
        raise PolicyError(f"{where}: UDM {entry.name!r} does not allow output {step.output!r}; "
                          f"allowed: {', '.join(man.allowed_output)}")
    if man.kind == "udo" and step.as_ is not None:
        raise PolicyError(f"{where}: 'as' names the result field of an aggregate; {entry.name!r} is a UDO")
    return BoundStep(step, entry, cat.instantiate(entry, step.params))


def bind(spec: QuerySpec, catalog: Catalog | None = None) -> BoundQuery:
    cat = catalog if catalog is not None else default_catalog()
    return BoundQuery(spec, tuple(_bind_step(s, cat, i) for i, s in enumerate(spec.steps)))
