"""End-to-end benchmark of query graphs over two inputs: ``join`` (inner, left_anti) and ``union``.

Input (`bench.gen.join_streams`): two streams, ``left`` ``{"k", "v"}`` and ``right`` ``{"k", "q"}``, 1 M
elements in all (``--quick``: 100 k), 10 k keys skewed towards 0, lifetimes of 1–50 ticks, ``le`` up to 20
ticks out of arrival order, ~5 % of the events later shortened or deleted, a CTI every 1000 elements of each
input. For each query it reports:

- from the real ``udm run --input left=… --input right=…`` in a child process (`bench.bench_run.run_udm`'s
  way): elements/s over `RunResult.seconds`, elements per CPU-second of the child (start-up included, all
  threads: the figure a loaded machine inflates least), wall time including interpreter start-up, peak RSS,
  output rows;
- in process (`QueryRunner.process_interleaved`, inputs merged as ``udm run`` merges them,
  `udm.host.io.interleave`): the most events held, sampled every 10 k elements (`QueryRunner.state_size`:
  ``events``, the live events the input gates know, plus ``held``, the events the operators keep), against
  the number of events in the inputs — with the CTIs, and with every CTI removed (the end of input is then
  the only one) for contrast: state bounded under CTIs means the first stays a small, size-independent number;
- at 100 k elements, that the output CHT equals an independent brute-force evaluation over the two inputs'
  CHTs (nested loop per key);
- the union's el/s against a single-input pass-through (``project drop: ["_absent"]``, a field no event has)
  over one stream of the same total size, measured in the same run: what a second input and the graph cost.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import gen
from bench.machine import load_text

INPUTS = {"left": {}, "right": {}}
QUERIES: dict[str, dict[str, Any]] = {
    "inner": {"inputs": INPUTS, "steps": [{"id": "j", "op": "join", "from": ["left", "right"], "on": [["k", "k"]],
                                          "type": "inner", "right_prefix": "r_"}]},
    "left_anti": {"inputs": INPUTS, "steps": [{"id": "j", "op": "join", "from": ["left", "right"],
                                              "on": [["k", "k"]], "type": "left_anti"}]},
    "union": {"inputs": INPUTS, "steps": [{"id": "u", "op": "union", "from": ["left", "right"]}]},
}
PASS_THROUGH: dict[str, Any] = {"steps": [{"op": "project", "drop": ["_absent"]}]}  # keeps every field
SAMPLE_EVERY = 10_000
CHECK_SIZE = 100_000
#: the most events held with CTIs, whatever the size: about two CTI intervals (1000 elements) of both inputs,
#: held once by the input gates and once by the operator, with a 2.5x margin
STATE_MAX = 10_000




def run_udm(query: Path, inputs: list[str], out: Path, dl: Path) -> dict[str, Any]:
    """One ``udm run`` in a child process (`bench._udm_child`): its JSON summary, wall time, CPU seconds (all
    threads), peak RSS (MiB)."""
    cmd = [sys.executable, "-m", "bench._udm_child", "run", str(query)]
    for spec in inputs:
        cmd += ["--input", spec]
    cmd += ["--output", str(out), "--dead-letter", str(dl), "--engine", "local", "--quiet", "--json"]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=Path(__file__).resolve().parent.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    if rc != 0:
        raise RuntimeError(f"udm run failed ({rc}): {stderr.strip()[-2000:]}")
    summary = json.loads(stdout.strip().splitlines()[-1])
    summary["wall"] = wall
    summary["cpu"] = usage.ru_utime + usage.ru_stime
    hwm = [int(x.split("=", 1)[1]) for x in stderr.splitlines() if x.startswith("UDM_BENCH_VMHWM_KB=")]
    summary["rss_mib"] = (hwm[-1] if hwm else usage.ru_maxrss) / 1024
    return summary


def _stream(path: Path, *, ctis: bool = True) -> Iterator[tuple[int | None, Any]]:
    from udm.host.io.jsonl import read_jsonl_batches
    from udm.host.temporal.elements import Cti

    for b in read_jsonl_batches(path):
        for line, el in b.to_elements():
            if ctis or not isinstance(el, Cti):
                yield line, el


def state_profile(spec: dict[str, Any], left: Path, right: Path, *, ctis: bool) -> dict[str, Any]:
    """Run the query in process; the most events held (input gates + operators, and the operators' alone)
    seen every `SAMPLE_EVERY` elements."""
    from udm.host.engine import QueryRunner
    from udm.host.io.interleave import interleave
    from udm.host.model import plan
    from udm.host.model.spec import parse_query

    runner = QueryRunner(plan.bind(parse_query(spec)))
    items = interleave([("left", _stream(left, ctis=ctis)), ("right", _stream(right, ctis=ctis))])
    peak, peak_op, n, n_out = 0, 0, 0, 0
    t0 = time.perf_counter()
    while True:
        chunk = list(itertools.islice(items, SAMPLE_EVERY))
        if not chunk:
            break
        n += len(chunk)
        n_out += len(runner.process_interleaved(chunk))
        size = runner.state_size()
        peak = max(peak, size["events"] + size["held"])
        peak_op = max(peak_op, size["held"])
    n_out += len(runner.finish())
    return {"max_state": peak, "max_state_op": peak_op, "elements": n, "out": n_out,
            "seconds": time.perf_counter() - t0, "final_state": sum(runner.state_size()[k] for k in ("events", "held"))}


# -- brute force ---------------------------------------------------------------------------------------------
def _events(path: Path) -> list[tuple[int, int, dict[str, Any]]]:
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.testing.cht import apply_stream

    return list(apply_stream(el for _, el in read_jsonl_elements(path)).events())


def brute_force(query: str, left: Path, right: Path) -> list[tuple[int, int, dict[str, Any]]]:
    """SEMANTICS §10 evaluated directly on the inputs' CHTs: nested loop over each key's events."""
    lev, rev = _events(left), _events(right)
    if query == "union":
        return lev + rev
    by_key: dict[Any, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for ev in rev:
        by_key[ev[2]["k"]].append(ev)
    out: list[tuple[int, int, dict[str, Any]]] = []
    for lle, lre, lp in lev:
        matches = [(rle, rre, rp) for rle, rre, rp in by_key.get(lp["k"], ()) if rle < lre and lle < rre]
        if query == "inner":
            for rle, rre, rp in matches:
                out.append((max(lle, rle), min(lre, rre), {**{"r_" + f: v for f, v in rp.items()}, **lp}))
        else:  # left_anti: the maximal parts of [lle, lre) no match covers
            t = lle
            for rle, rre, _ in sorted(matches, key=lambda m: m[0]):
                if rle > t:
                    out.append((t, rle, lp))
                t = max(t, rre)
                if t >= lre:
                    break
            if t < lre:
                out.append((t, lre, lp))
    return out


def check(out: Path, expected: list[tuple[int, int, dict[str, Any]]]) -> tuple[bool, str]:
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.testing.verifier import verify

    v = verify([el for _, el in read_jsonl_elements(out)], expected)
    return bool(v.ok), ("" if v.ok else str(v)[:400])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_join", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 k elements instead of 1 M")
    ap.add_argument("--size", type=int, default=None, help="total elements over both inputs")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--no-state", action="store_true", help="skip the in-process state profile")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a check is not met")
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated files in this directory")
    args = ap.parse_args(argv)
    n = args.size or (100_000 if args.quick else 1_000_000)
    queries = [q for q in args.queries.split(",") if q]
    tmp = Path(tempfile.mkdtemp(prefix="udm-bench-join-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    try:
        print(f"query graphs over two inputs, {n:,} elements in all; {load_text()}", flush=True)
        files: dict[int, tuple[Path, Path]] = {}
        for size in sorted({n, min(n, CHECK_SIZE)}):
            lp, rp = tmp / f"left-{size}.jsonl", tmp / f"right-{size}.jsonl"
            counts = gen.join_streams(lp, rp, size)
            files[size] = (lp, rp)
            print(f"  input {size:,}: " + "; ".join(f"{s} {c['insert']:,} inserts, {c['retract']:,} retractions, "
                                                    f"{c['cti']:,} CTIs" for s, c in counts.items()), flush=True)
        single = tmp / f"single-{n}.jsonl"
        gen.join_streams(single, tmp / "unused.jsonl", 2 * n)  # the left half of 2n: n elements, same shape
        (tmp / "pass.json").write_text(json.dumps(PASS_THROUGH))
        r = run_udm(tmp / "pass.json", [str(single)], tmp / "pass.out.jsonl", tmp / "pass.dl.jsonl")
        pass_eps = r["elements_in"] / r["seconds"]
        print(f"\n{'query':>10} {'el/s':>11} {'us/el':>7} {'el/cpu-s':>9} {'run s':>6} {'wall s':>6} {'RSS MiB':>8} "
              f"{'out rows':>10}", flush=True)
        print(f"{'pass-thru':>10} {pass_eps:>11,.0f} {1e6 / pass_eps:>7.2f} {r['elements_in'] / r['cpu']:>9,.0f} "
              f"{r['seconds']:>6.2f} {r['wall']:>6.2f} {r['rss_mib']:>8.1f} {r['elements_out']:>10,}", flush=True)
        results: dict[str, dict[str, Any]] = {}
        lp, rp = files[n]
        for q in queries:
            qf = tmp / f"{q}.json"
            qf.write_text(json.dumps(QUERIES[q]))
            out = tmp / f"{q}-{n}.out.jsonl"
            r = run_udm(qf, [f"left={lp}", f"right={rp}"], out, tmp / f"{q}.dl.jsonl")
            r["el_per_s"] = r["elements_in"] / r["seconds"]
            results[q] = r
            print(f"{q:>10} {r['el_per_s']:>11,.0f} {1e6 / r['el_per_s']:>7.2f} {r['elements_in'] / r['cpu']:>9,.0f} "
                  f"{r['seconds']:>6.2f} {r['wall']:>6.2f} {r['rss_mib']:>8.1f} {r['elements_out']:>10,}", flush=True)
            if r["dead_lettered"]:
                failures.append(f"{q}: {r['dead_lettered']} elements dead-lettered (expected none)")
        if "union" in results:
            ratio = results["union"]["el_per_s"] / pass_eps
            print(f"union / single-input pass-through (same total elements): x{ratio:.2f} el/s", flush=True)
        for q in queries:
            if q in ("inner", "left_anti") and "union" in results:
                print(f"{q} / union: x{results[q]['el_per_s'] / results['union']['el_per_s']:.2f} el/s", flush=True)

        # correctness at 100 k against the brute force
        cs = min(n, CHECK_SIZE)
        clp, crp = files[cs]
        print(f"\ncorrectness at {cs:,} elements (output CHT vs brute force over the inputs' CHTs):", flush=True)
        for q in queries:
            out = tmp / f"{q}-{cs}.out.jsonl"
            if cs != n:
                run_udm(tmp / f"{q}.json", [f"left={clp}", f"right={crp}"], out, tmp / f"{q}.dl.jsonl")
            expected = brute_force(q, clp, crp)
            same, diff = check(out, expected)
            print(f"{q:>10}: {len(expected):,} rows expected, same answer: {'yes' if same else 'NO ' + diff}",
                  flush=True)
            if not same:
                failures.append(f"{q} {cs}: output CHT differs from the brute force: {diff}")

        if not args.no_state:
            print(f"\nstate held in process at {n:,} (max of state_size() events + held every {SAMPLE_EVERY:,} "
                  f"elements: input gates + operator; the operator's own in brackets; bound {STATE_MAX:,}):",
                  flush=True)
            for q in queries:
                w = state_profile(QUERIES[q], lp, rp, ctis=True)
                wo = state_profile(QUERIES[q], lp, rp, ctis=False)
                total = sum(c for c in (_count_inserts(lp), _count_inserts(rp)))
                print(f"{q:>10}: with CTIs max {w['max_state']:>9,} ({w['max_state'] / total:6.2%}; operator "
                      f"{w['max_state_op']:>7,}), without CTIs max {wo['max_state']:>9,} "
                      f"({wo['max_state'] / total:4.0%}; operator {wo['max_state_op']:>9,}) of {total:,} input "
                      f"events; in process {w['elements'] / w['seconds']:,.0f} el/s", flush=True)
                if w["max_state"] > STATE_MAX:
                    failures.append(f"{q}: state with CTIs reached {w['max_state']:,} events (> {STATE_MAX:,})")
        print(f"\n{load_text()}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("checks not met:\n  " + "\n  ".join(failures), flush=True)
    else:
        print("all checks met", flush=True)
    return 1 if failures and args.strict else 0


def _count_inserts(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.startswith(b'{"kind":"insert"'))


if __name__ == "__main__":
    raise SystemExit(main())
