"""`udm.host.cli.startup_gc`: no cyclic collection while ``udm`` starts up, the collector back on (and the
start-up's objects frozen) when the command does its work, everything as before once ``main`` returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = """
import gc, json, sys
counts = {"collections": 0}
gc.callbacks.append(lambda phase, info: counts.__setitem__("collections", counts["collections"] + (phase == "stop")))
from udm.host.query import runners
real = runners.run_local
def spy(req):
    counts["at_run"] = counts["collections"] - counts["before_main"]
    counts["enabled_at_run"] = gc.isenabled()
    counts["frozen_at_run"] = gc.get_freeze_count()
    return real(req)
runners.ENGINES["local"] = spy
code = "from udm.host.cli.app import main\\ntry:\\n    main()\\nexcept SystemExit:\\n    pass\\n"
sys.argv = ["udm", *sys.argv[2:]]
counts["before_main"] = counts["collections"]
exec(code, {"__name__": __import__("os").environ["CALLER"]})
counts["enabled_after"] = gc.isenabled()
counts["frozen_after"] = gc.get_freeze_count()
print(json.dumps(counts))
"""


def _child(tmp_path: Path, caller: str) -> dict[str, object]:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                        "udm": "sum", "input": "price", "as": "total"}]}))
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"kind":"insert","id":"a","le":1,"re":2,"payload":{"price":3}}\n')
    env = {**os.environ, "CALLER": caller, "UDM_FAST_EXIT": "0"}
    res = subprocess.run([sys.executable, "-c", _CHILD, "-", "run", str(q), "--input", str(inp), "--output",
                          str(tmp_path / "o.jsonl"), "--quiet"], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_no_collection_during_start_up_and_the_collector_back_for_the_run(tmp_path: Path) -> None:
    own = _child(tmp_path, "__main__")
    embedded = _child(tmp_path, "some_program")  # a harness or an embedding program: left alone
    assert own["at_run"] == 0 < embedded["at_run"]  # (start-up triggers dozens of collections otherwise)
    assert own["enabled_at_run"] is True and own["frozen_at_run"] > 10_000
    assert embedded["enabled_at_run"] is True and embedded["frozen_at_run"] == 0
    for counts in (own, embedded):  # after main: as it was
        assert counts["enabled_after"] is True and counts["frozen_after"] == 0
