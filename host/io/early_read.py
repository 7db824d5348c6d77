"""The early input reader: ``udm run`` starts parsing its input file while the rest of udmkit is imported.

Start-up (importing typer, the catalog, pydantic models, the query planner; discovering plugins) runs on
one core and holds the GIL; pyarrow parses JSON Lines without it. So the console entry point
(`udm.host.cli.app.main`) looks at ``sys.argv`` before importing any of that and, for the one shape where
it is provably the same read as the run's own — ``udm run QUERY --input FILE`` with a single regular
file, the local engine, no table options, no checkpoint — opens the file and starts `JsonlReader` on it
in a background thread. When the run opens its input (`runners._feed_one`), it asks for the early reader
(`claim`), which is handed over only when everything matches exactly:

- the same resolved path, and the same file: ``(st_dev, st_ino, st_size, st_mtime_ns)`` of the path now,
  of the open descriptor now, and of the descriptor when it was opened are all equal (a file replaced,
  appended to or rewritten since is read afresh by the normal path);
- the same batch size and reader options (`READER_OPTIONS`), so the batches are the ones the run would
  have read.

Anything else — no claim (a bad query, another engine, an error before the input is opened), a mismatch,
an exception in the early thread — discards it: the thread is stopped and joined, the file closed, and
the run reads the file as it always has, so errors (a missing file, a bad query, bad lines → dead letters)
come out exactly as without it. The early reader never reports anything itself.

Memory is bounded: it reads at most `AHEAD_BATCHES` batches (beyond the reader's own few blocks ahead)
before waiting for the claim. ``UDM_EARLY_READ=0`` turns it off (A/B benches, tests).

This module imports only the standard library; `JsonlReader` (pyarrow, numpy) is imported when a read
starts, on the calling thread so that two threads never import the same modules at once.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

__all__ = ["AHEAD_BATCHES", "ENV", "READER_OPTIONS", "EarlyReader", "claim", "discard", "enabled", "start"]

#: ``UDM_EARLY_READ=0`` (or ``false``/``no``/``off``) turns the early reader off.
ENV = "UDM_EARLY_READ"

#: Batches read ahead while waiting for the claim (each at most the run's batch size): 4 x 65536 lines is
#: about what one core parses in the ~0.15 s of start-up left once the reader starts; more would only hold
#: memory (and take the GIL from the start-up for the parse's Python part).
AHEAD_BATCHES = 4

#: The `JsonlReader` options ``udm run`` reads with (`udm.host.query.runners.READER_OPTIONS` must equal
#: them for a claim to succeed; a test checks that they do).
READER_OPTIONS: dict[str, int] = {"workers": 2, "prefetch": 3}

_Key = tuple[int, int, int, int]


def _key(st: os.stat_result) -> _Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


class EarlyReader:
    """`JsonlReader` over one open regular file, iterated in a background thread up to `AHEAD_BATCHES`
    batches ahead until `take` (the run continues it on its own thread) or `stop`."""

    def __init__(self, path: str, batch_size: int, options: dict[str, int]) -> None:
        from udm.host.io.arrow_probe import skip_pandas_probe
        from udm.host.io.jsonl import JsonlReader  # on this thread: see the module docstring

        # as ``udm run --engine local`` does before it reads: else the parse's first numpy conversion would
        # make pyarrow import pandas (~0.2 CPU-s), which a local run never uses
        skip_pandas_probe()

        self.path = os.path.realpath(path)
        self.batch_size = batch_size
        self.options = dict(options)
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by stop()/the claimed reader
        try:
            st = os.fstat(self._file.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise OSError(f"{path} is not a regular file")
            self.key = _key(st)
            self._reader = JsonlReader(self._file, batch_size, **options)
            self._it: Iterator[Any] = iter(self._reader)
        except BaseException:
            self._file.close()
            raise
        self._ready: deque[tuple[Any, int]] = deque()
        self._cond = threading.Condition()
        self._halting = False
        self._done = False
        self._failed = False
        self._thread = threading.Thread(target=self._work, name="udm-early-read", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while len(self._ready) >= AHEAD_BATCHES and not self._halting:
                    self._cond.wait()
                if self._halting:
                    return
            try:
                batch = next(self._it)
            except StopIteration:
                self._done = True
                return
            except BaseException:  # the run's own read reports it, the normal way
                self._failed = True
                return
            with self._cond:
                self._ready.append((batch, self._reader.bytes_done))

    def halt(self) -> None:
        with self._cond:
            self._halting = True
            self._cond.notify_all()
        self._thread.join()

    def matches(self, path: str, batch_size: int, options: dict[str, int]) -> bool:
        """The run would read exactly this: same file (path, descriptor and both unchanged), same batches.
        Called with the thread halted (`halt`), so that a failure in it cannot come after the check."""
        if batch_size != self.batch_size or dict(options) != self.options or self._failed:
            return False
        try:
            if os.path.realpath(path) != self.path:
                return False
            return _key(os.stat(path)) == self.key == _key(os.fstat(self._file.fileno()))
        except (OSError, ValueError):
            return False

    def take(self) -> _Claimed:
        """Stop the background thread and hand what it read, and the reader itself, to the caller."""
        self.halt()
        return _Claimed(self._ready, self._it, self._reader, self._file)

    def stop(self) -> None:
        """Stop and join the thread, close the reader (joining its parse threads) and the file."""
        self.halt()
        self._ready.clear()
        try:
            close = getattr(self._it, "close", None)
            if close is not None:
                close()
        finally:
            self._file.close()


class _Claimed:
    """What `claim` hands the run: iterates the batches read early, then goes on with the same reader on
    the caller's thread; ``bytes_done`` and ``close`` as `JsonlReader`'s."""

    def __init__(self, ready: deque[tuple[Any, int]], it: Iterator[Any], reader: Any, file: Any) -> None:
        self._ready = ready
        self._it = it
        self._reader = reader
        self._file = file
        self.bytes_done = 0

    def __iter__(self) -> Iterator[Any]:
        try:
            while self._ready:
                batch, self.bytes_done = self._ready.popleft()
                yield batch
            for batch in self._it:
                self.bytes_done = self._reader.bytes_done
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        self._ready.clear()
        try:
            close = getattr(self._it, "close", None)
            if close is not None:
                close()
        finally:
            self._file.close()


_lock = threading.Lock()
_current: EarlyReader | None = None


def start(path: str, batch_size: int | None = None, options: dict[str, int] | None = None) -> EarlyReader | None:
    """Start reading ``path`` early (replacing any earlier one); None when it is not a regular file that can
    be opened, or the early reader is turned off. Never raises: whatever is wrong, the run reports it."""
    global _current
    discard()
    if not enabled():
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        if batch_size is None:
            from udm.host.io.jsonl import DEFAULT_BATCH_SIZE

            batch_size = DEFAULT_BATCH_SIZE
        reader = EarlyReader(path, batch_size, READER_OPTIONS if options is None else options)
    except Exception:  # only an optimisation: the run's own open and read say what is wrong
        return None
    with _lock:
        _current = reader
    return reader


def claim(source: Any, batch_size: int, options: dict[str, int]) -> _Claimed | None:
    """The early reader of ``source`` when it matches exactly (see the module docstring), else None; either
    way no early reader is left running."""
    global _current
    with _lock:
        reader, _current = _current, None
    if reader is None:
        return None
    reader.halt()
    if isinstance(source, (str, os.PathLike)) and str(source) != "-" and reader.matches(os.fspath(source),
                                                                                         batch_size, options):
        return reader.take()
    reader.stop()
    return None


def discard() -> None:
    """Stop any early reader that was not claimed (at the end of ``udm run``, whatever its outcome)."""
    global _current
    with _lock:
        reader, _current = _current, None
    if reader is not None:
        reader.stop()
