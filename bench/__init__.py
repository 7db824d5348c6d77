"""udmkit benchmarks. ``python -m bench`` (``make bench``) runs them all; ``--quick`` for a short run.

- `bench.bench_run`: end-to-end ``udm run --engine local`` throughput, per-element time and peak RSS at
  100 k and 1 M elements, in-order insert-only and disordered-with-retractions input, against a
  brute-force recompute baseline (same answer, checked).
- `bench.bench_engine_micro`: engine micro-benchmarks (owned by the engine).
- `bench.bench_span`: the columnar span path against the row path (engine + writer CPU per element).
- `bench.bench_cumulate`: cumulate windows, step 60 against step 3,600 of a day (µs per event, the ratio),
  and running aggregates (``rows`` unbounded) at 100 k and 1 M events; outputs checked against numpy
  (itself checked against the oracle: tests/test_bench_cumulate.py).
- `python -m bench.nexmark`: Nexmark-shaped queries end to end beside Flink 1.13's per-core figures.
"""
