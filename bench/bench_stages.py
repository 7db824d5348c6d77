"""Spark batch: a query graph whose partitioning key changes, run as stages against the same graph in one
bucket (what the planner did before stages), in the same run, on the same input.

Query: the two streams of `bench.gen.join_streams` (10 k skewed keys, disorder, ~5 % retractions, CTIs)
joined on ``k``, then counted per right value ``q`` (100 values) in tumbling windows of 50 ticks. No key
serves both steps, so the staged plan routes the join by ``k`` and the window by ``q``, with a shuffle of the
join's output (and its CTIs) between them; the baseline runs the whole graph in one Python task.

Prints, for each plan: seconds (Spark job, collection included; session start-up excluded, measured once
before), elements/s, output rows; and the staged/single time ratio. Both outputs must have the same CHT.

With the default key skew one hot key holds most of the join's work, which no partitioning spreads;
``--skew 1`` (uniform keys) shows what the stages gain when the work can spread. ``--heavy`` replaces the
tumbling count by hopping windows (size 200, hop 10) with ``median`` of the left value over 1,000 join keys:
a graph whose engine work outweighs the exchange, where the stages gain even on two task slots (the planner
does not know it before the run: such a graph is staged there only when the session says so,
`udm.host.spark.stage_cost`); ``--window``/``--udm``/``--keys`` set any other shape.

Plans alternate (single, staged, staged, single, ...) ``--repeat`` times and the medians are reported, with
the load average: the machine may be shared. Both plans are forced (``staged=True/False``): left to the
session, a graph runs in one bucket on two task slots or fewer (`udm.host.spark.stage_cost`).
``--master`` runs them elsewhere than ``local[2]``;
``--cluster`` starts a standalone cluster of two one-core workers on this machine
(`udm.host.testing.spark_cluster`) and runs the same comparison there and on ``local[2]``, each in a child
process of its own: on each, the staged plan against one bucket, and the staged plan's time on the cluster
against ``local[2]``.

``python -m bench.bench_stages [--quick] [--elements N] [--buckets B] [--skew S] [--keys K] [--heavy]
[--window JSON] [--udm NAME] [--repeat R] [--cluster] [--detail]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import gen

QUERY: dict[str, Any] = {"inputs": {"left": {}, "right": {}}, "steps": [
    {"id": "j", "op": "join", "from": ["left", "right"], "on": "k", "right_prefix": "r_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 50}, "group_by": ["r_q"], "udm": "count",
     "as": "n"}]}
#: ``--heavy``: the window step of a graph whose engine work outweighs the exchange (each joined element in
#: 20 windows, a holistic UDA)
HEAVY_WINDOW = ('{"type": "hopping", "size": 200, "hop": 10}', "median")


def query(window: str | None = None, udm: str | None = None) -> dict[str, Any]:
    """`QUERY` with another window (JSON text) and UDM for its window step (a UDM other than ``count`` reads
    the left input's ``v``)."""
    q = json.loads(json.dumps(QUERY))
    step = q["steps"][1]
    if window is not None:
        step["window"] = json.loads(window)
    if udm is not None and udm != "count":
        step.update(udm=udm, input="v")
    return q


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_stages", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="50 k elements instead of 400 k")
    ap.add_argument("--elements", type=int, default=None)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--skew", type=float, default=3.0, help="key skew of the streams (1: uniform keys)")
    ap.add_argument("--repeat", type=int, default=1, help="alternating runs of each plan (median reported)")
    ap.add_argument("--keys", type=int, default=10_000, help="join key values of the streams")
    ap.add_argument("--window", default=None, help="the window step's window (JSON; default tumbling 50)")
    ap.add_argument("--udm", default=None, help="the window step's UDM (default count; others read v)")
    ap.add_argument("--heavy", action="store_true",
                    help=f"window {HEAVY_WINDOW[0]} with {HEAVY_WINDOW[1]} (and --keys 1000 unless given)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cluster", action="store_true", help="also on a 2-worker standalone cluster (children)")
    ap.add_argument("--detail", action="store_true",
                    help="per plan, its last run's Spark stages: tasks, task CPU, shuffle rows, each task's run time")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's result, one JSON line
    args = ap.parse_args(argv)
    n = args.elements or (50_000 if args.quick else 400_000)
    if args.heavy:
        args.window, args.udm = args.window or HEAVY_WINDOW[0], args.udm or HEAVY_WINDOW[1]
        if "--keys" not in (argv if argv is not None else sys.argv):
            args.keys = 1_000
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.cluster:
        return _cluster(args, n)

    from udm.host.model.spec import parse_query
    from udm.host.spark.convert import collect_elements
    from udm.host.spark.file_source import file_elements_df, scan_file
    from udm.host.spark.graph import run_graph_batch
    from udm.host.spark.session import get_spark
    from udm.host.spark.stage_cost import staging_pays
    from udm.host.spark.stages import plan_stages
    from udm.host.testing.cht import cht

    spec = parse_query(query(args.window, args.udm))
    print(f"window step: {json.dumps(spec.to_json_dict()['steps'][1]['window'])} {spec.steps[1].udm}; "
          f"{args.keys:,} join keys", flush=True)
    print(f"stages: {[[x.name for x in s.nodes] for s in plan_stages(spec)]}", flush=True)
    t0 = time.perf_counter()
    spark = get_spark(args.master, shuffle_partitions=args.buckets)
    print(f"spark session: {time.perf_counter() - t0:.1f}s ({spark.sparkContext.master}); a run that leaves the "
          f"plan to the session runs {'stages' if staging_pays(spark) else 'one bucket'} here "
          "(udm.host.spark.stage_cost; both plans below are forced)", flush=True)
    # the files stay until the end: the cached frames are read from them again if Spark drops a cached block
    files = tempfile.TemporaryDirectory(prefix="udm-bench-stages-")
    paths = {name: Path(files.name) / f"{name}.jsonl" for name in ("left", "right")}
    gen.join_streams(paths["left"], paths["right"], n, skew=args.skew, keys=args.keys)
    frames = {}
    for name, path in paths.items():  # read as `udm run` reads a file: ranges parsed by tasks
        frames[name] = file_elements_df(spark, scan_file(path, spark.sparkContext.defaultParallelism)).cache()
        frames[name].count()
    import statistics

    times: dict[str, list[float]] = {"single bucket": [], "staged": []}
    answers: dict[str, Any] = {}
    loads = [os.getloadavg()[0]]
    plans = [("single bucket", False), ("staged", True)]
    meter = Meter(spark) if not spark.sparkContext.master.startswith("spark://") else None
    costs: dict[str, list[dict[str, float]]] = {"single bucket": [], "staged": []}
    details: dict[str, list[tuple[Any, ...]]] = {}
    for r in range(args.repeat):
        for label, staged in (plans if r % 2 == 0 else plans[::-1]):
            if meter is not None:
                meter.start()
            t0 = time.perf_counter()
            run = run_graph_batch(spec, frames, buckets=args.buckets, staged=staged)
            try:
                out = collect_elements(run.output)
                split = run.split
            finally:
                run.unpersist()
            secs = time.perf_counter() - t0
            times[label].append(secs)
            if meter is not None:
                costs[label].append(meter.stop())
                if args.detail:
                    details[label] = meter.stage_rows()
            answers[label] = cht(out)
            loads.append(os.getloadavg()[0])
            if not args.json:
                print(f"{label:>14}: {secs:7.1f}s  {n / secs:9,.0f} el/s  {len(out):,} output elements  "
                      f"split={split}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    if meter is not None and not args.json:
        for label, runs in costs.items():
            m = {k: statistics.median(c[k] for c in runs) for k in runs[0]}
            print(f"{label:>14} (median of {len(runs)}): {m['jobs']:.0f} jobs, {m['stages']:.0f} stages, "
                  f"{m['tasks']:.0f} tasks, shuffle {m['shuffle_rows']:,.0f} rows {m['shuffle_mb']:.1f} MB; "
                  f"CPU s: python workers {m['python']:.1f}, JVM {m['jvm']:.1f} (tasks {m['jvm_task_cpu']:.1f}, "
                  f"JIT {m['jit']:.1f}, GC {m['gc']:.1f}, py4j {m['py4j']:.1f}; "
                  f"{m['compiles']:.0f} classes generated), "
                  f"driver {m['driver']:.1f}, total {m['python'] + m['jvm'] + m['driver']:.1f}", flush=True)
    for label, rows in details.items() if not args.json else ():
        print(f"{label:>14}, last run's Spark stages (id, name, tasks, task CPU s, shuffle read rows, shuffle "
              "write rows, each task's run s):", flush=True)
        for row in sorted(rows):
            print(f"{'':>16}{row[0]:>4} {row[1]:<36} {row[2]:>3} {row[3]:6.2f} {row[4]:>9,} {row[5]:>9,}  "
                  f"{' '.join(f'{t:.2f}' for t in row[-1])}", flush=True)
    same = answers["staged"] == answers["single bucket"]
    ratio = med["staged"] / med["single bucket"]
    cpu_total = {label: statistics.median(c["python"] + c["jvm"] + c["driver"] for c in runs)
                 for label, runs in costs.items() if runs}
    if args.json:
        cpu = {label: {k: statistics.median(c[k] for c in runs) for k in runs[0]} for label, runs in costs.items()
               if runs}
        print(json.dumps({"single": med["single bucket"], "staged": med["staged"], "same": same,
                          "load": [min(loads), max(loads)], "cpu": cpu}), flush=True)
    else:
        print(f"median of {args.repeat}: staged {med['staged']:.1f}s, single bucket {med['single bucket']:.1f}s; "
              f"staged / single-bucket time: {ratio:.2f}x ({args.buckets} buckets on {spark.sparkContext.master}, "
              f"{os.cpu_count()} cpus; target <= 1.0x); same CHT: {same}; load {min(loads):.1f}-{max(loads):.1f}",
              flush=True)
        if len(cpu_total) == 2:
            print(f"staged / single-bucket CPU (python workers + JVM + driver, median of {args.repeat}): "
                  f"{cpu_total['staged'] / cpu_total['single bucket']:.2f}x ({cpu_total['staged']:.1f} / "
                  f"{cpu_total['single bucket']:.1f} CPU-s)", flush=True)
    files.cleanup()
    return 0 if same else 1


class Meter:
    """What one plan run cost that the machine's load does not change: Spark jobs, stages and tasks, shuffle
    rows and bytes written (the JVM's status store), classes Spark generated, and CPU seconds of the JVM (of
    which its JIT compiler threads', its GC's and its py4j threads'), of its Python workers (the JVM's
    process tree in /proc: live processes' own and reaped children's time) and of this driver."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self.store = self.sc._jsc.sc().statusStore()
        self.root = self.sc._gateway.proc.pid
        self.tick = os.sysconf("SC_CLK_TCK")
        self.codegen = self.sc._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def _cpu(self) -> dict[str, float]:
        """CPU seconds of the JVM's process tree, by ``java`` and the rest (Python workers)."""
        kids: dict[int, list[int]] = {}
        stat: dict[int, list[str]] = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                text = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            rest = text[text.rindex(")") + 2:].split()
            stat[int(d)] = [name, *rest]
            kids.setdefault(int(rest[1]), []).append(int(d))
        got = {"jvm": 0.0, "python": 0.0}
        todo = [self.root]
        while todo:
            pid = todo.pop()
            todo.extend(kids.get(pid, []))
            if pid not in stat:
                continue
            f = stat[pid]  # (fields 14-17 of proc(5): utime stime cutime cstime, here at 12..15)
            secs = sum(int(x) for x in f[12:16]) / self.tick
            got["jvm" if f[0] == "java" else "python"] += secs
        # the JVM's threads by role: its compiler threads (C1/C2: more distinct generated code, more to compile;
        # JVM warm-up: it goes on for runs after Spark's code generator stops compiling), its garbage
        # collector's, and the py4j threads the driver's calls run on (planning, code generation)
        got.update(jit=0.0, gc=0.0, py4j=0.0)
        for task in os.listdir(f"/proc/{self.root}/task") if self.root in stat else []:
            try:
                text = Path(f"/proc/{self.root}/task/{task}/stat").read_text()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            role = ("jit" if "CompilerThre" in name else "gc" if name.startswith(("GC Thread", "G1 "))
                    else "py4j" if name.startswith("Thread-") else None)
            if role is not None:
                f = text[text.rindex(")") + 2:].split()
                got[role] += (int(f[11]) + int(f[12])) / self.tick
        # classes Spark's code generator compiled (Janino; a plan seen before hits its cache)
        got["compiles"] = float(self.codegen.METRIC_COMPILATION_TIME().getCount())
        import resource

        got["driver"] = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(
            resource.RUSAGE_SELF).ru_stime
        return got

    def _stages(self) -> Any:
        none = self.sc._gateway.new_array(self.sc._gateway.jvm.double, 0)
        return self.store.stageList(None, False, False, none, None)

    def stage_rows(self) -> list[tuple[Any, ...]]:
        """(stage id, name, tasks, task CPU s, shuffle read rows, shuffle write rows, each task's run s) of the
        stages since `start`: where the time went, and whether one task (a hot key's bucket) held it."""
        stages = self._stages()
        rows = []
        for i in range(stages.size()):
            s = stages.apply(i)
            if s.stageId() > self.before[1] and str(s.status()) == "COMPLETE":
                tasks = self.store.taskList(s.stageId(), s.attemptId(), 1000)
                runs = sorted((tasks.apply(j).taskMetrics().get().executorRunTime() / 1e3
                               for j in range(tasks.size()) if tasks.apply(j).taskMetrics().isDefined()),
                              reverse=True)
                rows.append((s.stageId(), str(s.name())[:36], s.numCompleteTasks(), s.executorCpuTime() / 1e9,
                             s.shuffleReadRecords(), s.shuffleWriteRecords(), runs))
        return rows

    def _ids(self) -> tuple[int, int]:
        jobs = self.store.jobsList(None)
        stages = self._stages()
        return (max([jobs.apply(i).jobId() for i in range(jobs.size())], default=-1),
                max([stages.apply(i).stageId() for i in range(stages.size())], default=-1))

    def start(self) -> None:
        self.sc._jsc.sc().listenerBus().waitUntilEmpty()
        self.before = self._ids()
        self.cpu0 = self._cpu()

    def stop(self) -> dict[str, float]:
        cpu = self._cpu()
        self.sc._jsc.sc().listenerBus().waitUntilEmpty()
        jobs = self.store.jobsList(None)
        stages = self._stages()
        got: dict[str, float] = {k: cpu[k] - self.cpu0[k] for k in cpu}
        got["jobs"] = sum(1 for i in range(jobs.size()) if jobs.apply(i).jobId() > self.before[0])
        for key in ("stages", "tasks", "shuffle_rows", "shuffle_mb", "jvm_task_cpu"):
            got[key] = 0
        for i in range(stages.size()):
            s = stages.apply(i)
            if s.stageId() <= self.before[1] or str(s.status()) != "COMPLETE":
                continue
            got["stages"] += 1
            got["tasks"] += s.numCompleteTasks()
            got["shuffle_rows"] += s.shuffleWriteRecords()
            got["shuffle_mb"] += s.shuffleWriteBytes() / 1e6
            got["jvm_task_cpu"] += s.executorCpuTime() / 1e9
        return got


def _cluster(args: argparse.Namespace, n: int) -> int:
    """The comparison on ``local[2]`` and on a standalone cluster of two one-core workers, in children."""
    import subprocess
    import tempfile

    from udm.host.testing.spark_cluster import Cluster

    root = Path(__file__).resolve().parent.parent
    base = [sys.executable, "-m", "bench.bench_stages", "--json", "--elements", str(n), "--buckets",
            str(args.buckets), "--skew", str(args.skew), "--repeat", str(args.repeat), "--keys", str(args.keys),
            *(["--window", args.window] if args.window else []), *(["--udm", args.udm] if args.udm else [])]
    got: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="udm-bench-cluster-") as d, Cluster(Path(d), workers=2, cores=1) as c:
        for name, master in (("local[2]", "local[2]"), ("cluster", c.url), ("local[2] again", "local[2]")):
            res = subprocess.run([*base, "--master", master], cwd=root, capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr[-3000:])
                return 1
            got[name] = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{name:>15}: staged {got[name]['staged']:.1f}s, single bucket {got[name]['single']:.1f}s, "
                  f"same CHT {got[name]['same']}, load {got[name]['load'][0]:.1f}-{got[name]['load'][1]:.1f}",
                  flush=True)
    for name, g in got.items():
        print(f"{name:>15}: staged / single bucket {g['staged'] / g['single']:.2f}x", flush=True)
    local = (got["local[2]"]["staged"] + got["local[2] again"]["staged"]) / 2
    print(f"staged graph, cluster (2 workers x 1 core) / local[2]: {got['cluster']['staged'] / local:.2f}x "
          f"({n:,} elements, {args.buckets} buckets)", flush=True)
    return 0 if all(g["same"] for g in got.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
