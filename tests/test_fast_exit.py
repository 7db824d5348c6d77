"""`udm.host.cli.fast_exit`: a successful ``udm run`` ends without the interpreter's teardown only when
nothing can tell — same output, atexit handlers still run, never inside a harness or with a live thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from udm.host.cli import fast_exit

_CHILD = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
class Torn:
    def __del__(self):
        sys.stderr.write("torn down\\n")  # by the interpreter's teardown, which the fast exit skips
torn = Torn()
from udm.host.cli.app import main
sys.argv = ["udm", *sys.argv[1:]]
main()
"""


def _child(tmp_path: Path, fast: bool, *args: str) -> tuple[int, str, str, bytes]:
    out = tmp_path / f"out-{fast}.jsonl"
    env = {**os.environ, fast_exit.ENV: "1" if fast else "0"}
    res = subprocess.run([sys.executable, "-c", _CHILD, *args, "--output", str(out)], capture_output=True,
                         text=True, timeout=120, env=env)
    return res.returncode, res.stdout, res.stderr, out.read_bytes() if out.exists() else b""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                        "group_by": ["sym"], "udm": "sum", "input": "price", "as": "total"}]}))
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(f'{{"kind":"insert","id":"e{i}","le":{i},"re":{i + 1},'
                           f'"payload":{{"sym":"g{i % 3}","price":{i}}}}}\n' for i in range(50)))
    return q, inp


def test_same_output_and_atexit_handlers_run(tmp_path: Path, files: tuple[Path, Path]) -> None:
    q, inp = files
    slow = _child(tmp_path, False, "run", str(q), "--input", str(inp), "--json")
    fast = _child(tmp_path, True, "run", str(q), "--input", str(inp), "--json")
    assert slow[0] == fast[0] == 0
    assert slow[2] == "atexit ran\ntorn down\n" and fast[2] == "atexit ran\n"
    assert slow[3] == fast[3] and slow[3].count(b"\n") == 5 * 3 + 1  # 5 windows x 3 groups + the final CTI
    s, f = json.loads(slow[1]), json.loads(fast[1])
    assert {**s, "seconds": 0} == {**f, "seconds": 0}


def test_a_failing_run_exits_the_normal_way(tmp_path: Path, files: tuple[Path, Path]) -> None:
    _, inp = files
    code, _, err, _ = _child(tmp_path, True, "run", str(tmp_path / "nope.json"), "--input", str(inp))
    assert code == 1 and "nope.json" in err and err.endswith("atexit ran\ntorn down\n")


def test_another_command_exits_the_normal_way() -> None:
    res = subprocess.run([sys.executable, "-c", _CHILD, "list"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, fast_exit.ENV: "1"})
    assert res.returncode == 0 and "sum" in res.stdout and res.stderr.endswith("atexit ran\ntorn down\n")


def test_only_when_requested_from_the_programs_main_and_not_when_switched_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fast_exit.ENV, raising=False)
    monkeypatch.setattr(fast_exit, "_requested", False)
    assert not fast_exit.allowed("__main__")
    fast_exit.request()
    assert fast_exit.allowed("__main__")
    assert not fast_exit.allowed("cli_harness")
    monkeypatch.setenv(fast_exit.ENV, "0")
    assert not fast_exit.allowed("__main__")


def test_not_while_a_non_daemon_thread_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fast_exit.ENV, raising=False)
    monkeypatch.setattr(fast_exit, "_requested", True)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="plugin-worker")
    worker.start()
    try:
        assert not fast_exit.allowed("__main__")
    finally:
        stop.set()
        worker.join()
    assert fast_exit.allowed("__main__")
