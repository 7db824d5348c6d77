"""A streaming run's hold on its checkpoint: a lock on ``DIR/udm.lock`` that the run's Spark driver (the JVM)
holds while the run goes on (issue 31).

Why: ``udm run`` killed with SIGKILL leaves its JVM running: PySpark's gateway exits when its stdin (a pipe
from the dead driver) ends, but only after Spark's shutdown hooks, which go on writing the checkpoint (offset
and commit logs, the state store). A run resumed at once read a half-written checkpoint, and Spark failed it
with "batch N doesn't exist". The lock is the JVM's (``FileChannel.tryLock``, an ``fcntl`` record lock on
Linux), so the operating system lets go of it when that process ends, however it ends; a resumed run takes it
before it reads the checkpoint, waiting (bounded, `WAIT_SECONDS`, saying for whom) while the dead run's JVM
still holds it. The file holds the holder's process id, for that message.

Only a session whose driver JVM runs on this machine as this process's gateway holds the lock: a Spark Connect
server is not a child of the run and does not die with it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from udm.host.errors import UdmError

__all__ = ["LOCK_NAME", "WAIT_SECONDS", "CheckpointBusy", "checkpoint_held"]

#: the lock file in a checkpoint directory
LOCK_NAME = "udm.lock"
#: how long a run waits for another process to let go of its checkpoint
WAIT_SECONDS = 120.0
#: how often it asks
_POLL = 0.1


class CheckpointBusy(UdmError):
    """Another process (a run, or the JVM of a killed one) still holds the checkpoint after the wait."""


def _gateway(spark: Any) -> Any:
    """The py4j view of the session's driver JVM, or None for a Spark Connect session (no JVM of ours)."""
    try:
        return spark.sparkContext._jvm
    except Exception:  # a Connect session has no SparkContext
        return None


def _holder(lock: Path) -> str:
    try:
        pid = lock.read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


@contextmanager
def checkpoint_held(spark: Any, checkpoint: str | Path | None, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold ``checkpoint``'s lock in the session's JVM for the block (module doc); nothing to hold without a
    checkpoint (a run's temporary directory is its own). Waits up to ``wait`` seconds for another holder,
    saying so once on stderr, then raises `CheckpointBusy`."""
    jvm = _gateway(spark) if checkpoint is not None else None
    if jvm is None:
        yield
        return
    path = Path(checkpoint) / LOCK_NAME  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    channel = jvm.java.io.RandomAccessFile(str(path), "rw").getChannel()
    try:
        lock = _take(channel, path, wait)
        try:
            path.write_text(str(jvm.java.lang.ProcessHandle.current().pid()), encoding="utf-8")
            yield
        finally:
            lock.release()
    finally:
        channel.close()


def _take(channel: Any, path: Path, wait: float) -> Any:
    deadline = time.monotonic() + wait
    said = False
    while True:
        try:
            lock = channel.tryLock()
        except Exception as exc:  # (py4j's error for the JVM's exception)
            if "OverlappingFileLockException" not in str(exc):
                raise
            # this JVM holds it: another run in this session
            raise CheckpointBusy(f"checkpoint {path.parent} is in use by another run in this process") from exc
        if lock is not None:
            return lock
        if time.monotonic() >= deadline:
            raise CheckpointBusy(f"checkpoint {path.parent} is still held by {_holder(path)} after {wait:g} s (a "
                                 "run on it, or the Spark driver of a killed one finishing its writes): stop it, "
                                 "then resume")
        if not said:
            said = True
            print(f"udm: waiting for {_holder(path)} (a run on it, or the Spark driver of a killed one) to let go "
                  f"of checkpoint {path.parent} (up to {wait:g} s)", file=sys.stderr, flush=True)
        time.sleep(_POLL)
