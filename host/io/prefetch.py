"""`prefetched`: an iterator run ahead of its consumer in a background thread.

Why: a reader's work is mostly pyarrow's (parsing JSON, decoding Parquet, building columns), which runs
without the GIL, so reading the next batches overlaps the engine's work on this one (the JSON Lines and
table readers).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any

__all__ = ["prefetched"]


def prefetched(it: Iterator[Any], depth: int, name: str) -> Generator[Any, None, None]:
    """Runs ``it`` in a background thread (called ``name``), ``depth`` items ahead; an error in ``it`` is
    raised in the consumer."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def work() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # handed to the consumer
            q.put(exc)

    th = threading.Thread(target=work, name=name, daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        th.join(timeout=5)
