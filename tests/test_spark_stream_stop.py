"""`stop_between_batches`: a streaming query is stopped once its micro-batch under way is done, or after
the wait regardless (a fake query records when ``stop`` came, relative to its trigger)."""

from __future__ import annotations

import time
from typing import Any

from udm.host.spark.stream_stop import stop_between_batches


class _Query:
    """A query whose trigger is active for the first ``busy`` status calls (``busy=None``: always)."""

    def __init__(self, busy: int | None) -> None:
        self.busy = busy
        self.calls = 0
        self.stopped_at: int | None = None
        self.isActive = True

    @property
    def status(self) -> dict[str, Any]:
        if not self.isActive:
            raise RuntimeError("no status after stop")
        self.calls += 1
        return {"isTriggerActive": self.busy is None or self.calls <= self.busy}

    def stop(self) -> None:
        self.stopped_at = self.calls
        self.isActive = False


def test_waits_for_the_micro_batch_under_way() -> None:
    q = _Query(busy=3)
    stop_between_batches(q, wait=5.0)
    assert q.stopped_at == 4  # three busy answers, then the idle one, then stop


def test_stops_after_the_wait_when_the_trigger_never_rests() -> None:
    q = _Query(busy=None)
    t0 = time.monotonic()
    stop_between_batches(q, wait=0.3)
    assert not q.isActive and q.stopped_at is not None and q.stopped_at >= 2
    assert 0.3 <= time.monotonic() - t0 < 2.0


def test_an_idle_or_ended_query_stops_at_once() -> None:
    q = _Query(busy=0)
    stop_between_batches(q)
    assert q.stopped_at == 1
    ended = _Query(busy=0)
    ended.isActive = False
    stop_between_batches(ended)  # no status call on an ended query; stop() is still called (a no-op in Spark)
    assert ended.calls == 0 and ended.stopped_at == 0
