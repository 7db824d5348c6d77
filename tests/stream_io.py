"""Test-side plumbing for `run_stream` tests: a file source that delivers one JSON file per micro-batch,
a sink that collects every micro-batch's result rows, and the output elements those rows describe (decoded
here, independently of `udm.host.spark.stream_sinks`, by the encoding of semantics-notes 46)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from udm.host.temporal.elements import Cti, Insert, Retract

__all__ = ["agrees_with_whole", "collect", "json_files", "named_outputs", "out_elements", "with_keys"]


def with_keys(stream: list[Any]) -> list[Any]:
    """Each retraction repeats its insert's payload (as a DataFrame stream must, to be routed by its keys)."""
    seen: dict[str, Any] = {}
    out: list[Any] = []
    for el in stream:
        if isinstance(el, Insert):
            seen[el.id] = el.payload
        elif isinstance(el, Retract):
            el = Retract(el.id, el.le, el.re, el.re_new, seen.get(el.id))
        out.append(el)
    return out


def json_files(spark: Any, d: Path, files: list[list[dict[str, Any]]], schema: str) -> Any:
    """A file stream that delivers one file per micro-batch, in the given order."""
    d.mkdir(parents=True, exist_ok=True)
    base = time.time() - 1000
    for i, rows in enumerate(files):
        p = d / f"p{i:03d}.json"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(p, (base + i, base + i))
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(d))


def collect(stream_df: Any, ck: Path) -> list[dict[str, Any]]:
    """Every result row of ``stream_df`` run to the end of its source (``availableNow``), with its batch."""
    rows: list[dict[str, Any]] = []

    def keep(df: Any, batch_id: int) -> None:
        rows.extend({**r.asDict(), "batch": batch_id} for r in df.collect())

    q = stream_df.writeStream.foreachBatch(keep).option("checkpointLocation", str(ck)) \
        .trigger(availableNow=True).start()
    q.awaitTermination()
    return rows


def out_elements(rows: list[dict[str, Any]]) -> list[Any]:
    """The output stream: ``out`` rows applied in ``(batch, bucket, seq)`` order."""
    out: list[Any] = []
    for r in sorted((r for r in rows if r["stream"] == "out"), key=lambda r: (r["batch"], r["bucket"], r["seq"])):
        if r["kind"] == "insert":
            out.append(Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])))
        else:
            out.append(Retract(r["id"], r["le"], r["re"], r["re_new"]))
    return out


def named_outputs(res: Any) -> list[Any]:
    """A `KeyedResult`'s output elements with the ids a bucket gives them (``prefix.id``): comparable with
    one whole-bucket engine's, whose ids are the same."""
    out: list[Any] = []
    for prefix, el in res.out:
        if isinstance(el, Insert):
            out.append(Insert(f"{prefix}.{el.id}", el.le, el.re, el.payload))
        elif isinstance(el, Retract):
            out.append(Retract(f"{prefix}.{el.id}", el.le, el.re, el.re_new))
    return out


def agrees_with_whole(k: int, res: Any, got: list[Any], whole: Any, whole_cti: int | None,
                      dead_key: Callable[[Any], Any]) -> tuple[int | None, list[Any]]:
    """After micro-batch ``k``: a `KeyedResult`'s CTI and dead letters are those of one whole-bucket engine
    (``whole``, which gave ``got`` for the same rows; ``whole_cti`` its CTI before them). Returns the
    engine's CTI now and the bucket's output of the micro-batch (`named_outputs`, then its CTI)."""
    for el in got:
        if isinstance(el, Cti):
            whole_cti = el.t if whole_cti is None else max(whole_cti, el.t)
    assert res.cti == whole_cti, f"micro-batch {k}: bucket CTI {res.cti}, one engine {whole_cti}"
    assert sorted(map(dead_key, res.dead)) == sorted(map(dead_key, whole.take_dead_letters())), k
    return whole_cti, named_outputs(res) + ([Cti(res.cti)] if res.cti is not None else [])
