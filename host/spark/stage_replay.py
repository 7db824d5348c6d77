"""A staged query graph run micro-batch by micro-batch without Spark: every stage's buckets
(`udm.host.spark.stage_bucket.StageBucket`) over dict stores, wired as `stream_stages.run_staged` wires them.

Why: the per-key and the whole-bucket layouts of a stage must give the same output, CTIs and dead letters
after every micro-batch, and a micro-batch's reads must be countable; a Spark run shows neither cheaply.
The tests and ``bench/bench_stream_graph.py`` use it; the rows follow the ``udm run`` driver
(`udm.host.spark.stream_files`): one copy of each input row per stage reading it, routed by that stage's
key (`graph_routes`), T then the inputs' tails after the heads, the end of input last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.batch import ElementBatch
from udm.host.model.graph import resolve
from udm.host.spark.stage_bucket import DictStageStore, StageBucket
from udm.host.spark.stream_files import graph_routes
from udm.host.spark.stream_stages import stream_stages
from udm.host.spark.stream_wire import ALL_STAGES, BROADCAST, END_KIND, IN_ARROW, T_KIND, WIRE_FIELDS, stage_width
from udm.host.temporal.elements import Insert, Retract
from udm.sdk import INF

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.model.spec import QuerySpec
    from udm.host.temporal.elements import Element

__all__ = ["BatchResult", "StagedReplay"]

_ELEMENT = ("kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw")


@dataclass
class BatchResult:
    """What the last stage reported for one micro-batch."""

    #: output inserts and retractions (ids as written: ``bucket[.serial].id``)
    out: list[Element]
    #: the stream's output CTI so far (min over the last stage's buckets once all reported), or None
    cti: int | None
    #: dead-letter rows: (input, line, reason, category)
    dead: list[tuple[Any, ...]]
    stats: list[dict[str, Any]] = field(default_factory=list)


class StagedReplay:
    """The staged plan of ``spec`` over ``n`` buckets (module doc); ``per_key`` as `StageBucket`'s."""

    def __init__(self, spec: QuerySpec, n: int, *, on_violation: str | None = None, per_key: bool = True,
                 driver_keys: bool = True) -> None:
        """``driver_keys=False``: the input rows name no key (a DataFrame stream's; a keyed stage reads
        each row's key off its payload)."""
        stages = stream_stages(spec, n)
        if stages is None:
            raise ValueError("the query runs as one operator, not in stages")
        self.stages = stages
        self.n = n
        self.names = tuple(resolve(spec).inputs)
        self.policy = on_violation or spec.on_violation or "dead_letter"
        self.logic = [StageBucket(stages, s.index, n, self.names, on_violation or spec.on_violation, per_key=per_key,
                                  driver_keys=driver_keys) for s in stages]
        self.driver_keys = driver_keys
        self.stores = [[DictStageStore() for _ in range(stage_width(s, n))] for s in stages]
        self._sink_ctis: dict[int, int] = {}
        self.reached: int | None = None

    # -- the driver's rows ----------------------------------------------------------------------------------
    def input_rows(self, rows: list[tuple[str, int | None, Element]]) -> tuple[list[dict[str, Any]],
                                                                              list[dict[str, Any]]]:
        """The wire rows of the interleaved inputs ``rows`` ((input, line, element)), split as the driver
        does: the head (each input's rows before its first ``cti(INF)``) in order, and the tail."""
        per: dict[str, list[int]] = {}
        for i, (name, _, _) in enumerate(rows):
            per.setdefault(name, []).append(i)
        route: dict[tuple[int, int], tuple[int, str | None]] = {}  # (row, stage) -> bucket, key there
        base: dict[int, dict[str, Any]] = {}
        tail_from: dict[str, int] = {}
        for name, idx in per.items():
            table = ElementBatch.from_elements([rows[i][2] for i in idx], [rows[i][1] for i in idx]).table
            cols = {c: table.column(c).to_pylist() for c in _ELEMENT}
            for j, i in enumerate(idx):
                base[i] = {c: cols[c][j] for c in _ELEMENT}
                if name not in tail_from and cols["kind"][j] == "cti" and (cols["t"][j] or 0) >= INF:
                    tail_from[name] = i
            for s in self.stages:
                if name in s.inputs:
                    got, keys = graph_routes(table, name, s.routing, stage_width(s, self.n), self.policy)
                    for j, i in enumerate(idx):
                        route[(i, s.index)] = (got[j], keys[j])
        head: list[dict[str, Any]] = []
        tail: list[dict[str, Any]] = []
        for i, (name, _, _) in enumerate(rows):
            for s in self.stages:
                if name in s.inputs:
                    b, key = route[(i, s.index)]
                    r = {**base[i], "stream": "el", "udm_input": name, "udm_stage": s.index, "udm_route": b,
                         "udm_key": key if self.driver_keys else None}
                    (tail if i >= tail_from.get(name, len(rows)) else head).append(r)
        tail.sort(key=lambda r: self.names.index(r["udm_input"]))  # the tails input by input (stable)
        return head, tail

    def control(self, kind: str, t: int | None = None) -> dict[str, Any]:
        """A control row for every stage (T, the end of input)."""
        return {"stream": "el", "kind": kind, "t": t, "udm_stage": ALL_STAGES, "udm_route": BROADCAST}

    # -- one micro-batch ------------------------------------------------------------------------------------
    def batch(self, rows: list[dict[str, Any]]) -> BatchResult:
        """One micro-batch of wire rows through every stage; what the last stage reported."""
        wire = [{**r, "udm_seq": k} for k, r in enumerate(rows)]
        table = pa.Table.from_pylist(wire, schema=pa.schema([f for f in IN_ARROW if f.name != "udm_bucket"]))
        for s, logic, stores in zip(self.stages, self.logic, self.stores, strict=True):
            w = len(stores)
            stream = table.column("stream").to_pylist()
            stage_of = table.column("udm_stage").to_pylist()
            routes = table.column("udm_route").to_pylist()
            targets: list[list[int]] = [[] for _ in range(w)]
            for i in range(table.num_rows):
                if stream[i] == "el" and stage_of[i] in (s.index, ALL_STAGES):
                    rt = routes[i]
                    for b in (range(w) if rt == BROADCAST else [rt % w] if rt >= 0 else [0]):
                        targets[b].append(i)
                else:
                    targets[0].append(i)  # passes through some bucket
            outs = []
            for b, idx in enumerate(targets):
                if not idx:
                    continue
                part = table.take(pa.array(idx, pa.int64()))
                part = part.append_column("udm_bucket", pa.array([b] * len(idx), pa.int64()))
                got = logic.call(b, part, stores[b])
                outs.append(pa.table({name: pa.array(got.cols[name], pa.int64() if typ == "bigint" else pa.string())
                                      for name, typ in WIRE_FIELDS}))
            table = pa.concat_tables(outs) if outs else table.slice(0, 0)
        return self._result(table)

    def _result(self, table: pa.Table) -> BatchResult:
        table = table.filter(pc.not_equal(table.column("stream"), "el"))
        table = table.take(pc.sort_indices(table, [("udm_src", "ascending"), ("udm_seq", "ascending")]))
        out: list[Element] = []
        dead: list[tuple[Any, ...]] = []
        stats: list[dict[str, Any]] = []
        for r in table.to_pylist():
            if r["stream"] == "out":
                if r["kind"] == "insert":
                    out.append(Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])))
                else:
                    out.append(Retract(r["id"], r["le"], r["re"], r["re_new"]))
            elif r["stream"] == "cti":
                self._sink_ctis[r["udm_src"]] = max(self._sink_ctis.get(r["udm_src"], r["t"]), r["t"])
            elif r["stream"] == "dead":
                dead.append((r["payload"], r["line"], r["reason"], r["kind"]))
            elif r["stream"] == "stats":
                st = json.loads(r["payload"])
                stats.append(st)
                if st.get("T") is not None:
                    self.reached = max(self.reached or st["T"], st["T"])
        width = len(self.stores[-1])
        cti = min(self._sink_ctis.values()) if len(self._sink_ctis) == width else None
        return BatchResult(out, cti, dead, stats)

    def run(self, rows: list[tuple[str, int | None, Element]], size: int) -> list[BatchResult]:
        """The whole stream in micro-batches of ``size`` rows: the head, then T and the tail, then the end."""
        head, tail = self.input_rows(rows)
        results = [self.batch(head[i:i + size]) for i in range(0, len(head), size)]
        last = ([self.control(T_KIND, self.reached)] if self.reached is not None else []) + tail
        results.append(self.batch([*last, self.control(END_KIND)]))
        return results
