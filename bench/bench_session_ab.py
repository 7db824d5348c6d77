"""A/B of Spark session settings over the Spark benchmarks of issue 31, by CPU seconds.

Each configuration is a JSON object of Spark settings given to every session the runs start through
``$UDM_SPARK_CONF`` (`udm.host.spark.session.env_settings`: the CLI's and the benchmarks' own, the native
Spark SQL side of `bench.bench_spark_cli` included). Per round and configuration, in alternating order (A B C,
C B A, ...): one `bench.bench_stages` child (staged and single-bucket plans, CPU of the JVM, its JIT threads,
the Python workers and the driver) and one `bench.bench_spark_cli` child (``sum`` and ``median``: CPU of the
CLI's and of native Spark SQL's process trees). Medians over the rounds are printed per configuration, with
the load average around the runs: on a shared machine wall clock says little, CPU seconds say what a run
costs.

``python -m bench.bench_session_ab --config 'A={}' --config 'B={"spark.sql.adaptive.enabled": "false"}'
[--rounds 3] [--elements 100000] [--events 300000]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.child import load, run_child

ROOT = Path(__file__).resolve().parent.parent
#: the comparison run without ``--config``: Spark's adaptive execution on (its default) and off
DEFAULT = ['A={}', 'B={"spark.sql.adaptive.enabled": "false"}']


def _last_json(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _one(conf: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "UDM_SPARK_CONF": json.dumps(conf)}
    got: dict[str, float] = {}
    st = run_child([sys.executable, "-m", "bench.bench_stages", "--json", "--elements", str(args.elements),
                    "--repeat", "1"], cwd=ROOT, env=env)
    (stages,) = _last_json(st.stdout)
    assert stages["same"], "staged and single-bucket answers differ"
    for plan, label in (("staged", "staged"), ("single", "single bucket")):
        c = stages["cpu"][label]
        got[f"{plan} py"] = c["python"]
        got[f"{plan} jvm"] = c["jvm"]
        got[f"{plan} jit"] = c["jit"]
        got[f"{plan} total"] = c["python"] + c["jvm"] + c["driver"]
    got["staged/single"] = got["staged total"] / got["single total"]
    cli = run_child([sys.executable, "-m", "bench.bench_spark_cli", "--json", "--events", str(args.events),
                     "--repeat", "1", "--udms", "sum,median"], cwd=ROOT, env=env)
    for rec in _last_json(cli.stdout):
        assert rec["same"], f"{rec['udm']}: the CLI's answer differs from native"
        got[f"{rec['udm']} cli"] = rec["cli_cpu_s"]
        got[f"{rec['udm']} native"] = rec["native_cpu_s"]
        got[f"{rec['udm']} ratio"] = rec["cli_cpu_s"] / rec["native_cpu_s"]
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_session_ab", description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", metavar="NAME=JSON",
                    help="a configuration: its name and a JSON object of Spark settings (default: `DEFAULT`)")
    ap.add_argument("--quick", action="store_true", help="one round, 20 k elements, 50 k events")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--elements", type=int, default=100_000, help="bench_stages elements")
    ap.add_argument("--events", type=int, default=300_000, help="bench_spark_cli events")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.elements, args.events = 1, 20_000, 50_000
    configs = [(c.split("=", 1)[0], json.loads(c.split("=", 1)[1])) for c in args.config or DEFAULT]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in configs}
    loads = [load()]
    for r in range(args.rounds):
        for name, conf in (configs if r % 2 == 0 else configs[::-1]):
            got = _one(conf, args)
            runs[name].append(got)
            loads.append(load())
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in got.items()), flush=True)
    print(f"medians of {args.rounds} (CPU s; load {min(loads):.1f}-{max(loads):.1f}):")
    for name, conf in configs:
        med = {k: statistics.median(g[k] for g in runs[name]) for k in runs[name][0]}
        print(f"  {name} {json.dumps(conf)}: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
