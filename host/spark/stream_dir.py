"""``udm run --engine spark-streaming --input DIR``: watch a directory that element files land in.

The directory is read by `udm.host.spark.stream_sources.event_files` (JSON Lines, or Parquet element files
when that is all it holds at the start; an empty directory is watched for JSON Lines) and run by
`run_stream(order=FILE_ORDER)` (semantics-notes 44): each file keeps its own order, retractions are routed
by the group-key fields they repeat (there is no driver-side routing: the files are not read up front).
Each micro-batch's output goes to the run directory as for a file (`udm.host.spark.stream_output`: same
writer, same exactly-once replay), and reaches the output file as soon as it commits; the watch stops
after ``--until-idle`` seconds without a new row, or on Ctrl-C. The stream has no end of input, so engines are
not finished: output is what the CTIs read so far made final plus what is still speculative, and infinite
lifetimes are not cut at T (rule 2 needs the end of the input).

With ``--checkpoint DIR`` a stopped watch resumes: files already read are not read again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from udm.host.errors import UdmError
from udm.host.query.runners import RunRequest
from udm.host.run_result import RunResult
from udm.host.spark.session import get_spark, require_spark
from udm.host.spark.stream_lock import checkpoint_held
from udm.host.spark.stream_output import (
    LiveOutput,
    batch_writer,
    committed_batches,
    progress_text,
    resumed_meta,
    shared_run_dir,
)
from udm.host.spark.stream_parts import key_buckets
from udm.host.spark.stream_sources import FILE_ORDER, event_files
from udm.host.spark.stream_stop import stop_between_batches
from udm.host.spark.streaming import run_stream

__all__ = ["run_directory_stream"]

_LAYOUT = "directory-2"  # 2: key buckets grouped with a salt (semantics-notes 50)


def _format(d: Path) -> str:
    files = [p for p in d.iterdir() if p.is_file() and not p.name.startswith((".", "_"))]
    return "parquet" if files and all(p.suffix == ".parquet" for p in files) else "jsonl"


def _check_checkpoint(run_dir: Path, meta: dict[str, Any]) -> None:
    if resumed_meta(run_dir, meta, {"query": "query spec", "source": "input directory"}) is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text(json.dumps(meta), encoding="utf-8")


def run_directory_stream(req: RunRequest, directory: Path) -> RunResult:
    """Watch ``directory`` until idle for ``req.options["until_idle"]`` seconds (or Ctrl-C)."""
    require_spark(connect=True)
    if not req.bound.graph.is_linear or isinstance(req.input, dict):
        raise UdmError("a directory input on --engine spark-streaming needs a one-input query (graphs: give files)")
    if req.batch_size is not None:
        raise UdmError(f"--batch-size counts the elements of a staged file; a watched directory ({directory}) "
                       "reads the files that landed since the last micro-batch: pace it with --trigger")
    t0 = time.perf_counter()
    spark = get_spark(req.options.get("master"))
    shared_run_dir(req)
    with checkpoint_held(spark, req.checkpoint):  # (a killed run's JVM may still be writing it)
        return _watch(req, directory, spark, t0)


def _watch(req: RunRequest, directory: Path, spark: Any, t0: float) -> RunResult:
    _, n = key_buckets(req.spec, req.options, spark, req.checkpoint)
    temp = req.checkpoint is None
    run_dir = Path(tempfile.mkdtemp(prefix="udm-watch-")) if temp else Path(req.checkpoint)
    if not temp:
        _check_checkpoint(run_dir, {"layout": _LAYOUT, "query": req.spec.to_json_dict(), "buckets": n,
                                    "source": str(directory.resolve()), "on_violation": req.on_violation})
    until_idle = req.options.get("until_idle")
    elements = 0
    try:
        df = event_files(spark, directory, format=_format(directory))
        result = run_stream(req.bound, df, on_violation=req.on_violation, buckets=n, order=FILE_ORDER)
        writer = result.writeStream.foreachBatch(batch_writer(run_dir, n, None))
        if req.options.get("trigger"):
            writer = writer.trigger(processingTime=req.options["trigger"])
        query = writer.option("checkpointLocation", str(run_dir / "spark")).start()
        live = LiveOutput(run_dir, req.output, req.dead_letter)
        seen: set[int] = set()
        last_input = begun = time.monotonic()  # (idle counts once a first micro-batch ran, or after 30 s)
        try:
            while not query.awaitTermination(0.2):
                live.deliver(committed_batches(run_dir))
                for p in query.recentProgress:
                    if p["batchId"] not in seen:
                        seen.add(p["batchId"])
                        if p["numInputRows"]:  # (rows of the file source: whole files)
                            last_input = time.monotonic()
                if req.progress is not None:
                    req.progress(len(seen), None, live.inputs)
                    status = getattr(req.progress, "status", None)  # a display that shows a status line
                    if status is not None:
                        text = progress_text(query.lastProgress, len(seen), None)
                        if text:
                            status(text)
                started = bool(seen) or time.monotonic() - begun >= max(until_idle or 0, 30)
                if until_idle is not None and started and time.monotonic() - last_input >= until_idle \
                        and not query.status["isDataAvailable"] and not query.status["isTriggerActive"]:
                    break
            else:
                query.exception()  # a query that ended by itself failed: raise why
        except KeyboardInterrupt:
            pass  # the watch's normal stop: write what the committed micro-batches produced
        finally:
            if query.isActive:
                stop_between_batches(query)  # (Ctrl-C: the micro-batch under way is committed first)
            live.deliver(committed_batches(run_dir))
        n_out, n_dead, reasons, truncated, merges = live.summary()
        elements = live.inputs
    finally:
        if temp:
            shutil.rmtree(run_dir, ignore_errors=True)
    name = req.bound.graph.inputs[0]
    return RunResult(engine="spark-streaming", elements_in=elements, elements_out=n_out, dead_lettered=n_dead,
                     reasons=Counter(reasons), truncated_at=truncated, seconds=time.perf_counter() - t0,
                     inputs={name: {"elements_in": elements, "dead_lettered": n_dead}}, lmerge=merges)
