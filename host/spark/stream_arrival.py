"""``udm run --engine spark-streaming --time @arrival``: a live input (standard input, a named pipe, or a
directory that element files land in) stamped with its arrival time on the driver, then run by Spark as
ordinary elements (SEMANTICS §11, semantics-notes 70).

Why on the driver: the arrival time is the wall-clock time at which a line is *read*; only the process that
reads it can give it, in the read order, never decreasing (`udm.host.io.arrival.ArrivalStamper`, the local
engine's stamper, with its injectable clock). Spark then sees element rows like those of a staged file
(`udm.host.spark.stream_parts`): each routed to its key bucket as one engine would see ids (`LiveIds`, kept
from part to part), written as one Parquet part per micro-batch into the run directory that Spark's file
source reads (``maxFilesPerTrigger=1``: part ``k`` is micro-batch ``k``).

The feed loop (`_Feed`), every ``tick`` seconds (default 0.05, as `udm.host.query.runners._feed_arrival`):

* lines read since the last pass are stamped; ``--cti-every`` adds the clock's CTIs (`ArrivalStamper.due`);
* while Spark is busy they wait; once every part written is committed, what waits (at most ``--batch-size``
  elements, default 10,000) becomes the next part. So a quiet input costs nothing and a fast one is cut
  into micro-batches as large as Spark's pace makes them: the latency is about one micro-batch;
* ``align``'s ``max_wait``: every part starts with a clock row (`TICK_KIND`, ``t`` = the feed's clock) that
  every bucket's engine takes as its clock and a `QueryRunner.tick`; a part with inserts asks for another
  clock row ``max_wait`` later (a part of its own when nothing else comes), so held output goes out about
  ``max_wait`` plus one micro-batch after it became computable. Such a query keeps one engine per bucket
  (``per_key=False``): a clock row must reach every engine that may hold output, and the per-key layout
  loads only the keys its rows name;
* the first ``cti(INF)`` waits until everything before it is committed, then goes out after ``cti(T)`` (T,
  the largest finite time the buckets' engines reached: where one engine cuts infinite lifetimes,
  semantics-notes 2), as `udm.host.spark.stream_files` stages a file's tail;
* the end of input (standard input closed; ``--until-idle`` seconds without a line) is ``cti(T)`` and the
  end-of-input row, as for a file: the engines finish. Ctrl-C stops the run between micro-batches without
  ending the input (what the committed micro-batches produced is in the output).

Each committed micro-batch reaches ``--output`` as it commits (`udm.host.spark.stream_output.LiveOutput`).
There is no ``--checkpoint``: a restarted run would read other lines at other times.
"""

from __future__ import annotations

import heapq
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from udm.host.errors import UdmError
from udm.host.io.arrival import ArrivalSource, ArrivalStamper, open_lines
from udm.host.io.batch import ElementBatch
from udm.host.query.runners import RunRequest
from udm.host.run_result import RunResult
from udm.host.spark.convert import ELEMENT_COLUMNS, ELEMENT_DDL, batch_to_arrow
from udm.host.spark.key_state import payload_key
from udm.host.spark.results import explain_failure
from udm.host.spark.session import get_spark, require_spark
from udm.host.spark.stream_output import LiveOutput, batch_writer, committed_batches, progress_text, shared_run_dir
from udm.host.spark.stream_parts import (
    DEFAULT_BATCH_SIZE,
    LiveIds,
    control_part,
    driver_routes,
    key_buckets,
    part_schema,
    reached_in,
    write_parts,
)
from udm.host.spark.stream_stop import stop_between_batches
from udm.host.spark.stream_wire import BROADCAST, END_KIND, TICK_KIND
from udm.host.spark.streaming import run_stream
from udm.host.temporal.elements import Cti, Insert
from udm.sdk import INF

__all__ = ["max_wait_of", "run_arrival_stream"]


def max_wait_of(spec: Any) -> int | None:
    """The smallest ``max_wait`` (µs) of the query's steps, or None when no step has one."""
    waits = [w for s in spec.steps if (w := getattr(s, "max_wait", None)) is not None]
    return min(waits) if waits else None


class _Feed:
    """The parts written so far: rows routed as one engine would see ids, ``_seq`` counting every row."""

    def __init__(self, run_dir: Path, keys: list[str], n: int, policy: str) -> None:
        self.run_dir = run_dir
        self.keys = keys
        self.n = n
        self.policy = policy
        self.live = LiveIds(adjust=policy == "adjust")
        self.last: dict[str, int] = {}
        self.parts = 0
        self.seq = 0
        #: modification time of part 0 (the file source reads parts in this order)
        self.mtime = time.time()

    def rows(self, items: list[tuple[int | None, Any]]) -> pa.Table:
        tb = batch_to_arrow(ElementBatch.from_elements([e for _, e in items], [ln for ln, _ in items]))
        kinds = tb.column("kind").to_pylist()
        if self.keys:
            routes, row_keys = driver_routes(tb, kinds, tb.column("t").to_pylist(), self.keys, self.n, self.policy,
                                             key_of=payload_key, live=self.live, last=self.last)
        else:
            routes, row_keys = [BROADCAST if k == "cti" else 0 for k in kinds], [None] * len(kinds)
        return (tb.select(list(ELEMENT_COLUMNS))
                .append_column("_seq", pa.array([0] * tb.num_rows, pa.int64()))
                .append_column("_bucket", pa.array(routes, pa.int64()))
                .append_column("_key", pa.array(row_keys, pa.string())).cast(part_schema()))

    def write(self, pieces: list[pa.Table]) -> None:
        """One part (micro-batch) of ``pieces`` in order."""
        part = pa.concat_tables(pieces)
        part = part.set_column(part.column_names.index("_seq"), "_seq",
                               pa.array(range(self.seq, self.seq + part.num_rows), pa.int64()))
        self.seq += part.num_rows
        write_parts(self.run_dir, [part], self.parts, self.mtime)
        self.parts += 1


def run_arrival_stream(req: RunRequest, source: ArrivalSource) -> RunResult:
    """Read ``source`` live, stamp it, run it on Spark until its end (module doc)."""
    require_spark(connect=True)
    if not req.bound.graph.is_linear or isinstance(req.input, dict):
        raise UdmError("arrival time (--time @arrival) on --engine spark-streaming needs a query with one input")
    if req.checkpoint is not None:
        raise UdmError("arrival time (--time @arrival) takes no --checkpoint: a resumed run would read other lines "
                       "at other times")
    t0 = time.perf_counter()
    spark = get_spark(req.options.get("master"))
    shared_run_dir(req)
    keys, n = key_buckets(req.spec, req.options, spark)
    wait = max_wait_of(req.spec)
    lines = open_lines(source.path, directory=True)
    run_dir = Path(tempfile.mkdtemp(prefix="udm-arrival-"))
    try:
        feed = _Feed(run_dir, keys, n, req.on_violation or req.spec.on_violation)
        (run_dir / "input").mkdir()
        src = (spark.readStream.schema(f"{ELEMENT_DDL}, _seq bigint, _bucket bigint, _key string")
               .option("maxFilesPerTrigger", 1).parquet(str(run_dir / "input")))
        result = run_stream(req.bound, src, on_violation=req.on_violation, buckets=n, per_key=wait is None)
        writer = result.writeStream.foreachBatch(batch_writer(run_dir, n, None))
        if req.options.get("trigger"):
            writer = writer.trigger(processingTime=req.options["trigger"])
        query = writer.option("checkpointLocation", str(run_dir / "spark")).queryName(f"udm-{run_dir.name}").start()
        live = LiveOutput(run_dir, req.output, req.dead_letter)
        try:
            elements = _pump(req, source, lines, feed, query, live, wait)
        finally:
            lines.close()
            if query.isActive:
                stop_between_batches(query)
            live.deliver(committed_batches(run_dir))
        n_out, n_dead, reasons, truncated, merges = live.summary()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    name = req.bound.graph.inputs[0]
    return RunResult(engine="spark-streaming", elements_in=elements, elements_out=n_out, dead_lettered=n_dead,
                     reasons=reasons, truncated_at=truncated, seconds=time.perf_counter() - t0,
                     inputs={name: {"elements_in": elements, "dead_lettered": n_dead}}, lmerge=merges)


def _pump(req: RunRequest, source: ArrivalSource, lines: Any, feed: _Feed, query: Any, live: LiveOutput,
          wait: int | None) -> int:
    """The feed loop (module doc) until the input ends and its last part is committed, or Ctrl-C; the
    number of input elements read."""
    stamper = ArrivalStamper(req.options.get("clock"), source.cti_every)
    pause = float(req.options.get("tick", 0.05))
    cap = req.batch_size or DEFAULT_BATCH_SIZE
    until_idle = req.options.get("until_idle")
    pending: list[tuple[int | None, Any]] = []
    after_inf: list[tuple[int | None, Any]] | None = None  # from the first cti(INF) on, until T is known
    tail = False  # cti(T) went out (before the first cti(INF)): the end of input needs none
    ticks: list[int] = []  # clock times at which a clock row is due (``max_wait``)
    line = elements = 0
    heard = time.monotonic()
    ended = False
    try:
        while True:
            _alive(query)
            got: list[tuple[int | None, Any]] = []
            if lines.done:
                time.sleep(pause)  # (nothing more to read: wait for Spark)
            raw = lines.get(pause)
            while raw is not None:
                line += 1
                heard = time.monotonic()
                if raw.strip():
                    got += stamper.stamp(raw, line)
                if len(got) >= cap:
                    break
                raw = lines.get(0)
            ended = ended or lines.done or (until_idle is not None and time.monotonic() - heard >= until_idle)
            if not ended:  # (once the input ended, the end of input comes next, not the clock's CTIs)
                got += [(None, c) for c in stamper.due()]
            elements += len(got)
            for item in got:
                if after_inf is None and not tail and isinstance(item[1], Cti) and item[1].t >= INF:
                    after_inf = []
                (after_inf if after_inf is not None and not tail else pending).append(item)
            done = committed_batches(feed.run_dir)
            live.deliver(done)
            _progress(req, query, done, elements)
            if done < feed.parts:
                continue  # Spark is busy: what came waits for the next part
            clock: list[pa.Table] = []
            now = stamper.now() if wait is not None and (pending or ticks) else None
            if now is not None and (pending or ticks[0] <= now):
                while ticks and ticks[0] <= now:
                    heapq.heappop(ticks)
                clock = [control_part(TICK_KIND, now, 0)]
            if pending:
                take, pending = pending[:cap], pending[cap:]
                feed.write([*clock, feed.rows(take)])
                if now is not None and wait is not None and any(isinstance(e, Insert) for _, e in take):
                    heapq.heappush(ticks, now + wait)
            elif after_inf is not None and not tail:
                t_end = reached_in(feed.run_dir, feed.parts)
                feed.write(([control_part("cti", t_end, 0)] if t_end is not None else []) + [feed.rows(after_inf)])
                pending, after_inf, tail = [], None, True
            elif clock:
                feed.write(clock)
            elif ended:
                t_end = None if tail else reached_in(feed.run_dir, feed.parts)
                feed.write(([control_part("cti", t_end, 0)] if t_end is not None else [])
                           + [control_part(END_KIND, None, 0)])
                _await(query, feed, live, pause)
                return elements
    except KeyboardInterrupt:
        return elements  # a watch's stop: the committed micro-batches are in the output
    except UdmError:
        raise
    except Exception as exc:
        raise explain_failure(exc) from None


def _alive(query: Any) -> None:
    """Raise why the streaming query stopped, if it did (it stops only by failing while the feed runs)."""
    if not query.isActive:
        exc = query.exception()
        if exc is not None:
            raise explain_failure(exc)
        raise UdmError("the streaming query stopped before the end of the input")


def _await(query: Any, feed: _Feed, live: LiveOutput, pause: float) -> None:
    """Wait until every part written is committed."""
    while committed_batches(feed.run_dir) < feed.parts:
        _alive(query)
        time.sleep(pause)
        live.deliver(committed_batches(feed.run_dir))


def _progress(req: RunRequest, query: Any, done: int, elements: int) -> None:
    if req.progress is None:
        return
    req.progress(0, None, elements)
    status = getattr(req.progress, "status", None)  # a display that shows a status line
    if status is not None:
        text = progress_text(query.lastProgress, done, None)
        if text:
            status(text)
