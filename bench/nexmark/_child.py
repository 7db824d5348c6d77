"""``python -m bench.nexmark._child QUERY_JSON INPUT OUTPUT ENGINE [TABLE_JSON]``: one run, with the benchmark's
UDFs in the catalog, through `run_local` (``local``, what ``udm run`` does), the same engine fed one element
per call (``el``: the file read by the same reader, each batch decoded into elements and every element handed
to `QueryRunner.process`, the output written by `JsonlWriter`), or the Spark batch engine; prints one JSON
line: the run's seconds (first byte read to last byte written, as `RunResult.seconds`), the CPU seconds of all
its threads over the run (the per-core figure), wall time from interpreter start, elements in and out, peak
RSS (VmHWM, the process's own; see `bench._udm_child`) and the process's CPU seconds from its start
(``cpu_all``: start-up included). With ``TABLE_JSON`` (`udm.host.io.table_options.TableOptions` as JSON) the
input is a table, and an OUTPUT named ``*.parquet`` is a table too, as ``udm run`` has them.

Start-up as ``udm run --engine local`` has it, in its order: one BLAS thread (`udm.host.cli.blas_threads`,
before numpy loads), no cyclic garbage collection until the query is bound (`udm.host.cli.startup_gc`), and
pyarrow's first pandas probes run with pandas hidden (`udm.host.io.arrow_probe`: ~0.2 s of CPU a local run
does not need) before the engine is loaded, as ``udm run`` loads it. (Until session 8 the child hid pandas
only after loading the engine, whose first pyarrow call had imported it already, and left OpenBLAS its
spinning threads: ~0.25 CPU-s of start-up that ``udm run`` does not spend.) The Spark engines keep all
three as they are."""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Any

T_START = time.perf_counter()

if __name__ == "__main__" and not any(a.startswith("native:") or a == "spark" for a in sys.argv[1:]):
    from udm.host.cli import blas_threads, startup_gc

    blas_threads.limit("__main__")
    startup_gc.pause("__main__")


def _vmhwm_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str]) -> int:
    from bench.nexmark import udfs
    from udm.host.catalog import Catalog
    from udm.host.model.plan import bind
    from udm.host.model.spec import QuerySpec
    from udm.host.query.runners import RunRequest, get_engine

    spec_json, inp, out, engine, *table = argv
    if engine.startswith("native:"):
        return _native(engine.split(":", 1)[1], inp, out)
    spec = QuerySpec.model_validate(json.loads(spec_json))
    bound = bind(spec, Catalog.discover(plugins=[udfs]))
    names = list(bound.graph.inputs)
    one = _source(inp, table[0] if table else None)
    source = {n: one for n in names} if len(names) > 1 or names != ["main"] else one
    local = engine in ("local", "el")
    if local:  # as `udm run --engine local` starts (the module docstring): before the engine loads pyarrow
        from udm.host.io.arrow_probe import skip_pandas_probe

        skip_pandas_probe()
    run = _one_by_one if engine == "el" else get_engine(engine)
    import udm.host.engine  # noqa: F401  (imports and warm-up outside the CPU clock, as out of RunResult.seconds)
    from udm.host.query.runners import _warm_up

    if local:
        from udm.host.cli import startup_gc

        startup_gc.resume()
    _warm_up()
    sink = _sink(out, one)
    c0 = time.process_time()
    res = run(RunRequest(bound, source, sink, dead_letter=out + ".dl"))
    cpu = time.process_time() - c0
    print(json.dumps({"seconds": res.seconds, "cpu": cpu, "wall": time.perf_counter() - T_START, "in": res.elements_in,
                      "out": res.elements_out, "dead": res.dead_lettered, "rss_mb": _vmhwm_kb() / 1024,
                      "cpu_all": time.process_time()}))
    return 0


def _source(inp: str, table: str | None) -> Any:
    """The input as ``udm run`` takes it: element JSON Lines, or with ``table`` (`TableOptions` as JSON:
    ``--time`` and the rest) a table."""
    if table is None:
        return inp
    from pathlib import Path

    from udm.host.io.table_options import TableOptions, TableSource

    return TableSource(Path(inp), TableOptions(**json.loads(table)))


def _sink(out: str, source: Any) -> Any:
    """The output as ``udm run --output OUT`` writes it: a table for a ``.parquet`` name (the physical view),
    else element JSON Lines."""
    from udm.host.io.table_out import output_sink

    return output_sink(out, inputs=[source])


def _one_by_one(req: Any) -> Any:
    """`run_local`'s reading, writing and dead letters, the engine fed one element per call."""
    from udm.host.engine import QueryRunner
    from udm.host.io.jsonl import DeadLetterWriter, JsonlReader, JsonlWriter
    from udm.host.query.runners import READER_OPTIONS, quiet_gc

    runner = QueryRunner(req.bound)
    (name, path), = req.inputs.items()
    t0 = time.perf_counter()
    with quiet_gc(), JsonlWriter(req.output) as out, DeadLetterWriter(req.dead_letter) as dl:
        for batch in JsonlReader(path, **READER_OPTIONS):
            for line, el in batch.to_elements():
                out.write(runner.process(el, line, name))
            dl.write(runner.take_dead_letters())
        out.write(runner.finish())
        dl.write(runner.take_dead_letters())
    st = runner.stats
    return SimpleNamespace(seconds=time.perf_counter() - t0, elements_in=st.elements_in,
                           elements_out=st.elements_out, dead_lettered=st.dead_lettered)


def _native(q: str, inp: str, out: str) -> int:
    """Query ``q`` in native Spark (`bench.nexmark.queries.native_query`) over the same file: read, query,
    write JSON; seconds from the read to the written output (the session's start excluded, as for udm)."""
    from pyspark.sql import functions as F

    from bench.nexmark.queries import native_query
    from udm.host.spark.session import get_spark

    spark = get_spark()
    t0 = time.perf_counter()
    c0 = time.process_time()
    raw = spark.read.json(inp)
    n_in = raw.count()
    bids = (raw.where(F.col("kind") == "insert")
            .select("le", "re", "payload.auction", "payload.bidder", "payload.price", "payload.channel")
            .withColumn("ts", (F.col("le") / 1000).cast("timestamp")))
    res = native_query(q, bids)
    res.write.mode("overwrite").json(out + ".native")
    n_out = spark.read.json(out + ".native").count()
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "cpu": time.process_time() - c0, "wall": time.perf_counter() - T_START,
                      "in": n_in, "out": n_out, "dead": 0, "rss_mb": _vmhwm_kb() / 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
