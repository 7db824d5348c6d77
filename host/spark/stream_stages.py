"""A query graph cut into stages (`udm.host.spark.stages`) on Structured Streaming: one chained
``transformWithStateInPandas`` operator per stage, all in one streaming query.

Why: a graph with no single valid partitioning (joined by one key, then counted per another) would
otherwise run in one bucket. Cut into stages, each stage runs in its own key buckets, as on Spark batch.

Every operator reads and writes the same *wire* rows (`WIRE_DDL`): an element on its way (``stream``
``el``) or a result on its way to the sink (``out``, ``cti``, ``dead``, ``stats``, the `STREAM_RESULT_DDL`
streams). An element row says which stage consumes it (``udm_stage``; `ALL_STAGES` for the control rows
every stage needs) and its bucket there (``udm_route``: a bucket, `BROADCAST`, `UNROUTABLE`, or
`ROUTE_LATER`). Before operator *k*, rows for stage *k* are grouped by their bucket (a `BROADCAST` row is
copied to each of the stage's buckets); every other row passes through some bucket of operator *k*
unchanged, keeping its ``udm_seq``.

Exchange (a stage's sink read by a later stage), computed in Python on the executor by the producing
bucket: an insert goes to the hash of the consumer's routing fields (`key_bucket`, the same hash the
driver uses for query inputs, so a join's two sides meet), a retraction to the bucket its insert went
to (kept per id in the producer's state until the producer's CTI passes the element's end), a CTI to
every consumer bucket. A consumer bucket keeps, per exchange stream, the latest CTI of every producer
bucket in its state and feeds the minimum over them when it rises (what `merge_exchange` does on batch).

T (the largest finite time of the real inputs, semantics-notes 2): ``udm run`` sends a `T_KIND` control
row to every bucket of every stage before the inputs' tails; each engine takes it as its ``ctx.reached``
(not as a CTI: an ``alter_lifetime`` shift would carry that CTI past T), so a later stage truncates at the
inputs' T, not at what its own input reached. A DataFrame-API stream has no end, hence no T row.

Exactly once: every operator's state (engine snapshot, exchange routes and merge state) is in the state
store and checkpointed with the query, so a restarted query replays an uncommitted micro-batch from the
same state through every stage.
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from udm.host.query.spec import QuerySpec
from udm.host.spark.partition import BY_ID
from udm.host.spark.stages import Stage, checked_before, plan_stages, read_before
from udm.host.spark.stream_buckets import bucket_salts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = ["ALL_STAGES", "ROUTE_LATER", "SINK_STAGE", "T_KIND", "WIRE_DDL", "id_bucket", "key_bucket",
           "run_staged", "stage_width", "stream_stages"]

#: ``udm_stage`` of control rows (end of input, T) that every stage consumes.
ALL_STAGES = -1
#: ``udm_stage`` of result rows on their way to the sink.
SINK_STAGE = 1 << 30
#: ``udm_route`` of a query-input row the first operator routes (a DataFrame-API row for a later stage).
ROUTE_LATER = -3
#: ``kind`` of the control row carrying T (semantics-notes 2) to every engine.
T_KIND = "_t_end"

#: The rows between operators: the result columns of `STREAM_RESULT_DDL` (``udm_src`` is its ``bucket``,
#: ``udm_seq`` its ``seq``) plus what an element on its way needs.
WIRE_DDL = ("stream string, kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, "
            "line bigint, error string, raw string, reason string, element string, udm_seq bigint, "
            "udm_input string, udm_stage bigint, udm_route bigint, udm_src bigint")
_WIRE_FIELDS = [c.split(" ") for c in WIRE_DDL.split(", ")]
_INTS = [name for name, typ in _WIRE_FIELDS if typ == "bigint"]
_IN_ARROW = pa.schema([(name, pa.int64() if typ == "bigint" else pa.string()) for name, typ in _WIRE_FIELDS]
                      + [("udm_bucket", pa.int64())])
_NEG = -(2**63)


def stream_stages(spec: QuerySpec, n: int) -> list[Stage] | None:
    """The stages of a graph on streaming, or None when it runs as one operator (one partitioning valid
    for the whole graph, one bucket asked for, or a plan that is one stage anyway)."""
    if n <= 1:
        return None
    stages = plan_stages(spec, split=True)
    return stages if len(stages) > 1 else None


def stage_width(stage: Stage, n: int) -> int:
    """How many buckets ``stage`` runs in: ``n``, or one when it has no partitioning."""
    return n if stage.routing is not None else 1


def key_bucket(payload: Any, fields: list[str], n: int) -> int:
    """A keyed row's bucket: its fields' JSON values, numbers by value (a join matches 1 and 1.0). The
    driver (`udm.host.spark.stream_files`) and the producing stages use this one hash, so rows that must
    meet do, whichever side they come from."""
    values = [payload.get(k) if isinstance(payload, dict) else None for k in fields]
    values = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values]
    return zlib.crc32(json.dumps(values, sort_keys=True, separators=(",", ":")).encode()) % n


def id_bucket(name: str, id: str, n: int) -> int:
    """A row's bucket in a stage that goes by (input, id)."""
    return zlib.crc32(json.dumps([name, id]).encode()) % n


def _route_of(routing: Any, name: str, n: int, kind: str | None, id: str | None, payload: Any) -> int:
    """The bucket of an element of stream ``name`` in a stage with ``routing`` (no state: a retraction
    goes by the key fields it repeats, or is `UNROUTABLE`)."""
    from udm.host.spark.streaming import BROADCAST, UNROUTABLE

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


def _processor_class() -> type:
    """The per-stage `StatefulProcessor`, built on first use (importing this module imports no pyspark)."""
    from pyspark.sql.streaming import StatefulProcessor

    class _StageProcessor(StatefulProcessor):
        """One bucket of one stage: its engine, the routes of its exchange output, its exchange merge."""

        def __init__(self, stages: list[Stage], index: int, n: int, query_inputs: tuple[str, ...],
                     on_violation: str | None) -> None:
            stage = stages[index]
            self._stage = stage
            self._index = index
            self._last = index == len(stages) - 1
            self._spec_json = stage.spec.to_json_dict()
            self._on_violation = on_violation
            self._query_inputs = query_inputs
            self._inputs = stage.inputs
            self._exchanges = stage.exchanges(query_inputs)
            self._sink = stage.sink
            self._multi = len(query_inputs) > 1
            self._origins = {name: (next(iter(o)) if len(o) == 1 else None) for name, o in stage.origins.items()}
            producer = {s.sink: s for s in stages}
            #: per exchange read: how many buckets produce it
            self._producers = {x: stage_width(producer[x], n) for x in self._exchanges}
            #: the stages reading this stage's sink: (index, routing, width)
            self._consumers = [(s.index, s.routing, stage_width(s, n)) for s in stages
                               if s.index > index and self._sink in s.inputs]
            #: for the first operator: how to route a `ROUTE_LATER` row per (input, stage)
            self._later = {(x, s.index): (s.routing, stage_width(s, n)) for s in stages for x in s.inputs
                           if x in query_inputs}
            #: query inputs an earlier stage checks first: their input-level dead letters are its
            self._read_before = read_before(stages, stage, query_inputs)
            self._bound: Any = None

        def init(self, handle: Any) -> None:
            self._engine = handle.getValueState("engine", "snapshot binary, cti bigint")
            self._aux = handle.getValueState("exchange", "blob binary")

        def _runner(self) -> tuple[Any, int | None]:
            from udm.host.engine import QueryRunner
            from udm.host.query.plan import bind
            from udm.host.query.spec import parse_query

            if self._bound is None:
                self._bound = bind(parse_query(self._spec_json))
            if self._engine.exists():
                snap, cti = self._engine.get()
                return QueryRunner.restore(bytes(snap), self._bound), (None if cti is None else int(cti))
            return QueryRunner(self._bound, on_violation=self._on_violation, derived_inputs=self._exchanges), None

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                            ) -> Iterator[pd.DataFrame]:
            import pandas as pd
            import pyarrow.compute as pc

            frames = list(rows)
            pdf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            table = pa.Table.from_pandas(pdf, schema=_IN_ARROW, preserve_index=False)
            from udm.host.spark.streaming import NULL_TICK

            for c in _INTS:  # NULL_TICK back to null
                col = table.column(c)
                table = table.set_column(table.column_names.index(c), c,
                                         pc.if_else(pc.equal(col, NULL_TICK), None, col))
            bucket = int(key[0])
            out = _Rows()
            mine = pc.fill_null(pc.and_(pc.equal(table.column("stream"), "el"),
                                        pc.is_in(table.column("udm_stage"),
                                                 pa.array([self._index, ALL_STAGES], pa.int64()))), False)
            for r in table.filter(pc.invert(mine)).drop_columns(["udm_bucket"]).to_pylist():
                if self._index == 0 and r["udm_route"] == ROUTE_LATER:
                    routing, width = self._later[(r["udm_input"], r["udm_stage"])]
                    text = r["payload"]
                    try:
                        payload = json.loads(text) if text else None
                    except ValueError:
                        payload = None
                    r["udm_route"] = _route_of(routing, r["udm_input"], width, r["kind"], r["id"], payload)
                out.add(**r)
            consumed = table.filter(mine).sort_by("udm_seq")
            if consumed.num_rows:
                self._consume(bucket, consumed, out)
            yield out.frame()

        def _consume(self, bucket: int, table: pa.Table, out: _Rows) -> None:
            import pyarrow.compute as pc

            from udm.host.engine.common import DeadLetter
            from udm.host.io.batch import ElementBatch
            from udm.host.spark.convert import ELEMENT_COLUMNS
            from udm.host.spark.rows import dead_rows, output_rows, with_struct_payloads
            from udm.host.spark.streaming import END_KIND, UNROUTABLE
            from udm.host.temporal.elements import Cti

            runner, cti = self._runner()
            aux = pickle.loads(bytes(self._aux.get()[0])) if self._aux.exists() else {"routes": {}, "merge": {}}
            before = dict(runner.stats.reasons)
            kinds = table.column("kind").to_pylist()
            stage_of = table.column("udm_stage").to_pylist()
            control = [k in (END_KIND, T_KIND) for k in kinds]
            if not self._last and bucket == 0:  # control rows go on to the later stages, once
                for r, c in zip(table.drop_columns(["udm_bucket"]).to_pylist(), control, strict=True):
                    if c and r["udm_stage"] == ALL_STAGES:
                        out.add(**r)
            for k, t in zip(kinds, table.column("t").to_pylist(), strict=True):
                if k == T_KIND and t is not None:  # T before the tails' cti(INF) (module doc)
                    runner.ctx.reached = max(runner.ctx.reached, int(t))
            names = table.column("udm_input").to_pylist()
            routes = table.column("udm_route").to_pylist()
            produced: list[Any] = []
            extra_dead: list[Any] = []
            own = [i for i, (x, c, s) in enumerate(zip(names, control, stage_of, strict=True))
                   if not c and x in self._query_inputs and s == self._index]
            lo = 0
            while lo < len(own):  # the query inputs, in order, in runs of one input each
                hi = lo
                while hi < len(own) and names[own[hi]] == names[own[lo]] and routes[own[hi]] != UNROUTABLE:
                    hi += 1
                if hi > lo:
                    part = table.take(pa.array(own[lo:hi])).select(list(ELEMENT_COLUMNS))
                    produced += runner.process_batch(ElementBatch.from_table(with_struct_payloads(part)),
                                                     names[own[lo]])
                    lo = hi
                    continue
                i = own[lo]
                row = {c: table.column(c)[i].as_py() for c in ("kind", "id", "le", "re", "re_new")}
                from udm.host.spark.streaming import _unroutable_reason

                routing = self._later.get((names[i], self._index), (None, 0))[0]
                fields = routing.get(names[i], []) if isinstance(routing, dict) else []
                extra_dead.append(DeadLetter(table.column("line")[i].as_py(), _unroutable_reason(fields), row,
                                             input=names[i] if self._multi else None))
                lo += 1
            for x in self._exchanges:
                part = table.filter(pc.fill_null(pc.equal(table.column("udm_input"), x), False))
                if part.num_rows:
                    # T so far: what the producers' real inputs reached (on their CTI rows, as ``le``)
                    reach = pc.max(part.filter(pc.fill_null(pc.equal(part.column("kind"), "cti"), False))
                                   .column("le")).as_py()
                    if reach is not None:
                        runner.ctx.reached = max(runner.ctx.reached, int(reach))
                    merged = _merge(part, aux["merge"].setdefault(x, {}), self._producers[x])
                    if merged.num_rows:
                        produced += runner.process_batch(ElementBatch.from_table(with_struct_payloads(merged)), x)
            if any(k == END_KIND for k in kinds):
                produced += runner.finish()
            for el in produced:
                if isinstance(el, Cti):
                    cti = el.t if cti is None else max(cti, el.t)
            seq = 0
            if self._last:
                for r in output_rows(bucket, produced):
                    out.add(stream="out", udm_src=bucket, udm_seq=seq, **r)
                    seq += 1
            else:
                seq = self._exchange(bucket, produced, aux["routes"], cti, runner.ctx.reached, out)
            dead = runner.take_dead_letters()
            if self._read_before:
                copies = [dl for dl in dead if checked_before(dl, self._stage, self._read_before)]
                for dl in copies:  # reported by the earlier stage (and counted there)
                    runner.stats.reasons[dl.category] -= 1
                dead = [dl for dl in dead if not checked_before(dl, self._stage, self._read_before)]
            for dl in dead + extra_dead:
                name = dl.input if dl.input is not None else (self._inputs[0] if len(self._inputs) == 1 else None)
                for r in dead_rows([dl]):
                    out.add(stream="dead", udm_src=bucket, udm_seq=seq, udm_stage=SINK_STAGE,
                            payload=self._origins.get(name) if self._multi and name is not None else None,
                            line=r["line"], reason=r["reason"], element=r["element"], kind=r["category"])
                    seq += 1
            if self._last and cti is not None:
                out.add(stream="cti", kind="cti", t=cti, udm_src=bucket, udm_seq=seq, udm_stage=SINK_STAGE)
            reasons = {k: v - before.get(k, 0) for k, v in runner.stats.reasons.items() if v != before.get(k, 0)}
            if extra_dead:
                reasons["unroutable"] = len(extra_dead)
            stats: dict[str, Any] = {"stage": self._index}
            if reasons:
                stats["reasons"] = reasons
            if runner.stats.truncated_at is not None:
                stats["truncated_at"] = runner.stats.truncated_at
            if runner.ctx.reached > _NEG:
                stats["T"] = runner.ctx.reached
            merges = runner.chattiness()
            if merges:
                stats["lmerge"] = merges
            out.add(stream="stats", payload=json.dumps(stats), udm_src=bucket, udm_seq=seq + 1,
                    udm_stage=SINK_STAGE)
            self._engine.update((runner.snapshot(), cti))
            self._aux.update((pickle.dumps(aux, protocol=pickle.HIGHEST_PROTOCOL),))

        def _exchange(self, bucket: int, produced: list[Any], routes: dict[str, Any], cti: int | None,
                      reached: int, out: _Rows) -> int:
            """This stage's output on its way to each stage reading it (module doc); returns the next seq.
            A CTI row carries, as ``le``, T so far (``reached``): a later stage holds back what lies past
            its T (semantics-notes 2) and must learn T from its producers."""
            from udm.host.spark.streaming import BROADCAST
            from udm.host.temporal.elements import Cti, Insert

            seq = 0
            for el in produced:
                if isinstance(el, Cti):
                    for c, _, _ in self._consumers:
                        out.add(stream="el", kind="cti", t=el.t, le=reached if reached > _NEG else None,
                                udm_input=self._sink, udm_stage=c,
                                udm_route=BROADCAST, udm_src=bucket, udm_seq=seq)
                    seq += 1
                    continue
                rid = f"{bucket}.{el.id}"
                if isinstance(el, Insert):
                    dest = [_route_of(r, self._sink, w, "insert", rid, el.payload) for _, r, w in self._consumers]
                    routes[el.id] = [dest, el.re]
                    for (c, _, _), b in zip(self._consumers, dest, strict=True):
                        out.add(stream="el", kind="insert", id=rid, le=el.le, re=el.re,
                                payload=json.dumps(el.payload, separators=(",", ":")), udm_input=self._sink,
                                udm_stage=c, udm_route=b, udm_src=bucket, udm_seq=seq)
                else:
                    rec = routes.get(el.id)
                    dest = rec[0] if rec is not None else [0] * len(self._consumers)
                    if rec is not None:
                        if el.re_new <= el.le:
                            del routes[el.id]
                        else:
                            rec[1] = el.re_new
                    for (c, _, _), b in zip(self._consumers, dest, strict=True):
                        out.add(stream="el", kind="retract", id=rid, le=el.le, re=el.re, re_new=el.re_new,
                                udm_input=self._sink, udm_stage=c, udm_route=b, udm_src=bucket, udm_seq=seq)
                seq += 1
            if cti is not None:  # no retraction of an element that ended before the CTI can come
                for id in [i for i, (_, re) in routes.items() if re < cti]:
                    del routes[id]
            return seq

        def close(self) -> None:
            pass

    return _StageProcessor


class _Rows:
    """Output wire rows, built column by column (ints as pandas ``Int64``: nothing becomes a float)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name, _ in _WIRE_FIELDS}

    def add(self, **values: Any) -> None:
        for c, lst in self.cols.items():
            lst.append(values.get(c))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: (pd.array(self.cols[name], dtype="Int64") if typ == "bigint"
                                    else pd.array(self.cols[name], dtype=object)) for name, typ in _WIRE_FIELDS})


def _merge(part: pa.Table, latest: dict[int, int], producers: int) -> pa.Table:
    """One micro-batch of an exchange stream as the consumer feeds it (module doc): ``latest`` (the CTI of
    each producing bucket so far, and ``-1``: the minimum fed so far) is updated in place. Rows are taken
    in each producer's order, interleaved by the CTI that producer had reached (as `merge_exchange`)."""
    from udm.host.spark.convert import ELEMENT_COLUMNS

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
    merged = part.take(pa.array(take, pa.int64())).select(list(ELEMENT_COLUMNS))
    return merged.set_column(merged.column_names.index("t"), "t", pa.array(new_t, pa.int64()))


def run_staged(df: DataFrame, stages: list[Stage], n: int, query_inputs: tuple[str, ...],
               on_violation: str | None) -> DataFrame:
    """The staged plan over ``df`` (normalized element rows with ``input``, ``_seq`` and, from ``udm run``,
    ``_bucket`` and ``_stage`` already set); returns `STREAM_RESULT_DDL` rows."""
    from pyspark.sql import functions as F

    from udm.host.spark.convert import ELEMENT_COLUMNS
    from udm.host.spark.streaming import BROADCAST, END_KIND, NULL_TICK, STREAM_RESULT_DDL

    if "_stage" not in df.columns:  # a DataFrame-API stream: each row to every stage reading its input
        readers: dict[str, list[int]] = {}
        for s in stages:
            for x in s.inputs:
                if x in query_inputs:
                    readers.setdefault(x, []).append(s.index)
        which: Any = None
        for x, idx in readers.items():
            arr = F.array(*[F.lit(i) for i in idx])
            which = F.when(F.col("input") == x, arr) if which is None else which.when(F.col("input") == x, arr)
        kind = F.col("kind")
        df = df.withColumn("_stage", F.when(kind == END_KIND, F.array(F.lit(ALL_STAGES))).otherwise(
            F.coalesce(which, F.array(F.lit(0))))).withColumn("_stage", F.explode("_stage"))
        if "_bucket" not in df.columns:
            from udm.host.spark.streaming import _route_graph

            first = stages[0]
            df = _route_graph(df, first.routing, stage_width(first, n))
            df = df.withColumn("_bucket", F.when((F.col("_stage") > 0) & ~kind.isin("cti", END_KIND),
                                                 F.lit(ROUTE_LATER)).otherwise(F.col("_bucket")))
    df = df.select(F.lit("el").alias("stream"), *[F.col(c) for c in ELEMENT_COLUMNS],
                   *[F.lit(None).cast("string").alias(c) for c in ("reason", "element")],
                   F.col("_seq").cast("bigint").alias("udm_seq"), F.col("input").alias("udm_input"),
                   F.col("_stage").cast("bigint").alias("udm_stage"),
                   F.col("_bucket").cast("bigint").alias("udm_route"), F.lit(None).cast("bigint").alias("udm_src"))
    for stage in stages:
        w = stage_width(stage, n)
        route = F.col("udm_route")
        mine = (F.col("stream") == "el") & F.col("udm_stage").isin(stage.index, ALL_STAGES)
        targets = (F.when(mine & (route == BROADCAST), F.sequence(F.lit(0), F.lit(w - 1)))
                   .when(mine & (route >= 0), F.array(F.pmod(route, F.lit(w))))
                   .when(mine, F.array(F.lit(0)))  # UNROUTABLE: dead-lettered by bucket 0
                   .otherwise(F.array(F.pmod(F.xxhash64("udm_input", "udm_seq", "udm_src"), F.lit(w)))))
        df = df.select(*[F.coalesce(F.col(c), F.lit(NULL_TICK)).alias(c) if c in _INTS else F.col(c)
                         for c, _ in _WIRE_FIELDS], F.explode(targets).alias("udm_bucket"))
        # one shuffle partition per stage bucket (`udm.host.spark.stream_buckets`, semantics-notes 50)
        salts = F.array(*[F.lit(s).cast("bigint") for s in bucket_salts(w)])
        df = df.withColumn("udm_salt", F.element_at(salts, F.col("udm_bucket").cast("int") + 1))
        processor = _processor_class()(stages, stage.index, n, query_inputs, on_violation)
        df = df.groupBy("udm_bucket", "udm_salt").transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=WIRE_DDL, outputMode="Append", timeMode="None")
    cols = [c.split(" ")[0] for c in STREAM_RESULT_DDL.split(", ")]
    return df.where(F.col("stream") != "el").select(
        *[F.col("udm_src").alias("bucket") if c == "bucket" else F.col("udm_seq").alias("seq") if c == "seq"
          else F.col(c) for c in cols])
