"""`udm run --checkpoint DIR` on the local engine: a run killed with SIGKILL at any point and started again with
the same command writes exactly (byte for byte) the output and dead letters of an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from udm.host.temporal.elements import parse_element
from udm.host.testing.cht import cht
from udm.host.testing.oracle import oracle

QUERY = {"steps": [{"op": "window", "window": {"type": "hopping", "size": 20, "hop": 5}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}


def _input(path: Path, n: int, seed: int = 1) -> None:
    """Inserts with CTIs, retractions (some refused: dead letters), a poisoned value now and then."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            t = i // 3
            v: Any = "bad" if i % 211 == 0 else rng.randint(0, 100)
            f.write(json.dumps({"kind": "insert", "id": f"e{i}", "le": t, "re": t + rng.randint(1, 30),
                                "payload": {"g": f"k{i % 7}", "v": v}}) + "\n")
            if i % 500 == 499:
                f.write(json.dumps({"kind": "cti", "t": t - 20}) + "\n")
            if i % 97 == 0:
                f.write(json.dumps({"kind": "retract", "id": f"e{i}", "le": t, "re": 99999, "re_new": t}) + "\n")


def _cmd(d: Path, out: str, ck: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "udm.host.cli.app", "run", str(d / "q.json"), "--input", str(d / "in.jsonl"),
           "--output", str(d / f"{out}.jsonl"), "--dead-letter", str(d / f"{out}.dl.jsonl"), "--batch-size", "300"]
    return cmd + (["--checkpoint", str(d / ck)] if ck else [])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ck")
    _input(d / "in.jsonl", 30000)
    (d / "q.json").write_text(json.dumps(QUERY))
    res = subprocess.run(_cmd(d, "ref", None), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return d


def test_uninterrupted_checkpointed_run_equals_plain_run(run_dir: Path) -> None:
    res = subprocess.run(_cmd(run_dir, "once", "ck-once"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (run_dir / "once.jsonl").read_bytes() == (run_dir / "ref.jsonl").read_bytes()
    assert (run_dir / "once.dl.jsonl").read_bytes() == (run_dir / "ref.dl.jsonl").read_bytes()
    # and the plain run is right: its CHT is the oracle's
    lines = (run_dir / "in.jsonl").read_text().splitlines()
    stream = [parse_element(json.loads(x)) for x in lines]
    out = [parse_element(json.loads(x)) for x in (run_dir / "ref.jsonl").read_text().splitlines()]
    from udm.host.model.spec import parse_query

    assert cht(out) == oracle(parse_query(QUERY), stream)
    # a second run with the finished checkpoint changes nothing
    res = subprocess.run(_cmd(run_dir, "once", "ck-once"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (run_dir / "once.jsonl").read_bytes() == (run_dir / "ref.jsonl").read_bytes()


def _mtime(p: Path) -> int:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return 0


def test_sigkill_at_many_points_then_resume(run_dir: Path) -> None:
    """Every third attempt is killed at a random moment (also before the first commit); the others right
    after a fresh commit, a few milliseconds into the next batch (mid-batch, output half written)."""
    rng = random.Random(7)
    mark = run_dir / "ck-kill" / "local-run.pkl"
    kills = after_commit = 0
    for attempt in range(10):
        seen = _mtime(mark)
        proc = subprocess.Popen(_cmd(run_dir, "killed", "ck-kill"), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        if attempt % 3 == 0:
            time.sleep(rng.uniform(0.05, 1.0))
        else:
            deadline = time.monotonic() + 60
            while proc.poll() is None and _mtime(mark) == seen and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.03))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
            after_commit += _mtime(mark) != seen
        proc.wait(timeout=60)
        if proc.returncode == 0:
            break
    res = subprocess.run(_cmd(run_dir, "killed", "ck-kill"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    print(f"local SIGKILL: {kills} kills, {after_commit} right after a commit; output identical")
    assert kills >= 5 and after_commit >= 4, (kills, after_commit)
    assert (run_dir / "killed.jsonl").read_bytes() == (run_dir / "ref.jsonl").read_bytes()
    assert (run_dir / "killed.dl.jsonl").read_bytes() == (run_dir / "ref.dl.jsonl").read_bytes()


def test_checkpoint_of_another_run_is_refused(run_dir: Path) -> None:
    res = subprocess.run(_cmd(run_dir, "once", "ck-other"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    other = {"steps": [{**QUERY["steps"][0], "udm": "max"}]}
    (run_dir / "q2.json").write_text(json.dumps(other))
    cmd = _cmd(run_dir, "once", "ck-other")
    cmd[cmd.index(str(run_dir / "q.json"))] = str(run_dir / "q2.json")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "different query spec" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_checkpoint_of_another_layout_is_refused_in_one_line(run_dir: Path) -> None:
    """A checkpoint whose engine state another udmkit wrote (another `FORMAT`) must not be unpickled into
    this engine's classes: one line, no traceback."""
    import pickle

    from udm.host.io.checkpoint import FORMAT

    res = subprocess.run(_cmd(run_dir, "old", "ck-old"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    path = run_dir / "ck-old" / "local-run.pkl"
    data = pickle.loads(path.read_bytes())
    assert data["format"] == FORMAT
    path.write_bytes(pickle.dumps({**data, "format": FORMAT - 1}))
    res = subprocess.run(_cmd(run_dir, "old", "ck-old"), capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "another version of udmkit" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
