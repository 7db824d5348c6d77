"""A fluent Python API for query writers, over the same `QuerySpec` model as query files (INTERFACES §2).

::

    from udm.host.query import Stream

    out = (Stream.from_jsonl("trades.jsonl")
           .filter("in_range", args={"x": "price"}, params={"lo": 0, "hi": 100})
           .group_by("sym")
           .hopping(10, 5)
           .aggregate("median", input="price", as_="m")
           .to_elements())

Every method returns a new `Stream` (a stream value can be branched). ``group_by`` and a window method
set the grouping and window of the *next* ``aggregate``/``apply``; they are consumed by it. UDMs are
invoked by registered name; `bind` (called by every run method before any event is read) resolves
them and checks parameters and policies, raising `UdmError`s that say what is available.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from udm.host.errors import PolicyError, QuerySpecError, UdmError
from udm.host.query.plan import BoundQuery, bind
from udm.host.query.spec import (
    CountByEnd,
    CountByStart,
    FilterStep,
    Hopping,
    MapStep,
    QuerySpec,
    Snapshot,
    Tumbling,
    WindowSpec,
    WindowStep,
    format_validation_error,
    parse_query,
)
from udm.host.temporal.elements import Element, parse_element
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.catalog import Catalog
    from udm.host.query.runners import RunResult
    from udm.host.testing.cht import CHT

__all__ = ["Stream", "run_elements"]

_Window: TypeAlias = Tumbling | Hopping | Snapshot | CountByStart | CountByEnd


@dataclass(frozen=True)
class _Source:
    kind: str  # "events" | "jsonl" | "none"
    events: tuple[Any, ...] = ()
    path: str | None = None


def _coerce_elements(events: Iterable[Any]) -> tuple[Any, ...]:
    """Elements as given; JSON-shaped dicts (INTERFACES §1) are parsed now. A bad dict is kept as is and
    dead-lettered by the run, like a bad line in a file."""
    out: list[Any] = []
    for ev in events:
        if isinstance(ev, Mapping):
            try:
                out.append(parse_element(dict(ev)))
            except UdmError as bad:
                out.append(bad)
        else:
            out.append(ev)
    return tuple(out)


@dataclass(frozen=True)
class Stream:
    """An immutable query under construction, optionally with a source to run it on."""

    _source: _Source = _Source("none")
    _steps: tuple[Any, ...] = ()
    _methods: tuple[str, ...] = ()  # which builder made each step ("filter", "map", "aggregate", "apply")
    _group_by: tuple[str, ...] | None = None
    _window: _Window | None = None
    _on_violation: str = "dead_letter"
    _catalog: Any = None

    # ------------------------------------------------------------------ sources
    @classmethod
    def from_events(cls, events: Iterable[Element | Mapping[str, Any]], *, catalog: Catalog | None = None
                    ) -> Stream:
        """A stream over in-memory elements (`Insert`/`Retract`/`Cti`, or their JSON dicts)."""
        return cls(_Source("events", events=_coerce_elements(events)), _catalog=catalog)

    @classmethod
    def from_jsonl(cls, path: str | Path, *, catalog: Catalog | None = None) -> Stream:
        """A stream over a JSON Lines event file (read only when the query runs)."""
        return cls(_Source("jsonl", path=str(path)), _catalog=catalog)

    @classmethod
    def query(cls, *, catalog: Catalog | None = None) -> Stream:
        """A query with no source: build a `spec`, or run it later with `run_on`."""
        return cls(_catalog=catalog)

    # ------------------------------------------------------------------ span steps
    def _add(self, step: Any, method: str) -> Stream:
        if self._group_by is not None or self._window is not None:
            raise QuerySpecError(f".{method}() after .group_by()/a window: finish the window step with "
                                 ".aggregate(...) or .apply(...) first")
        return replace(self, _steps=(*self._steps, step), _methods=(*self._methods, method))

    def filter(self, udf: str, *, args: Mapping[str, str] | None = None, params: Mapping[str, Any] | None = None,
               version: str | None = None) -> Stream:
        """Keep events for which UDF ``udf`` is truthy; ``args`` maps its arguments to payload fields."""
        return self._add(_build(FilterStep, op="filter", udf=udf, version=version, args=dict(args or {}),
                                params=dict(params or {})), "filter")

    def map(self, udf: str, *, as_: str, args: Mapping[str, str] | None = None,
            params: Mapping[str, Any] | None = None, version: str | None = None) -> Stream:
        """Set payload field ``as_`` to UDF ``udf``'s result."""
        return self._add(_build(MapStep, op="map", udf=udf, version=version, args=dict(args or {}),
                                params=dict(params or {}), **{"as": as_}), "map")

    # ------------------------------------------------------------------ grouping and windows
    def group_by(self, *keys: str | Sequence[str]) -> Stream:
        """Group the next window step by these payload fields."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        return replace(self, _group_by=tuple(flat))

    def window(self, window: _Window | Mapping[str, Any]) -> Stream:
        if isinstance(window, Mapping):
            from pydantic import TypeAdapter, ValidationError

            data = dict(window)
            try:
                window = TypeAdapter(WindowSpec).validate_python(data)
            except ValidationError as exc:
                raise QuerySpecError(format_validation_error(exc, "invalid window", data)) from None
        return replace(self, _window=window)

    def tumbling(self, size: int, offset: int = 0) -> Stream:
        return self.window({"type": "tumbling", "size": size, "offset": offset})

    def hopping(self, size: int, hop: int, offset: int = 0) -> Stream:
        return self.window({"type": "hopping", "size": size, "hop": hop, "offset": offset})

    def snapshot(self) -> Stream:
        return self.window({"type": "snapshot"})

    def count_by_start(self, n: int, hop: int = 1) -> Stream:
        return self.window({"type": "count_by_start", "n": n, "hop": hop})

    def count_by_end(self, n: int, hop: int = 1) -> Stream:
        return self.window({"type": "count_by_end", "n": n, "hop": hop})

    # ------------------------------------------------------------------ window steps
    def _window_step(self, method: str, udm: str, *, input: str | Mapping[str, str] | None,
                     as_: str | None, params: Mapping[str, Any] | None, version: str | None, clip: str,
                     output: str, max_delay: int | str, max_memory_time: int | str) -> Stream:
        if self._window is None:
            raise QuerySpecError(f".{method}({udm!r}) needs a window first: .tumbling(size), .hopping(size, hop), "
                                 ".snapshot(), .count_by_start(n, hop) or .count_by_end(n, hop)")
        data: dict[str, Any] = {
            "op": "window",
            "window": self._window.model_dump(),
            "group_by": list(self._group_by or ()),
            "udm": udm,
            "version": version,
            "input": dict(input) if isinstance(input, Mapping) else input,
            "params": dict(params or {}),
            "clip": clip,
            "output": output,
            "max_delay": max_delay,
            "max_memory_time": max_memory_time,
        }
        if as_ is not None:
            data["as"] = as_
        step = _build(WindowStep, **data)
        return replace(self, _steps=(*self._steps, step), _methods=(*self._methods, method),
                       _group_by=None, _window=None)

    def aggregate(self, udm: str, *, input: str | Mapping[str, str] | None = None, as_: str | None = None,
                  params: Mapping[str, Any] | None = None, version: str | None = None, clip: str = "none",
                  output: str = "window", max_delay: int | str = 0,
                  max_memory_time: int | str = INF) -> Stream:
        """Apply UDA ``udm`` to each window (per group): one output event per window, payload
        ``{**group_key, as_: value}`` (``as_`` defaults to the UDM name)."""
        return self._window_step("aggregate", udm, input=input, as_=as_, params=params, version=version,
                                 clip=clip, output=output, max_delay=max_delay, max_memory_time=max_memory_time)

    def apply(self, udm: str, *, params: Mapping[str, Any] | None = None, input: str | Mapping[str, str] | None = None,
              version: str | None = None, clip: str = "none", output: str = "window", max_delay: int | str = 0,
              max_memory_time: int | str = INF) -> Stream:
        """Apply UDO ``udm`` to each window (per group): zero or more output events per window."""
        return self._window_step("apply", udm, input=input, as_=None, params=params, version=version, clip=clip,
                                 output=output, max_delay=max_delay, max_memory_time=max_memory_time)

    def on_violation(self, policy: str) -> Stream:
        """``dead_letter`` (default), ``adjust`` or ``error`` (SEMANTICS §1)."""
        if policy not in ("dead_letter", "adjust", "error"):
            raise QuerySpecError(f"on_violation must be one of dead_letter, adjust, error; got {policy!r}")
        return replace(self, _on_violation=policy)

    def with_catalog(self, catalog: Catalog) -> Stream:
        return replace(self, _catalog=catalog)

    # ------------------------------------------------------------------ the query
    @property
    def spec(self) -> QuerySpec:
        """The query as a `QuerySpec` (what a query file holds)."""
        if self._group_by is not None or self._window is not None:
            raise QuerySpecError("the query ends with .group_by()/a window but no .aggregate(...) or .apply(...)")
        if not self._steps:
            raise QuerySpecError("the query has no steps: add .filter, .map, or a window with .aggregate/.apply")
        return parse_query({"steps": [s.model_dump(by_alias=True) for s in self._steps],
                            "on_violation": self._on_violation}, source="query")

    def to_json_dict(self) -> dict[str, Any]:
        return self.spec.to_json_dict()

    def bind(self) -> BoundQuery:
        """Resolve every UDM and check parameters and policies (raises before any event is read)."""
        bound = bind(self.spec, self._catalog)
        for i, (method, bs) in enumerate(zip(self._methods, bound.steps, strict=True)):
            kind = bs.entry.manifest.kind
            if method == "aggregate" and kind != "uda":
                raise PolicyError(f"steps[{i}]: {bs.entry.name!r} is a {kind.upper()}; "
                                  f"use .apply({bs.entry.name!r}, ...) for an operator")
            if method == "apply" and kind != "udo":
                raise PolicyError(f"steps[{i}]: {bs.entry.name!r} is a {kind.upper()}; use "
                                  f".aggregate({bs.entry.name!r}, ...) for an aggregate")
        return bound

    # ------------------------------------------------------------------ running
    def to_elements(self, *, dead_letters: list[Any] | None = None) -> list[Element]:
        """Run locally to the output elements (end of input is ``cti(INF)``). Bad input elements are
        skipped; pass a list as ``dead_letters`` to receive their dead-letter records."""
        bound = self.bind()
        if self._source.kind == "none":
            raise QuerySpecError("this stream has no source: use Stream.from_events/from_jsonl, or run_on(...)")
        if self._source.kind == "events":
            return run_elements(bound, self._source.events, dead_letters=dead_letters)
        from udm.host.io.jsonl import JsonlReader
        from udm.host.query.runners import make_runner, quiet_gc

        runner = make_runner(bound, None)
        out: list[Element] = []
        with quiet_gc():
            for batch in JsonlReader(self._source.path or "", prefetch=1):
                out.extend(runner.process_batch(batch))
                _collect(runner, dead_letters)
            out.extend(runner.finish())
            _collect(runner, dead_letters)
        return out

    def to_cht(self) -> CHT:
        """Run locally to the output's canonical history table (a multiset of ``(le, re, payload)`` rows)."""
        from udm.host.testing.cht import cht

        return cht(self.to_elements())

    def run_on(self, events: Iterable[Element | Mapping[str, Any]]) -> list[Element]:
        """Run this query over in-memory elements (the query's own source, if any, is ignored)."""
        return replace(self, _source=_Source("events", events=_coerce_elements(events))).to_elements()

    def run(self, output: str | Path, *, dead_letter: str | Path | None = None, engine: str = "local",
            input: str | Path | None = None, **options: Any) -> RunResult:
        """Run file to file, exactly as ``udm run`` does (``input`` defaults to the `from_jsonl` path)."""
        from udm.host.query.runners import RunRequest, get_engine

        bound = self.bind()
        src = input if input is not None else self._source.path
        if src is None:
            raise QuerySpecError("run() needs an input file: Stream.from_jsonl(path) or run(..., input=path)")
        run = get_engine(engine)
        return run(RunRequest(bound=bound, input=str(src), output=str(output),
                              dead_letter=None if dead_letter is None else str(dead_letter), options=options))

    def __repr__(self) -> str:
        src = {"none": "query", "events": f"events[{len(self._source.events)}]",
               "jsonl": f"jsonl({self._source.path!r})"}[self._source.kind]
        parts = [src, *(f"{m}({_step_name(s)})" for m, s in zip(self._methods, self._steps, strict=True))]
        if self._group_by is not None:
            parts.append(f"group_by{self._group_by}")
        if self._window is not None:
            parts.append(f"window({self._window.type})")
        return "Stream<" + " → ".join(parts) + ">"


def _step_name(step: Any) -> str:
    return str(getattr(step, "udf", None) or getattr(step, "udm", "?"))


def _build(model: Any, **data: Any) -> Any:
    from pydantic import ValidationError

    data = {k: v for k, v in data.items() if v is not None or k in ("input",)}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise QuerySpecError(format_validation_error(exc, f"invalid {data.get('op', 'step')} step", data)) from None


def _collect(runner: Any, sink: list[Any] | None) -> None:
    dls = runner.take_dead_letters()
    if sink is not None:
        sink.extend(dls)


def run_elements(bound: BoundQuery, elements: Iterable[Any], *, dead_letters: list[Any] | None = None
                 ) -> list[Element]:
    """Run a bound query over in-memory elements with the local engine; end of input is ``cti(INF)``."""
    from udm.host.io.batch import ElementBatch
    from udm.host.query.runners import make_runner, quiet_gc

    els = list(elements)
    runner = make_runner(bound, None)
    with quiet_gc():
        out = list(runner.process_batch(ElementBatch.from_elements(els, list(range(1, len(els) + 1)))))
        _collect(runner, dead_letters)
        out.extend(runner.finish())
        _collect(runner, dead_letters)
    return out
