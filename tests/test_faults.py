"""Faults around a run (issue 15's fault matrix): a full disk or an unwritable output is one clear line and
exit 1 with the input untouched; spark-streaming killed with SIGKILL resumes exactly once. (Plugins that
fail to import or register one name and version twice: tests/test_discovery.py; a raising UDM:
tests/test_input_typing.py; a non-deterministic UDM: the kit, tests/test_testing_contracts.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.session import default_partitions
from udm.host.spark.stream_lock import LOCK_NAME, CheckpointBusy, checkpoint_held
from udm.host.temporal.elements import parse_element
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}


def _udm(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "udm.host.cli.app", *args], capture_output=True, text=True,
                          timeout=timeout)


def _files(d: Path) -> tuple[Path, Path]:
    stream = generate(seed=3, events=40, groups=2, speculation=0.3, cti="regular", bad=0.1)
    src = d / "in.jsonl"
    write_stream(src, stream)
    q = d / "q.json"
    q.write_text(json.dumps(QUERY))
    return q, src


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return _files(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux) to simulate a full disk")
@pytest.mark.parametrize("which", ["--output", "--dead-letter"])
def test_full_disk_is_one_line_and_the_input_is_untouched(files: tuple[Path, Path], tmp_path: Path,
                                                          which: str) -> None:
    q, src = files
    before = src.read_bytes()
    args = {"--output": str(tmp_path / "o.jsonl"), "--dead-letter": str(tmp_path / "d.jsonl"), which: "/dev/full"}
    res = _udm("run", str(q), "--input", str(src), *[x for kv in args.items() for x in kv])
    assert res.returncode == 1
    assert res.stderr.strip() == "error: cannot write /dev/full: No space left on device"
    assert src.read_bytes() == before


def test_output_under_a_file_is_one_line(files: tuple[Path, Path], tmp_path: Path) -> None:
    q, src = files
    before = src.read_bytes()
    res = _udm("run", str(q), "--input", str(src), "--output", str(src / "out.jsonl"))
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "cannot write" in res.stderr and "Traceback" not in res.stderr
    assert src.read_bytes() == before


def _in_process(q: Path, src: Path, out: Path, dead: Path, ck: Path | None, batch_size: int | None = None,
                buckets: int | None = None) -> None:
    """A spark-streaming run in this process, on the tests' session (no JVM of its own to start): new, with
    ``buckets``, or resumed from ``ck`` (which keeps the batch size and bucket count it began with)."""
    from udm.host.model.spec import load_query
    from udm.host.query.runners import RunRequest, get_engine

    get_engine("spark-streaming")(RunRequest(bind(load_query(q)), src, out, dead_letter=dead, checkpoint=ck,
                                             batch_size=batch_size, options={"buckets": buckets} if buckets else {}))


@pytest.fixture(scope="module")
def uninterrupted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The query, the input and the uninterrupted run's directory (output ``b.jsonl``, dead letters ``b.dl``) the
    killed-and-resumed runs are held to: one run on the tests' session serves both kill tests (the same input
    and batch size, the CLI's bucket count: `default_partitions` of its default master, ``local[*]``)."""
    d = tmp_path_factory.mktemp("uninterrupted")
    q, src = _files(d)
    _in_process(q, src, d / "b.jsonl", d / "b.dl", None, batch_size=8, buckets=default_partitions("local[*]"))
    return q, src, d


@pytest.mark.spark
def test_spark_streaming_sigkill_then_resume(uninterrupted: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The CLI killed with SIGKILL once two micro-batches wrote their output, then resumed from its checkpoint:
    the output is byte for byte an uninterrupted run's, and its CHT the oracle's. Only the killed run needs a
    process of its own; the resumed and the uninterrupted ones run on the tests' session."""
    q, src, ref = uninterrupted
    ck = tmp_path / "ck"
    # (a session of its own: the kill takes the run's JVM with it, as a terminal's kill of a job does; `udm`
    # killed alone: the next test)
    proc = _run_until_two_batches(q, src, tmp_path, ck)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVM it started
    proc.wait(timeout=60)
    assert killed, "the run ended before it could be killed"
    _in_process(q, src, tmp_path / "a.jsonl", tmp_path / "a.dl", ck)
    _assert_as_uninterrupted(q, src, tmp_path, ref)


def _run_until_two_batches(q: Path, src: Path, tmp_path: Path, ck: Path) -> subprocess.Popen[bytes]:
    """The CLI's spark-streaming run (output ``a.jsonl``, dead letters ``a.dl``, checkpoint ``ck``) in a session
    of its own, returned once two micro-batches wrote their output (or it ended, or 240 s went by)."""
    cmd = [sys.executable, "-m", "udm.host.cli.app", "run", str(q), "--input", str(src), "--engine",
           "spark-streaming", "--batch-size", "8", "--output", str(tmp_path / "a.jsonl"), "--dead-letter",
           str(tmp_path / "a.dl"), "--checkpoint", str(ck)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline and len(list((ck / "out").glob("*.jsonl"))) < 2:
        time.sleep(0.05)
    return proc


def _assert_as_uninterrupted(q: Path, src: Path, tmp_path: Path, ref: Path) -> None:
    """The resumed run's ``a.jsonl`` and ``a.dl`` are byte for byte those of the uninterrupted run in ``ref``
    (``b.jsonl``, ``b.dl``: the `uninterrupted` fixture), and its CHT the oracle's."""
    assert (tmp_path / "a.jsonl").read_bytes() == (ref / "b.jsonl").read_bytes()
    assert (tmp_path / "a.dl").read_bytes() == (ref / "b.dl").read_bytes()
    out = [parse_element(json.loads(x)) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    stream = [parse_element(json.loads(x)) for x in src.read_text().splitlines() if _is_element(x)]
    assert verify(out, oracle_run(bind(parse_query(QUERY)), stream).cht)


def _alive(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes() and \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.spark
def test_spark_streaming_sigkill_of_udm_alone_then_resume_at_once(uninterrupted: tuple[Path, Path, Path],
                                                                  tmp_path: Path, capfd: Any) -> None:
    """Only ``udm`` killed (not its process group): its JVM lives on through Spark's shutdown hooks, writing the
    checkpoint. Held stopped (SIGSTOP) so it surely outlives the kill, it still holds the checkpoint's lock: the
    run resumed at once waits for it, saying for which process, and goes on once it ends (SIGCONT: its stdin,
    the dead driver's pipe, is closed, so it exits); the output is byte for byte an uninterrupted run's (no
    duplicate, no gap) and its CHT the oracle's."""
    q, src, ref = uninterrupted
    ck = tmp_path / "ck"
    proc = _run_until_two_batches(q, src, tmp_path, ck)
    jvm = int((ck / LOCK_NAME).read_text())
    assert _alive(jvm)
    os.kill(jvm, signal.SIGSTOP)
    try:
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)  # udm alone: its JVM is left behind
        proc.wait(timeout=60)
        threading.Timer(3.0, os.kill, (jvm, signal.SIGCONT)).start()
        _in_process(q, src, tmp_path / "a.jsonl", tmp_path / "a.dl", ck)
        assert f"waiting for process {jvm}" in capfd.readouterr().err
        assert not _alive(jvm)
    finally:
        if _alive(jvm):
            os.kill(jvm, signal.SIGKILL)
            os.kill(jvm, signal.SIGCONT)
    _assert_as_uninterrupted(q, src, tmp_path, ref)


HOLD = """import fcntl, os, sys, time
f = open(sys.argv[1], "a+")
fcntl.lockf(f, fcntl.LOCK_EX)
f.truncate(0)
f.write(str(os.getpid()))
f.flush()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.spark
def test_a_held_checkpoint_is_waited_for_then_refused_by_name(spark: Any, tmp_path: Path) -> None:
    """A checkpoint another process holds (its lock, as the JVM of a killed run holds it) is waited for a bounded
    time, then refused naming that process; once that process is gone the run takes it. A second run on it in
    this process is refused at once."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / LOCK_NAME)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t = time.monotonic()
        with pytest.raises(CheckpointBusy, match=f"still held by process {holder.pid} after 0.5 s"), \
                checkpoint_held(spark, tmp_path, wait=0.5):
            pass
        assert time.monotonic() - t >= 0.5
    finally:
        holder.kill()
        holder.wait()
    with checkpoint_held(spark, tmp_path, wait=5), \
            pytest.raises(CheckpointBusy, match="in use by another run in this process"), \
            checkpoint_held(spark, tmp_path, wait=5):
        pass
    with checkpoint_held(spark, tmp_path, wait=0):  # (let go at the end of the block)
        pass


def _is_element(line: str) -> bool:
    try:
        parse_element(json.loads(line))
    except Exception:
        return False
    return True
