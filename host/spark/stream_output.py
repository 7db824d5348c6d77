"""What a streaming run writes per micro-batch, and how it reaches the user's output file as it commits.

``foreachBatch`` hands `batch_writer`'s function each micro-batch's result rows (`run_stream`'s
`STREAM_RESULT_DDL`); it writes them under the run directory by batch id, each file replaced atomically::

    out/NNNNNNNN.jsonl   output elements        out/NNNNNNNN.cti    the stream's output CTI after the batch
    out/NNNNNNNN.stats   dead-letter counters, T, truncation, lmerge counters, input elements
    dead/NNNNNNNN.jsonl  dead letters

A micro-batch Spark replays (same id, same input, same state) rewrites the same files, so the run directory
holds each batch once. `LiveOutput` appends each batch to the user's output and dead-letter files once
Spark has committed it, in batch order, exactly once across restarts. `progress_text` is the status line
both show under the progress bar. Used by the file runner (`udm.host.spark.stream_files`) and the
directory watch (`udm.host.spark.stream_dir`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.query.runners import RunRequest
from udm.host.spark.convert import element_lines_of
from udm.host.spark.session import on_this_machine, resolved_master
from udm.host.spark.stream_lock import LOCK_NAME
from udm.host.spark.streaming import combine_ctis
from udm.sdk import INF

__all__ = [
    "CRASH_ENV",
    "LiveOutput",
    "batch_writer",
    "committed_batches",
    "crash_point",
    "progress_text",
    "resumed_meta",
    "shared_run_dir",
    "write_atomic",
]


def write_atomic(path: Path, text: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    os.replace(tmp, path)


def resumed_meta(run_dir: Path, meta: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
    """What ``run_dir/run.json`` recorded when the run began, once every entry of ``meta`` matches it (one
    that does not is refused, named by ``names`` or its key); None for a new run, whose directory must be
    empty or absent (but for the lock this run holds on it, `udm.host.spark.stream_lock`): a checkpoint
    belongs to one run (query, input, layout, ...)."""
    path = run_dir / "run.json"
    if path.exists():
        old: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        for key, value in meta.items():
            if old.get(key) != value:
                what = names.get(key, key.replace("_", " "))
                raise UdmError(f"checkpoint {run_dir} belongs to a run with a different {what}; use a new "
                               "--checkpoint directory (or delete this one) to start over")
        return old
    if run_dir.exists() and any(p.name != LOCK_NAME for p in run_dir.iterdir()):
        raise UdmError(f"--checkpoint {run_dir} is not empty and holds no udm streaming run")
    return None


#: ``WHERE:BATCH`` (``write:3``, ``deliver:3``): the run kills itself (SIGKILL, no cleanup) right after that
#: step of that micro-batch: after its parts are written and before Spark commits it, or after it was
#: appended to the output and before that was recorded. The exactly-once tests' way of crashing a run at
#: the worst moments; unset, it costs one dictionary lookup per micro-batch.
CRASH_ENV = "UDM_TEST_CRASH_AT"


def crash_point(where: str, batch_id: int) -> None:
    if os.environ.get(CRASH_ENV) == f"{where}:{batch_id}":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def batch_writer(run_dir: Path, n: int, stop_after: int | None) -> Any:
    # (``n``: how many buckets report the output CTI: the last stage's when the plan has stages)
    """The ``foreachBatch`` function: one micro-batch's result rows to its files (see the module doc)."""

    out_dir, dead_dir = run_dir / "out", run_dir / "dead"
    out_dir.mkdir(exist_ok=True)
    dead_dir.mkdir(exist_ok=True)

    def write(df: Any, batch_id: int) -> None:
        table = df.toArrow().sort_by([("bucket", "ascending"), ("seq", "ascending")])
        is_out = pc.equal(table.column("stream"), "out")
        # the output rows, encoded column by column; the few others (dead letters, CTIs, stats) row by row
        lines = element_lines_of(table.filter(is_out)).to_bytes()
        dead: list[str] = []
        ctis: dict[int, int] = {}
        reasons: Counter[str] = Counter()
        truncated: list[int] = []
        reached: list[int] = []
        merges: dict[str, Any] = {}  # bucket -> its lmerge counters so far
        elements = 0
        for r in table.filter(pc.invert(is_out)).to_pylist():
            if r["stream"] == "dead":
                element = None if r["element"] is None else json.loads(r["element"])
                rec = {"line": r["line"], "reason": r["reason"], "element": element}
                if r["payload"] is not None:  # a multi-input query's dead letter names its input
                    rec["input"] = r["payload"]
                dead.append(json.dumps(rec))
            elif r["stream"] == "cti":
                ctis[r["bucket"]] = r["t"]
            else:
                stats = json.loads(r["payload"])
                reasons.update(stats.get("reasons", {}))
                if stats.get("truncated_at") is not None:
                    truncated.append(stats["truncated_at"])
                if stats.get("T") is not None:
                    reached.append(stats["T"])
                elements += int(stats.get("in", 0))
                if stats.get("lmerge"):  # (a stage's buckets apart from another's)
                    where = str(r["bucket"]) if "stage" not in stats else f"{stats['stage']}.{r['bucket']}"
                    merges[where] = stats["lmerge"]
        name = f"{batch_id:08d}"
        write_atomic(out_dir / f"{name}.stats", json.dumps(
            {"reasons": dict(reasons), "truncated_at": max(truncated) if truncated else None,
             "T": max(reached) if reached else None, "lmerge": merges, "in": elements}))
        write_atomic(out_dir / f"{name}.jsonl", lines)
        write_atomic(dead_dir / f"{name}.jsonl", "".join(x + "\n" for x in dead))
        cti = combine_ctis(ctis, n)
        write_atomic(out_dir / f"{name}.cti", "" if cti is None else str(cti))
        crash_point("write", batch_id)
        if stop_after is not None and batch_id + 1 >= stop_after:
            # a crash after the batch's files are written and before Spark commits it: the hardest
            # moment to stop at (the restart must replay this batch and rewrite the same files)
            raise RuntimeError(f"udm-stop-requested after micro-batch {batch_id}")

    return write


class LiveOutput:
    """The user's output and dead-letter files, kept up to date as micro-batches commit.

    The driver calls `deliver` with how many micro-batches Spark has committed (its commit log); every
    committed batch not delivered yet is appended, in batch order: its output elements, then the stream's
    CTI when it advanced, and its dead letters (each batch's in line order). A batch is delivered only
    once Spark committed it, so what a replay may rewrite (a batch written but not committed when the run
    stopped) never reaches the user's files before its final form.

    Exactly once across restarts: after each batch, ``delivered.json`` in the run directory records the
    batch and both files' sizes (written aside, then renamed in). A run resumed from the checkpoint
    truncates the files to the recorded sizes (dropping a batch half appended when the run was killed) and
    goes on with the next batch. When the files are not the recorded ones (another ``--output``, a file
    removed or shortened), they are written again from every committed batch's parts, which the run
    directory keeps: the output file is always the whole stream's output so far (semantics-notes 47).
    ``-`` (standard output) is appended to as batches commit; it cannot be truncated, so a resumed run
    writes its batches after whatever an earlier run printed."""

    def __init__(self, run_dir: Path, output: Any, dead_letter: Any) -> None:
        self.run_dir = run_dir
        self._record = run_dir / "delivered.json"
        self._out = self._open(output, "output")
        self._dead = self._open(dead_letter, "dead")
        old: dict[str, Any] = {}
        if self._record.exists():
            old = json.loads(self._record.read_text(encoding="utf-8"))
        same = (old and old.get("output") == self._out["name"] and old.get("dead") == self._dead["name"]
                and self._fits(self._out, old.get("out_bytes", 0)) and self._fits(self._dead, old.get("dead_bytes", 0)))
        self.next = int(old["batch"]) + 1 if same else 0
        self.out_bytes = int(old.get("out_bytes", 0)) if same else 0
        self.dead_bytes = int(old.get("dead_bytes", 0)) if same else 0
        self.elements = int(old.get("elements", 0)) if same else 0
        self.dead_letters = int(old.get("dead_letters", 0)) if same else 0
        #: input elements of the delivered batches (what the buckets' stats rows counted)
        self.inputs = int(old.get("inputs", 0)) if same else 0
        self.last_cti: int | None = old.get("last_cti") if same else None
        for f, size in ((self._out, self.out_bytes), (self._dead, self.dead_bytes)):
            if f["path"] is not None:
                with f["path"].open("a+b") as h:
                    h.truncate(size)

    @staticmethod
    def _open(target: Any, what: str) -> dict[str, Any]:
        if target is None:
            return {"name": None, "path": None, "stream": None}
        if isinstance(target, (str, Path)) and str(target) != "-":
            p = Path(target)
            p.parent.mkdir(parents=True, exist_ok=True)
            return {"name": str(p.resolve()), "path": p, "stream": None}
        stream = sys.stdout if target == "-" else target
        return {"name": f"<{what} stream>", "path": None, "stream": stream}

    @staticmethod
    def _fits(f: dict[str, Any], size: int) -> bool:
        """Whether ``f`` can be cut back to ``size`` (a file at least that long; a stream, always)."""
        if f["path"] is None:
            return True
        return f["path"].exists() and f["path"].stat().st_size >= size

    @staticmethod
    def _append(f: dict[str, Any], data: bytes) -> int:
        if not data:
            return 0
        if f["path"] is not None:
            with f["path"].open("ab") as h:
                h.write(data)
                h.flush()
                os.fsync(h.fileno())
        elif f["stream"] is not None:
            stream = f["stream"]
            raw = getattr(stream, "buffer", None)
            if raw is not None:
                stream.flush()
                raw.write(data)
                raw.flush()
            else:
                stream.write(data.decode("utf-8"))
                stream.flush()
        return len(data)

    def deliver(self, committed: int) -> None:
        """Append every committed micro-batch not delivered yet (``committed``: how many Spark committed)."""
        out_dir, dead_dir = self.run_dir / "out", self.run_dir / "dead"
        while self.next < committed:
            name = f"{self.next:08d}"
            cti_path = out_dir / f"{name}.cti"
            if not cti_path.exists():  # (written last by the batch writer: the batch's parts are all there)
                return
            data = (out_dir / f"{name}.jsonl").read_bytes()
            n = data.count(b"\n")
            text = cti_path.read_text(encoding="utf-8").strip()
            if text:
                cti = int(text)
                if self.last_cti is None or cti > self.last_cti:
                    self.last_cti = cti
                    data += (json.dumps({"kind": "cti", "t": "inf" if cti >= INF else cti}) + "\n").encode()
                    n += 1
            dead = [json.loads(x) for x in (dead_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines() if x]
            dead.sort(key=lambda d: (d["line"] is None, d["line"] or 0, d.get("input") or ""))
            self.out_bytes += self._append(self._out, data)
            if self._dead["name"] is not None:
                self.dead_bytes += self._append(self._dead, "".join(
                    json.dumps(d) + "\n" for d in dead).encode())
            crash_point("deliver", self.next)
            self.elements += n
            self.dead_letters += len(dead)
            stats = json.loads((out_dir / f"{name}.stats").read_text(encoding="utf-8"))
            self.inputs += int(stats.get("in", 0))
            write_atomic(self._record, json.dumps({
                "batch": self.next, "output": self._out["name"], "dead": self._dead["name"],
                "out_bytes": self.out_bytes, "dead_bytes": self.dead_bytes, "elements": self.elements,
                "dead_letters": self.dead_letters, "inputs": self.inputs, "last_cti": self.last_cti}))
            self.next += 1

    def summary(self, per_input: Counter[str] | None = None
                ) -> tuple[int, int, Counter[str], int | None, dict[str, dict[str, int]]]:
        """(elements out, dead letters, dead letters by category, truncated_at, lmerge counters summed over
        the buckets' last reports) of every delivered batch; ``per_input`` gets the dead letters per input."""
        reasons: Counter[str] = Counter()
        truncated: int | None = None
        latest: dict[str, dict[str, dict[str, int]]] = {}  # bucket -> lmerge step -> counters (cumulative)
        for k in range(self.next):
            name = f"{k:08d}"
            stats = json.loads((self.run_dir / "out" / f"{name}.stats").read_text(encoding="utf-8"))
            reasons.update(stats["reasons"])
            if stats["truncated_at"] is not None:
                truncated = max(truncated or stats["truncated_at"], stats["truncated_at"])
            latest.update(stats.get("lmerge") or {})
            if per_input is not None:
                text = (self.run_dir / "dead" / f"{name}.jsonl").read_text(encoding="utf-8")
                per_input.update(json.loads(x).get("input") or "" for x in text.splitlines() if x)
        merges: dict[str, dict[str, int]] = {}
        for per_step in latest.values():
            for step, counts in per_step.items():
                acc = merges.setdefault(step, {})
                for key, v in counts.items():
                    acc[key] = acc.get(key, 0) + int(v)
        return self.elements, self.dead_letters, reasons, truncated, merges


def committed_batches(run_dir: Path) -> int:
    """Micro-batches Spark has committed (its commit log holds one file per batch id, from 0)."""
    commits = run_dir / "spark" / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def progress_text(progress: dict[str, Any] | None, done: int, batches: int | None) -> str | None:
    """One status line from Spark's progress report of the last micro-batch: its latency and the state
    the query holds (rows and bytes over its stateful operators), or None before the first report.
    ``batches``: how many the run has (a staged file), or None (a watched directory has no end)."""
    if not progress:
        return None
    ms = (progress.get("durationMs") or {}).get("triggerExecution")
    ops = progress.get("stateOperators") or []
    rows = sum(int(op.get("numRowsTotal") or 0) for op in ops)
    size = sum(int(op.get("memoryUsedBytes") or 0) for op in ops)
    count = f"{done}/{batches}" if batches is not None else str(done)
    return f"micro-batch {count}: {ms if ms is not None else '?'} ms, state {rows:,} rows {size / 1e6:.1f} MB"


def shared_run_dir(req: RunRequest) -> None:
    """Refuse a run on a cluster of other machines without ``--checkpoint``: the run directory holds the
    staged micro-batches the executors read and the state they write, so it must be on storage every
    node sees (an NFS mount, ...); a temporary directory is only on this machine."""
    master = resolved_master(req.options.get("master"))
    if req.checkpoint is None and master is not None and not on_this_machine(master):
        raise UdmError(f"--engine spark-streaming on a cluster ({master}) needs --checkpoint DIR on storage every "
                       "node sees: the executors read the staged input and keep their state there")
