"""`udm run QUERY --input IN.jsonl --output OUT.jsonl [--dead-letter DL.jsonl] [--engine ...]` (INTERFACES §3).

The query is bound (every UDM resolved, parameters and policies checked) before the input is opened;
the engine is looked up by name in `udm.host.query.runners.ENGINES`. Progress goes to stderr as a rich
bar when stderr is a terminal (never with ``--quiet``); the one-line summary goes to stderr too, so that
``--output -`` can stream elements to stdout.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from udm.host.errors import UdmError
from udm.host.io.arrival import ArrivalSource
from udm.host.io.arrow_probe import skip_pandas_probe
from udm.host.io.table_options import TableSource
from udm.host.model.plan import bind
from udm.host.model.spec import load_query
from udm.host.query.runners import KNOWN_ENGINES, ProgressFn, RunRequest, get_engine
from udm.host.run_result import RunResult
from udm.host.temporal.strict import echo_dumps

from . import fast_exit, startup_gc
from ._common import err
from .table_args import TableArgs, parse_trigger, table_sink, table_sources

__all__ = ["cmd_run", "register"]

# lazy imports: rich — a piped `udm run` draws nothing and never imports it (`_common`)

_TABLES = "Tables (Parquet, CSV, JSON): see docs/query-writer.md"

#: Seconds into a run before the progress bar appears.
BAR_AFTER = 2.0


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[ProgressFn | None]:
    """A rich bar on stderr (bytes read, elements, elements/s), shown once a run has lasted `BAR_AFTER` s."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]udm run[/]"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[elements]:>12,} elements"),
        TextColumn("{task.fields[rate]:>10,.0f} el/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        # asked for with --progress on a pipe or file: draw it anyway (rich draws only on terminals)
        console=err if err.is_terminal else Console(stderr=True, force_terminal=True),
        transient=True,
    )
    task = bar.add_task("run", total=None, elements=0, rate=0.0, status="")
    t0 = time.perf_counter()

    class Update:
        """The progress callback; ``status`` shows an engine's own line (spark-streaming: micro-batch
        latency and state size). The bar appears only once a run has lasted ``BAR_AFTER`` seconds."""

        shown = False

        def __call__(self, done: int, total: int | None, elements: int) -> None:
            elapsed = time.perf_counter() - t0
            if not self.shown:
                if elapsed < BAR_AFTER:
                    return  # a short run finishes before a bar would tell anything
                bar.start()
                self.shown = True
            bar.update(task, completed=done, total=total, elements=elements,
                       rate=elements / max(elapsed, 1e-9))

        def status(self, text: str) -> None:
            bar.update(task, status=text)

    update = Update()
    try:
        yield update
    finally:
        if update.shown:
            bar.stop()


def cmd_run(
    query: Path = typer.Argument(..., help="Query spec file (JSON or YAML; docs/reference.md, \"Query spec\")."),
    input_: list[str] = typer.Option(..., "--input", "-i", help="Input events, JSON Lines ('-' = stdin): PATH for "
                                     "a query with one input, NAME=PATH once per input of a query graph; with "
                                     "--engine spark-streaming a DIRECTORY is watched for event files."),
    output: str = typer.Option(..., "--output", "-o", help="Output events, JSON Lines ('-' = stdout)."),
    dead_letter: str = typer.Option(None, "--dead-letter", help="Where bad input elements go (JSON Lines)."),
    engine: str = typer.Option("local", "--engine", "-e", help=f"One of: {', '.join(KNOWN_ENGINES)}."),
    batch_size: int = typer.Option(None, "--batch-size", min=1,
                                   help="Elements per batch (spark-streaming micro-batch, default 10000; local "
                                   "read chunk)."),
    trigger: str = typer.Option(None, "--trigger", help="spark-streaming: start a micro-batch at most every "
                                "interval, e.g. '2 seconds', '500ms', '1 minute' (default: as soon as the last "
                                "one is done)."),
    until_idle: float = typer.Option(None, "--until-idle", min=0, help="spark-streaming with a directory "
                                     "--input (watched for new event files): stop after this many seconds "
                                     "without new input (default: run until Ctrl-C); with --time @arrival "
                                     "that ends the input."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="State directory: a killed run resumes from it."),
    master: str = typer.Option(None, "--master", help="Spark master URL for the spark engines "
                               "(default $UDM_SPARK_MASTER / $SPARK_REMOTE, else local[*])."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
    progress: bool = typer.Option(False, "--progress", help="Show the progress bar even when stderr is not a "
                                  "terminal."),
    time_: list[str] = typer.Option([], "--time", help="Table input: point events at column COL "
                                    "([NAME=]COL); @arrival: a live input's elements (stdin, a pipe; a watched "
                                    "directory on spark-streaming) take the wall-clock time they are read at "
                                    "(microseconds).", rich_help_panel=_TABLES),
    start: list[str] = typer.Option([], "--start", help="Table input: interval start column ([NAME=]COL).",
                                    rich_help_panel=_TABLES),
    end: list[str] = typer.Option([], "--end", help="Table input: interval end column ([NAME=]COL; null = inf).",
                                  rich_help_panel=_TABLES),
    edge: list[str] = typer.Option([], "--edge", help="Table input: edge events, each sample holding until "
                                   "its key's next sample ([NAME=]COL).", rich_help_panel=_TABLES),
    key: list[str] = typer.Option([], "--key", help="Edge events: the key columns ([NAME=]COL,COL...).",
                                  rich_help_panel=_TABLES),
    id_: list[str] = typer.Option([], "--id", help="Table input: event id column ([NAME=]COL; default r<row>).",
                                  rich_help_panel=_TABLES),
    unit: list[str] = typer.Option([], "--unit", help="Numeric time columns: ticks (as is), s, ms, us, ns "
                                   "(→ microsecond ticks, as timestamps are) ([NAME=]UNIT).",
                                   rich_help_panel=_TABLES),
    format_: list[str] = typer.Option([], "--format", help="Input format: elements, parquet, csv, json "
                                      "(default: by name ending and options) ([NAME=]FMT).",
                                      rich_help_panel=_TABLES),
    cti_every: list[str] = typer.Option([], "--cti-every", help="Table input: a CTI each time the largest time "
                                        "minus --cti-lag crosses a multiple of this (ticks, or 10s/5m/1h); "
                                        "with --time @arrival: each time the clock does ([NAME=]N).",
                                        rich_help_panel=_TABLES),
    cti_lag: list[str] = typer.Option([], "--cti-lag", help="How far CTIs trail the largest time seen: the "
                                      "lateness allowed ([NAME=]N).", rich_help_panel=_TABLES),
    output_format: str = typer.Option(None, "--output-format", help="elements, parquet, csv or json (default: "
                                      "by --output's name ending; .jsonl = elements).", rich_help_panel=_TABLES),
    final: bool = typer.Option(False, "--final", help="Table output: only the final result, no retractions: the "
                               "canonical history table (CHT), one row per output event with its final lifetime "
                               "(le, re) and payload columns.", rich_help_panel=_TABLES),
    times: str = typer.Option(None, "--times", help="Table output: le/re as ticks or timestamps (default: "
                              "the input's type: timestamps when the table inputs' time columns are timestamps).",
                              rich_help_panel=_TABLES),
    json_summary: bool = typer.Option(False, "--json", help="Print the summary as one JSON document on stdout."),
) -> None:
    """Run a query over an event file."""
    spec = load_query(query)
    bound = bind(spec)  # unknown UDMs, bad params, disallowed policies: fail before any event is read
    if engine == "local":
        skip_pandas_probe()  # ~0.2 s of start-up a local run does not need (before the engine loads pyarrow)
    run = get_engine(engine)  # loads the engine's modules, while start-up's collector pause lasts
    inputs = _inputs(input_, bound.graph.inputs)
    args = TableArgs(time=time_, start=start, end=end, edge=edge, key=key, id=id_, unit=unit, format=format_,
                     cti_every=cti_every, cti_lag=cti_lag)
    sources = table_sources(args, inputs)
    sink = table_sink(output, output_format, final, times, sources)
    if engine == "spark-streaming" and not isinstance(sink, str):
        raise UdmError("table output is written by --engine local and --engine spark; --engine spark-streaming "
                       "writes element JSON Lines (drop --output-format/--final, or name a .jsonl output)")
    options: dict[str, Any] = {"master": master} if master else {}
    if trigger is not None:
        if engine != "spark-streaming":
            raise UdmError(f"--trigger is a --engine spark-streaming option (this run uses --engine {engine})")
        options["trigger"] = parse_trigger(trigger)
    if until_idle is not None:
        if engine != "spark-streaming":
            raise UdmError(f"--until-idle is a --engine spark-streaming option (this run uses --engine {engine})")
        options["until_idle"] = until_idle
    for name, path in inputs.items():
        if isinstance(sources[name], (TableSource, ArrivalSource)):
            continue  # checked by table_sources (a directory of files is fine; a live input may be a pipe)
        if engine == "spark-streaming" and len(inputs) == 1 and Path(path).is_dir():
            continue  # a directory that event files land in (`udm.host.spark.stream_dir`)
        if path != "-" and not Path(path).is_file():
            what = f"input file {path}" if len(inputs) == 1 else f"input file {path} (input {name!r})"
            raise UdmError(f"{what} does not exist")
    named = [(f"--input {n}" if len(inputs) > 1 else "--input", p) for n, p in inputs.items()]
    named += [(n, p) for n, p in (("--output", output), ("--dead-letter", dead_letter)) if p is not None]
    named = [(n, p) for n, p in named if p != "-"]
    for i, (n1, p1) in enumerate(named):
        for n2, p2 in named[i + 1:]:
            if Path(p1).resolve() == Path(p2).resolve():
                raise UdmError(f"{n1} and {n2} are the same file ({p1}); the run would overwrite it")
    startup_gc.resume()  # start-up is over: collect garbage again (host/cli/startup_gc.py)
    show_bar = not quiet and (progress or (err.is_terminal and output != "-"))
    with _progress_bar(show_bar) as update:
        source: Any = sources if len(sources) > 1 else next(iter(sources.values()))
        result = run(RunRequest(bound=bound, input=source, output=sink, dead_letter=dead_letter,
                                batch_size=batch_size, checkpoint=checkpoint, progress=update,
                                options=options))
    _explain(result, sources, dead_letter is not None)
    if json_summary:
        sys.stdout.write(echo_dumps(result.to_json_dict()) + "\n")  # (strict JSON, SEMANTICS §1)
    elif not quiet and err.is_terminal:
        err.print(result.summary(), highlight=False, markup=False)
    elif not quiet:  # piped: plain text (rich would cost ~20 ms of imports for one unstyled line)
        sys.stderr.write(result.summary() + "\n")
        sys.stderr.flush()
    if engine == "local":
        fast_exit.request()


def _explain(result: RunResult, sources: dict[str, Any], dead_letters_kept: bool) -> None:
    """What the summary can say knowing the command line: delays as durations for timestamp inputs, bad
    elements dropped for want of --dead-letter, the --cti-every hint for a table input that sent no CTI; no
    CTI warning for an input whose every element was bad (nothing of it was held)."""
    from udm.host.io.tables import microsecond_ticks  # lazy: the table readers (pyarrow) load with a run

    result.tick_us = microsecond_ticks(sources.values())
    result.dead_letters_kept = dead_letters_kept
    kept = []
    for w in result.warnings:
        for name, src in sources.items():
            if not w.startswith(f"input {name!r} sent no CTI"):
                continue
            counts = result.inputs.get(name, {})
            if counts.get("elements_in", 0) and counts.get("dead_lettered", 0) == counts["elements_in"]:
                w = ""
            elif isinstance(src, TableSource) and src.options.cti_every is None:
                w += "; a table input gets CTIs with --cti-every N"
        if w:
            kept.append(w)
    result.warnings[:] = kept


def _inputs(values: list[str], declared: tuple[str, ...]) -> dict[str, str]:
    """``--input`` values → ``{input name: path}``. ``NAME=PATH`` when NAME is a declared input; anything else
    is a bare path, which stands for the query's only input."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or name not in declared:
            if len(declared) > 1:
                raise UdmError(f"--input {value}: the query reads inputs {', '.join(declared)}; give each as "
                               f"--input NAME=PATH")
            name, path = declared[0], value
        if name in out:
            raise UdmError(f"--input {name}= given twice")
        out[name] = path
    missing = [n for n in declared if n not in out]
    if missing:
        raise UdmError(f"no events given for input {missing[0]!r}: add --input {missing[0]}=PATH")
    return out


def register(app: typer.Typer) -> None:
    app.command("run")(cmd_run)
