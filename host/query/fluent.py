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
from typing import TYPE_CHECKING, Any

from udm.host.errors import PolicyError, QuerySpecError
from udm.host.io.arrival import ArrivalSource
from udm.host.io.table_options import TableOptions, TableSource
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import (
    AlignStep,
    AlterLifetimeStep,
    FilterStep,
    FinalizeStep,
    FlatMapStep,
    JoinStep,
    LmergeStep,
    MapStep,
    ProjectStep,
    QuerySpec,
    UnionStep,
    duration_ticks,
    parse_query,
)
from udm.host.query.fluent_run import Source, coerce_elements, run_elements, run_file, run_sources
from udm.host.query.fluent_windows import Window, WindowMethods, build_step
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Element

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.catalog import Catalog

__all__ = ["Stream", "run_elements"]


@dataclass(frozen=True)
class Stream(WindowMethods):
    """An immutable query (graph) under construction, with the sources to run it on.

    ``_steps`` hold explicit ``id``/``from`` (``_head`` names the step or input this stream stands for);
    `spec` drops them again for a linear query over the single input ``main``.
    """

    _inputs: tuple[tuple[str, Source], ...] = (("main", Source("none")),)
    _steps: tuple[Any, ...] = ()
    _methods: tuple[str, ...] = ()  # which builder made each step ("filter", "map", "aggregate", "apply", ...)
    _head: str = "main"
    _group_by: tuple[str, ...] | None = None
    _window: Window | None = None
    _on_violation: str = "dead_letter"
    _catalog: Any = None

    # ------------------------------------------------------------------ sources
    @classmethod
    def from_events(cls, events: Iterable[Element | Mapping[str, Any]], *, name: str = "main",
                    catalog: Catalog | None = None) -> Stream:
        """A stream over in-memory elements (`Insert`/`Retract`/`Cti`, or their JSON dicts); ``name`` is
        its input name in a query graph."""
        return cls(((name, Source("events", events=coerce_elements(events))),), _head=name, _catalog=catalog)

    @classmethod
    def from_jsonl(cls, path: str | Path, *, name: str = "main", catalog: Catalog | None = None) -> Stream:
        """A stream over a JSON Lines event file (read only when the query runs); ``name`` is its input name
        in a query graph."""
        return cls(((name, Source("jsonl", path=str(path))),), _head=name, _catalog=catalog)

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
        source = Source("table", path=str(path), table=TableSource(Path(path), opts))
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
        return cls(((name, Source("arrival", live=live, clock=clock)),), _head=name, _catalog=catalog)

    @classmethod
    def query(cls, *, catalog: Catalog | None = None) -> Stream:
        """A query with no source: build a `spec`, or run it later with `run_on`."""
        return cls(_catalog=catalog)

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
        return self._add(build_step(FilterStep, op="filter", udf=udf, version=version, args=dict(args or {}),
                                params=dict(params or {})), "filter")

    def map(self, udf: str, *, as_: str, args: Mapping[str, str] | None = None,
            params: Mapping[str, Any] | None = None, version: str | None = None) -> Stream:
        """Set payload field ``as_`` to UDF ``udf``'s result."""
        return self._add(build_step(MapStep, op="map", udf=udf, version=version, args=dict(args or {}),
                                params=dict(params or {}), **{"as": as_}), "map")

    def flat_map(self, udm: str, *, params: Mapping[str, Any] | None = None, version: str | None = None) -> Stream:
        """Run span UDO ``udm`` once per event: each event becomes zero or more events (``explode``), each
        inside its lifetime; a retraction of the event changes exactly its outputs."""
        return self._add(build_step(FlatMapStep, op="flat_map", udm=udm, version=version, params=dict(params or {})),
                         "flat_map")

    # ------------------------------------------------------------------ temporal operators (SEMANTICS §10)
    def project(self, keep: Sequence[str] | None = None, *, drop: Sequence[str] = (),
                rename: Mapping[str, str] | None = None, set: Mapping[str, Any] | None = None) -> Stream:
        """Rewrite payloads: ``keep`` only these fields, then ``drop``, ``rename`` (old → new), ``set`` constants."""
        return self._add(build_step(ProjectStep, op="project", keep=list(keep) if keep is not None else None,
                                drop=list(drop), rename=dict(rename or {}), set=dict(set or {})), "project")

    def alter_lifetime(self, le: str | Mapping[str, Any] = "keep", duration: str | int | Mapping[str, Any] = "keep"
                       ) -> Stream:
        """New lifetimes ``[f(LE), f(LE) + duration)``: ``le`` is ``"keep"``, ``{"shift": d}`` or
        ``{"snap": {"size": s, "offset": o}}``; ``duration`` is ``"keep"``, ``"inf"``, an int or ``{"const": d}``."""
        dur = {"const": duration} if isinstance(duration, int) else duration
        return self._add(build_step(AlterLifetimeStep, op="alter_lifetime", le=le, duration=dur), "alter_lifetime")

    def union(self, *others: Stream, distinct: bool = False) -> Stream:
        """The multiset sum of this stream and ``others`` (``distinct``: each distinct row once)."""
        merged, heads = self._merged(others, "union")
        return merged._append(build_step(UnionStep, op="union", distinct=distinct), "union", heads)

    def join(self, other: Stream, on: str | Sequence[str | tuple[str, str] | list[str]], *, type: str = "inner",
             where: str | Mapping[str, Any] | None = None, left_prefix: str = "", right_prefix: str = "") -> Stream:
        """Temporal equijoin with ``other`` (this stream is the left input). ``on``: a field name, or a list of
        names / ``(left_field, right_field)`` pairs; ``where``: a UDF name, or ``{"udf", "args", "params"}``,
        called on the joined payload."""
        merged, heads = self._merged([other], "join")
        pairs = [on] if isinstance(on, str) else [list(x) if not isinstance(x, str) else x for x in on]
        cond = {"udf": where} if isinstance(where, str) else (dict(where) if where is not None else None)
        step = build_step(JoinStep, op="join", on=pairs, type=type, where=cond, left_prefix=left_prefix,
                      right_prefix=right_prefix)
        return merged._append(step, "join", heads)

    def lmerge(self, *others: Stream, algorithm: str = "auto", feedback: bool = False) -> Stream:
        """One stream compatible with this one and ``others``, which carry the same logical stream in
        physically different ways (SEMANTICS §8): replicas, an old and a new plan, a replay and a live feed."""
        merged, heads = self._merged(others, "lmerge")
        step = build_step(LmergeStep, op="lmerge", algorithm=algorithm, feedback=feedback)
        return merged._append(step, "lmerge", heads)

    def align(self, max_delay: int | str = 0, *, max_wait: int | str | None = None) -> Stream:
        """Hold output until the CTI makes it final, or until it is ``max_delay`` ticks behind the watermark
        (``"inf"``: strong consistency); ``max_wait`` (``"2s"``, or microseconds) bounds the hold in
        wall-clock time (SEMANTICS §7, §10; docs/consistency.md)."""
        return self._add(build_step(AlignStep, op="align", max_delay=max_delay, max_wait=max_wait), "align")

    def finalize(self, max_memory_time: int | str) -> Stream:
        """Treat ``watermark - max_memory_time`` as a CTI from here on: steps after it forget older state, and
        corrections older than that are dead-lettered (SEMANTICS §7, §10; docs/consistency.md)."""
        return self._add(build_step(FinalizeStep, op="finalize", max_memory_time=max_memory_time), "finalize")

    def left_anti_join(self, other: Stream, on: str | Sequence[str | tuple[str, str] | list[str]], *,
                       where: str | Mapping[str, Any] | None = None) -> Stream:
        """The parts of this stream's lifetimes that no matching event of ``other`` covers."""
        return self.join(other, on, type="left_anti", where=where)

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
        return run_sources(self.bind(), self._inputs, dead_letters)

    def run_on(self, events: Iterable[Element | Mapping[str, Any]]) -> list[Element]:
        """Run this query over in-memory elements (the query's own source, if any, is ignored)."""
        name = self._inputs[0][0] if len(self._inputs) == 1 else "main"
        source = Source("events", events=coerce_elements(events))
        return replace(self, _inputs=((name, source),)).to_elements()

    def run(self, output: str | Path, *, dead_letter: str | Path | None = None, engine: str = "local",
            input: str | Path | None = None, output_format: str | None = None, final: bool = False,
            times: str | None = None, **options: Any) -> RunResult:
        """Run file to file, exactly as ``udm run`` does (``input`` defaults to the `from_jsonl` /
        `from_table` source). ``output_format``/``final``/``times`` as ``udm run``'s table output options
        (``times`` None: the table inputs' time type)."""
        return run_file(self.bind(), self._inputs, output, dead_letter=dead_letter, engine=engine, input=input,
                        output_format=output_format, final=final, times=times, options=options)

    def __repr__(self) -> str:
        srcs = [s.describe() for _, s in self._inputs]
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
