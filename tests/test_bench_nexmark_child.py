"""`bench.nexmark._child` measures a local run "start-up included" (issue 26): its start-up must be the one
``udm run --engine local`` has, no heavier and no lighter. The reference is ``udm run`` itself, probed the
same way: after a run over the same events, which of the start-up's deciding facts hold — pandas imported
(pyarrow's first probe imports it unless `udm.host.io.arrow_probe` hid it before the engine loaded: ~0.2 CPU-s
and ~30 MiB of peak RSS) and the BLAS thread count asked for (`udm.host.cli.blas_threads`: OpenBLAS's
spinning threads cost CPU in start-up and run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from bench.nexmark.__main__ import output_elements
from bench.nexmark.gen import generate, table_options, to_parquet
from bench.nexmark.queries import QUERIES
from udm.host.cli.blas_threads import CHOICES

ROOT = Path(__file__).resolve().parent.parent

_FACTS = """
import os, sys
print("FACTS " + repr(["pandas" in sys.modules, os.environ.get("OPENBLAS_NUM_THREADS")]), file=sys.stderr)
"""

_CLI = """
import sys
from udm.host.cli.app import main
sys.argv = ["udm", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
""" + _FACTS

_CHILD = """
import runpy, sys
sys.argv = ["bench.nexmark._child", *sys.argv[1:]]
try:
    runpy.run_module("bench.nexmark._child", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
""" + _FACTS


def _facts(code: str, *args: str) -> list[object]:
    env = {k: v for k, v in os.environ.items() if k not in CHOICES}  # (a user's BLAS choice would win)
    env |= {"UDM_FAST_EXIT": "0", "PYTHONPATH": str(ROOT)}  # (else a successful udm run exits inside main)
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=180, env=env,
                         cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    line = [x for x in res.stderr.splitlines() if x.startswith("FACTS ")][-1]
    return json.loads(line[len("FACTS "):].replace("'", '"').replace("True", "true").replace("False", "false")
                      .replace("None", "null"))


def test_the_child_starts_as_udm_run_does(tmp_path: Path) -> None:
    inp = tmp_path / "bids.jsonl"
    inp.write_text("".join(json.dumps({"kind": "insert", "id": f"b{i}", "le": i, "re": i + 1,
                                       "payload": {"auction": i % 7, "bidder": i, "price": 100 + i,
                                                   "channel": "web"}}) + "\n" for i in range(50))
                   + json.dumps({"kind": "cti", "t": 60}) + "\n")
    q = tmp_path / "q0.json"
    q.write_text(json.dumps(QUERIES["q0"]))
    cli = _facts(_CLI, "run", str(q), "--input", str(inp), "--output", str(tmp_path / "cli.jsonl"))
    child = _facts(_CHILD, json.dumps(QUERIES["q0"]), str(inp), str(tmp_path / "child.jsonl"), "local")
    assert cli == [False, "1"]  # what `udm run` is documented to do (arrow_probe, blas_threads)
    assert child == cli
    assert (tmp_path / "child.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()


def test_the_table_child_runs_as_udm_run_over_a_table_with_the_jsonl_runs_answer(tmp_path: Path) -> None:
    """``--format parquet``: the child over the bids as a Parquet table, with Parquet output, starts and
    writes as ``udm run --input bids.parquet --time le --cti-every .. --cti-lag .. --output out.parquet``;
    its output spells the CHT of the JSON Lines run over the same bids (windows: q7)."""
    from udm.host.testing.cht import cht

    streams = generate(tmp_path, 3000, disorder=20)
    table = to_parquet(streams.bids, tmp_path / "bids.parquet")
    opts = table_options(20)
    for q in ("q0", "q7"):
        spec = tmp_path / f"{q}.json"
        spec.write_text(json.dumps(QUERIES[q]))
        cli = _facts(_CLI, "run", str(spec), "--input", str(table), "--time", opts["time"], "--cti-every",
                     str(opts["cti_every"]), "--cti-lag", str(opts["cti_lag"]), "--output",
                     str(tmp_path / "cli.parquet"))
        child = _facts(_CHILD, json.dumps(QUERIES[q]), str(table), str(tmp_path / "child.parquet"), "local",
                       json.dumps(opts))
        assert child == cli
        got = pq.read_table(tmp_path / "child.parquet")
        assert got.to_pylist() == pq.read_table(tmp_path / "cli.parquet").to_pylist()
        assert "kind" in got.column_names  # the physical view
        jsonl = _facts(_CHILD, json.dumps(QUERIES[q]), str(streams.bids), str(tmp_path / "child.jsonl"), "local")
        assert jsonl == cli
        assert cht(output_elements(tmp_path / "child.parquet")) == cht(output_elements(tmp_path / "child.jsonl"))
