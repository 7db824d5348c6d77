"""Which ``udm run`` command lines the early reader (`udm.host.io.early_read`) may start on, read from
``sys.argv`` before typer parses it.

Only the one shape where the run provably reads the input as element JSON Lines with `runners._feed_one`:
one ``--input FILE`` (not ``-``, not ``NAME=PATH``), the local engine, no table option, no ``--checkpoint``.
Anything not recognised (``--help``, an unknown or abbreviated option) is None: typer then parses the line
as always and reports what is wrong; the early reader is only an optimisation.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["run_input"]

#: ``udm run`` options that take a value, and flags (`udm.host.cli.run_cmd.cmd_run`).
_VALUE_OPTIONS = frozenset({"--input", "-i", "--output", "-o", "--dead-letter", "--engine", "-e", "--batch-size",
                            "--trigger", "--until-idle", "--checkpoint", "--master", "--time", "--start", "--end",
                            "--edge", "--key", "--id", "--unit", "--format", "--cti-every", "--cti-lag",
                            "--output-format", "--times"})
_FLAGS = frozenset({"--quiet", "-q", "--progress", "--final", "--json"})
#: options under which the input is not read by `runners._feed_one` as element JSON Lines
_OTHER_READS = frozenset({"--checkpoint", "--time", "--start", "--end", "--edge", "--key", "--id", "--unit",
                          "--format", "--cti-every", "--cti-lag"})
_TABLE_ENDINGS = (".parquet", ".pq", ".parq", ".csv", ".csv.gz", ".tsv")


def run_input(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """``(input path, --batch-size or None)`` when ``argv`` (without the program name) is a ``udm run`` that
    reads one element JSON Lines file with the local engine; else None. Anything it does not recognise
    (``--help``, an unknown option, ``NAME=PATH``, stdin) is None: the early reader is only an optimisation."""
    args = list(argv)
    while args and args[0] in ("--debug", "--strict"):
        args.pop(0)
    if not args or args[0] != "run":
        return None
    values: dict[str, list[str]] = {}
    positional = []
    i = 1
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            opt, _, val = a.partition("=")
            i += 1
        elif a in _VALUE_OPTIONS:
            if i + 1 >= len(args):
                return None
            opt, val = a, args[i + 1]
            i += 2
        elif a in _FLAGS:
            i += 1
            continue
        elif a.startswith("-"):
            return None  # --help, --, -qi, an unknown option: leave it to typer
        else:
            positional.append(a)
            i += 1
            continue
        if opt not in _VALUE_OPTIONS:
            return None
        values.setdefault({"-i": "--input", "-e": "--engine"}.get(opt, opt), []).append(val)
    inputs = values.get("--input", [])
    engines = values.get("--engine", ["local"])
    if len(positional) != 1 or len(inputs) != 1 or engines != ["local"] or _OTHER_READS & values.keys():
        return None
    path = inputs[0]
    if path == "-" or "=" in path or path.lower().endswith(_TABLE_ENDINGS):
        return None
    sizes = values.get("--batch-size", [])
    if len(sizes) > 1:
        return None
    try:
        batch_size = int(sizes[0]) if sizes else None
    except ValueError:
        return None
    if batch_size is not None and batch_size < 1:
        return None
    return path, batch_size
