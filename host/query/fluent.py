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

Query graphs (SEMANTICS §10): streams over different sources combine with ``union``, ``join`` and
``left_anti_join``; a stream used twice is multicast::

    bids = Stream.from_jsonl("bids.jsonl", name="bids")
    auctions = Stream.from_jsonl("auctions.jsonl", name="auctions")
    hot = bids.group_by("auction").tumbling(10).aggregate("count", as_="num")
    out = hot.join(auctions, on=[("auction", "id")], right_prefix="a_").project(keep=["auction", "num", "a_seller"])

A stream with one source named ``main`` and a chain of steps gives the linear spec it always gave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import TypeAdapter, ValidationError

from udm.host.errors import PolicyError, QuerySpecError, UdmError
from udm.host.io.arrival import ArrivalSource
from udm.host.io.interleave import interleave
from udm.host.io.jsonl import JsonlReader
from udm.host.io.table_options import TableOptions, TableSource
from udm.host.io.table_out import output_sink
from udm.host.io.tables import TableReader
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import (
    AlignStep,
    AlterLifetimeStep,
    CountByEnd,
    CountByStart,
    Cumulate,
    FilterStep,
    FinalizeStep,
    FlatMapStep,
    Hopping,
    JoinStep,
    LmergeStep,
    MapStep,
    ProjectStep,
    QuerySpec,
    Rows,
    Session,
    Snapshot,
    Tumbling,
    UnionStep,
    WindowSpec,
    WindowStep,
    duration_ticks,
    format_validation_error,
    parse_query,
)
from udm.host.query import runners
from udm.host.query.runners import RunRequest, get_engine, quiet_gc
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Element, parse_element
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.catalog import Catalog

__all__ = ["Stream", "run_elements"]

_Window: TypeAlias = Tumbling | Hopping | Cumulate | Snapshot | CountByStart | CountByEnd | Rows | Session


@dataclass(frozen=True)
class _Source:
    kind: str  # "events" | "jsonl" | "table" | "arrival" | "none"
    events: tuple[Any, ...] = ()
    path: str | None = None
    table: Any = None  # a `udm.host.io.table_options.TableSource` (kind "table")
    live: Any = None  # a `udm.host.io.arrival.ArrivalSource` (kind "arrival")
    clock: Any = None  # its clock (tests)

    def reader(self) -> Any:
        """The batches of a file source (element JSON Lines or a table)."""
        if self.kind == "table":
            return TableReader(self.table)

        return JsonlReader(self.path or "", prefetch=1)

    @property
    def file(self) -> Any:
        """What `RunRequest.input` takes for this source."""
        return self.table if self.kind == "table" else self.live if self.kind == "arrival" else self.path


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
    """An immutable query (graph) under construction, with the sources to run it on.

    ``_steps`` hold explicit ``id``/``from`` (``_head`` names the step or input this stream stands for);
    `spec` drops them again for a linear query over the single input ``main``.
    """

    _inputs: tuple[tuple[str, _Source], ...] = (("main", _Source("none")),)
    _steps: tuple[Any, ...] = ()
    _methods: tuple[str, ...] = ()  # which builder made each step ("filter", "map", "aggregate", "apply", ...)
    _head: str = "main"
    _group_by: tuple[str, ...] | None = None
    _window: _Window | None = None
    _on_violation: str = "dead_letter"
    _catalog: Any = None

    # ------------------------------------------------------------------ sources
    @classmethod
    def from_events(cls, events: Iterable[Element | Mapping[str, Any]], *, name: str = "main",
                    catalog: Catalog | None = None) -> Stream:
        """A stream over in-memory elements (`Insert`/`Retract`/`Cti`, or their JSON dicts); ``name`` is
        its input name in a query graph."""
        return cls(((name, _Source("events", events=_coerce_elements(events))),), _head=name, _catalog=catalog)

    @classmethod
    def from_jsonl(cls, path: str | Path, *, name: str = "main", catalog: Catalog | None = None) -> Stream:
        """A stream over a JSON Lines event file (read only when the query runs); ``name`` is its input name
        in a query graph."""
        return cls(((name, _Source("jsonl", path=str(path))),), _head=name, _catalog=catalog)

    @classmethod
    def from_table(cls, path: str | Path, *, time: str | None = None, start: str | None = None,
                   end: str | None = None, edge: str | None = None, key: Sequence[str] = (), id: str | None = None,
                   unit: str = "ticks", cti_every: int | None = None, cti_lag: int = 0, format: str | None = None,
                   name: str = "main", catalog: Catalog | None = None) -> Stream:
        """A stream over a user's table — a Parquet, CSV or JSON Lines file or directory — with the column
        options of ``udm run`` (`udm.host.io.table_options.TableOptions`): ``time=`` for point events,
        ``start=``/``end=`` for intervals, ``edge=``/``key=`` for edge samples. Read (streamed) when the
        query runs; bad rows are dead letters with their row numbers."""
        opts = TableOptions(time=time, start=start, end=end, edge=edge, key=tuple(key), id=id, unit=unit,
                            cti_every=cti_every, cti_lag=cti_lag, format=format).check(str(path))
        source = _Source("table", path=str(path), table=TableSource(Path(path), opts))
        return cls(((name, source),), _head=name, _catalog=catalog)

    @classmethod
    def from_live(cls, source: str | Path | Any = "-", *, cti_every: int | str | None = None,
                  clock: Any = None, name: str = "main", catalog: Catalog | None = None) -> Stream:
        """A live input read with arrival time (SEMANTICS §11, ``udm run --time @arrival``): element JSON Lines
        from ``source`` (``"-"``: stdin, a path such as a named pipe, or a binary stream), each stamped with
        the wall-clock time it is read at, in microseconds; ``cti_every`` (``"1s"``, or microseconds): a CTI
        each time the clock passes a multiple of it. ``clock``: a function giving microseconds (tests)."""
        every = duration_ticks(cti_every) if isinstance(cti_every, str) else cti_every
        live = ArrivalSource(source if not isinstance(source, Path) else str(source), every)
        return cls(((name, _Source("arrival", live=live, clock=clock)),), _head=name, _catalog=catalog)

    @classmethod
    def query(cls, *, catalog: Catalog | None = None) -> Stream:
        """A query with no source: build a `spec`, or run it later with `run_on`."""
        return cls(_catalog=catalog)

    @property
    def _source(self) -> _Source:
        """The source of a single-input stream."""
        if len(self._inputs) != 1:
            names = ", ".join(n for n, _ in self._inputs)
            raise QuerySpecError(f"this stream reads several inputs ({names}); run it with run()/to_elements()")
        return self._inputs[0][1]

    # ------------------------------------------------------------------ span steps
    def _add(self, step: Any, method: str) -> Stream:
        if self._group_by is not None or self._window is not None:
            raise QuerySpecError(f".{method}() after .group_by()/a window: finish the window step with "
                                 ".aggregate(...) or .apply(...) first")
        return self._append(step, method)

    def _append(self, step: Any, method: str, sources: Sequence[str] | None = None) -> Stream:
        """Add ``step`` reading ``sources`` (default: this stream's head); it becomes the new head."""
        taken = {n for n, _ in self._inputs} | {s.id for s in self._steps}
        k = len(self._steps)
        while f"s{k}" in taken:
            k += 1
        name = f"s{k}"
        src = list(sources) if sources is not None else [self._head]
        step = step.model_copy(update={"id": name, "from_": src[0] if len(src) == 1 else src})
        return replace(self, _steps=(*self._steps, step), _methods=(*self._methods, method), _head=name)

    def _merged(self, others: Sequence[Stream], method: str) -> tuple[Stream, list[str]]:
        """This stream with the steps and inputs of ``others`` added (their step names made unique; an input
        name shared with the same source is one input read twice, with another source an error); returns it
        and the heads of all streams, this one first."""
        if self._group_by is not None or self._window is not None:
            raise QuerySpecError(f".{method}() after .group_by()/a window: finish the window step first")
        merged = self
        heads = [self._head]
        for other in others:
            if not isinstance(other, Stream):
                raise QuerySpecError(f".{method}() takes Streams, got {type(other).__name__}")
            inputs = dict(merged._inputs)
            for name, src in other._inputs:
                if name in inputs and inputs[name] != src:
                    raise QuerySpecError(f".{method}(): two different sources are both named {name!r}; name them, "
                                         f"e.g. Stream.from_jsonl(path, name='bids')")
                inputs.setdefault(name, src)
            own = set(inputs) | {s.id for s in merged._steps}
            renames: dict[str, str] = {}
            steps = list(merged._steps)
            for st in other._steps:
                if st in merged._steps:  # a shared upstream step (multicast): keep one copy
                    continue
                new = st.id
                k = len(steps)
                while new in own:
                    new, k = f"s{k}", k + 1
                renames[st.id] = new
                own.add(new)
                reads = [renames.get(x, x) for x in st.sources]
                steps.append(st.model_copy(update={"id": new, "from_": reads[0] if len(reads) == 1 else reads}))
            methods = list(merged._methods) + [m for st, m in zip(other._steps, other._methods, strict=True)
                                               if st.id in renames]
            merged = replace(merged, _inputs=tuple(inputs.items()), _steps=tuple(steps), _methods=tuple(methods))
            heads.append(renames.get(other._head, other._head))
        return merged, heads

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

    def flat_map(self, udm: str, *, params: Mapping[str, Any] | None = None, version: str | None = None) -> Stream:
        """Run span UDO ``udm`` once per event: each event becomes zero or more events (``explode``), each
        inside its lifetime; a retraction of the event changes exactly its outputs."""
        return self._add(_build(FlatMapStep, op="flat_map", udm=udm, version=version, params=dict(params or {})),
                         "flat_map")

    # ------------------------------------------------------------------ temporal operators (SEMANTICS §10)
    def project(self, keep: Sequence[str] | None = None, *, drop: Sequence[str] = (),
                rename: Mapping[str, str] | None = None, set: Mapping[str, Any] | None = None) -> Stream:
        """Rewrite payloads: ``keep`` only these fields, then ``drop``, ``rename`` (old → new), ``set`` constants."""
        return self._add(_build(ProjectStep, op="project", keep=list(keep) if keep is not None else None,
                                drop=list(drop), rename=dict(rename or {}), set=dict(set or {})), "project")

    def alter_lifetime(self, le: str | Mapping[str, Any] = "keep", duration: str | int | Mapping[str, Any] = "keep"
                       ) -> Stream:
        """New lifetimes ``[f(LE), f(LE) + duration)``: ``le`` is ``"keep"``, ``{"shift": d}`` or
        ``{"snap": {"size": s, "offset": o}}``; ``duration`` is ``"keep"``, ``"inf"``, an int or ``{"const": d}``."""
        dur = {"const": duration} if isinstance(duration, int) else duration
        return self._add(_build(AlterLifetimeStep, op="alter_lifetime", le=le, duration=dur), "alter_lifetime")

    def union(self, *others: Stream, distinct: bool = False) -> Stream:
        """The multiset sum of this stream and ``others`` (``distinct``: each distinct row once)."""
        merged, heads = self._merged(others, "union")
        return merged._append(_build(UnionStep, op="union", distinct=distinct), "union", heads)

    def join(self, other: Stream, on: str | Sequence[str | tuple[str, str] | list[str]], *, type: str = "inner",
             where: str | Mapping[str, Any] | None = None, left_prefix: str = "", right_prefix: str = "") -> Stream:
        """Temporal equijoin with ``other`` (this stream is the left input). ``on``: a field name, or a list of
        names / ``(left_field, right_field)`` pairs; ``where``: a UDF name, or ``{"udf", "args", "params"}``,
        called on the joined payload."""
        merged, heads = self._merged([other], "join")
        pairs = [on] if isinstance(on, str) else [list(x) if not isinstance(x, str) else x for x in on]
        cond = {"udf": where} if isinstance(where, str) else (dict(where) if where is not None else None)
        step = _build(JoinStep, op="join", on=pairs, type=type, where=cond, left_prefix=left_prefix,
                      right_prefix=right_prefix)
        return merged._append(step, "join", heads)

    def lmerge(self, *others: Stream, algorithm: str = "auto", feedback: bool = False) -> Stream:
        """One stream compatible with this one and ``others``, which carry the same logical stream in
        physically different ways (SEMANTICS §8): replicas, an old and a new plan, a replay and a live feed."""
        merged, heads = self._merged(others, "lmerge")
        step = _build(LmergeStep, op="lmerge", algorithm=algorithm, feedback=feedback)
        return merged._append(step, "lmerge", heads)

    def align(self, max_delay: int | str = 0, *, max_wait: int | str | None = None) -> Stream:
        """Hold output until the CTI makes it final, or until it is ``max_delay`` ticks behind the watermark
        (``"inf"``: strong consistency); ``max_wait`` (``"2s"``, or microseconds) bounds the hold in
        wall-clock time (SEMANTICS §7, §10; docs/consistency.md)."""
        return self._add(_build(AlignStep, op="align", max_delay=max_delay, max_wait=max_wait), "align")

    def finalize(self, max_memory_time: int | str) -> Stream:
        """Treat ``watermark - max_memory_time`` as a CTI from here on: steps after it forget older state, and
        corrections older than that are dead-lettered (SEMANTICS §7, §10; docs/consistency.md)."""
        return self._add(_build(FinalizeStep, op="finalize", max_memory_time=max_memory_time), "finalize")

    def left_anti_join(self, other: Stream, on: str | Sequence[str | tuple[str, str] | list[str]], *,
                       where: str | Mapping[str, Any] | None = None) -> Stream:
        """The parts of this stream's lifetimes that no matching event of ``other`` covers."""
        return self.join(other, on, type="left_anti", where=where)

    # ------------------------------------------------------------------ grouping and windows
    def group_by(self, *keys: str | Sequence[str]) -> Stream:
        """Group the next window step by these payload fields."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        return replace(self, _group_by=tuple(flat))

    def window(self, window: _Window | Mapping[str, Any]) -> Stream:
        if isinstance(window, Mapping):
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

    def cumulate(self, size: int, step: int, offset: int = 0) -> Stream:
        """Each period of ``size`` ticks, its running windows one per ``step`` ("so far today, every minute")."""
        return self.window({"type": "cumulate", "size": size, "step": step, "offset": offset})

    def snapshot(self) -> Stream:
        return self.window({"type": "snapshot"})

    def count_by_start(self, n: int, hop: int = 1) -> Stream:
        return self.window({"type": "count_by_start", "n": n, "hop": hop})

    def count_by_end(self, n: int, hop: int = 1) -> Stream:
        return self.window({"type": "count_by_end", "n": n, "hop": hop})

    def rows(self, n: int, slide: int = 1, partial: bool = False) -> Stream:
        return self.window({"type": "rows", "n": n, "slide": slide, "partial": partial})

    def session(self, gap: int) -> Stream:
        return self.window({"type": "session", "gap": gap})

    # ------------------------------------------------------------------ window steps
    def _window_step(self, method: str, udm: str | None, *, input: str | Mapping[str, str] | None,
                     as_: str | None, params: Mapping[str, Any] | None, version: str | None, clip: str,
                     output: str, max_delay: int | str, max_memory_time: int | str,
                     aggregates: list[dict[str, Any]] | None = None, early: int | None = None) -> Stream:
        if self._window is None:
            raise QuerySpecError(f".{method}({udm!r}) needs a window first: .tumbling(size), .hopping(size, hop), "
                                 ".snapshot(), .count_by_start(n, hop), .count_by_end(n, hop), .rows(n, slide) "
                                 "or .session(gap)")
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
            "early": early,
        }
        if as_ is not None:
            data["as"] = as_
        if aggregates is not None:
            data.update(udm=None, aggregates=aggregates, version=None, input=None, params={})
        step = _build(WindowStep, **data)
        return replace(self, _group_by=None, _window=None)._append(step, method)

    def aggregate(self, udm: str | None = None, *, input: str | Mapping[str, str] | None = None,
                  as_: str | None = None, params: Mapping[str, Any] | None = None, version: str | None = None,
                  clip: str = "none", output: str = "window", max_delay: int | str = 0,
                  max_memory_time: int | str = INF, early: int | None = None,
                  **aggregates: str | Mapping[str, Any]) -> Stream:
        """Apply UDA ``udm`` to each window (per group): one output event per window, payload
        ``{**group_key, as_: value}`` (``as_`` defaults to the UDM name).

        Several UDAs over one membership (SEMANTICS §9 ``aggregates``): name each output field as a
        keyword, its value a UDM name or ``{"udm", "input"?, "params"?, "version"?}``, e.g.
        ``.aggregate(n="count", mean={"udm": "avg", "input": "price"})``: one output per window with
        every field. ``early``: progressive output (the window step's ``early``)."""
        if aggregates:
            if udm is not None or input is not None or as_ is not None or params or version is not None:
                raise QuerySpecError(".aggregate(name=..., ...) takes the UDM, input, params and version "
                                     "of each aggregate inside its own value, not as udm/input/as_/params/version")
            parts = [{"udm": v, "as": k} if isinstance(v, str) else {**dict(v), "as": k}
                     for k, v in aggregates.items()]
            return self._window_step("aggregate", None, input=None, as_=None, params=None, version=None,
                                     clip=clip, output=output, max_delay=max_delay,
                                     max_memory_time=max_memory_time, aggregates=parts, early=early)
        if udm is None:
            raise QuerySpecError(".aggregate() needs a UDM name, or output fields as keywords "
                                 "(.aggregate(n='count', mean={'udm': 'avg', 'input': 'v'}))")
        return self._window_step("aggregate", udm, input=input, as_=as_, params=params, version=version,
                                 clip=clip, output=output, max_delay=max_delay, max_memory_time=max_memory_time,
                                 early=early)

    def apply(self, udm: str, *, params: Mapping[str, Any] | None = None, input: str | Mapping[str, str] | None = None,
              version: str | None = None, clip: str = "none", output: str = "window", max_delay: int | str = 0,
              max_memory_time: int | str = INF, early: int | None = None) -> Stream:
        """Apply UDO ``udm`` to each window (per group): zero or more output events per window."""
        return self._window_step("apply", udm, input=input, as_=None, params=params, version=version, clip=clip,
                                 output=output, max_delay=max_delay, max_memory_time=max_memory_time, early=early)

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
        steps = [s.model_dump(by_alias=True, exclude_none=True) for s in self._steps]
        if self._is_chain():
            for st in steps:
                st.pop("id", None)
                st.pop("from", None)
            return parse_query({"steps": steps, "on_violation": self._on_violation}, source="query")
        return parse_query({"inputs": {n: {} for n, _ in self._inputs}, "steps": steps, "output": self._head,
                            "on_violation": self._on_violation}, source="query")

    def _is_chain(self) -> bool:
        """One input named ``main`` and each step reading the one before: the linear spec of INTERFACES §2."""
        prev = "main"
        for i, st in enumerate(self._steps):
            if self._inputs[0][0] != "main" or len(self._inputs) != 1 or st.id != f"s{i}" or st.sources != [prev]:
                return False
            prev = st.id
        return prev == self._head

    def to_json_dict(self) -> dict[str, Any]:
        return self.spec.to_json_dict()

    def bind(self) -> BoundQuery:
        """Resolve every UDM and check parameters and policies (raises before any event is read)."""
        bound = bind(self.spec, self._catalog)
        for i, (method, bs) in enumerate(zip(self._methods, bound.steps, strict=True)):
            if method not in ("aggregate", "apply") or bs.entry is None:
                continue
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
        if any(src.kind == "none" for _, src in self._inputs):
            raise QuerySpecError("this stream has no source: use Stream.from_events/from_jsonl, or run_on(...)")
        if len(self._inputs) > 1 or self._inputs[0][0] != bound.graph.inputs[0]:
            return _run_sources(bound, self._inputs, dead_letters)
        if self._source.kind == "events":
            return run_elements(bound, self._source.events, dead_letters=dead_letters)

        if self._source.kind == "arrival":
            return _run_live(bound, self._source, dead_letters)

        runner = runners.make_runner(bound)  # (looked up at call time: tests stand a runner in)
        out: list[Element] = []
        with quiet_gc():
            for batch in self._source.reader():
                out.extend(runner.process_batch(batch))
                _collect(runner, dead_letters)
            out.extend(runner.finish())
            _collect(runner, dead_letters)
        return out

    def run_on(self, events: Iterable[Element | Mapping[str, Any]]) -> list[Element]:
        """Run this query over in-memory elements (the query's own source, if any, is ignored)."""
        name = self._inputs[0][0] if len(self._inputs) == 1 else "main"
        source = _Source("events", events=_coerce_elements(events))
        return replace(self, _inputs=((name, source),)).to_elements()

    def run(self, output: str | Path, *, dead_letter: str | Path | None = None, engine: str = "local",
            input: str | Path | None = None, output_format: str | None = None, final: bool = False,
            times: str | None = None, **options: Any) -> RunResult:
        """Run file to file, exactly as ``udm run`` does (``input`` defaults to the `from_jsonl` /
        `from_table` source). ``output_format``/``final``/``times`` as ``udm run``'s table output options
        (``times`` None: the table inputs' time type)."""
        bound = self.bind()
        src: Any
        if len(self._inputs) > 1 and input is None:
            if any(s.kind not in ("jsonl", "table") for _, s in self._inputs):
                raise QuerySpecError("run() reads files: build every input with Stream.from_jsonl(path, name=...) "
                                     "or Stream.from_table(path, name=..., time=...)")
            src = {n: s.file for n, s in self._inputs}
        else:
            src = input if input is not None else self._source.file
            if src is None:
                raise QuerySpecError("run() needs an input file: Stream.from_jsonl(path) or run(..., input=path)")
            src = src if not isinstance(src, (str, Path)) else str(src)
        run = get_engine(engine)
        sink = output_sink(str(output), output_format, final=final, times=times,
                           inputs=src.values() if isinstance(src, dict) else [src])
        return run(RunRequest(bound=bound, input=src, output=sink,
                              dead_letter=None if dead_letter is None else str(dead_letter), options=options))

    def __repr__(self) -> str:
        srcs = [{"none": "query", "events": f"events[{len(s.events)}]", "jsonl": f"jsonl({s.path!r})",
                 "table": f"table({s.path!r})", "arrival": f"live({s.live})"}[s.kind]
                for _, s in self._inputs]
        parts = [" + ".join(srcs), *(f"{m}({_step_name(s)})" for m, s in zip(self._methods, self._steps, strict=True))]
        if self._group_by is not None:
            parts.append(f"group_by{self._group_by}")
        if self._window is not None:
            parts.append(f"window({self._window.type})")
        return "Stream<" + " → ".join(parts) + ">"


def _step_name(step: Any) -> str:
    aggs = getattr(step, "aggregates", None)
    if aggs:
        return "+".join(a.udm for a in aggs)
    return str(getattr(step, "udf", None) or getattr(step, "udm", None) or step.id)


def _run_sources(bound: BoundQuery, inputs: Sequence[tuple[str, _Source]], dead_letters: list[Any] | None
                 ) -> list[Element]:
    """Run a query graph over several sources, read side by side in the documented order."""
    def numbered(src: _Source) -> Iterable[tuple[int | None, Any]]:
        """(line, element) pairs: a file's own line numbers, or 1, 2, ... for in-memory events."""
        if src.kind == "events":
            return enumerate(src.events, 1)
        return (pair for batch in src.reader() for pair in batch.to_elements())

    names = bound.graph.inputs
    given = dict(inputs)
    if set(given) != set(names):
        raise QuerySpecError(f"the query reads inputs {', '.join(names)}; the stream has {', '.join(given)}")
    runner = runners.make_runner(bound)  # (looked up at call time: tests stand a runner in)
    with quiet_gc():
        out = runner.process_interleaved(interleave([(n, numbered(given[n])) for n in names])) + runner.finish()
    _collect(runner, dead_letters)
    return out


def _run_live(bound: BoundQuery, src: _Source, dead_letters: list[Any] | None) -> list[Element]:
    """A live source with arrival time, locally, until it ends (`udm.host.query.runners` feeds it)."""
    class _Collect:
        def __init__(self) -> None:
            self.out: list[Element] = []

        def write(self, els: Iterable[Element]) -> None:
            self.out.extend(els)

    runner = runners.make_runner(bound)  # (looked up at call time: tests stand a runner in)
    sink = _Collect()
    req = RunRequest(bound=bound, input=src.live, output=None, options={"clock": src.clock} if src.clock else {})
    with quiet_gc():
        runners._feed_arrival(req, runner, src.live, sink, lambda: _collect(runner, dead_letters))
        sink.out.extend(runner.finish())
        _collect(runner, dead_letters)
    return sink.out


def _build(model: Any, **data: Any) -> Any:
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
    runner = runners.make_runner(bound)  # (looked up at call time: tests stand a runner in)
    with quiet_gc():
        out = runner.run_all(list(elements))
    _collect(runner, dead_letters)
    return out
