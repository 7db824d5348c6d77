"""The reader's fast path and explicit ``"payload": null``: bad on an insert (SEMANTICS §1, a dead letter),
fine on a retraction (no payload) and ignored on a CTI; pyarrow parses it as it parses an absent payload, so
the fast path searches the block for it, but only when an insert's payload came out null
(`udm.host.io.jsonl._explicit_null_payload`). Every case is checked against `parse_line` line by line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from udm.host.errors import BadElement
from udm.host.io import jsonl as jl
from udm.host.io.jsonl import parse_line, read_jsonl_elements


def _text(objs: list[Any]) -> bytes:
    return ("\n".join(json.dumps(o) for o in objs) + "\n").encode()


def _oracle(text: bytes) -> list[tuple[int, Any]]:
    """Line by line with json + parse_element (`parse_line`), numbered as the reader numbers lines."""
    return [(i, parse_line(t, i)) for i, t in enumerate(text.split(b"\n")[:-1], 1)]


def _as_tuples(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, ...]]:
    return [(ln, type(e).__name__, e.reason if isinstance(e, BadElement) else e) for ln, e in pairs]


def _bulk(n: int) -> list[dict[str, Any]]:
    """Enough plain inserts (with payload objects) for a block the fast path takes whole."""
    return [{"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1, "payload": {"p": i, "s": "x"}} for i in range(n)]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the per-line path's batches and the null searches."""
    seen = {"slow": 0, "search": 0}
    slow, search = jl._slow_batch, jl._explicit_null_payload

    def count_slow(*a: Any) -> Any:
        seen["slow"] += 1
        return slow(*a)

    def count_search(chunk: bytes) -> bool:
        seen["search"] += 1
        return search(chunk)

    monkeypatch.setattr(jl, "_slow_batch", count_slow)
    monkeypatch.setattr(jl, "_explicit_null_payload", count_search)
    return seen


def test_an_inserts_explicit_null_payload_is_a_dead_letter(calls: dict[str, int]) -> None:
    objs = _bulk(100)
    objs[57] = {"kind": "insert", "id": "bad", "le": 1, "re": 2, "payload": None}
    text = _text(objs)
    got = read_jsonl_elements(io.BytesIO(text))
    assert _as_tuples(got) == _as_tuples(_oracle(text))
    bad = [(ln, e.reason) for ln, e in got if isinstance(e, BadElement)]
    assert bad == [(58, "payload must be a JSON object, got NoneType")]
    assert calls["search"] >= 1 and calls["slow"] >= 1


def test_an_insert_without_payload_is_searched_and_kept(calls: dict[str, int]) -> None:
    objs = _bulk(100)
    objs[3] = {"kind": "insert", "id": "bare", "le": 1, "re": 2}
    text = _text(objs)
    got = read_jsonl_elements(io.BytesIO(text))
    assert _as_tuples(got) == _as_tuples(_oracle(text))
    assert calls["search"] == 1 and calls["slow"] == 0


@pytest.mark.parametrize("odd", [
    {"kind": "retract", "id": "e5", "le": 5, "re": 6, "re_new": 5, "payload": None},
    {"kind": "cti", "t": 0, "payload": None},
    {"kind": "insert", "id": "s", "le": 1, "re": 2, "payload": {"p": 1, "s": '"payload": null'}},
])
def test_a_null_payload_no_insert_has_needs_no_search(calls: dict[str, int], odd: dict[str, Any]) -> None:
    objs = [*_bulk(100), odd]
    text = _text(objs)
    got = read_jsonl_elements(io.BytesIO(text))
    assert _as_tuples(got) == _as_tuples(_oracle(text))
    assert calls == {"slow": 0, "search": 0}


def test_a_nested_null_payload_field_goes_line_by_line(calls: dict[str, int]) -> None:
    nested = {"p": 1, "s": "x", "payload": None}
    objs = [*_bulk(100), {"kind": "insert", "id": "n", "le": 1, "re": 2, "payload": nested}]
    text = _text(objs)
    got = read_jsonl_elements(io.BytesIO(text))
    assert _as_tuples(got) == _as_tuples(_oracle(text))
    assert got[-1][1].payload == {"p": 1, "s": "x", "payload": None}
    assert calls["slow"] >= 1  # (`_faithful`: a null field cannot round-trip through the struct)
