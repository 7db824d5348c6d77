"""``python -m bench.nexmark._child QUERY_JSON INPUT OUTPUT ENGINE``: one run through `run_local` (or the
Spark batch engine) with the benchmark's UDFs in the catalog; prints one JSON line: the run's seconds
(`RunResult.seconds`: first byte read to last byte written), the CPU seconds of all its threads over the
run (the per-core figure), wall time from interpreter start, elements in
and out, and peak RSS (VmHWM, the process's own; see `bench._udm_child`)."""

from __future__ import annotations

import json
import sys
import time

T_START = time.perf_counter()


def _vmhwm_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str]) -> int:
    from bench.nexmark import udfs
    from udm.host.catalog import Catalog
    from udm.host.query.plan import bind
    from udm.host.query.runners import RunRequest, get_engine
    from udm.host.query.spec import QuerySpec

    spec_json, inp, out, engine = argv
    spec = QuerySpec.model_validate(json.loads(spec_json))
    bound = bind(spec, Catalog.discover(plugins=[udfs]))
    names = list(bound.graph.inputs)
    source = {n: inp for n in names} if len(names) > 1 or names != ["main"] else inp
    c0 = time.process_time()
    res = get_engine(engine)(RunRequest(bound, source, out, dead_letter=out + ".dl"))
    cpu = time.process_time() - c0
    print(json.dumps({"seconds": res.seconds, "cpu": cpu, "wall": time.perf_counter() - T_START, "in": res.elements_in,
                      "out": res.elements_out, "dead": res.dead_lettered, "rss_mb": _vmhwm_kb() / 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
