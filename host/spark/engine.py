"""``udm run --engine spark``: the same files and query specs as the local engine, on Spark batch.

The event file is read on the driver by `udm.host.io` (same parser, same bad-row reasons and line
numbers as the local engine), shipped to Spark as Arrow, run by `run_batch`, and the output and dead
letters written back as JSONL. The master comes from ``request.options["master"]`` (``--master``), else
``$UDM_SPARK_MASTER`` / ``$SPARK_REMOTE``, else ``local[*]``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from udm.host.query.runners import ENGINES, RunRequest, RunResult, no_cti_warnings

__all__ = ["run_spark"]


def run_spark(req: RunRequest) -> RunResult:
    from udm.host.errors import UdmError
    from udm.host.io.jsonl import DeadLetterWriter
    from udm.host.io.table_out import open_writer
    from udm.host.io.tables import open_reader
    from udm.host.spark.batch import run_batch
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.session import get_spark

    if req.checkpoint is not None:
        raise UdmError("--checkpoint is only supported by --engine spark-streaming")
    if not req.bound.graph.is_linear:
        return _run_graph(req)
    t0 = time.perf_counter()
    spark = get_spark(req.options.get("master"))
    reader = open_reader(req.input, batch_size=req.batch_size or 65536)
    try:
        batches = list(reader)
    finally:
        reader.close()
    n_in = sum(len(b) for b in batches)
    silent = [] if _sent_cti(batches) else [req.bound.graph.inputs[0]]
    run = run_batch(req.bound, elements_df(spark, batches), on_violation=req.on_violation)
    try:
        out = collect_elements(run.output)
        with open_writer(req.output) as w:
            w.write(out)
        rows = run.dead_letters.orderBy("line").collect()
        dead = [{"line": r["line"], "reason": r["reason"],
                 "element": None if r["element"] is None else json.loads(r["element"])} for r in rows]
        reasons = Counter(r["category"] or "other" for r in rows)
    finally:
        run.unpersist()
    if req.dead_letter is not None:
        with DeadLetterWriter(req.dead_letter) as dlw:
            dlw.write(dead)
    return RunResult(engine="spark", elements_in=n_in, elements_out=len(out), dead_lettered=len(dead),
                     reasons=reasons, seconds=time.perf_counter() - t0,
                     inputs={req.bound.graph.inputs[0]: {"elements_in": n_in, "dead_lettered": len(dead)}},
                     warnings=no_cti_warnings(req.bound.spec, silent, _HELD))


#: what a Spark run's warning about an input without CTIs says the engines kept
_HELD = "each bucket's engine held its live events and windows"


def _sent_cti(batches: list[Any]) -> bool:
    """Whether an input read on the driver holds a CTI (SEMANTICS §7: without one no state is cleaned up)."""
    from udm.host.io.batch import KIND_CTI

    return any(bool((b.kind_codes() == KIND_CTI).any()) for b in batches)


def _run_graph(req: RunRequest) -> RunResult:
    """A query graph (`udm.host.spark.graph`): every ``--input NAME=PATH`` read on the driver, one
    DataFrame each, run together; dead letters of a multi-input query name their input."""
    from udm.host.io.jsonl import DeadLetterWriter
    from udm.host.io.table_out import open_writer
    from udm.host.io.tables import open_reader
    from udm.host.spark.convert import collect_elements, elements_df
    from udm.host.spark.graph import lmerge_counts, run_graph_batch
    from udm.host.spark.session import get_spark

    sources = req.inputs
    t0 = time.perf_counter()
    spark = get_spark(req.options.get("master"))
    frames = {}
    counts: dict[str, dict[str, int]] = {}
    silent: list[str] = []
    for name, src in sources.items():
        reader = open_reader(src, batch_size=req.batch_size or 65536)
        try:
            batches = list(reader)
        finally:
            reader.close()
        counts[name] = {"elements_in": sum(len(b) for b in batches), "dead_lettered": 0}
        if not _sent_cti(batches):
            silent.append(name)
        frames[name] = elements_df(spark, batches)
    run = run_graph_batch(req.bound, frames, on_violation=req.on_violation,
                          buckets=req.options.get("buckets"))
    multi = len(sources) > 1
    try:
        out = collect_elements(run.output)
        with open_writer(req.output) as w:
            w.write(out)
        rows = run.dead_letters.orderBy("line", "input").collect()
        dead = []
        for r in rows:
            rec = {"line": r["line"], "reason": r["reason"],
                   "element": None if r["element"] is None else json.loads(r["element"])}
            if multi and r["input"] is not None:
                rec["input"] = r["input"]
            dead.append(rec)
            if r["input"] in counts:
                counts[r["input"]]["dead_lettered"] += 1
            elif not multi:
                counts[next(iter(counts))]["dead_lettered"] += 1
        reasons = Counter(r["category"] or "other" for r in rows)
        merges = lmerge_counts(run)
    finally:
        run.unpersist()
    if req.dead_letter is not None:
        with DeadLetterWriter(req.dead_letter) as dlw:
            dlw.write(dead)
    return RunResult(engine="spark", elements_in=sum(c["elements_in"] for c in counts.values()),
                     elements_out=len(out), dead_lettered=len(dead), reasons=reasons,
                     seconds=time.perf_counter() - t0, inputs=counts, lmerge=merges,
                     warnings=no_cti_warnings(req.bound.spec, silent, _HELD))


ENGINES["spark"] = run_spark
