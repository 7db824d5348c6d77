"""The rows of a Structured Streaming query on their way between its stateful operators (`udm.host.spark.
streaming`, `udm.host.spark.stream_stages`): the control kinds and routes a row can carry, the result and
wire schemas, the bucket a row goes to, and the consumer's merge of an exchange stream.

Both the Spark-side processors and the Spark-free stage logic (`udm.host.spark.stage_bucket`, replayed
without Spark by `udm.host.spark.stage_replay`) read and write these rows, so they live below all of them.
"""

from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.spark.convert import ELEMENT_COLUMNS
from udm.host.spark.partition import BY_ID
from udm.host.spark.stages import Stage
from udm.host.temporal.strict import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ALL_STAGES", "BROADCAST", "END_KIND", "IN_ARROW", "NULL_TICK", "ROUTE_LATER", "SINK_STAGE",
           "STREAM_RESULT_DDL", "TICK_KIND", "T_KIND", "UNROUTABLE", "WIRE_DDL", "WIRE_FIELDS", "WIRE_INTS",
           "WireRows", "id_bucket", "join_value", "key_bucket", "merge_exchange_part", "route_of", "stage_width",
           "unroutable_reason"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: ``_bucket`` of rows every bucket must see (CTIs, the end-of-input marker).
BROADCAST = -1
#: ``_bucket`` of a retraction the stream cannot route (no group-key fields in its payload).
UNROUTABLE = -2
#: ``kind`` of the control row that ends the input (`QueryRunner.finish`); `stream_files` adds it.
END_KIND = "_end"
#: Stands for null in int64 columns between the JVM and pandas (no valid time or line is this small).
NULL_TICK = -(2**63)
#: What `run_stream` returns, one row per output element, dead letter, bucket CTI or bucket stats.
STREAM_RESULT_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, "
                     "payload string, line bigint, reason string, element string, bucket bigint, seq bigint")

#: ``udm_stage`` of control rows (end of input, T) that every stage consumes.
ALL_STAGES = -1
#: ``udm_stage`` of result rows on their way to the sink.
SINK_STAGE = 1 << 30
#: ``udm_route`` of a query-input row the first operator routes (a DataFrame-API row for a later stage).
ROUTE_LATER = -3
#: ``kind`` of the control row carrying T (semantics-notes 2) to every engine.
T_KIND = "_t_end"
#: ``kind`` of the control row carrying the wall clock (``t``, microseconds) of an arrival-time feed to every
#: engine (`udm.host.spark.stream_arrival`): the engine's clock from there on, and a `QueryRunner.tick`
#: (``align``'s ``max_wait`` releases what waited long enough).
TICK_KIND = "_tick"

#: The rows between operators: the result columns of `STREAM_RESULT_DDL` (``udm_src`` is its ``bucket``,
#: ``udm_seq`` its ``seq``) plus what an element on its way needs (``udm_key``: its key in a keyed stage,
#: named by the ``udm run`` driver or the producing stage, semantics-notes 59).
WIRE_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, "
            "line bigint, error string, raw string, reason string, element string, udm_seq bigint, "
            "udm_input string, udm_stage bigint, udm_route bigint, udm_src bigint, udm_key string")
WIRE_FIELDS = [c.split(" ") for c in WIRE_DDL.split(", ")]
#: the wire's int64 columns (null travels as `NULL_TICK` in them)
WIRE_INTS = [name for name, typ in WIRE_FIELDS if typ == "bigint"]
#: What a stage bucket's call receives: the wire columns and the ``udm_bucket`` it was sent to.
IN_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string()) for name, typ in WIRE_FIELDS]
                     + [("udm_bucket", pa.int64())])
_NEG = -(2**63)


def unroutable_reason(keys: list[str]) -> str:
    """The dead-letter reason of a retraction a streaming DataFrame cannot route."""
    return (f"retraction without the group-key fields {keys} in its payload: a streaming DataFrame routes "
            "retractions by them (repeat them, or run the file with udm run --engine spark-streaming)")


def stage_width(stage: Stage, n: int) -> int:
    """How many buckets ``stage`` runs in: ``n``, or one when it has no partitioning."""
    return n if stage.routing is not None else 1


def join_value(v: Any) -> Any:
    """A key value as a join compares it (`udm.host.engine.ops.join_keys.key_part`): numbers by value, inside
    objects and arrays too (``{"x": 1}`` meets ``{"x": 1.0}``), ``true`` apart from ``1``. What a graph's
    rows are bucketed by (`key_bucket`) and keyed by in their bucket (`udm.host.spark.key_state`); values
    the join tells apart that come out alike here only share a bucket or an engine."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return ["n", float(v)]
    if isinstance(v, dict):
        return {k: join_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [join_value(x) for x in v]
    return v


def key_bucket(payload: Any, fields: list[str], n: int) -> int:
    """A keyed row's bucket: its fields' values as `join_value`. The driver (`udm.host.spark.stream_files`)
    and the producing stages use this one hash, so rows that must meet do, whichever side they come from."""
    values = [payload.get(k) if isinstance(payload, dict) else None for k in fields]
    # (a number hashes as its float, as before objects and arrays were compared by value too: checkpointed
    # streams keep their buckets)
    values = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
              else join_value(v) if isinstance(v, (dict, list)) else v for v in values]
    return zlib.crc32(canonical_json(values).encode()) % n


def id_bucket(name: str, id: str, n: int) -> int:
    """A row's bucket in a stage that goes by (input, id)."""
    return zlib.crc32(json.dumps([name, id]).encode()) % n


def route_of(routing: Any, name: str, n: int, kind: str | None, id: str | None, payload: Any) -> int:
    """The bucket of an element of stream ``name`` in a stage with ``routing`` (no state: a retraction
    goes by the key fields it repeats, or is `UNROUTABLE`)."""
    if kind == "cti":
        return BROADCAST
    if routing is None or n == 1 or kind not in ("insert", "retract"):
        return 0
    if routing == BY_ID:
        return id_bucket(name, id, n) if id is not None else 0
    fields = routing[name]
    if kind == "retract" and not (isinstance(payload, dict) and all(f in payload for f in fields)):
        return UNROUTABLE
    return key_bucket(payload, fields, n)


class WireRows:
    """Output wire rows, built column by column (ints as pandas ``Int64``: nothing becomes a float)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name, _ in WIRE_FIELDS}

    def add(self, **values: Any) -> None:
        for c, lst in self.cols.items():
            lst.append(values.get(c))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: (pd.array(self.cols[name], dtype="Int64") if typ == "bigint"
                                    else pd.array(self.cols[name], dtype=object)) for name, typ in WIRE_FIELDS})


def merge_exchange_part(part: pa.Table, latest: dict[int, int], producers: int,
                        keep: tuple[str, ...] = ()) -> pa.Table:
    """One micro-batch of an exchange stream as the consumer feeds it (module doc): ``latest`` (the CTI of
    each producing bucket so far, and ``-1``: the minimum fed so far) is updated in place. Rows are taken
    in each producer's order, interleaved by the CTI that producer had reached (as `merge_exchange`).
    Returns the element columns and ``keep``."""
    src = part.column("udm_src").to_pylist()
    seqs = part.column("udm_seq").to_pylist()
    kinds = part.column("kind").to_pylist()
    ts = part.column("t").to_pylist()
    epoch: dict[int, int] = {}
    keyed = []
    for i in sorted(range(part.num_rows), key=lambda i: (src[i], seqs[i])):
        b = src[i]
        e = max(epoch.get(b, latest.get(b, _NEG)), ts[i] if kinds[i] == "cti" and ts[i] is not None else _NEG)
        epoch[b] = e
        keyed.append((e, b, seqs[i], i))
    keyed.sort()
    low = latest.get(-1, _NEG)
    take: list[int] = []
    new_t: list[int | None] = []
    for _, b, _, i in keyed:
        if kinds[i] != "cti":
            take.append(i)
            new_t.append(ts[i])
            continue
        if ts[i] is not None and ts[i] > latest.get(b, _NEG):
            latest[b] = ts[i]
        now = min(latest.get(p, _NEG) for p in range(producers))
        if now > low:
            low = now
            take.append(i)
            new_t.append(now)
    latest[-1] = low
    merged = part.take(pa.array(take, pa.int64())).select([*ELEMENT_COLUMNS, *keep])
    return merged.set_column(merged.column_names.index("t"), "t", pa.array(new_t, pa.int64()))
