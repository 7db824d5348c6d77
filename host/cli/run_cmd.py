"""`udm run QUERY --input IN.jsonl --output OUT.jsonl [--dead-letter DL.jsonl] [--engine ...]` (INTERFACES §3).

The query is bound (every UDM resolved, parameters and policies checked) before the input is opened;
the engine is looked up by name in `udm.host.query.runners.ENGINES`. Progress goes to stderr as a rich
bar when stderr is a terminal (never with ``--quiet``); the one-line summary goes to stderr too, so that
``--output -`` can stream elements to stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from udm.host.errors import UdmError
from udm.host.query.plan import bind
from udm.host.query.runners import KNOWN_ENGINES, ProgressFn, RunRequest, get_engine
from udm.host.query.spec import load_query

from ._common import err

__all__ = ["cmd_run", "register"]


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[ProgressFn | None]:
    if not enabled:
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("[bold]udm run[/]"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[elements]:>12,} elements"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("run", total=None, elements=0, status="")

        class Update:
            """The progress callback; ``status`` shows an engine's own line (spark-streaming: micro-batch
            latency and state size)."""

            def __call__(self, done: int, total: int | None, elements: int) -> None:
                bar.update(task, completed=done, total=total, elements=elements)

            def status(self, text: str) -> None:
                bar.update(task, status=text)

        yield Update()


def cmd_run(
    query: Path = typer.Argument(..., help="Query spec file (JSON or YAML, INTERFACES §2)."),
    input_: list[str] = typer.Option(..., "--input", "-i", help="Input events, JSON Lines ('-' = stdin): PATH for "
                                     "a query with one input, NAME=PATH once per input of a query graph."),
    output: str = typer.Option(..., "--output", "-o", help="Output events, JSON Lines ('-' = stdout)."),
    dead_letter: str = typer.Option(None, "--dead-letter", help="Where bad input elements go (JSON Lines)."),
    engine: str = typer.Option("local", "--engine", "-e", help=f"One of: {', '.join(KNOWN_ENGINES)}."),
    batch_size: int = typer.Option(None, "--batch-size", min=1,
                                   help="Elements per batch (spark-streaming micro-batch; local read chunk)."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="State directory: a killed run resumes from it."),
    master: str = typer.Option(None, "--master", help="Spark master URL for the spark engines "
                               "(default $UDM_SPARK_MASTER / $SPARK_REMOTE, else local[*])."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
    json_summary: bool = typer.Option(False, "--json", help="Print the summary as one JSON document on stdout."),
) -> None:
    """Run a query over an event file."""
    spec = load_query(query)
    bound = bind(spec)  # unknown UDMs, bad params, disallowed policies: fail before any event is read
    run = get_engine(engine)
    inputs = _inputs(input_, bound.graph.inputs)
    for name, path in inputs.items():
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
    show_bar = not quiet and err.is_terminal and output != "-"
    with _progress_bar(show_bar) as progress:
        source: str | dict[str, str] = inputs if len(inputs) > 1 else next(iter(inputs.values()))
        result = run(RunRequest(bound=bound, input=source, output=output, dead_letter=dead_letter,
                                batch_size=batch_size, checkpoint=checkpoint, progress=progress,
                                options={"master": master} if master else {}))
    if json_summary:
        sys.stdout.write(json.dumps(result.to_json_dict()) + "\n")
    elif not quiet:
        err.print(result.summary(), highlight=False, markup=False)


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
