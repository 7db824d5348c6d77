"""Table input at scale: ``udm run --input big.parquet --time ts`` over 1 M and 10 M rows (issue 17).

For each size it writes a Parquet file (``ts`` int64 ticks in order, ``sym`` of three keys, ``price``),
then runs the real ``udm`` command in a child process (`bench._udm_child`: read, engine, write; a CTI every
1000 ticks from ``--cti-every`` so the engine's state stays bounded) and reports:

- throughput (rows/s over `RunResult.seconds`) and peak RSS of the run;
- the baseline, measured in the same run: a child that loads the same file whole
  (``pyarrow.parquet.read_table``), the way a reader that does not stream would;
- the ratios: peak RSS 10 M / 1 M for ``udm run`` (target <= 1.3: flat memory) and for the baseline
  (grows with the file), and the output's row count against the expected window count.

``--quick``: 100 k and 1 M rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RSS_RATIO_MAX = 1.3
WINDOW = 1000
QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": WINDOW}, "group_by": ["sym"],
                    "udm": "avg", "input": "price", "as": "avg_price"}]}
_ROOT = Path(__file__).resolve().parent.parent


def write_parquet(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """``rows`` rows, one tick apart, written a row group at a time (the generator streams too)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    syms = np.array(["AAA", "BBB", "CCC"])
    schema = pa.schema([("ts", pa.int64()), ("sym", pa.string()), ("price", pa.float64())])
    rng = np.random.default_rng(17)
    with pq.ParquetWriter(path, schema) as w:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            ts = np.arange(start, start + n, dtype=np.int64)
            w.write_table(pa.table({"ts": ts, "sym": syms[ts % 3], "price": rng.uniform(1, 100, n)}, schema=schema))


def _child(cmd: list[str]) -> tuple[str, str, float]:
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=fo, stderr=fe, cwd=_ROOT)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({proc.returncode}): {err.strip()[-800:]}")
    return out, err, wall


def _vmhwm_mib(stderr: str) -> float:
    for line in stderr.splitlines():
        if line.startswith("UDM_BENCH_VMHWM_KB="):
            return int(line.split("=")[1]) / 1024
    raise SystemExit("the child did not report its peak RSS")


def run_udm(query: Path, inp: Path, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench._udm_child", "run", str(query), "--input", str(inp), "--time", "ts",
           "--cti-every", str(WINDOW), "--output", str(out), "--engine", "local", "--quiet", "--json"]
    stdout, stderr, wall = _child(cmd)
    summary = json.loads(stdout.strip().splitlines()[-1])
    return {"seconds": summary["seconds"], "wall": wall, "rss": _vmhwm_mib(stderr),
            "rows_in": summary["elements_in"], "out": summary["elements_out"]}


_LOAD_WHOLE = """
import atexit, sys
from bench._udm_child import _report
atexit.register(_report)
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
print(t.num_rows)
"""


def run_baseline(inp: Path) -> dict[str, Any]:
    stdout, stderr, wall = _child([sys.executable, "-c", _LOAD_WHOLE, str(inp)])
    return {"rows": int(stdout.strip()), "wall": wall, "rss": _vmhwm_mib(stderr)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_tables", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 k and 1 M rows instead of 1 M and 10 M")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the memory target is missed")
    args = ap.parse_args(argv)
    sizes = (100_000, 1_000_000) if args.quick else (1_000_000, 10_000_000)
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="udm-bench-tables-") as tmp:
        d = Path(tmp)
        query = d / "q.json"
        query.write_text(json.dumps(QUERY))
        for n in sizes:
            inp = d / f"rows_{n}.parquet"
            t0 = time.perf_counter()
            write_parquet(inp, n)
            gen_s = time.perf_counter() - t0
            run = run_udm(query, inp, d / f"out_{n}.jsonl")
            base = run_baseline(inp)
            # windows: one per sym per WINDOW ticks; output = inserts + CTIs (one per WINDOW + the final)
            windows = 3 * ((n + WINDOW - 1) // WINDOW)
            results[n] = {"run": run, "base": base, "windows": windows}
            size_mb = inp.stat().st_size / 2**20
            print(f"{n:>11,} rows ({size_mb:,.0f} MiB parquet, written in {gen_s:.1f}s): udm run "
                  f"{run['seconds']:.1f}s = {run['rows_in'] / run['seconds']:,.0f} el/s, peak RSS {run['rss']:,.0f} MiB"
                  f" | load whole (read_table) peak RSS {base['rss']:,.0f} MiB", flush=True)
            os.remove(inp)
    small, big = sizes
    r_udm = results[big]["run"]["rss"] / results[small]["run"]["rss"]
    r_base = results[big]["base"]["rss"] / results[small]["base"]["rss"]
    per_el = ((results[big]["run"]["seconds"] / big) / (results[small]["run"]["seconds"] / small))
    print(f"peak RSS {big // 1_000_000 or big / 1e6}M / {small / 1e6:g}M rows: udm run {r_udm:.2f}x "
          f"(target <= {RSS_RATIO_MAX}), loading whole {r_base:.2f}x; per-row time ratio {per_el:.2f}x; "
          f"udm run at {big:,} rows uses {results[big]['run']['rss'] / results[big]['base']['rss']:.2f}x "
          f"the memory of loading the file whole")
    ok = r_udm <= RSS_RATIO_MAX
    print("memory target met" if ok else "memory target MISSED")
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
