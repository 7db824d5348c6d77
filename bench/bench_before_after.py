"""The end-to-end ``udm run`` benchmark (`bench.bench_run`'s shapes and queries) on two code trees in one run.

``python -m bench.bench_before_after [--quick] [--base REV] [--repeats N] [--strict]``

The baseline tree is ``git archive REV`` unpacked into a temporary directory (removed afterwards); the
current tree is this checkout. Each ``udm run`` is a child process started through a small bootstrap
(written to the temporary directory) that points the editable install's import mapping (the
``__editable___udmkit_*_finder`` module's ``MAPPING``: ``udm`` -> ``<tree>/udm``, ``udm.host`` ->
``<tree>/host``, ...) at the chosen tree before anything of ``udm`` is imported, reports which
``udm.host`` it imported (checked here) and its peak RSS, then calls the ``udm`` CLI's ``main``. Both trees
go through the same bootstrap, so start-up costs the same.

Runs alternate (base, current, base, current, ...) ``--repeats`` times (default 3) per shape and query; the
table shows the median el/s (over `RunResult.seconds`) of each tree and their ratio (and the ratio of their
elements per CPU-second of the child, start-up included: the steadier one on a loaded machine), flagging a current
tree more than 5 % slower. Both trees' outputs are checked to have the same CHT. Shapes (``--cases``):
``in_order``, ``disordered`` (`bench.gen`), ``realistic_in_order``, ``realistic_disordered``
(`bench.bench_realistic`), ``nexmark`` (the bids of `bench.nexmark.gen`); queries (``--queries``): ``avg``,
``median`` (`bench.bench_run`), ``sum100`` (`bench.bench_realistic`), and the Nexmark queries without a
benchmark UDF (q0, q5, q6, q7, q7j, q11: `bench.nexmark.queries`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import bench_realistic, gen
from bench.bench_run import QUERIES as RUN_QUERIES
from bench.bench_run import TARGETS
from bench.machine import load_text
from bench.nexmark.gen import generate
from bench.nexmark.queries import BENCH_UDFS
from bench.nexmark.queries import QUERIES as NEXMARK

#: bench_run's queries, bench_realistic's 10-group / 100-tick tumbling sum (``--queries sum100``), and the
#: Nexmark queries that call no benchmark UDF (``--cases nexmark --queries q5,q6,...``: the CLI loads only
#: installed UDMs)
QUERIES: dict[str, Any] = {**RUN_QUERIES, "sum100": bench_realistic.QUERY,
                           **{q: NEXMARK[q] for q in NEXMARK if q not in BENCH_UDFS}}


def nexmark_bids(path: Path, n: int) -> None:
    """About ``n`` Nexmark bid elements (`bench.nexmark.gen`: 46 of every 50 events are bids)."""
    streams = generate(path.parent / f"{path.stem}-nexmark", max(1, n * 50 // 46))
    streams.bids.replace(path)
    shutil.rmtree(streams.bids.parent, ignore_errors=True)


#: bench.gen's shapes, bench_realistic's 10-group ones (``--cases realistic_in_order,...``) and the Nexmark bids
CASES = {"in_order": gen.in_order, "disordered": gen.disordered, "realistic_in_order": bench_realistic.in_order,
         "realistic_disordered": bench_realistic.disordered, "nexmark": nexmark_bids}

REPO = Path(__file__).resolve().parent.parent
SLOWER = 0.05

#: the start of a child's bootstrap: the editable install's import mapping pointed at the tree given as
#: argv[1] (popped), before anything of ``udm`` is imported (also `bench.nexmark.before_after`'s)
REDIRECT = r'''
import sys
from pathlib import Path

tree = Path(sys.argv.pop(1)).resolve()
if any(m == "udm" or m.startswith("udm.") for m in sys.modules):
    raise SystemExit("udm was imported before the bootstrap could redirect it")
finders = [sys.modules.get(getattr(f, "__module__", "")) for f in sys.meta_path]
finders = [m for m in finders if m is not None and getattr(m, "MAPPING", None)]
roots = {Path(m.MAPPING["udm"]).parent for m in finders if "udm" in m.MAPPING}
if not roots:
    raise SystemExit("no editable-install finder for 'udm' on sys.meta_path")
# udm and the checkout's plugins (plugins/*: a plugin may use SDK declarations the other tree lacks)
for mod in finders:
    for name, path in list(mod.MAPPING.items()):
        root = next((r for r in roots if Path(path).is_relative_to(r)), None)
        if root is not None:
            mod.MAPPING[name] = str(tree / Path(path).relative_to(root))
'''

BOOTSTRAP = r'''
"""udm CLI on the tree given as argv[1]: ``python boot.py TREE run ...``"""
import atexit
''' + REDIRECT + r'''

def _report():
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    sys.stderr.write(f"\nUDM_BENCH_VMHWM_KB={int(line.split()[1])}\n")
    except OSError:
        pass
    sys.stderr.flush()


atexit.register(_report)
import udm.host  # noqa: E402

sys.stderr.write(f"UDM_BENCH_TREE={udm.host.__file__}\n")
from udm.host.cli.app import main  # noqa: E402

sys.argv = ["udm", *sys.argv[1:]]
main()
'''




def export_tree(rev: str, dest: Path) -> str:
    """``git archive REV`` unpacked into ``dest``; returns the full commit id."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    dest.mkdir(parents=True)
    archive = dest.parent / "base.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "archive", "--format=tar", sha], cwd=REPO, check=True, stdout=f)
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")
    archive.unlink()
    return sha


def run_tree(boot: Path, tree: Path, query: Path, inp: Path, out: Path, dl: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(boot), str(tree), "run", str(query), "--input", str(inp), "--output", str(out),
           "--dead-letter", str(dl), "--engine", "local", "--quiet", "--json"]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=boot.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    if rc != 0:
        raise RuntimeError(f"udm run on {tree} failed ({rc}): {stderr.strip()[-2000:]}")
    imported = [x.split("=", 1)[1] for x in stderr.splitlines() if x.startswith("UDM_BENCH_TREE=")]
    if not imported or not Path(imported[0]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the child imported udm.host from {imported or '?'}, not from {tree}")
    summary = json.loads(stdout.strip().splitlines()[-1])
    hwm = [int(x.split("=", 1)[1]) for x in stderr.splitlines() if x.startswith("UDM_BENCH_VMHWM_KB=")]
    summary.update(wall=wall, imported=imported[0], rss_mib=(hwm[-1] if hwm else usage.ru_maxrss) / 1024,
                   el_per_s=summary["elements_in"] / summary["seconds"],
                   # per CPU-second of the child, start-up included: what a loaded machine does not inflate
                   el_per_cpu_s=summary["elements_in"] / max(usage.ru_utime + usage.ru_stime, 1e-9))
    return summary


def _same_cht(a: Path, b: Path) -> tuple[bool, str]:
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.testing.verifier import verify

    v = verify([e for _, e in read_jsonl_elements(a)], [e for _, e in read_jsonl_elements(b)])
    return bool(v.ok), ("" if v.ok else str(v)[:300])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_before_after", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 k elements instead of 1 M")
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--base", default="af7cf65", help="baseline git revision (default af7cf65)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cases", default="in_order,disordered")
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--strict", action="store_true", help="exit 1 when the current tree is > 5 %% slower")
    args = ap.parse_args(argv)
    n = args.size or (100_000 if args.quick else 1_000_000)
    tmp = Path(tempfile.mkdtemp(prefix="udm-bench-ba-"))
    failures: list[str] = []
    rows: list[tuple[str, str, float, float, float, float, float, float]] = []
    try:
        base_tree = tmp / "base"
        sha = export_tree(args.base, base_tree)
        boot = tmp / "udm_boot.py"
        boot.write_text(BOOTSTRAP)
        trees = {"base": base_tree, "current": REPO}
        print(f"udm run --engine local, {n:,} elements, CTI every 1000; base = {args.base} ({sha[:10]}, "
              f"git archive in {base_tree}), current = {REPO} (working tree); {args.repeats} alternating "
              f"repeats, median; {load_text()}", flush=True)
        for case in [c for c in args.cases.split(",") if c]:
            inp = tmp / f"{case}-{n}.jsonl"
            CASES[case](inp, n)
            for qname in [q for q in args.queries.split(",") if q]:
                qf = tmp / f"query-{qname}.json"
                qf.write_text(json.dumps(QUERIES[qname]))
                eps: dict[str, list[float]] = {"base": [], "current": []}
                cps: dict[str, list[float]] = {"base": [], "current": []}
                rss: dict[str, list[float]] = {"base": [], "current": []}
                outs: dict[str, Path] = {}
                for rep in range(args.repeats):
                    for label, tree in trees.items():
                        out = tmp / f"{label}-{case}-{qname}.out.jsonl"
                        r = run_tree(boot, tree, qf, inp, out, tmp / f"{label}.dl.jsonl")
                        if rep == 0:
                            print(f"  {case} {qname} {label}: imported {r['imported']}", flush=True)
                        eps[label].append(r["el_per_s"])
                        cps[label].append(r["el_per_cpu_s"])
                        rss[label].append(r["rss_mib"])
                        outs[label] = out
                        if r["dead_lettered"]:
                            failures.append(f"{case} {qname} {label}: {r['dead_lettered']} dead-lettered")
                same, diff = _same_cht(outs["current"], outs["base"])
                if not same:
                    failures.append(f"{case} {qname}: outputs of the two trees differ: {diff}")
                b, c = statistics.median(eps["base"]), statistics.median(eps["current"])
                cpu_ratio = statistics.median(cps["current"]) / statistics.median(cps["base"])
                rows.append((case, qname, b, c, c / b, cpu_ratio, statistics.median(rss["base"]),
                             statistics.median(rss["current"])))
                print(f"  {case} {qname}: base {', '.join(f'{x:,.0f}' for x in eps['base'])}; current "
                      f"{', '.join(f'{x:,.0f}' for x in eps['current'])} el/s; same output CHT: "
                      f"{'yes' if same else 'NO'}; per CPU-second incl. start-up (median): base "
                      f"{statistics.median(cps['base']):,.0f}, current {statistics.median(cps['current']):,.0f} "
                      f"(x{statistics.median(cps['current']) / statistics.median(cps['base']):.2f})", flush=True)
            inp.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'shape':>10} {'query':>7} {'base el/s':>11} {'current el/s':>13} {'ratio':>6} {'per CPU-s':>9} "
          f"{'RSS base/cur MiB':>17}  (target)", flush=True)
    for case, qname, b, c, ratio, cpu_ratio, rb, rc in rows:
        flag = "  SLOWER" if ratio < 1 - SLOWER else ""
        tgt = f"  ({TARGETS[case]:,})" if case in TARGETS else ""
        print(f"{case:>10} {qname:>7} {b:>11,.0f} {c:>13,.0f} {ratio:>6.2f} {cpu_ratio:>9.2f} {rb:>8.1f}/{rc:<8.1f}"
              f"{tgt}{flag}", flush=True)
        if flag:
            failures.append(f"{case} {qname}: current {c:,.0f} el/s is {1 - ratio:.0%} slower than base {b:,.0f}")
    print(f"{load_text()}; temporary tree removed: {not tmp.exists()}", flush=True)
    if failures:
        print("checks not met:\n  " + "\n  ".join(failures), flush=True)
    else:
        print("all checks met (current within 5 % of base or faster, same outputs)", flush=True)
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
