"""Query graphs whose partitioning key changes along the way, on Structured Streaming: one stateful
operator per stage in one streaming query (`udm.host.spark.stream_stages`), elements exchanged between
stages by the next stage's key, CTIs to every bucket and merged as the minimum over the producers.

References: the conformance kit's brute-force graph oracle for the output CHT, the local engine for dead
letters and per-input counts, and an uninterrupted run for the restart (byte for byte)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from stage_queries import (
    JOIN_THEN_WINDOW,
    QUERIES,
    TWO,
)

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.spark.stages import plan_stages
from udm.host.temporal.elements import Cti, Insert, parse_element
from udm.host.testing import assert_equivalent, oracle
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream

pytestmark = pytest.mark.spark



def _inputs(seed: int) -> dict[str, list[Any]]:
    from udm.host.testing.generator import generate_related

    return generate_related(2, seed=seed, keys=3, events=24, bad=0.05, duration="mixed", speculation=0.3,
                            disorder="slightly", cti="regular")


def _files(d: Path, streams: dict[str, list[Any]]) -> dict[str, Path]:
    paths = {}
    for name, els in streams.items():
        paths[name] = d / f"{name}.jsonl"
        write_stream(paths[name], els)
    return paths


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _run(engine: str, query: dict[str, Any], files: dict[str, Path], out: Path, **kw: Any) -> Any:
    req = RunRequest(bind(parse_query(query)), files, out, out.with_suffix(".dl.jsonl"),
                     batch_size=kw.pop("batch_size", None), checkpoint=kw.pop("checkpoint", None),
                     options={"buckets": 2, **kw})
    return (run_local if engine == "local" else get_engine(engine))(req)


@pytest.mark.parametrize("name", list(QUERIES))
def test_staged_stream_equals_the_oracle_and_the_local_engine(spark: Any, tmp_path: Path, name: str) -> None:
    """Each graph that needs stages runs staged on spark-streaming (micro-batches of 16 elements, so the
    exchanges and their CTIs span several micro-batches): output CHT = the oracle's and the local
    engine's, dead letters (with their input) and per-input counts = the local engine's."""
    spec = parse_query(QUERIES[name])
    assert len(plan_stages(spec)) > 1
    streams = _inputs(100)
    files = _files(tmp_path, streams)
    local = _run("local", QUERIES[name], files, tmp_path / "local.jsonl")
    res = _run("spark-streaming", QUERIES[name], files, tmp_path / "s.jsonl", batch_size=16)
    out = _read(tmp_path / "s.jsonl")
    assert_equivalent(out, oracle(spec, streams))
    assert cht(out) == cht(_read(tmp_path / "local.jsonl"))
    assert sorted((tmp_path / "s.dl.jsonl").read_text().splitlines()) == \
        sorted((tmp_path / "local.dl.jsonl").read_text().splitlines())
    assert (res.inputs, res.dead_lettered, res.reasons) == (local.inputs, local.dead_lettered, local.reasons)
    ctis = [e.t for e in out if isinstance(e, Cti)]
    assert len(ctis) >= 2 and ctis == sorted(set(ctis))  # the merged CTI advanced before the end


def test_staged_stream_truncates_at_the_inputs_T(spark: Any, tmp_path: Path) -> None:
    """An event that never ends, joined, shifted, then counted per tumbling window in the second stage:
    output stops at T of the *inputs* (semantics-notes 2), which the driver sends every stage, not at a
    time only the first stage's output reached."""
    query = {"inputs": TWO, "steps": [
        {"id": "j", "op": "join", "from": ["a", "b"], "on": "k"},
        {"id": "al", "op": "alter_lifetime", "le": {"shift": 7}, "duration": "keep"},
        {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 3}, "group_by": ["v"],
         "udm": "count", "as": "n"}]}
    streams = {"a": [Insert("x", 1, 2**63 - 1, {"k": 1, "v": 5}), Insert("y", 4, 6, {"k": 2, "v": 6})],
               "b": [Insert("z", 2, 12, {"k": 1}), Insert("q", 0, 2**63 - 1, {"k": 2}), Cti(9)]}
    assert len(plan_stages(parse_query(query))) > 1
    files = _files(tmp_path, streams)

    class Display:  # a progress display with a status line (the CLI's rich bar has one)
        lines: list[str] = []

        def __call__(self, done: int, total: int | None, elements: int) -> None:
            pass

        def status(self, text: str) -> None:
            self.lines.append(text)

    shown = Display()
    req = RunRequest(bind(parse_query(query)), files, tmp_path / "s.jsonl", tmp_path / "s.dl.jsonl",
                     progress=shown, options={"buckets": 2})
    res = get_engine("spark-streaming")(req)
    assert_equivalent(_read(tmp_path / "s.jsonl"), oracle(parse_query(query), streams))
    local = _run("local", query, files, tmp_path / "local.jsonl")
    assert res.truncated_at == local.truncated_at
    # the status line: Spark's latency of the last micro-batch and the state the two stages hold
    assert shown.lines and all(re.fullmatch(r"micro-batch \d+/\d+: \d+ ms, state [\d,]+ rows \d+\.\d MB", x)
                               for x in shown.lines)


def test_progress_text_reads_sparks_progress_report() -> None:
    from udm.host.spark.stream_files import progress_text

    report = {"durationMs": {"triggerExecution": 812}, "stateOperators": [
        {"numRowsTotal": 3, "memoryUsedBytes": 1_500_000}, {"numRowsTotal": 2, "memoryUsedBytes": 600_000}]}
    assert progress_text(report, 4, 9) == "micro-batch 4/9: 812 ms, state 5 rows 2.1 MB"
    assert progress_text(None, 0, 9) is None


def test_dataframe_api_runs_a_staged_graph(spark: Any, tmp_path: Path) -> None:
    """`run_stream` with ``{input: streaming DataFrame}`` for a graph that needs stages: the join's inputs
    routed by ``k`` in Spark, the join's output routed by ``v`` on the executor, a retraction (repeating
    its key) across micro-batches; the output CHT is the oracle's and both last-stage buckets report the
    merged CTI."""
    import os
    import time

    from udm.host.spark.streaming import run_stream
    from udm.host.temporal.elements import Retract

    inf = 2**63 - 1
    files = {
        "a": [[{"line": 1, "kind": "insert", "id": "a1", "le": 1, "re": 20, "payload": '{"k":1,"v":"x"}'},
               {"line": 2, "kind": "insert", "id": "a2", "le": 2, "re": 20, "payload": '{"k":2,"v":"x"}'}],
              [{"line": 3, "kind": "retract", "id": "a2", "le": 2, "re": 20, "re_new": 5, "payload": '{"k":2}'},
               {"line": 4, "kind": "cti", "t": 12}],
              [{"line": 5, "kind": "insert", "id": "a3", "le": 14, "re": 18, "payload": '{"k":1,"v":"y"}'},
               {"line": 6, "kind": "cti", "t": inf}]],
        "b": [[{"line": 1, "kind": "insert", "id": "b1", "le": 0, "re": 30, "payload": '{"k":1}'},
               {"line": 2, "kind": "insert", "id": "b2", "le": 3, "re": 30, "payload": '{"k":2}'}],
              [{"line": 3, "kind": "cti", "t": 12}],
              [{"line": 4, "kind": "cti", "t": inf}]]}
    schema = "line long, kind string, id string, le long, re long, re_new long, t long, payload string"
    frames = {}
    base = time.time() - 1000
    for name, parts in files.items():
        d = tmp_path / name
        d.mkdir()
        for i, rows in enumerate(parts):
            p = d / f"p{i:03d}.json"
            p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            os.utime(p, (base + i, base + i))
        frames[name] = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(d))
    got: list[dict[str, Any]] = []

    def keep(df: Any, batch_id: int) -> None:
        got.extend({**r.asDict(), "batch": batch_id} for r in df.collect())

    q = (run_stream(JOIN_THEN_WINDOW, frames, buckets=2).writeStream.foreachBatch(keep)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination()
    out: list[Any] = []
    for r in sorted((r for r in got if r["stream"] == "out"), key=lambda r: (r["batch"], r["bucket"], r["seq"])):
        out.append(Insert(r["id"], r["le"], r["re"], json.loads(r["payload"])) if r["kind"] == "insert"
                   else Retract(r["id"], r["le"], r["re"], r["re_new"]))
    logical = {name: [parse_element({k: v for k, v in r.items() if k != "line"}
                                    | ({"payload": json.loads(r["payload"])} if "payload" in r else {}))
                      for part in parts for r in part] for name, parts in files.items()}
    assert_equivalent(out, oracle(parse_query(JOIN_THEN_WINDOW), logical))
    assert not [r for r in got if r["stream"] == "dead"]
    last = max(r["batch"] for r in got)
    assert {r["bucket"] for r in got if r["stream"] == "cti" and r["batch"] == last} == {0, 1}


def test_staged_stream_survives_sigkill_of_the_driver(spark: Any, tmp_path: Path) -> None:
    """A spark-streaming run of a staged graph in a process of its own (driver and JVM) killed with SIGKILL
    once two micro-batches wrote their output (every stage's state store then holds committed and possibly
    uncommitted versions), then resumed from its checkpoint: output and dead letters are byte for byte an
    uninterrupted run's (so no element is duplicated), and the CHT is the oracle's."""
    import signal
    import subprocess
    import sys
    import time

    streams = _inputs(102)
    files = _files(tmp_path, streams)
    ck = tmp_path / "ck"
    out = tmp_path / "killed.jsonl"
    child = ("import json, sys\n"
             "from udm.host.model.plan import bind\n"
             "from udm.host.query.runners import RunRequest, get_engine\n"
             "from udm.host.model.spec import parse_query\n"
             "q, files, out, ck = json.loads(sys.argv[1])\n"
             "get_engine('spark-streaming')(RunRequest(bind(parse_query(q)), files, out, out[:-6] + '.dl.jsonl', "
             "batch_size=16, checkpoint=ck, options={'buckets': 2, 'master': 'local[2]'}))\n")
    args = json.dumps([JOIN_THEN_WINDOW, {n: str(p) for n, p in files.items()}, str(out), str(ck)])
    proc = subprocess.Popen([sys.executable, "-c", child, args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline and len(list((ck / "out").glob("*.jsonl"))) < 2:
        time.sleep(0.05)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVM it started
    proc.wait(timeout=60)
    assert killed, "the run ended before it could be killed"
    before = out.read_bytes() if out.exists() else b""  # (the micro-batches committed before the kill)
    resumed = _run("spark-streaming", JOIN_THEN_WINDOW, files, out, batch_size=16, checkpoint=ck)
    whole = _run("spark-streaming", JOIN_THEN_WINDOW, files, tmp_path / "whole.jsonl", batch_size=16)
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes() and out.read_bytes().startswith(before)
    assert (tmp_path / "killed.dl.jsonl").read_bytes() == (tmp_path / "whole.dl.jsonl").read_bytes()
    assert (resumed.elements_out, resumed.inputs) == (whole.elements_out, whole.inputs)
    assert_equivalent(_read(out), oracle(parse_query(JOIN_THEN_WINDOW), streams))


@pytest.mark.parametrize("seed", range(100))
def test_exchange_merged_micro_batch_by_micro_batch_is_a_valid_union(seed: int) -> None:
    """The consumer's merge (`stream_wire.merge_exchange_part`, state carried between micro-batches) against batch's
    `merge_exchange` over the whole exchange: the same element rows, each producer's order kept, CTIs rising
    and never above a later element's sync time, and the same final CTI (the minimum over the producers)."""
    import random

    import pyarrow as pa
    from test_spark_stages import _bucket_stream as bucket_stream  # (random per-bucket exchange streams)

    from udm.host.io.batch import ElementBatch
    from udm.host.spark.stages import merge_exchange
    from udm.host.spark.stream_wire import IN_ARROW, merge_exchange_part

    rng = random.Random(seed)
    producers = rng.randint(1, 4)
    streams = {b: bucket_stream(rng, b) for b in range(producers)}
    # each producer's rows cut into micro-batches at random points; a micro-batch holds every producer's part
    cuts = {b: sorted(rng.sample(range(len(els) + 1), min(3, len(els) + 1))) for b, els in streams.items()}
    state: dict[int, int] = {}
    fed: list[Any] = []
    for k in range(4):
        rows = []
        for b, els in streams.items():
            bounds = [0, *cuts[b], len(els)]
            lo, hi = bounds[k], bounds[k + 1] if k + 1 < len(bounds) else len(els)
            for seq in range(lo, hi):
                rows.append((b, seq, els[seq]))
        if not rows:
            continue
        rng.shuffle(rows)
        table = ElementBatch.from_elements([el for _, _, el in rows]).table
        wire = {c: table.column(c) if c in table.column_names else pa.nulls(len(rows), IN_ARROW.field(c).type)
                for c in IN_ARROW.names}
        wire["udm_src"] = pa.array([b for b, _, _ in rows], pa.int64())
        wire["udm_seq"] = pa.array([s for _, s, _ in rows], pa.int64())
        merged = merge_exchange_part(pa.table(wire, schema=IN_ARROW), state, producers)
        fed += [el for _, el in ElementBatch.from_table(merged).to_elements()]
    data = [el for el in fed if not isinstance(el, Cti)]
    for b, els in streams.items():
        assert [el for el in data if el.id.startswith(f"{b}.")] == [el for el in els if not isinstance(el, Cti)]
    assert len(data) == sum(not isinstance(el, Cti) for els in streams.values() for el in els)
    ctis = [el.t for el in fed if isinstance(el, Cti)]
    assert ctis == sorted(set(ctis))
    low = -(2**63)
    for el in fed:
        if isinstance(el, Cti):
            low = el.t
        else:
            assert (el.le if isinstance(el, Insert) else min(el.re, el.re_new)) >= low
    whole = ElementBatch.from_elements([el for els in streams.values() for el in els]).table
    whole = whole.set_column(whole.column_names.index("line"), "line",
                             pa.array([s for els in streams.values() for s in range(len(els))], pa.int64()))
    batch = merge_exchange(whole.append_column("_src", pa.array([b for b, els in streams.items() for _ in els],
                                                                  pa.int64())))
    last = [t for k, t in zip(batch.column("kind").to_pylist(), batch.column("t").to_pylist(), strict=True)
            if k == "cti"]
    assert ctis[-1:] == last[-1:]
