"""What a streaming run writes per micro-batch, and the output file assembled from it.

``foreachBatch`` hands `batch_writer`'s function each micro-batch's result rows (`run_stream`'s
`STREAM_RESULT_DDL`); it writes them under the run directory by batch id, each file replaced atomically::

    out/NNNNNNNN.jsonl   output elements        out/NNNNNNNN.cti    the stream's output CTI after the batch
    out/NNNNNNNN.stats   dead-letter counters, T, truncation, lmerge counters
    dead/NNNNNNNN.jsonl  dead letters

A micro-batch Spark replays (same id, same input, same state) rewrites the same files, so the run directory
holds each batch once. `assemble_output` builds the output and dead-letter files from the parts, in batch
order. `progress_text` is the status line both show under the progress bar. Used by the file runner
(`udm.host.spark.stream_files`) and the directory watch
(`udm.host.spark.stream_dir`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from udm.host.spark.streaming import combine_ctis
from udm.sdk import INF

__all__ = ["assemble_output", "batch_writer", "progress_text", "resumed_meta", "write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def resumed_meta(run_dir: Path, meta: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
    """What ``run_dir/run.json`` recorded when the run began, once every entry of ``meta`` matches it (one
    that does not is refused, named by ``names`` or its key); None for a new run, whose directory must be
    empty or absent: a checkpoint belongs to one run (query, input, layout, ...)."""
    from udm.host.errors import UdmError

    path = run_dir / "run.json"
    if path.exists():
        old: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        for key, value in meta.items():
            if old.get(key) != value:
                what = names.get(key, key.replace("_", " "))
                raise UdmError(f"checkpoint {run_dir} belongs to a run with a different {what}; use a new "
                               "--checkpoint directory (or delete this one) to start over")
        return old
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UdmError(f"--checkpoint {run_dir} is not empty and holds no udm streaming run")
    return None


def batch_writer(run_dir: Path, n: int, stop_after: int | None) -> Any:
    # (``n``: how many buckets report the output CTI: the last stage's when the plan has stages)
    """The ``foreachBatch`` function: one micro-batch's result rows to its files (see the module doc)."""
    from udm.host.temporal.elements import Insert, Retract, element_to_json

    out_dir, dead_dir = run_dir / "out", run_dir / "dead"
    out_dir.mkdir(exist_ok=True)
    dead_dir.mkdir(exist_ok=True)

    def write(df: Any, batch_id: int) -> None:
        rows = df.toArrow().to_pylist()
        rows.sort(key=lambda r: (r["bucket"], r["seq"]))
        lines: list[str] = []
        dead: list[str] = []
        ctis: dict[int, int] = {}
        reasons: Counter[str] = Counter()
        truncated: list[int] = []
        reached: list[int] = []
        merges: dict[str, Any] = {}  # bucket -> its lmerge counters so far
        for r in rows:
            if r["stream"] == "out":
                if r["kind"] == "insert":
                    el: Any = Insert(r["id"], r["le"], r["re"], json.loads(r["payload"]))
                else:
                    el = Retract(r["id"], r["le"], r["re"], r["re_new"])
                lines.append(json.dumps(element_to_json(el), separators=(",", ":")))
            elif r["stream"] == "dead":
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
                if stats.get("lmerge"):  # (a stage's buckets apart from another's)
                    where = str(r["bucket"]) if "stage" not in stats else f"{stats['stage']}.{r['bucket']}"
                    merges[where] = stats["lmerge"]
        name = f"{batch_id:08d}"
        write_atomic(out_dir / f"{name}.stats", json.dumps(
            {"reasons": dict(reasons), "truncated_at": max(truncated) if truncated else None,
             "T": max(reached) if reached else None, "lmerge": merges}))
        write_atomic(out_dir / f"{name}.jsonl", "".join(x + "\n" for x in lines))
        write_atomic(dead_dir / f"{name}.jsonl", "".join(x + "\n" for x in dead))
        cti = combine_ctis(ctis, n)
        write_atomic(out_dir / f"{name}.cti", "" if cti is None else str(cti))
        if stop_after is not None and batch_id + 1 >= stop_after:
            # a crash after the batch's files are written and before Spark commits it: the hardest
            # moment to stop at (the restart must replay this batch and rewrite the same files)
            raise RuntimeError(f"udm-stop-requested after micro-batch {batch_id}")

    return write


def assemble_output(run_dir: Path, output: Any, dead_letter: Any, per_input: Counter[str] | None = None
              ) -> tuple[int, int, Counter[str], int | None, dict[str, dict[str, int]]]:
    """The final output file from the parts, in batch order; CTIs that do not advance are dropped.
    Returns (elements out, dead letters, dead letters by category, truncated_at, lmerge counters summed
    over the buckets' last reports)."""
    from udm.host.io.jsonl import DeadLetterWriter

    n_out = 0
    last: int | None = None
    if isinstance(output, (str, Path)) and str(output) != "-":
        target: Any = Path(output).open("w", encoding="utf-8")  # noqa: SIM115 - closed by the with below
    else:
        target = contextlib.nullcontext(sys.stdout if output == "-" else output)
    with target as f:
        for part in sorted((run_dir / "out").glob("*.jsonl")):
            text = part.read_text(encoding="utf-8")
            f.write(text)
            n_out += text.count("\n")
            cti_text = part.with_suffix(".cti").read_text(encoding="utf-8").strip()
            if cti_text:
                cti = int(cti_text)
                if last is None or cti > last:
                    last = cti
                    f.write(json.dumps({"kind": "cti", "t": "inf" if cti >= INF else cti}) + "\n")
                    n_out += 1
    dead = [json.loads(line) for part in sorted((run_dir / "dead").glob("*.jsonl"))
            for line in part.read_text(encoding="utf-8").splitlines() if line]
    dead.sort(key=lambda d: (d["line"] is None, d["line"] or 0, d.get("input") or ""))
    if per_input is not None:
        per_input.update(d.get("input") or "" for d in dead)
    if dead_letter is not None:
        with DeadLetterWriter(dead_letter) as dlw:
            dlw.write(dead)
    reasons: Counter[str] = Counter()
    truncated: int | None = None
    latest: dict[str, dict[str, dict[str, int]]] = {}  # bucket -> lmerge step -> counters (cumulative)
    for part in sorted((run_dir / "out").glob("*.stats")):
        stats = json.loads(part.read_text(encoding="utf-8"))
        reasons.update(stats["reasons"])
        if stats["truncated_at"] is not None:
            truncated = max(truncated or stats["truncated_at"], stats["truncated_at"])
        latest.update(stats.get("lmerge") or {})
    merges: dict[str, dict[str, int]] = {}
    for per_step in latest.values():
        for step, counts in per_step.items():
            acc = merges.setdefault(step, {})
            for k, v in counts.items():
                acc[k] = acc.get(k, 0) + int(v)
    return n_out, len(dead), reasons, truncated, merges




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
