"""Running a plan: `make_runner`, and the engines that run a bound query over event files, behind one
registry (`ENGINES`).

`make_runner` is the one way to run a plan: a query in any form (`udm.host.model.plan.build_plan`) to its
`QueryRunner`. `run_local`, the fluent API, every Spark path (one runner per key bucket) and the demo
build their runners with it.

``udm run --engine NAME`` and the fluent API look an engine up here by name. An engine is a callable
``(RunRequest) -> RunResult``; it reads ``request.input``, writes ``request.output`` (and the dead-letter
file when one is given) and returns the counts. `run_local` is the in-process engine. Other engines
register themselves (``ENGINES["spark"] = run_spark``) from their own module, imported lazily through
`ENGINE_MODULES` so that ``udm run --engine local`` never imports pyspark. A name in `KNOWN_ENGINES`
with no registered engine fails with "engine 'NAME' is not available yet".
"""

from __future__ import annotations

import gc
import importlib
import itertools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from udm.host.errors import UdmError
from udm.host.io.arrival import ArrivalSource, ArrivalStamper, open_lines
from udm.host.io.checkpoint import LocalCheckpoint, Mark, file_digest, truncate_to
from udm.host.io.interleave import interleave
from udm.host.io.table_options import TableSource
from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import QuerySpec
from udm.host.run_result import RunResult
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.catalog import Catalog
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import DeadLetterWriter

__all__ = [
    "ENGINES",
    "ENGINE_MODULES",
    "KNOWN_ENGINES",
    "EngineUnavailable",
    "ProgressFn",
    "RunRequest",
    "get_engine",
    "make_runner",
    "no_cti_warnings",
    "quiet_gc",
    "run_local",
]

#: ``progress(bytes_done, bytes_total_or_None, elements_done)`` — called after every batch.
ProgressFn = Callable[[int, int | None, int], None]


class EngineUnavailable(UdmError):
    """The named engine is known but not installed/wired in this build."""


#: One input source: a path, ``-`` (stdin) or a binary stream (element JSON Lines), or a
#: `udm.host.io.table_options.TableSource` (a user's table read with column options).
Source = Any


@dataclass
class RunRequest:
    bound: BoundQuery
    #: the input, or one per declared input name (``{"bids": path, "auctions": path}``)
    input: Source | dict[str, Source]
    #: a path / stream for element JSON Lines, or a `udm.host.io.table_out.TableSink`
    output: Any
    dead_letter: str | Path | IO[str] | None = None
    batch_size: int | None = None
    checkpoint: str | Path | None = None
    on_violation: str | None = None
    progress: ProgressFn | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> QuerySpec:
        return self.bound.spec

    @property
    def inputs(self) -> dict[str, Source]:
        """Each declared input's source, checked against the query's inputs (INTERFACES §3)."""
        names = list(self.bound.graph.inputs)
        given = self.input if isinstance(self.input, dict) else None
        if given is None:
            if len(names) != 1:
                raise UdmError(f"the query reads inputs {', '.join(names)}: give each as --input NAME=PATH")
            return {names[0]: self.input}
        unknown = [n for n in given if n not in names]
        if unknown:
            raise UdmError(f"the query has no input {unknown[0]!r} (its inputs: {', '.join(names)})")
        missing = [n for n in names if n not in given]
        if missing:
            raise UdmError(f"no events given for input {missing[0]!r}: add --input {missing[0]}=PATH")
        return {n: given[n] for n in names}


Engine = Callable[[RunRequest], RunResult]

#: Every engine name ``udm run --engine`` accepts (INTERFACES §3).
KNOWN_ENGINES: tuple[str, ...] = ("local", "spark", "spark-streaming")

#: Registered engines. Other modules add theirs: ``ENGINES["spark"] = run_spark``.
ENGINES: dict[str, Engine] = {}

#: Modules imported on first use of an engine name, so that they can register it (and stay unimported
#: otherwise). A module that is missing or fails to import leaves the engine unavailable.
ENGINE_MODULES: dict[str, str] = {"spark": "udm.host.spark.engine",
                                  "spark-streaming": "udm.host.spark.stream_files"}


def get_engine(name: str) -> Engine:
    if name not in ENGINES and name in ENGINE_MODULES:
        try:
            importlib.import_module(ENGINE_MODULES[name])
        except ImportError as exc:
            raise EngineUnavailable(f"engine {name!r} is not available: {exc}") from None
    elif name == "local" and ENGINES.get(name) is run_local:
        _load_local()
    if name in ENGINES:
        return ENGINES[name]
    if name in KNOWN_ENGINES:
        raise EngineUnavailable(f"engine {name!r} is not available yet")
    raise EngineUnavailable(f"unknown engine {name!r}; engines: {', '.join(KNOWN_ENGINES)}")


@contextmanager
def quiet_gc(threshold: int = 200_000) -> Iterator[None]:
    """Run with a high gen-0 GC threshold: a run allocates millions of short-lived elements, and the
    default threshold makes the cyclic collector rescan the engine's state over and over."""
    old = gc.get_threshold()
    gc.set_threshold(max(threshold, old[0]), max(old[1], 50), max(old[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _file_size(p: Any) -> int | None:
    if isinstance(p, TableSource):
        p = p.path
        if p.is_dir():
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    if isinstance(p, (str, Path)) and str(p) != "-":
        try:
            return Path(p).stat().st_size
        except OSError:
            return None
    return None


def _load_local() -> tuple[type[QueryRunner], type[DeadLetterWriter], Callable[..., Any]]:
    """What `run_local` runs with, imported here so that `get_engine` can load it when the engine is chosen
    rather than at the run's first element: the CLI then loads the engine while start-up's collector pause
    lasts (`udm.host.cli.startup_gc`: measured ~13 collections and ~7 ms CPU of a one-line ``udm run``
    otherwise). One list, so the two callers cannot drift apart."""
    # lazy: the engine (pyarrow) loads with a run, not with `udm --help`
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import DeadLetterWriter
    from udm.host.io.table_out import open_writer

    return QueryRunner, DeadLetterWriter, open_writer


def _warm_up() -> None:
    """Load what pyarrow loads lazily on first use (it imports pandas, ~0.4 s) before the run's clock
    starts, so `RunResult.seconds` measures the run, not one-time imports."""
    import pyarrow as pa  # lazy: as the engine below

    pa.array([0], pa.int64()).to_numpy()  # (a list: an ndarray would import numpy.ma too, `arrow_probe`)


def make_runner(plan: BoundQuery | QuerySpec | Mapping[str, Any] | str | Path, on_violation: str | None = None,
                *, derived_inputs: Collection[str] = (), catalog: Catalog | None = None) -> QueryRunner:
    """The `QueryRunner` of ``plan`` (a query in any form `build_plan` takes). ``derived_inputs``: inputs
    that carry another runner's output (a Spark stage's exchanges), not a user's events. (Tests replace
    this module's ``make_runner`` to run the plumbing around a stand-in.)"""
    # lazy: the engine (pyarrow) loads with a run, not with `udm --help` (cli.run_cmd imports this module)
    from udm.host.engine import QueryRunner

    return QueryRunner(build_plan(plan, catalog), on_violation=on_violation, derived_inputs=derived_inputs)


#: How `run_local` reads: blocks parsed in two threads, three blocks ahead. pyarrow parses without the GIL,
#: so on two cores the parse of the next blocks overlaps the engine, and both cores parse while the
#: engine waits for input.
READER_OPTIONS: dict[str, int] = {"workers": 2, "prefetch": 3}


def per_input_counts(stats: RunResult, names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """The run summary's per-input counts (a single input's are the totals)."""
    if len(names) == 1:
        return {names[0]: {"elements_in": stats.elements_in, "dead_lettered": stats.dead_lettered}}
    return {n: {"elements_in": stats.inputs.get(n, {}).get("elements_in", 0),
                "dead_lettered": stats.inputs.get(n, {}).get("dead_lettered", 0)} for n in names}


def run_local(req: RunRequest) -> RunResult:
    """The in-process engine: JSONL batches -> `QueryRunner.process_batch` -> JSONL out; end of input is
    ``cti(INF)`` (`QueryRunner.finish`). Several inputs are read side by side, in the order of
    `udm.host.io.interleave`."""
    QueryRunner, DeadLetterWriter, open_writer = _load_local()
    sources = req.inputs
    ck = _local_checkpoint(req, sources) if req.checkpoint is not None else None
    mark = ck.load() if ck is not None else None
    if mark is not None:
        truncate_to(req.output, mark.out_bytes, "output")
        truncate_to(req.dead_letter, mark.dl_bytes, "dead-letter")
        runner = QueryRunner.restore(mark.snapshot, req.bound, on_violation=req.on_violation)
    else:
        runner = make_runner(req.bound, req.on_violation)  # imports the engine; the run's clock starts below
    _warm_up()
    t0 = time.perf_counter()
    resume = mark is not None
    dlw = DeadLetterWriter(req.dead_letter, append=resume) if req.dead_letter is not None else None

    peak = StatePeak()

    def dead_letters() -> None:  # after every batch
        peak.update(runner)
        if dlw is not None:
            dlw.write(runner.take_dead_letters())
        else:
            runner.take_dead_letters()

    with quiet_gc(), open_writer(req.output, append=resume) as out:
        try:
            live = [n for n, s in sources.items() if isinstance(s, ArrivalSource)]
            if live and (len(sources) > 1 or ck is not None):
                raise UdmError(f"input {live[0]!r}: arrival time (--time @arrival) is for a query with a single "
                               f"input and no --checkpoint")
            if live:
                _feed_arrival(req, runner, sources[live[0]], out, dead_letters)
            elif ck is not None:
                _feed_checkpointed(req, runner, next(iter(sources.values())), out, dlw, ck, mark, peak)
            elif len(sources) == 1:
                _feed_one(req, runner, next(iter(sources.values())), out, dead_letters)
            else:
                _feed_several(req, runner, sources, out, dead_letters)
            warnings = peak.warnings(runner)
            if hasattr(out, "write_batch"):  # a table output takes the engine's columns (`io.table_columns`)
                out.write_batch(runner.finish_batch())
            else:
                out.write(runner.finish())
            dead_letters()
            if ck is not None:
                _commit(ck, runner, out, dlw, -1, done=True)
        finally:
            if dlw is not None:
                dlw.close()
    res: RunResult = runner.stats  # the engine's counters; what the driver knows goes in here
    res.seconds = time.perf_counter() - t0
    res.inputs = per_input_counts(res, req.bound.graph.inputs)
    res.warnings = warnings
    res.lmerge = runner.chattiness()
    return res


class StatePeak:
    """The most live events and windows the engine held after a batch (SEMANTICS §7: state stays bounded
    only when CTIs advance), for the warning about inputs that never send a CTI."""

    def __init__(self) -> None:
        self.events = 0
        self.windows = 0

    def update(self, runner: Any) -> None:
        size = getattr(runner, "state_size", None)
        if size is None:
            return
        sz = size()
        self.events = max(self.events, sz.get("events", 0))
        self.windows = max(self.windows, sz.get("windows", 0))

    def warnings(self, runner: Any) -> list[str]:
        """Before `finish`: one warning per input that sent no CTI, when the engine held something because
        of it (an input of nothing but bad lines held nothing: no warning)."""
        self.update(runner)
        if not self.events and not self.windows:
            return []
        silent: list[str] = getattr(runner, "inputs_without_cti", lambda: [])()
        return no_cti_warnings(runner.bound.spec, silent, f"the engine held up to {self.events:,} live events "
                                                          f"and {self.windows:,} live windows")


def no_cti_warnings(spec: Any, silent: Iterable[str], held: str) -> list[str]:
    """One warning per input in ``silent`` (it sent no CTI): ``held`` says what the engine kept until the
    end of input (SEMANTICS §7: state is cleaned up only as CTIs advance)."""
    bounded = any(getattr(s, "max_memory_time", INF) < INF for s in spec.steps)
    advice = ("max_memory_time bounds what the window steps hold" if bounded else
              "send CTIs, or set max_memory_time on the window steps, to bound memory")
    return [f"input {name!r} sent no CTI: {held} until the end of input ({advice})" for name in silent]


def _feed_one(req: RunRequest, runner: Any, source: Source, out: Any, dead_letters: Callable[[], None]) -> None:
    # lazy: the readers (pyarrow) load with a run, not with `udm --help`
    from udm.host.io.jsonl import DEFAULT_BATCH_SIZE
    from udm.host.io.tables import open_reader
    from udm.host.io.write_behind import WriteBehind

    total = _file_size(source)
    reader = open_reader(source, batch_size=req.batch_size or DEFAULT_BATCH_SIZE, **READER_OPTIONS)
    n_in = 0
    # the columnar span path (filter / map / project chains) hands back lines, encoded and written by a
    # write-behind thread while the engine goes on (`udm.host.io.write_behind`); else element lists,
    # written here once the lines before them are
    encoded = getattr(runner, "process_batch_encoded", None) if hasattr(out, "write_encoded") else None
    columns = hasattr(out, "write_batch")  # a table output: the engine's batches, column by column, behind too
    behind = WriteBehind(out) if encoded is not None or columns else None
    ok = False
    try:
        for batch in reader:
            lines = encoded(batch, defer=True) if encoded is not None else None
            if lines is not None:
                behind.write_encoded(lines)  # type: ignore[union-attr]
            elif columns:
                behind.write_batch(runner.run_batch(batch))  # type: ignore[union-attr]
            else:
                if behind is not None:
                    behind.drain()
                out.write(runner.process_batch(batch))
            n_in += len(batch)
            dead_letters()
            if req.progress is not None:
                req.progress(reader.bytes_done, total, n_in)
        ok = True
    finally:
        if behind is not None:
            behind.close(raise_errors=ok)
        reader.close()


def _feed_arrival(req: RunRequest, runner: Any, source: Any, out: Any, dead_letters: Callable[[], None]) -> None:
    """A live input read with arrival time (`udm.host.io.arrival`): each line stamped as it comes and fed at
    once; while the source is quiet the engine still gets the clock's CTIs (``--cti-every``) and ``align``'s
    ``max_wait`` releases (`QueryRunner.tick`), every ``options["tick"]`` seconds (default 0.05). Output is
    flushed as it is made. ``options["clock"]``: the clock (microseconds), for tests."""
    clock = req.options.get("clock")
    stamper = ArrivalStamper(clock, source.cti_every)
    runner.ctx.clock = stamper.now
    wait = float(req.options.get("tick", 0.05))
    lines = open_lines(source.path, directory=False)
    line = 0
    flush = getattr(out, "flush", None)
    try:
        while not lines.done:
            items: list[tuple[int | None, Any]] = []
            raw = lines.get(wait)
            while raw is not None and len(items) < _CHUNK:
                line += 1
                if raw.strip():
                    items += stamper.stamp(raw, line)
                raw = lines.get(0)
            if raw is not None:
                line += 1
                if raw.strip():
                    items += stamper.stamp(raw, line)
            items += [(None, c) for c in stamper.due()]
            if items:
                out.write(runner.process_items(items))
            out.write(runner.tick())
            if flush is not None:
                flush()
            dead_letters()
            if req.progress is not None:
                req.progress(0, None, line)
    finally:
        lines.close()


def _local_checkpoint(req: RunRequest, sources: dict[str, Source]) -> Any:
    """The checkpoint of a resumable local run (single input file, output files), or a one-line error."""
    if len(sources) != 1:
        raise UdmError("--checkpoint with --engine local needs a single-input query (several inputs: not yet)")
    src = next(iter(sources.values()))

    if isinstance(src, TableSource):
        raise UdmError("--checkpoint with --engine local reads element JSON Lines only (table inputs: not yet)")
    if not isinstance(src, (str, Path)) or str(src) == "-":
        raise UdmError("--checkpoint needs an input file, not stdin")
    for what, p in (("--output", req.output), ("--dead-letter", req.dead_letter)):
        if p is not None and (not isinstance(p, (str, Path)) or str(p) == "-"):
            raise UdmError(f"--checkpoint needs {what} to be a file, not stdout")
    try:
        digest = file_digest(Path(src))
    except OSError as exc:
        raise UdmError(f"cannot read {src}: {exc.strerror or exc}") from None
    fingerprint = {"engine": "local", "query": req.spec.to_json_dict(), "input": digest,
                   "output": str(Path(str(req.output)).resolve()),
                   "dead_letter": str(Path(str(req.dead_letter)).resolve()) if req.dead_letter is not None else None,
                   "on_violation": req.on_violation, "batch_size": req.batch_size}
    return LocalCheckpoint(req.checkpoint, fingerprint)


def _commit(ck: Any, runner: Any, out: Any, dlw: Any, line: int, done: bool = False) -> None:
    if dlw is not None:
        dlw.write(runner.take_dead_letters())
    else:
        runner.take_dead_letters()
    out_bytes = out.sync()  # the output up to here is on disk before the mark says so
    dl_bytes = dlw.sync() if dlw is not None else -1
    ck.commit(Mark(runner.snapshot(), line, out_bytes, dl_bytes, done))


def _feed_checkpointed(req: RunRequest, runner: Any, source: Source, out: Any, dlw: Any, ck: Any,
                       mark: Any, peak: StatePeak) -> None:
    """`_feed_one` with a commit after every batch; a resumed run skips the lines its mark consumed."""
    from udm.host.io.jsonl import DEFAULT_BATCH_SIZE, JsonlReader  # lazy: as in `_feed_one`

    if mark is not None and mark.done:
        return
    skip = mark.line if mark is not None else 0
    total = _file_size(source)
    reader = JsonlReader(source, batch_size=req.batch_size or DEFAULT_BATCH_SIZE, **READER_OPTIONS)
    n_in = 0
    try:
        for batch in reader:
            n = len(batch)
            if n == 0:
                continue
            last = int(batch.lines[-1])
            if last <= skip:
                continue  # consumed before the checkpoint
            if int(batch.lines[0]) <= skip:
                k = int((batch.lines <= skip).sum())
                batch = batch.slice(k)
            out.write(runner.process_batch(batch))
            n_in += n
            peak.update(runner)
            _commit(ck, runner, out, dlw, last)
            if req.progress is not None:
                req.progress(reader.bytes_done, total, n_in)
    finally:
        reader.close()


#: elements of several inputs fed between two releases of output
_CHUNK = 4096


def _feed_several(req: RunRequest, runner: Any, sources: dict[str, Source], out: Any,
                  dead_letters: Callable[[], None]) -> None:
    # lazy: the readers (pyarrow) load with a run, not with `udm --help`
    from udm.host.io.jsonl import DEFAULT_BATCH_SIZE
    from udm.host.io.tables import open_reader

    readers = {n: open_reader(src, batch_size=req.batch_size or DEFAULT_BATCH_SIZE) for n, src in sources.items()}
    sizes = [_file_size(src) for src in sources.values()]
    total = None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    def elements(reader: Any) -> Any:
        for batch in reader:
            yield from batch.to_elements()

    merged = interleave([(n, elements(r)) for n, r in readers.items()])
    n_in = 0
    try:
        while chunk := list(itertools.islice(merged, _CHUNK)):
            out.write(runner.process_interleaved(chunk))
            n_in += len(chunk)
            dead_letters()
            if req.progress is not None:
                req.progress(sum(r.bytes_done for r in readers.values()), total, n_in)
    finally:
        for r in readers.values():
            r.close()


ENGINES["local"] = run_local
