"""`struct_payloads`: JSON-text payloads as a typed struct column, only when that column gives back
exactly what ``json.loads`` gives (the Spark engine paths hand the engine this column)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from udm.host.io.jsonl import struct_payloads


def _same(texts: list[str | None], struct: pa.Array) -> None:
    got = struct.to_pylist()
    want = [None if t is None else json.loads(t) for t in texts]
    # == treats 28 and 28.0 as equal; the JSON text does not
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


@pytest.mark.parametrize("texts", [
    ['{"k":"a","v":1.5}', '{"k":"b","v":2.0}'],
    ['{"k":"a","v":1.5}', None, '{"k":"b","v":-0.0}', None],
    ['{"k":"a\\"q\\\\","n":3,"o":{"x":[1,2]}}', '{"k":"prïce ✓","n":-9007199254740993,"o":{"x":[]}}'],
    ['{"v": 1.0E10, "w": 2.5e-7}', '{"v": 3.5, "w": 1.0}'],
    ['{"flag": true, "s": "tab\\there"}', '{"flag": false, "s": ""}'],
])
def test_faithful_payloads_become_a_struct(texts: list[str | None]) -> None:
    struct = struct_payloads(pa.array(texts, pa.string()))
    assert struct is not None and pa.types.is_struct(struct.type)
    _same(texts, struct)


@pytest.mark.parametrize(("texts", "why"), [
    (['{"k":"a","v":1}', '{"k":"b","v":2.5}'], "an int literal in a float column"),
    (['{"k":"a","v":1.0}', '{"k":"b","v":2}'], "an int literal in a float column"),
    (['{"k":"a","v":1.5}', '{"k":"b"}'], "a field missing in one row"),
    (['{"k":"a","v":null}', '{"k":"b","v":2.5}'], "a null field"),
    (['5', '{"k":"b"}'], "not an object"),
    (['{"k":', '"b"}'], "not JSON"),
    (['{"k":"a",\n"v":1.5}', '{"k":"b","v":2.5}'], "a text spanning lines"),
    (['{}\n{}', ' '], "two objects in one text, none in another"),
    ([None, None], "no payloads"),
    (['{}', '{}'], "no fields"),
    (['{"a":1}', '{"a":"x"}'], "mixed types"),
])
def test_unfaithful_payloads_stay_text(texts: list[str | None], why: str) -> None:
    assert struct_payloads(pa.array(texts, pa.string())) is None, why


def test_chunked_and_sliced_input() -> None:
    texts: list[Any] = [None, '{"k":"a","v":1.5}', '{"k":"b","v":2.5}', '{"k":"c","v":3.5}']
    arr = pa.chunked_array([pa.array(texts[:2], pa.string()), pa.array(texts[2:], pa.string())])
    struct = struct_payloads(arr)
    assert struct is not None
    _same(texts, struct)
    sliced = pa.array(['{"k":"z","v":9.5}', *texts], pa.string()).slice(1)
    struct = struct_payloads(sliced)
    assert struct is not None
    _same(texts, struct)
