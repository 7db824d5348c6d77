"""Stopping a streaming query between micro-batches rather than in the middle of one.

``query.stop()`` interrupts the stream execution thread. When that thread is inside a ``foreachBatch``
Python function that is running a Spark job, the interrupt comes back through Py4J as an error whose text
holds the interrupted job's whole stack trace; Spark decides whether the query failed or was stopped by
matching a regular expression against that text (``StreamExecution.isInterruptionException``, added by
SPARK-39218 / SPARK-48717), and on a long text Java's backtracking matcher overflows the thread's stack:
the JVM prints a ``java.lang.StackOverflowError`` of a thousand lines to stderr (the query does stop). It
is harmless but alarming, and an interrupted micro-batch is work thrown away. `stop_between_batches`
waits (a bounded time) for the micro-batch under way to finish, then stops the query.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["stop_between_batches"]


def stop_between_batches(query: Any, wait: float = 30.0) -> None:
    """Stop ``query`` once no trigger is active (at most ``wait`` seconds from now, then regardless).

    (A processing-time trigger may still fire between the check and the stop; the window is the time of
    one status call, not that of a micro-batch.)"""
    deadline = time.monotonic() + wait
    while query.isActive and time.monotonic() < deadline:
        try:
            if not query.status["isTriggerActive"]:
                break
        except Exception:  # a query that just ended has no status: stop() below is then a no-op
            break
        time.sleep(0.05)
    query.stop()
