"""Run in a child process by ``test_spark_cluster.py``: the runs of ``work/job.json`` on a standalone
cluster (``argv[2]``), one Spark application for all of them, through the engines ``udm run`` calls
(`udm.host.query.runners.get_engine` with a `RunRequest`, exactly what the CLI builds). A child process
because the test run's own SparkSession is ``local[2]`` and a process has one SparkContext.

Before the run named ``kill`` it writes ``work/kill-started`` (the parent then kills a worker); after
each run it records the run's summary and its start and end times in ``work/results.json``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(work: Path, master: str) -> None:
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query
    from udm.host.query.runners import RunRequest, get_engine
    from udm.host.spark.session import get_spark
    from udm.host.spark.stage_cost import STAGED_CONF

    get_spark(master, shuffle_partitions=2, **{STAGED_CONF: "true"})  # (the cluster's 2 slots: staged anyway)
    results: dict[str, Any] = {}
    for run in json.loads((work / "job.json").read_text(encoding="utf-8")):
        if run["name"] == "kill":
            (work / "kill-started").write_text(str(time.time()), encoding="utf-8")
        inputs = run["input"] if isinstance(run["input"], str) else dict(run["input"])
        req = RunRequest(bind(parse_query(run["query"])), inputs, run["output"], dead_letter=run["dead"],
                         batch_size=run.get("batch_size"), options={"master": master})
        t0 = time.time()
        res = get_engine(run["engine"])(req)
        results[run["name"]] = {"start": t0, "end": time.time(), "elements_in": res.elements_in,
                                "dead_lettered": res.dead_lettered}
        (work / "results.json").write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
