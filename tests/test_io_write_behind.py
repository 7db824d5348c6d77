"""`udm.host.io.write_behind.WriteBehind`: lines written in the order given, deferred lines encoded by the
writer, other calls after everything queued, a failed write raised in the caller's thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from udm.host.io.encode import DeferredLines, EncodedLines
from udm.host.io.jsonl import JsonlWriter
from udm.host.io.write_behind import WriteBehind
from udm.host.temporal.elements import Cti, Insert


def _lines(k: int) -> EncodedLines:
    return EncodedLines((f'{{"kind": "cti", "t": {k}}}\n'.encode(),), 1)


def test_order_of_encoded_deferred_and_element_writes(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    threads: list[str] = []

    def deferred(k: int) -> DeferredLines:
        def make() -> EncodedLines:
            threads.append(threading.current_thread().name)
            return _lines(k)
        return DeferredLines(1, make)

    with JsonlWriter(path) as w:
        b = WriteBehind(w)
        for k in range(50):
            b.write_encoded(deferred(k) if k % 2 else _lines(k))
        b.write([Insert("x", 1, 2, {"a": 1}), Cti(50)])  # any other method: after the queue
        b.write_encoded(_lines(51))
        b.close()
    want = [f'{{"kind": "cti", "t": {k}}}' for k in range(50)]
    want += ['{"kind": "insert", "id": "x", "le": 1, "re": 2, "payload": {"a": 1}}', '{"kind": "cti", "t": 50}',
             '{"kind": "cti", "t": 51}']
    assert path.read_text().splitlines() == want
    assert threads and set(threads) == {"udm-write-behind"}  # deferred lines are encoded behind


class _Failing:
    def __init__(self) -> None:
        self.written: list[Any] = []

    def write_encoded(self, lines: Any) -> None:
        if len(self.written) == 2:
            raise OSError("disk full")
        self.written.append(lines)


def test_a_failed_write_is_raised_at_the_next_call_or_close() -> None:
    w = _Failing()
    b = WriteBehind(w)
    for k in range(3):
        b.write_encoded(_lines(k))
    with pytest.raises(OSError, match="disk full"):
        b.drain()
    b.close()  # raised once only
    assert len(w.written) == 2

    raised = 0  # raised exactly once: at a later write_encoded (if the thread got there first) or at close
    b2 = WriteBehind(_Failing())
    for k in range(5):
        try:
            b2.write_encoded(_lines(k))
        except OSError:
            raised += 1
    try:
        b2.close()
    except OSError:
        raised += 1
    assert raised == 1
    b3 = WriteBehind(_Failing())
    for k in range(3):
        b3.write_encoded(_lines(k))
    b3.close(raise_errors=False)  # the caller is failing already: its own error stands


def test_empty_lines_are_not_queued() -> None:
    w = _Failing()
    b = WriteBehind(w)
    b.write_encoded(EncodedLines((), 0))
    b.close()
    assert w.written == []
