"""How a user's table (Parquet, CSV, JSON Lines) becomes events: `TableOptions` and `TableSource`.

A row of a table is one event; the options name the columns that carry its time (semantics notes 31–32):

- ``time``: point events ``[t, t + 1)``;
- ``start`` + ``end``: intervals ``[start, end)`` (a null ``end`` is ``INF``);
- ``edge`` + ``key``: edge events — a sample holds from its time until the next sample of its key
  (its ``key`` columns), the last one open-ended;
- ``id``: the event id column (else ids are ``r<row number>``).

Times are timestamps (→ microsecond ticks, the convention of `udm.host.spark.convert`) or numbers in
``unit`` (``ticks``: taken as they are; ``s``/``ms``/``us``/``ns``: converted to microsecond ticks).
Every column that is not a time or id column is a payload field. ``cti_every`` gives an input without
punctuation a CTI each time its largest time minus ``cti_lag`` crosses a multiple of ``cti_every``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from udm.host.errors import UdmError

__all__ = ["FORMATS", "UNITS", "TableOptions", "TableSource", "detect_format"]

#: Table formats and the file name endings that select them.
FORMATS: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet", ".pq", ".parq"),
    "csv": (".csv", ".csv.gz", ".tsv"),
    "json": (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz"),
}

#: Microsecond ticks per unit of a numeric time column (``ticks``: the number is the tick).
UNITS: dict[str, float] = {"ticks": 1, "s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}

Shape = Literal["point", "interval", "edge"]


@dataclass(frozen=True)
class TableOptions:
    """Which columns carry an event's time and id, and how numbers map to ticks (checked by `check`)."""

    time: str | None = None
    start: str | None = None
    end: str | None = None
    edge: str | None = None
    key: tuple[str, ...] = ()
    id: str | None = None
    unit: str = "ticks"
    cti_every: int | None = None
    cti_lag: int = 0
    format: str | None = None

    @property
    def shape(self) -> Shape:
        if self.start is not None:
            return "interval"
        if self.edge is not None:
            return "edge"
        return "point"

    @property
    def time_columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.time, self.start, self.end, self.edge) if c is not None)

    @property
    def reserved(self) -> frozenset[str]:
        """Columns that are not payload: the time columns and the id column (``key`` columns stay)."""
        return frozenset(c for c in (*self.time_columns, self.id) if c is not None)

    def check(self, where: str = "") -> TableOptions:
        """One clear error for options that cannot go together; returns self."""
        at = f" ({where})" if where else ""
        shapes = [s for s, on in (("--time", self.time), ("--start", self.start), ("--edge", self.edge)) if on]
        if len(shapes) != 1:
            raise UdmError(f"a table input needs exactly one of --time, --start/--end, --edge{at}; "
                           f"got {', '.join(shapes) or 'none'}")
        if (self.start is None) != (self.end is None):
            raise UdmError(f"--start and --end go together (an interval has both ends){at}")
        if self.key and self.edge is None:
            raise UdmError(f"--key is for edge events (--edge COL --key COLS){at}")
        if self.unit not in UNITS:
            raise UdmError(f"unknown time unit {self.unit!r}{at}; units: {', '.join(UNITS)}")
        if self.cti_every is not None and self.cti_every <= 0:
            raise UdmError(f"--cti-every must be a positive number of ticks{at}")
        if self.cti_lag < 0:
            raise UdmError(f"--cti-lag must be >= 0{at}")
        if self.format is not None and self.format not in FORMATS:
            raise UdmError(f"unknown table format {self.format!r}{at}; formats: {', '.join(FORMATS)}")
        return self


@dataclass(frozen=True)
class TableSource:
    """An input that is a table file or a directory of table files, read with `options`."""

    path: Path
    options: TableOptions

    def __str__(self) -> str:
        return str(self.path)


def detect_format(path: Path, given: str | None = None) -> str:
    """The table format of a file or directory: ``given``, else by its (or its files') name ending."""
    if given is not None:
        return given
    names = [path] if not path.is_dir() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in names:
        low = p.name.lower()
        for fmt, endings in FORMATS.items():
            if low.endswith(endings):
                return fmt
    raise UdmError(f"cannot tell the table format of {path} from its name; give --format "
                   f"{'|'.join(FORMATS)}")
