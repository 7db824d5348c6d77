"""`WriteBehind`: a writer's ``write_encoded`` (JSON Lines) or ``write_batch`` (a table) run in a background
thread, in order, so that encoding and writing one batch's output overlap the engine's work on the next.

Why: on a span query the engine's own thread spends about a third of its time encoding output lines
(pyarrow compute, which releases the GIL) and writing them (a system call, likewise); done in a second
thread they run beside the next batch's planning and the reader's parse instead of after them.

Only encoded lines (`EncodedLines`, `DeferredLines`: values that no longer change) and the engine's output
batches (`udm.host.engine.batch.Batch`: a batch handed out is not changed again; its columns become a
table's, and Parquet's encoding and compression run without the GIL too) go behind; anything
else (``flush``, element lists from the row path, whose payload objects the engine owns) first waits
until the queue is written (`drain`), so the file holds everything in the order it was given. A write
that fails is raised in the caller's thread at its next call or at `close`.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from .encode import DeferredLines, EncodedLines

__all__ = ["DEPTH", "WriteBehind"]

#: batches waiting to be written at most (their columns stay in memory until then)
DEPTH = 1

_STOP = object()


class WriteBehind:
    """Wraps ``writer`` (anything with ``write_encoded`` or ``write_batch``): those two queue, everything else
    drains the queue first and is then called on ``writer`` directly."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self._q: queue.Queue[Any] = queue.Queue(maxsize=DEPTH)
        self._error: BaseException | None = None  # a failed write's error, until raised to the caller
        self._failed = False  # a write failed: nothing more is written
        self._thread = threading.Thread(target=self._work, name="udm-write-behind", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is _STOP:
                    return
                if not self._failed:  # after a failure the rest is dropped: the run stops with its error
                    write, arg = item
                    write(arg)
            except BaseException as exc:
                self._failed = True
                self._error = exc
            finally:
                self._q.task_done()

    def _raise(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise err

    def write_encoded(self, lines: EncodedLines | DeferredLines) -> None:
        """Queue ``lines`` (waits while `DEPTH` batches are queued)."""
        self._raise()
        if lines.count:
            self._q.put((self.writer.write_encoded, lines))

    def write_batch(self, batch: Any) -> None:
        """Queue the engine's output ``batch`` for a table writer (waits while `DEPTH` batches are queued)."""
        self._raise()
        if len(batch):
            self._q.put((self.writer.write_batch, batch))

    def drain(self) -> None:
        """Wait until everything queued is written; raise a failed write's error."""
        self._q.join()
        self._raise()

    def __getattr__(self, name: str) -> Any:
        """Any other method of the writer, called once the queue is written."""
        attr = getattr(self.writer, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            self.drain()
            return attr(*args, **kw)

        return call

    def close(self, *, raise_errors: bool = True) -> None:
        """Write what is queued and stop the thread (the wrapped writer stays open); raise a failed write's
        error unless ``raise_errors`` is false (the caller is already failing)."""
        if self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()
        if raise_errors:
            self._raise()
