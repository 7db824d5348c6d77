"""`udm.host.io.arrow_pool`: the reader moves pyarrow off mimalloc, unless the user chose a pool."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import json, pyarrow as pa
from udm.host.io.jsonl import JsonlReader
before = pa.default_memory_pool().backend_name
batches = list(JsonlReader(sys.argv[1]))
print(json.dumps([before, pa.default_memory_pool().backend_name, sum(len(b) for b in batches)]))
"""


def _probe(tmp_path, env_pool: str | None) -> list:
    src = tmp_path / "in.jsonl"
    src.write_text('{"kind": "insert", "id": "a", "le": 1, "re": 2, "payload": {"x": 1}}\n{"kind": "cti", "t": 3}\n')
    env = {k: v for k, v in __import__("os").environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env_pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = env_pool
    res = subprocess.run([sys.executable, "-c", "import sys\n" + _PROBE, str(src)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_reading_moves_the_default_pool_to_jemalloc_or_system(tmp_path):
    before, after, n = _probe(tmp_path, None)
    assert n == 2
    assert after in ("jemalloc", "system")
    assert before != "jemalloc" or after == "jemalloc"


@pytest.mark.parametrize("pool", ["mimalloc", "system"])
def test_a_pool_the_user_named_is_kept(tmp_path, pool):
    before, after, n = _probe(tmp_path, pool)
    assert (before, after, n) == (pool, pool, 2)
