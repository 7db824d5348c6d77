"""The JVM's stderr filter (`udm.host.spark.session`): PySpark's ``transformWithStateInPandas`` worker
trace and the JVM's start-up warning are dropped, everything else the JVM writes reaches stderr in order.
Spark-free: the filter is exercised on a pipe standing in for the JVM's stderr."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from udm.host.spark import session

NOISE = [
    b"WARNING: Using incubator modules: jdk.incubator.vector\n",
    b"Starting Streaming TransformWithStateInPandas Python worker.\n",
    b"\n",
    b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF: <f>.\n",
    b"\n",
]


def _through_filter(tmp_path: Path, chunks: list[bytes]) -> bytes:
    """What reaches the real stderr (a file here) when the JVM, holding the filtered fd 2, writes ``chunks``."""
    target = tmp_path / "stderr"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    before = set(threading.enumerate())
    try:
        with session._jvm_stderr_filtered(True):
            jvm = os.dup(2)  # what a child started now inherits as its stderr: the pipe
        for chunk in chunks:
            os.write(jvm, chunk)
        os.close(jvm)  # the last writer gone: the copying thread reads to the end and stops
        for t in set(threading.enumerate()) - before:
            if t.name == "udm-jvm-stderr":
                t.join(timeout=10)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return target.read_bytes()


def test_the_worker_trace_and_start_up_warning_are_dropped_and_the_rest_kept_in_order(tmp_path: Path) -> None:
    kept = [b"ERROR something a user must see\n", b"\n", b"  at line two of it\n"]
    got = _through_filter(tmp_path, [NOISE[0], kept[0], kept[1], *NOISE[1:], kept[2]])
    # a blank line after a kept line is kept; the blank lines that follow the trace lines are not
    assert got == b"".join(kept)


def test_a_disabled_filter_leaves_stderr_alone(tmp_path: Path) -> None:
    target = tmp_path / "stderr"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        with session._jvm_stderr_filtered(False):
            os.write(2, NOISE[1])
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert target.read_bytes() == NOISE[1]
