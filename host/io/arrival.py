"""Arrival time (SEMANTICS §11; seeds/004's internal timestamps): a live input whose elements take the wall-clock
time at which they are read as their application time.

``udm run ... --input - --time @arrival [--cti-every 1s]`` reads element JSON Lines (INTERFACES §1) from a
live source and `ArrivalStamper` stamps each line as it comes:

* the arrival time ``A``: microseconds since the Unix epoch, never below the input's previous ``A`` (ties keep
  the read order), from an injectable clock;
* ``insert``: lifetime ``[A, A + d)`` where ``d`` is the line's ``duration`` (ticks, or ``"inf"``), else its
  ``re - le`` when it gives both, else 1 (a point event); ``le``/``re`` need not be given;
* ``retract``: ends its event (by ``id``) at ``A`` (``[LE, min(RE, A))``; at its own LE: deleted); a retraction
  of an event the stamper does not know passes as written (the gate judges it);
* ``cti``: ``cti(A)`` (``"t": "inf"`` ends the input); ``--cti-every N``: a ``cti(k·N)`` each time the clock
  passes a new multiple of ``N``, even while nothing arrives (`due`);
* ``ecti``: a dead letter (its range is in application time, which the clock decides here).

Results are deterministic given the recorded arrival times: the stamped elements are what the engine gets.
`LiveLines` reads a source in a thread so the caller can wait with a timeout (CTIs and ``align``'s
``max_wait`` go on while the source is quiet); `WatchedLines` does the same for a directory that element files
land in (``--engine spark-streaming``, `udm.host.spark.stream_arrival`).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from udm.host.errors import BadElement, UdmError
from udm.host.temporal.elements import Cti, Insert, Retract, parse_element, parse_time
from udm.host.temporal.strict import NotStrictJSON
from udm.host.temporal.strict import loads as strict_loads

__all__ = ["ARRIVAL", "ArrivalSource", "ArrivalStamper", "LiveLines", "WatchedLines", "open_lines", "wall_micros"]

#: the ``--time`` value that asks for arrival time
ARRIVAL = "@arrival"

_INF = 2**63 - 1


def wall_micros() -> int:
    """The wall clock in microseconds since the Unix epoch."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class ArrivalSource:
    """An input read with arrival time: ``path`` (``-`` = stdin, or a binary stream) and ``cti_every`` (µs)."""

    path: Any
    cti_every: int | None = None

    def __str__(self) -> str:
        return f"{self.path} (arrival time)"


class ArrivalStamper:
    """Stamps one input's lines with their arrival time (see the module docstring)."""

    def __init__(self, clock: Callable[[], int] | None = None, cti_every: int | None = None) -> None:
        self.clock = clock or wall_micros
        self.cti_every = cti_every
        #: the latest arrival time given (stamps never go below it)
        self.last = -(2**63)
        #: the latest CTI the stamper put in the stream
        self.cti = -(2**63)
        #: id -> [LE, RE] of stamped events (what a retraction ends), forgotten once a CTI passes RE
        self.live: dict[str, list[int]] = {}

    def now(self) -> int:
        t = int(self.clock())
        if t > self.last:
            self.last = t
        return self.last

    def stamp(self, text: bytes | str, line: int | None) -> list[tuple[int | None, Any]]:
        """One line read now: the stamped element(s) (a `BadElement` for a line that is not one)."""
        a = self.now()
        try:
            obj = strict_loads(text)
        except (NotStrictJSON, ValueError, UnicodeDecodeError, RecursionError) as exc:
            raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
            return [(line, BadElement(f"not valid JSON: {getattr(exc, 'msg', exc)}", line=line, raw=raw.rstrip()))]
        try:
            return [(line, self._element(obj, a, line))]
        except BadElement as bad:
            return [(line, BadElement(bad.reason, line=line, raw=obj))]

    def _element(self, obj: Any, a: int, line: int | None) -> Any:
        if not isinstance(obj, dict):
            raise BadElement(f"an element must be a JSON object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind == "insert":
            eid = obj.get("id")
            if isinstance(eid, bool) or not isinstance(eid, (str, int)):
                raise BadElement("missing field 'id'" if eid is None else f"id must be a string, got {eid!r}")
            payload = obj.get("payload", {})
            if not isinstance(payload, dict):
                raise BadElement(f"payload must be a JSON object, got {type(payload).__name__}")
            d = self._duration(obj)
            re = _INF if d >= _INF or a + d >= _INF else a + d
            self.live[str(eid)] = [a, re]
            return Insert(str(eid), a, re, payload)
        if kind == "retract":
            eid = obj.get("id")
            if eid is None:
                raise BadElement("missing field 'id'")
            known = self.live.get(str(eid))
            if known is None:  # not one of ours: as written (the gate refuses an unknown id)
                return parse_element(obj, line=line, json_text=True)
            le, re = known
            end = min(re, max(a, le))
            if end <= le:
                del self.live[str(eid)]
            else:
                known[1] = end
            return Retract(str(eid), le, re, end)
        if kind == "cti":
            t = obj.get("t")
            if isinstance(t, str) and t.lower() == "inf":
                return Cti(_INF)
            self._forget(a)
            return Cti(a)
        if kind == "ecti":
            raise BadElement("an ecti has no meaning on an input read with arrival time (its range is in "
                             "application time, which the clock decides)")
        raise BadElement(f"unknown element kind {kind!r} (expected insert, retract or cti)")

    def _duration(self, obj: dict[str, Any]) -> int:
        if "duration" in obj:
            d = parse_time(obj["duration"], "duration", allow_inf=True, inf_int=False)
            if d < 1:
                raise BadElement(f"duration must be at least 1, got {d}")
            return d
        if "le" in obj and "re" in obj:
            le = parse_time(obj["le"], "le", allow_inf=False, inf_int=False)
            re = parse_time(obj["re"], "re", allow_inf=True, inf_int=False)
            if re <= le:
                raise BadElement(f"insert needs le < re, got [{le}, {re})")
            return _INF if re >= _INF else re - le
        return 1

    def due(self) -> list[Any]:
        """``--cti-every``: the CTI the clock has reached (none, or the highest multiple passed since the last)."""
        if self.cti_every is None:
            return []
        a = self.now()
        k = a // self.cti_every * self.cti_every
        if k <= self.cti:
            return []
        self._forget(k)
        return [Cti(k)]

    def _forget(self, c: int) -> None:
        self.cti = max(self.cti, c)
        if len(self.live) > 1024:
            self.live = {k: v for k, v in self.live.items() if v[1] >= c}


_EOF = object()


class _QueuedLines:
    """Lines put on a queue by a reader thread; `get` waits at most ``timeout`` seconds for the next one."""

    def __init__(self) -> None:
        self._q: queue.Queue[Any] = queue.Queue()
        self.done = False

    def get(self, timeout: float | None) -> bytes | None:
        """The next line; None when none came within ``timeout`` (or at the end: then `done` is set)."""
        if self.done:
            return None
        try:
            item = self._q.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _EOF:
            self.done = True
            return None
        if isinstance(item, BaseException):
            raise item
        line: bytes = item
        return line


class LiveLines(_QueuedLines):
    """A source's lines (``-``: standard input; a path: a file or a named pipe; or a binary stream), read in a
    daemon thread."""

    def __init__(self, source: str | Path | IO[bytes]) -> None:
        super().__init__()
        if isinstance(source, (str, Path)):
            try:
                self._f: Any = sys.stdin.buffer if str(source) == "-" else open(source, "rb")  # noqa: SIM115
            except OSError as exc:
                raise UdmError(f"cannot read the live input {source}: {exc.strerror or exc}") from None
            self._own = str(source) != "-"
        else:
            self._f, self._own = source, False
        self._t = threading.Thread(target=self._read, name="udm-live", daemon=True)
        self._t.start()

    def _read(self) -> None:
        try:
            for raw in iter(self._f.readline, b""):
                self._q.put(raw)
        except BaseException as exc:  # (reported by `get` in the caller's thread)
            self._q.put(exc)
        self._q.put(_EOF)

    def close(self) -> None:
        if self._own:
            self._f.close()


class WatchedLines(_QueuedLines):
    """The lines of the element files that land in ``directory``, read in a daemon thread as they land: new
    files in the order of their modification time (ties by name), each file's lines in order, every
    ``poll`` seconds. A file must land whole (written aside, then renamed in); names starting with ``.`` or
    ``_`` are skipped. It never ends by itself (`close` stops it): the caller decides when the watch is over."""

    def __init__(self, directory: str | Path, poll: float = 0.1) -> None:
        super().__init__()
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise UdmError(f"watched directory {directory} does not exist")
        self._poll = poll
        self._stop = threading.Event()
        self._seen: set[str] = set()
        #: files read so far, in order
        self.files: list[str] = []
        self._t = threading.Thread(target=self._read, name="udm-watch", daemon=True)
        self._t.start()

    def _landed(self) -> list[Path]:
        new = []
        for p in self.directory.iterdir():
            if p.name not in self._seen and not p.name.startswith((".", "_")) and p.is_file():
                new.append((p.stat().st_mtime_ns, p.name, p))
        return [p for _, _, p in sorted(new)]

    def _read(self) -> None:
        try:
            while not self._stop.is_set():
                for p in self._landed():
                    self._seen.add(p.name)
                    self.files.append(p.name)
                    with p.open("rb") as f:
                        for raw in f:
                            self._q.put(raw)
                self._stop.wait(self._poll)
        except BaseException as exc:  # (reported by `get` in the caller's thread)
            self._q.put(exc)

    def close(self) -> None:
        self._stop.set()


def open_lines(path: Any, *, directory: bool) -> LiveLines | WatchedLines:
    """The lines of a live input: a watched directory (where ``directory`` allows one), else `LiveLines`."""
    if isinstance(path, (str, Path)) and str(path) != "-" and Path(path).is_dir():
        if not directory:
            raise UdmError(f"--input {path} is a directory: a watched directory read with arrival time needs "
                           "--engine spark-streaming (--engine local reads standard input, a file or a named pipe)")
        return WatchedLines(path)
    return LiveLines(path)
