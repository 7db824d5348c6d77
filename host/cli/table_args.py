"""``udm run``'s table options → one `TableSource` per input, and the output `TableSink`.

Each table option (``--time``, ``--start``, ``--end``, ``--edge``, ``--key``, ``--id``, ``--unit``,
``--format``, ``--cti-every``, ``--cti-lag``) takes ``VALUE`` — for every input — or ``NAME=VALUE`` for the
declared input ``NAME`` only (a per-input value wins over an all-inputs one)::

    udm run q.yaml --input prices.parquet --time ts
    udm run join.yaml --input bids=bids.csv --time bids=ts --input auctions=a.parquet \\
        --start auctions=open --end auctions=close --cti-every 1m

An input is read as a table when it has a shape option (``--time``, ``--start``/``--end`` or ``--edge``);
a ``.parquet``/``.csv`` input without one is an error, and an input with none is element JSON Lines as
before (INTERFACES §1), whatever its name.
"""

from __future__ import annotations

import re
from pathlib import Path

from udm.host.errors import UdmError
from udm.host.io.arrival import ARRIVAL, ArrivalSource
from udm.host.io.table_options import FORMATS, TableOptions, TableSource
from udm.host.io.table_out import TableSink, output_sink
from udm.host.model.spec import duration_ticks

__all__ = ["TableArgs", "parse_duration", "parse_trigger", "table_sink", "table_sources"]

def parse_duration(text: str, option: str) -> int:
    """``"500"`` → 500 ticks; ``"10s"``, ``"5m"``, ``"1h"``, ``"250ms"`` → microsecond ticks (timestamp inputs)."""
    try:
        return duration_ticks(text)
    except ValueError:
        raise UdmError(f"{option} {text}: expected a number of ticks or a duration like 10s, 5m, 1h, 250ms") from None


_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\s*$",
                      re.IGNORECASE)
_TRIGGER_MS = {"ms": 1, "mil": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
               "hou": 3_600_000}


def parse_trigger(text: str) -> str:
    """``--trigger`` (``"2 seconds"``, ``"500ms"``, ``"1 minute"``) → Spark's processing-time interval in
    milliseconds (``"2000 milliseconds"``), or a one-line error."""
    m = _TRIGGER.match(text)
    unit = m.group(2).lower() if m else ""
    scale = _TRIGGER_MS.get(unit[:3]) or _TRIGGER_MS.get(unit[:1]) if m else None
    if m is None or scale is None or float(m.group(1)) * scale < 1:
        raise UdmError(f"--trigger {text}: expected an interval like '2 seconds', '500ms' or '1 minute'")
    return f"{round(float(m.group(1)) * scale)} milliseconds"


class TableArgs:
    """The raw option values, as typer gives them (lists, possibly empty)."""

    def __init__(self, **values: list[str]) -> None:
        self.values = values

    def per_input(self, option: str, names: tuple[str, ...]) -> dict[str, str]:
        """``{input name: value}`` for one option: ``NAME=VALUE`` for one input, ``VALUE`` for all."""
        out: dict[str, str] = {}
        shared: str | None = None
        for v in self.values.get(option, []):
            name, sep, rest = v.partition("=")
            if sep and name in names:
                if name in out:
                    raise UdmError(f"--{_flag(option)} {name}= given twice")
                out[name] = rest
            else:
                if shared is not None:
                    raise UdmError(f"--{_flag(option)} given twice for all inputs ({shared!r}, {v!r}); "
                                   f"use NAME=VALUE per input")
                shared = v
        return {n: out.get(n, shared) for n in names if n in out or shared is not None}  # type: ignore[misc]


def _flag(option: str) -> str:
    return option.replace("_", "-")


def table_sources(args: TableArgs, inputs: dict[str, str]) -> dict[str, str | TableSource | ArrivalSource]:
    """Each input as a path (element JSON Lines), a `TableSource`, or an `ArrivalSource` (``--time @arrival``:
    element JSON Lines stamped with their arrival time, SEMANTICS §11); or a one-line error."""
    names = tuple(inputs)
    opt = {o: args.per_input(o, names) for o in ("time", "start", "end", "edge", "key", "id", "unit", "format",
                                                 "cti_every", "cti_lag")}
    out: dict[str, str | TableSource | ArrivalSource] = {}
    for name, path in inputs.items():
        where = f"--input {path}" if len(names) == 1 else f"input {name!r}"
        fmt = opt["format"].get(name)
        if opt["time"].get(name) == ARRIVAL:
            extra = [o for o in ("start", "end", "edge", "key", "id", "unit", "cti_lag") if name in opt[o]]
            if extra or fmt not in (None, "elements"):
                raise UdmError(f"--{_flag(extra[0]) if extra else 'format'} does not go with --time {ARRIVAL} "
                               f"({where}: element JSON Lines stamped as they are read; CTIs follow the clock)")
            cti = opt["cti_every"].get(name)
            out[name] = ArrivalSource(path, None if cti is None else parse_duration(cti, "--cti-every"))
            continue
        if fmt is not None and fmt != "elements" and fmt not in FORMATS:
            raise UdmError(f"--format {fmt}: unknown format for {where}; formats: elements, {', '.join(FORMATS)}")
        shaped = any(name in opt[o] for o in ("time", "start", "end", "edge"))
        low = path.lower()
        if fmt == "elements" or (not shaped and fmt is None and not low.endswith((*FORMATS["parquet"],
                                                                                  *FORMATS["csv"]))):
            extra = [o for o in ("key", "id", "unit", "cti_every", "cti_lag") if name in opt[o]]
            if extra:
                raise UdmError(f"--{_flag(extra[0])} is a table option, but {where} is read as element JSON Lines "
                               f"(add --time, --start/--end or --edge to read it as a table)")
            out[name] = path
            continue
        if not shaped:
            raise UdmError(f"{where} is a table: say which column holds the time (--time COL, --start COL --end "
                           f"COL, or --edge COL --key COLS)")
        if path == "-":
            raise UdmError(f"{where}: a table input must be a file or directory, not stdin")
        key = tuple(k.strip() for k in opt["key"].get(name, "").split(",") if k.strip())
        cti = opt["cti_every"].get(name)
        lag = opt["cti_lag"].get(name)
        options = TableOptions(
            time=opt["time"].get(name), start=opt["start"].get(name), end=opt["end"].get(name),
            edge=opt["edge"].get(name), key=key, id=opt["id"].get(name), unit=opt["unit"].get(name, "ticks"),
            cti_every=None if cti is None else parse_duration(cti, "--cti-every"),
            cti_lag=0 if lag is None else parse_duration(lag, "--cti-lag"),
            format=fmt if fmt in FORMATS else None,
        ).check(where)
        if not Path(path).exists():
            raise UdmError(f"input {'file' if len(names) == 1 else name!r} {path} does not exist")
        out[name] = TableSource(Path(path), options)
    return out


def table_sink(output: str, fmt: str | None, final: bool, times: str | None,
               sources: dict[str, str | TableSource | ArrivalSource]) -> str | TableSink:
    """The output as a path (element JSON Lines) or a `TableSink` (`udm.host.io.table_out.output_sink`;
    ``times`` None keeps the table inputs' time type)."""
    return output_sink(output, fmt, final=final, times=times, inputs=sources.values())
