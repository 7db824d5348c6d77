"""An element file read by Spark's executors, in byte ranges, with udmkit's own JSON Lines reader.

``udm run --engine spark`` used to read the whole file on the driver and ship it to Spark as one Arrow
table: one core parsed, the driver held every element, and the JVM copied them again. Here the driver
only plans (`scan_file`: one pass of ``memchr``-speed newline counting over the file, no parsing), and each
range is parsed where it is used, by the same reader as ``--engine local`` (`udm.host.io.jsonl`): same
fast pyarrow path, same bad-row reasons, same strict rules (SEMANTICS §1), same line numbers (a range
starts after a newline, and the driver knows how many newlines come before it).

Why not Spark's JSON reader with a schema: its typed columns cannot tell ``"payload": "{...}"`` (a string,
a bad element) from an object, nor ``"id": 1.5`` from ``"id": "1.5"``, and it gives no line numbers;
every such row would need a second look at its text. Spark's reader also parses about 3× slower than
pyarrow here (1 M elements: 1.1 s against 0.4 s on two cores, `bench.bench_spark`).

The ranges are read where the file is: every executor must see the same path. That holds for ``local[N]``
and for a cluster on this machine (`udm.host.spark.session.on_this_machine`); for another cluster the CLI
reads the file on the driver and ships it instead (docs/query-writer.md, "Running on a cluster").

`InputFacts` carries what the driver's pass learned that spares Spark a pre-pass: whether the file can
hold an infinite time (the batch plan needs the stream's T only then, semantics-notes 2).
"""

from __future__ import annotations

import io
import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.io.batch import ElementBatch
from udm.host.io.jsonl import read_jsonl_batches
from udm.host.spark.convert import ELEMENT_DDL, batch_to_arrow

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from udm.host.io.batch import ElementBatch

__all__ = ["FileScan", "InputFacts", "file_elements_df", "may_hold_ecti", "range_batches", "range_tables",
           "ranges_df", "scan_file"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: a range read by one task is at least this big (smaller files are one range)
_MIN_RANGE = 4 << 20
_RANGE_DDL = "path string, start bigint, stop bigint, first_line bigint"
#: what an infinite time is spelt with ("inf", "Inf", "INF", INF itself); a hint only (`InputFacts`), so
#: three substring searches (~0.1 s each per 100 MB) instead of a regular expression (~4 s)
_MAYBE_INF = (b'nf"', b'NF"', b"9223372036854775807")
_CTI_KIND = re.compile(rb'"kind"\s*:\s*"cti"')
_BLANK = b" \t\r\x0b\x0c"  # what bytes.strip() removes besides the newline itself


@dataclass(frozen=True)
class InputFacts:
    """What a pass over an input's bytes proved, for plans that would otherwise ask Spark: ``None`` means
    unknown. It is conservative: ``False`` only when no line can hold an infinite time. A wrong
    ``infinite=False`` would cost no correctness either: a run that cut an infinite lifetime at a
    T it did not know is run again with the true T (`udm.host.spark.batch`)."""

    infinite: bool | None = None


@dataclass(frozen=True)
class FileScan:
    """A planned read of one JSON Lines file: ``ranges`` of ``(start, stop, first line)``, each starting
    just after a newline; ``elements`` counts its non-blank lines (what the local engine counts in)."""

    path: str
    ranges: tuple[tuple[int, int, int], ...]
    elements: int
    facts: InputFacts
    #: whether a line spells a CTI (``"kind": "cti"``; one inside a payload counts too): the run summary
    #: warns about an input without one
    ctis: bool = False
    #: whether a line may hold an external CTI (``"ecti"`` anywhere): its ranges count the whole input, so
    #: the query then runs in one bucket (SEMANTICS §11)
    ectis: bool = False


def scan_file(path: str | Path, parts: int, *, min_bytes: int = _MIN_RANGE) -> FileScan:
    """Plan ``parts`` ranges of at least ``min_bytes`` each (fewer for a small file) over ``path``; counts
    its elements on the way."""
    p = Path(path)
    try:
        size = p.stat().st_size
        f = p.open("rb")
    except OSError as exc:
        raise UdmError(f"cannot read input {p}: {exc.strerror or exc}") from None
    with f:
        if size == 0:
            return FileScan(str(p.resolve()), (), 0, InputFacts(False), False)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            nl = np.flatnonzero(buf == 10)
            elements = _non_blank(mm, buf, nl, size)
            infinite = any(mm.find(s) >= 0 for s in _MAYBE_INF)
            ctis = mm.find(b'"cti"') >= 0 and _CTI_KIND.search(mm) is not None
            ectis = mm.find(b'"ecti"') >= 0
            del buf  # (the mmap cannot close while a view of it lives)
    k = max(1, min(parts, size // max(1, min_bytes)))
    cuts = [0]
    for i in range(1, k):
        j = int(np.searchsorted(nl, size * i // k))
        if j < len(nl) and int(nl[j]) + 1 > cuts[-1] and int(nl[j]) + 1 < size:
            cuts.append(int(nl[j]) + 1)
    cuts.append(size)
    first_lines = [1 + int(np.searchsorted(nl, c)) for c in cuts[:-1]]  # newlines before the cut, plus one
    ranges = tuple((a, b, ln) for a, b, ln in zip(cuts, cuts[1:], first_lines, strict=False) if b > a)
    return FileScan(str(p.resolve()), ranges, elements, InputFacts(infinite), ctis, ectis)


def may_hold_ecti(source: object) -> bool:
    """Whether an input file may hold an external CTI (``"ecti"`` anywhere in it; a payload string counts
    too). Standard input and streams cannot be looked at ahead: False."""
    if not isinstance(source, (str, Path)) or str(source) == "-" or not Path(source).is_file():
        return False
    with open(source, "rb") as f:
        if Path(source).stat().st_size == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return mm.find(b'"ecti"') >= 0


def _non_blank(mm: mmap.mmap, buf: np.ndarray, nl: np.ndarray, size: int) -> int:
    """How many lines hold something besides whitespace (the reader skips the others, counting them)."""
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [size]))
    if starts[-1] >= size:  # the file ends with a newline: no line after it
        starts, ends = starts[:-1], ends[:-1]
    empty = starts >= ends
    first = buf[np.minimum(starts, size - 1)]
    maybe = ~empty & np.isin(first, np.frombuffer(_BLANK, dtype=np.uint8))  # a blank line starts blank
    blank = int(empty.sum())
    for a, b in zip(starts[maybe].tolist(), ends[maybe].tolist(), strict=True):
        if not mm[a:b].strip():
            blank += 1
    return len(starts) - blank


def range_batches(path: str, start: int, stop: int, first_line: int) -> Iterator[ElementBatch]:
    """The elements of one range as the local reader reads them, numbered by their line in the file."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(stop - start)
    shift = pa.scalar(first_line - 1, pa.int64())
    for b in read_jsonl_batches(io.BytesIO(data)):
        tb = b.table
        tb = tb.set_column(tb.column_names.index("line"), "line", pc.add(tb.column("line"), shift))
        yield ElementBatch.from_table(tb)


def range_tables(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: range rows (`_RANGE_DDL`) in, element rows (`ELEMENT_DDL`) out."""
    for rb in batches:
        for path, start, stop, first in zip(*(rb.column(c).to_pylist() for c in range(4)), strict=True):
            for b in range_batches(path, start, stop, first):
                yield from batch_to_arrow(b).to_batches()


def ranges_df(spark: SparkSession, scan: FileScan) -> DataFrame:
    """One row per range, one partition each (so each range is its own task): ``spark.range`` spreads
    ``k`` ids over ``k`` partitions one each, and each id picks its range out of a literal array."""
    from pyspark.sql import functions as F

    if not scan.ranges:
        return spark.createDataFrame([], _RANGE_DDL)
    k = len(scan.ranges)
    table = F.array(*[F.struct(F.lit(scan.path).alias("path"), F.lit(a).cast("bigint").alias("start"),
                               F.lit(b).cast("bigint").alias("stop"), F.lit(ln).cast("bigint").alias("first_line"))
                      for a, b, ln in scan.ranges])
    return spark.range(0, k, 1, k).select(F.element_at(table, F.col("id").cast("int") + 1).alias("r")).select("r.*")


def file_elements_df(spark: SparkSession, scan: FileScan) -> DataFrame:
    """The file's element DataFrame (`udm.host.spark.convert.ELEMENT_DDL`), each range parsed by a task."""
    return ranges_df(spark, scan).mapInArrow(range_tables, ELEMENT_DDL)
