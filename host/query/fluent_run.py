"""How a fluent `Stream` runs: its sources, and the local runs over them (in-memory events, element files,
tables, a live source, several inputs side by side), or a file-to-file run exactly as ``udm run`` does.

Kept apart from the builder (`udm.host.query.fluent`) because building a query needs no reader, and every
run goes through `runners.make_runner`, looked up at call time (tests stand a runner in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udm.host.errors import QuerySpecError, UdmError
from udm.host.io.interleave import interleave
from udm.host.io.jsonl import JsonlReader
from udm.host.io.table_out import output_sink
from udm.host.io.tables import TableReader
from udm.host.model.plan import BoundQuery
from udm.host.query import runners
from udm.host.query.runners import RunRequest, get_engine, quiet_gc
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Element, parse_element

__all__ = ["Source", "coerce_elements", "run_elements", "run_file", "run_sources"]


@dataclass(frozen=True)
class Source:
    """One input of a stream: in-memory events, an element file, a table or a live source (or none yet)."""

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

    def describe(self) -> str:
        return {"none": "query", "events": f"events[{len(self.events)}]", "jsonl": f"jsonl({self.path!r})",
                "table": f"table({self.path!r})", "arrival": f"live({self.live})"}[self.kind]


def coerce_elements(events: Iterable[Any]) -> tuple[Any, ...]:
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


def run_sources(bound: BoundQuery, inputs: Sequence[tuple[str, Source]], dead_letters: list[Any] | None
                ) -> list[Element]:
    """Run locally to the output elements (end of input is ``cti(INF)``), over the stream's own sources."""
    if any(src.kind == "none" for _, src in inputs):
        raise QuerySpecError("this stream has no source: use Stream.from_events/from_jsonl, or run_on(...)")
    if len(inputs) > 1 or inputs[0][0] != bound.graph.inputs[0]:
        return _side_by_side(bound, inputs, dead_letters)
    src = inputs[0][1]
    if src.kind == "events":
        return run_elements(bound, src.events, dead_letters=dead_letters)
    if src.kind == "arrival":
        return _run_live(bound, src, dead_letters)
    runner = runners.make_runner(bound)
    out: list[Element] = []
    with quiet_gc():
        for batch in src.reader():
            out.extend(runner.process_batch(batch))
            _collect(runner, dead_letters)
        out.extend(runner.finish())
        _collect(runner, dead_letters)
    return out


def run_file(bound: BoundQuery, inputs: Sequence[tuple[str, Source]], output: str | Path, *,
             dead_letter: str | Path | None, engine: str, input: str | Path | None, output_format: str | None,
             final: bool, times: str | None, options: dict[str, Any]) -> RunResult:
    """A file-to-file run, exactly as ``udm run`` does (``input`` defaults to the stream's file sources)."""
    src: Any
    if len(inputs) > 1 and input is None:
        if any(s.kind not in ("jsonl", "table") for _, s in inputs):
            raise QuerySpecError("run() reads files: build every input with Stream.from_jsonl(path, name=...) "
                                 "or Stream.from_table(path, name=..., time=...)")
        src = {n: s.file for n, s in inputs}
    else:
        src = input if input is not None else inputs[0][1].file
        if src is None:
            raise QuerySpecError("run() needs an input file: Stream.from_jsonl(path) or run(..., input=path)")
        src = src if not isinstance(src, (str, Path)) else str(src)
    run = get_engine(engine)
    sink = output_sink(str(output), output_format, final=final, times=times,
                       inputs=src.values() if isinstance(src, dict) else [src])
    return run(RunRequest(bound=bound, input=src, output=sink,
                          dead_letter=None if dead_letter is None else str(dead_letter), options=options))


def _side_by_side(bound: BoundQuery, inputs: Sequence[tuple[str, Source]], dead_letters: list[Any] | None
                  ) -> list[Element]:
    """Run a query graph over several sources, read side by side in the documented order."""
    def numbered(src: Source) -> Iterable[tuple[int | None, Any]]:
        """(line, element) pairs: a file's own line numbers, or 1, 2, ... for in-memory events."""
        if src.kind == "events":
            return enumerate(src.events, 1)
        return (pair for batch in src.reader() for pair in batch.to_elements())

    names = bound.graph.inputs
    given = dict(inputs)
    if set(given) != set(names):
        raise QuerySpecError(f"the query reads inputs {', '.join(names)}; the stream has {', '.join(given)}")
    runner = runners.make_runner(bound)
    with quiet_gc():
        out = runner.process_interleaved(interleave([(n, numbered(given[n])) for n in names])) + runner.finish()
    _collect(runner, dead_letters)
    return out


def _run_live(bound: BoundQuery, src: Source, dead_letters: list[Any] | None) -> list[Element]:
    """A live source with arrival time, locally, until it ends (`udm.host.query.runners` feeds it)."""
    class _Collect:
        def __init__(self) -> None:
            self.out: list[Element] = []

        def write(self, els: Iterable[Element]) -> None:
            self.out.extend(els)

    runner = runners.make_runner(bound)
    sink = _Collect()
    req = RunRequest(bound=bound, input=src.live, output=None, options={"clock": src.clock} if src.clock else {})
    with quiet_gc():
        runners._feed_arrival(req, runner, src.live, sink, lambda: _collect(runner, dead_letters))
        sink.out.extend(runner.finish())
        _collect(runner, dead_letters)
    return sink.out


def _collect(runner: Any, sink: list[Any] | None) -> None:
    dls = runner.take_dead_letters()
    if sink is not None:
        sink.extend(dls)


def run_elements(bound: BoundQuery, elements: Iterable[Any], *, dead_letters: list[Any] | None = None
                 ) -> list[Element]:
    """Run a bound query over in-memory elements with the local engine; end of input is ``cti(INF)``."""
    runner = runners.make_runner(bound)
    with quiet_gc():
        out = runner.run_all(list(elements))
    _collect(runner, dead_letters)
    return out
