"""``udm run --engine spark``: the same files and query specs as the local engine, on Spark batch.

Reading: an element file the executors can see (``local[N]``, or a cluster on this machine:
`udm.host.spark.session.on_this_machine`) is read by them in byte ranges with udmkit's own reader (same
parser, same bad-row reasons and line numbers as the local engine); the driver only counts newlines,
while Spark starts. Anything else (standard input, a user's table, a file on a remote cluster's driver) is
read on the driver by `udm.host.io` and shipped to Spark as Arrow.

Planning: a query the two-phase plan takes (`udm.host.spark.algebraic.eligible_step`, holistic UDAs
included) over an element file of at most `DRIVER_FINAL_BYTES` runs as one Spark job (the ranges read and
folded by the executors) whose pane states come back as Arrow and are merged on the driver
(`final_on_driver`): no shuffle, no final tasks, no persisted result. Otherwise (or when that plan refuses
the input: a bad line, a retraction, a reused id, a late insert) `run_batch` (or
`udm.host.spark.graph.run_graph_batch`) once. Writing: the result rows come back in one Arrow collect of
the persisted result (output and dead letters together), ordered on the driver, and element JSON Lines are
encoded column by column (`element_lines_of`); a table output (``--output-format``, ``--final``) takes the
element path of `udm.host.io.table_out`.

The master comes from ``request.options["master"]`` (``--master``), else ``$UDM_SPARK_MASTER`` /
``$SPARK_REMOTE``, else ``local[*]``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.errors import UdmError
from udm.host.io.batch import KIND_CTI, KIND_ECTI
from udm.host.io.jsonl import DeadLetterWriter, JsonlWriter
from udm.host.io.table_options import TableSource
from udm.host.io.table_out import TableSink, open_writer
from udm.host.io.tables import open_reader
from udm.host.model.plan import build_plan
from udm.host.query.runners import ENGINES, RunRequest, no_cti_warnings
from udm.host.run_result import RunResult
from udm.host.spark.algebraic import eligible_step, final_on_driver
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import element_lines_of, elements_df, elements_of
from udm.host.spark.file_source import file_elements_df, scan_file
from udm.host.spark.graph import is_graph, lmerge_counts, run_graph_batch
from udm.host.spark.results import explain_failure
from udm.host.spark.session import get_spark, on_this_machine, resolved_master
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.spark.batch import SparkRun
    from udm.host.spark.file_source import FileScan

__all__ = ["run_spark"]

# lazy imports: pyarrow.compute — `udm run --engine spark` loads it with the job's results

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: an element file up to this size that the two-phase plan takes has its final phase on the driver
#: (`udm.host.spark.algebraic.final_on_driver`): the driver writes every output row anyway; a holistic
#: UDA's pane states are the members themselves, all of which then come to the driver
DRIVER_FINAL_BYTES = 256 << 20
#: no dead letters (`_write_rows`)
_NO_DEAD = pa.table({"line": pa.array([], pa.int64()), "reason": pa.array([], pa.string()),
                     "element": pa.array([], pa.string()), "kind": pa.array([], pa.string())})

#: what a Spark run's warning about an input without CTIs says the engines kept
_HELD = "each bucket's engine held its live events and windows"


class _Input:
    """One query input on its way to Spark: a file the executors read (`FileScan`, planned in a thread
    while Spark starts), or batches read on the driver."""

    def __init__(self, source: Any, master: str | None, batch_size: int) -> None:
        self.source = source
        self.scan: FileScan | None = None
        self.batches: list[Any] | None = None
        self._error: BaseException | None = None
        self._batch_size = batch_size
        direct = (isinstance(source, (str, Path)) and not isinstance(source, TableSource) and str(source) != "-"
                  and Path(source).is_file() and on_this_machine(resolved_master(master)))
        self._thread: threading.Thread | None = None
        if direct:
            self._thread = threading.Thread(target=self._scan, name="udm-scan", daemon=True)
            self._thread.start()

    def _scan(self) -> None:
        try:
            self.scan = scan_file(self.source, 2 * (os.cpu_count() or 1))
        except BaseException as exc:  # raised in the caller's thread by `frame`
            self._error = exc

    def file_scan(self) -> FileScan | None:
        """The planned read of an element file the executors read (None: read on the driver)."""
        if self._thread is not None:
            self._thread.join()
            if self._error is not None:
                raise self._error
            assert self.scan is not None
        return self.scan

    def frame(self, spark: Any) -> Any:
        """The input's element DataFrame."""
        scan = self.file_scan()
        if scan is not None:
            return file_elements_df(spark, scan)

        reader = open_reader(self.source, batch_size=self._batch_size)
        try:
            self.batches = list(reader)
        finally:
            reader.close()
        return elements_df(spark, self.batches)

    @property
    def elements(self) -> int:
        if self.scan is not None:
            return self.scan.elements
        return sum(len(b) for b in self.batches or ())

    def has_ecti(self) -> bool:
        """Whether the input may hold an external CTI: its ranges count the whole input, so the query runs in
        one bucket (SEMANTICS §11; a bucket would see part of the data and never complete a range)."""
        if self.scan is not None:
            return self.scan.ectis
        return any(bool((b.kind_codes() == KIND_ECTI).any()) for b in self.batches or ())

    def sent_cti(self) -> bool:
        """Whether the input holds a CTI (SEMANTICS §7: without one no state is cleaned up)."""
        if self.scan is not None:
            return self.scan.ctis
        return any(bool((b.kind_codes() == KIND_CTI).any()) for b in self.batches or ())


def run_spark(req: RunRequest) -> RunResult:
    if req.checkpoint is not None:
        raise UdmError("--checkpoint is only supported by --engine spark-streaming")
    if is_graph(req.spec):
        return _run_graph(req)
    t0 = time.perf_counter()
    master = req.options.get("master")
    inp = _Input(req.input, master, req.batch_size or 65536)
    spark = get_spark(master)
    name = req.bound.graph.inputs[0]
    out = _small_file_plan(req, spark, inp.file_scan())
    if out is not None:
        n_out, dead, reasons = _write_rows(req, out, _NO_DEAD, multi=False)
    else:
        frame = inp.frame(spark)
        whole = inp.has_ecti()
        run = run_batch(req.bound, frame, on_violation=req.on_violation, scan=inp.scan,
                        buckets=1 if whole else None, algebraic=False if whole else None)
        try:
            n_out, dead, reasons = _write_result(req, run, multi=False)
        finally:
            run.unpersist()
    silent = [] if inp.sent_cti() else [name]
    return RunResult(engine="spark", elements_in=inp.elements, elements_out=n_out, dead_lettered=len(dead),
                     reasons=reasons, seconds=time.perf_counter() - t0,
                     inputs={name: {"elements_in": inp.elements, "dead_lettered": len(dead)}},
                     warnings=no_cti_warnings(req.bound.spec, silent, _HELD))


def _small_file_plan(req: RunRequest, spark: Any, scan: FileScan | None) -> pa.Table | None:
    """Output rows in order, final CTI included, when the two-phase plan takes the query over a file of at
    most `DRIVER_FINAL_BYTES`, its final phase on the driver (`final_on_driver`); None: `run_batch` runs it
    (the plan refused the input, or it does not apply)."""
    if scan is None or scan.ectis or not scan.ranges or scan.ranges[-1][1] > DRIVER_FINAL_BYTES:
        return None
    spec = build_plan(req.bound).spec
    if eligible_step(spec, holistic=True) is None:
        return None
    try:
        out = final_on_driver(spec, spark, scan)
    except Exception as exc:
        raise explain_failure(exc) from None
    if out is None:
        return None
    final = pa.table({"kind": ["cti"], "id": [None], "le": [None], "re": [None], "re_new": [None], "t": [INF],
                      "payload": [None], "line": [out.num_rows]}, schema=out.schema)
    return pa.concat_tables([out, final])


def _collect(run: SparkRun) -> tuple[pa.Table, pa.Table]:
    """(output rows, dead-letter rows), each in ``line`` order, from one collect of the persisted result."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    cols = ["stream", "kind", "id", "le", "re", "re_new", "t", "payload", "line", "reason", "element"]
    result = run._result
    if "input" in result.columns:
        cols.append("input")
    parts = [p.where(F.col("stream") == "dead") for p in run.parts if p is not result]
    whole = result.where(F.col("stream").isin("out", "dead")).select(*cols)
    for p in parts:
        whole = whole.unionByName(p.select(*cols))
    table = whole.toArrow()
    out = table.filter(pc.equal(table.column("stream"), "out")).sort_by("line")
    dead = table.filter(pc.equal(table.column("stream"), "dead"))
    keys = [("line", "ascending")] + ([("input", "ascending")] if "input" in cols else [])
    return out, dead.sort_by(keys)


def _write_result(req: RunRequest, run: SparkRun, multi: bool) -> tuple[int, list[dict[str, Any]], Counter[str]]:
    """Write the output and the dead letters; (elements out, dead-letter records, counts by category)."""
    out, dead_rows = _collect(run)
    return _write_rows(req, out, dead_rows, multi)


def _write_rows(req: RunRequest, out: pa.Table, dead_rows: pa.Table, multi: bool
                ) -> tuple[int, list[dict[str, Any]], Counter[str]]:
    """`_write_result` of output rows (in order) and dead-letter rows (``line, reason, element, kind``)."""
    if isinstance(req.output, TableSink):
        with open_writer(req.output) as tw:
            tw.write(elements_of(out))
    else:
        with JsonlWriter(req.output) as w:
            w.write_encoded(element_lines_of(out))
    dead = []
    inputs = dead_rows.column("input").to_pylist() if "input" in dead_rows.column_names else [None] * len(dead_rows)
    for line, reason, element, name in zip(dead_rows.column("line").to_pylist(), dead_rows.column("reason").to_pylist(),
                                           dead_rows.column("element").to_pylist(), inputs, strict=True):
        rec = {"line": line, "reason": reason, "element": None if element is None else json.loads(element)}
        if multi and name is not None:
            rec["input"] = name
        dead.append(rec)
    reasons = Counter(k or "other" for k in dead_rows.column("kind").to_pylist())
    if req.dead_letter is not None:
        with DeadLetterWriter(req.dead_letter) as dlw:
            dlw.write(dead)
    return out.num_rows, dead, reasons


def _run_graph(req: RunRequest) -> RunResult:
    """A query graph (`udm.host.spark.graph`): every ``--input NAME=PATH`` its own DataFrame, run
    together; dead letters of a multi-input query name their input."""
    sources = req.inputs
    t0 = time.perf_counter()
    master = req.options.get("master")
    inputs = {name: _Input(src, master, req.batch_size or 65536) for name, src in sources.items()}
    spark = get_spark(master)
    frames = {name: inp.frame(spark) for name, inp in inputs.items()}
    facts = {name: inp.scan.facts for name, inp in inputs.items() if inp.scan is not None}
    whole = any(inp.has_ecti() for inp in inputs.values())
    run = run_graph_batch(req.bound, frames, on_violation=req.on_violation,
                          buckets=1 if whole else req.options.get("buckets"), facts=facts)
    multi = len(sources) > 1
    try:
        n_out, dead, reasons = _write_result(req, run, multi)
        merges = lmerge_counts(run)
    finally:
        run.unpersist()
    counts = {name: {"elements_in": inp.elements, "dead_lettered": 0} for name, inp in inputs.items()}
    for rec in dead:
        name = rec.get("input") if multi else next(iter(counts))
        if name in counts:
            counts[name]["dead_lettered"] += 1
    silent = [name for name, inp in inputs.items() if not inp.sent_cti()]
    return RunResult(engine="spark", elements_in=sum(c["elements_in"] for c in counts.values()),
                     elements_out=n_out, dead_lettered=len(dead), reasons=reasons,
                     seconds=time.perf_counter() - t0, inputs=counts, lmerge=merges,
                     warnings=no_cti_warnings(req.bound.spec, silent, _HELD))


ENGINES["spark"] = run_spark
