"""udmkit benchmarks. ``python -m bench`` (``make bench``) runs every ``bench/bench_*.py``; ``--quick`` for a
short run. Each prints its figures beside a baseline measured in the same run, and the machine's load.

Local engine (`QueryRunner`, one route: every operator on columnar batches):

- `bench.bench_run`: end-to-end ``udm run --engine local`` throughput, per-element time and peak RSS at
  100 k and 1 M elements, in-order insert-only and disordered-with-retractions input, against a
  brute-force recompute baseline (same answer, checked).
- `bench.bench_realistic`: the 10-group / 100-tick tumbling ``sum`` end to end, in order and disordered,
  start-up included; 1 M against 100 k (``--startup``: start-up alone, A/B).
- `bench.bench_engine_micro`: the engine alone on in-memory input, a batch at a time and via
  ``process_many`` against one element per call (``process``).
- `bench.bench_span`: the span queries of `bench.nexmark` a batch at a time against one element per call,
  engine and writer only, output bytes compared.
- `bench.bench_sliding`: µs per event of sliding windows (hopping hop 1, count_by_start, rows, RANGE) at
  window sizes 10 to 10,000 and under disorder, every cell checked against an independent computation;
  the ordered aggregators alone against a sorted-fold baseline.
- `bench.bench_cumulate`: cumulate windows, step 60 against step 3,600 of a day (µs per event, the ratio),
  and running aggregates (``rows`` unbounded) at 100 k and 1 M events; outputs checked against numpy
  (itself checked against the oracle: tests/test_bench_cumulate.py).
- `bench.bench_join`: join (inner, left_anti) and union over two inputs against a single-input
  pass-through; state held with and without CTIs; answers against a brute force.
- `bench.bench_lmerge`: lmerge's algorithms R0–R4 against a union (throughput, state) and output size
  against disorder with and without lmerge (seeds/001 Fig. 2–4).
- `bench.bench_before_after`: `bench.bench_run`'s runs on another git revision and this tree, alternating.
- `bench.bench_tables`: Parquet table input at 1 M and 10 M rows.
- `python -m bench.nexmark`: Nexmark-shaped queries end to end beside Flink 1.13's per-core figures and the
  same engine fed one element per call; `python -m bench.nexmark.stages`: a span query's CPU by stage.

Spark: `bench.bench_spark` (batch engine against Spark built-ins), `bench.bench_spark_cli` (``udm run
--engine spark`` against native Spark SQL end to end), `bench.bench_stages` (staged graphs),
`bench.bench_streaming` and `bench.bench_stream_sources` (Structured Streaming against the local engine
and native streaming), `bench.bench_streaming_cli` (``udm run --engine spark-streaming`` against native
Structured Streaming end to end), `bench.bench_stream_graph` (per-key against whole-bucket state),
`bench.bench_sketches` (HLL against exact and Spark's ``approx_count_distinct``). Registry:
`bench.bench_registry_site`.
"""
