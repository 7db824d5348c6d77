"""udm.host.io: ElementBatch, the bulk JSONL reader (fast pyarrow path == per-line path), the writers."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host.errors import BadElement
from udm.host.io import jsonl as jl
from udm.host.io.batch import KIND_BAD, KIND_CTI, KIND_INSERT, KIND_RETRACT, ElementBatch, ints_filled
from udm.host.io.dead_letters import dead_letter_record
from udm.host.io.encode import EncodedLines
from udm.host.io.jsonl import (
    DeadLetterWriter,
    JsonlReader,
    JsonlWriter,
    parse_line,
    read_jsonl_batches,
    read_jsonl_elements,
)
from udm.host.temporal.elements import Cti, Insert, Retract, element_to_json, parse_element
from udm.host.temporal.strict import nonfinite_in
from udm.sdk import INF


def _norm(pairs: list[tuple[int | None, Any]]) -> list[tuple[Any, ...]]:
    """Comparable form: elements with their exact JSON text (so 28 and 28.0 differ), bad elements as
    (line, reason, raw)."""
    out: list[tuple[Any, ...]] = []
    for line, e in pairs:
        if isinstance(e, BadElement):
            out.append((line, "BAD", e.line, e.reason, json.dumps(e.raw, sort_keys=True)))
        else:
            out.append((line, e, json.dumps(element_to_json(e), sort_keys=True)))
    return out


def _reference(text: bytes) -> list[tuple[Any, ...]]:
    """What the spec says: every non-blank line through json + parse_element, numbered from 1. A line that is
    JSON only to a lenient parser (NaN, Infinity, a number overflowing a double: SEMANTICS §1) is bad, and
    in JSON text only "inf" spells an infinite time (``json_text``)."""
    out: list[tuple[int | None, Any]] = []
    for i, raw in enumerate(text.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw, parse_constant=_not_json)
            if nonfinite_in(obj) is not None:
                raise ValueError("a number beyond a double")
        except ValueError:
            out.append((i, BadElement("x", line=i, raw=raw.decode("utf-8", "replace").rstrip("\r"))))
            continue
        try:
            out.append((i, parse_element(obj, line=i, json_text=True)))
        except BadElement as bad:
            out.append((i, bad))
    return _norm(out)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _read(text: bytes, **kw: Any) -> list[tuple[Any, ...]]:
    return _norm(read_jsonl_elements(io.BytesIO(text), **kw))


def _same_but_json_reasons(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    """Equal, except that for not-JSON lines only the fact (not json's wording) is compared."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if x[1] == "BAD" and y[1] == "BAD" and (x[3].startswith("not valid JSON") or y[3] == "x"):
            assert (x[0], x[2], x[4]) == (y[0], y[2], y[4])
        else:
            assert x == y


@pytest.fixture
def fast_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the fast path take tiny chunks and retry in tiny pieces, so small inputs exercise it."""
    monkeypatch.setattr(jl, "_MIN_FAST_LINES", 1)
    monkeypatch.setattr(jl, "_PIECE_LINES", 3)


def _lines(*objs: Any) -> bytes:
    return ("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n").encode()


# ---------------------------------------------------------------------------------------------- ElementBatch
def test_batch_round_trip_and_schema() -> None:
    els = [Insert("a", 1, 5, {"x": 1, "s": "q"}), Cti(3), Retract("a", 1, 5, 3), Retract("b", 0, INF, 2, {"y": [1]}),
           BadElement("nope", line=99, raw={"kind": "?"})]
    b = ElementBatch.from_elements(els, lines=[1, 2, 3, 4, 5])
    assert len(b) == 5
    assert b.table.column_names == ["kind", "id", "le", "re", "re_new", "t", "payload", "line", "error", "raw"]
    for name in ("le", "re", "re_new", "t", "line"):
        assert b.table.schema.field(name).type == pa.int64()
    assert b.lines.dtype == np.int64 and b.lines.tolist() == [1, 2, 3, 4, 5]
    assert b.kind_codes().tolist() == [KIND_INSERT, KIND_CTI, KIND_RETRACT, KIND_RETRACT, KIND_BAD]
    assert b.table.column("re").to_pylist()[3] == INF
    assert b.bad_count == 1
    # a batch rebuilt from its table alone (no cached elements) decodes the same
    back = ElementBatch(b.table).to_elements()
    assert [e for _, e in back[:4]] == els[:4]
    bad = back[4][1]
    assert isinstance(bad, BadElement) and bad.reason == "nope" and bad.line == 5 and bad.raw == {"kind": "?"}


def test_batch_in_order_inserts_and_sync_times() -> None:
    ins = ElementBatch.from_elements([Insert("a", 5, 6), Insert("b", 5, 9), Cti(7), Insert("c", 7, 8)])
    assert ins.sync_times().tolist() == [5, 5, 7, 7]
    assert ins.is_in_order_inserts(5)
    assert not ins.is_in_order_inserts(6)
    assert not ins.is_in_order_inserts(0, allow_cti=False)
    assert not ElementBatch.from_elements([Insert("a", 5, 6), Insert("b", 4, 9)]).is_in_order_inserts(0)
    assert not ElementBatch.from_elements([Insert("a", 5, 6), Retract("a", 5, 6, 5)]).is_in_order_inserts(0)
    assert not ElementBatch.from_elements([BadElement("x")]).is_in_order_inserts(0)
    assert ElementBatch.empty().is_in_order_inserts(10)


def test_payload_field_on_struct_batches(tmp_path: Path, fast_small: None) -> None:
    p = tmp_path / "in.jsonl"
    p.write_bytes(_lines(*({"kind": "insert", "id": f"e{i}", "le": i, "re": i + 1,
                            "payload": {"sym": "AB"[i % 2], "price": i * 0.5}} for i in range(10)),
                         {"kind": "cti", "t": 10}))
    (b,) = list(read_jsonl_batches(p))
    assert b.payload_is_struct
    assert b.payload_field("price").to_pylist() == [i * 0.5 for i in range(10)] + [None]
    assert b.payload_field("nope") is None
    assert ElementBatch.from_elements([Insert("a", 1, 2, {"p": 1})]).payload_field("p") is None
    assert b.is_in_order_inserts(0)


# ---------------------------------------------------------------------------------------------- reading
@pytest.fixture
def no_slow_path(monkeypatch: pytest.MonkeyPatch, fast_small: None) -> None:
    def refuse(*a: Any) -> None:
        raise AssertionError("the per-line path was used")

    monkeypatch.setattr(jl, "_slow_batch", refuse)


def test_fast_path_is_used_and_agrees(no_slow_path: None) -> None:
    text = _lines(
        {"kind": "insert", "id": "e1", "le": 5, "re": 10, "payload": {"sym": "A", "price": [10.5, 2.5]}},
        {"kind": "insert", "id": "7", "le": 6, "re": "inf", "payload": {"sym": "B", "price": [1.5]}},
        {"kind": "retract", "id": "e1", "le": 5, "re": 10, "re_new": 7},
        {"kind": "cti", "t": 8, "extra": 1},
        {"kind": "retract", "id": "7", "le": 6, "re": "INF", "re_new": 9},
        {"kind": "cti", "t": "inf"},
    )
    batches = list(read_jsonl_batches(io.BytesIO(text), batch_size=100))
    assert len(batches) == 1 and batches[0].payload_is_struct
    assert _read(text) == _reference(text)
    els = [e for _, e in read_jsonl_elements(io.BytesIO(text))]
    assert els[1] == Insert("7", 6, INF, {"sym": "B", "price": [1.5]})
    assert els[-1] == Cti(INF)


def test_integer_ids_are_strings(no_slow_path: None) -> None:
    text = _lines(*({"kind": "insert", "id": i, "le": i, "re": i + 1} for i in range(3)))
    assert [e.id for _, e in read_jsonl_elements(io.BytesIO(text))] == ["0", "1", "2"]
    assert _read(text) == _reference(text)


def test_bad_lines_do_not_lose_good_ones(fast_small: None) -> None:
    text = _lines(
        {"kind": "insert", "id": "a", "le": 1, "re": 2},
        "this is not json",
        {"kind": "insert", "id": "b", "le": 3, "re": 3},
        "",
        {"kind": "insert", "id": "c", "le": 4, "re": 9, "payload": None},
        {"kind": "wat"},
        {"kind": "insert", "id": "d", "le": 4.0, "re": 9},
        {"kind": "insert", "id": "e", "le": 5, "re": 9, "payload": {"p": 1}},
        [1, 2],
        {"kind": "cti", "t": 6},
    )
    got = read_jsonl_elements(io.BytesIO(text))
    lines = [ln for ln, _ in got]
    assert lines == [1, 2, 3, 5, 6, 7, 8, 9, 10]  # the blank line 4 is skipped, not renumbered
    bad = {ln: e.reason for ln, e in got if isinstance(e, BadElement)}
    assert set(bad) == {2, 3, 5, 6, 7, 9}
    assert bad[2].startswith("not valid JSON")
    assert bad[3] == "insert needs le < re, got [3, 3)"
    assert "payload must be a JSON object" in bad[5]
    assert "unknown element kind" in bad[6]
    assert "float" in bad[7]
    good = [e for _, e in got if not isinstance(e, BadElement)]
    assert good == [Insert("a", 1, 2, {}), Insert("e", 5, 9, {"p": 1}), Cti(6)]
    _same_but_json_reasons(_read(text), _reference(text))
    assert _read(text) == _read(text, fast=False)


def test_not_json_line_keeps_raw_text() -> None:
    bad = parse_line(b"{oops\r\n", 12)
    assert isinstance(bad, BadElement) and bad.line == 12 and bad.raw == "{oops"
    assert dead_letter_record(bad) == {"line": 12, "reason": bad.reason, "element": "{oops"}


def test_inf_rewrite_does_not_touch_payload_fields(fast_small: None) -> None:
    text = _lines(
        {"kind": "insert", "id": "a", "le": 1, "re": "inf", "payload": {"re": "inf", "t": "Inf"}},
        {"kind": "insert", "id": "b", "le": 2, "re": 4, "payload": {"re": "x", "t": "y"}},
    )
    els = [e for _, e in read_jsonl_elements(io.BytesIO(text))]
    assert els == [Insert("a", 1, INF, {"re": "inf", "t": "Inf"}), Insert("b", 2, 4, {"re": "x", "t": "y"})]


def test_mixed_inf_takes_the_fast_path(no_slow_path: None) -> None:
    objs = [{"kind": "insert", "id": str(i), "le": i, "re": "inf" if i % 3 else i + 1, "payload": {"v": i}}
            for i in range(200)]
    text = _lines(*objs)
    (b,) = list(read_jsonl_batches(io.BytesIO(text)))
    assert b.payload_is_struct
    assert _read(text) == _reference(text)


def test_integers_and_floats_keep_their_type(fast_small: None) -> None:
    objs = [{"kind": "insert", "id": str(i), "le": i, "re": i + 1, "payload": {"m": m, "l": [m, 0.5]}}
            for i, m in enumerate([28, 28.5, 3.0, -1, 2e3])]
    text = _lines(*objs)
    assert _read(text) == _reference(text)
    els = [e for _, e in read_jsonl_elements(io.BytesIO(text))]
    assert [type(e.payload["m"]) for e in els] == [int, float, float, int, float]
    floats = _lines(*({"kind": "insert", "id": str(i), "le": i, "re": i + 1, "payload": {"m": i + 0.5}}
                      for i in range(5)))
    assert all(b.payload_is_struct for b in read_jsonl_batches(io.BytesIO(floats), batch_size=100))


def test_payloads_of_different_shapes(fast_small: None) -> None:
    text = _lines(
        {"kind": "insert", "id": "a", "le": 1, "re": 3, "payload": {"x": 1}},
        {"kind": "insert", "id": "b", "le": 1, "re": 3, "payload": {"y": "s"}},
        {"kind": "insert", "id": "c", "le": 1, "re": 3, "payload": {"x": {"deep": [1, None]}}},
        {"kind": "insert", "id": "d", "le": 1, "re": 3, "payload": {}},
        {"kind": "insert", "id": "e", "le": 1, "re": 3, "payload": {"d": "2020-01-01"}},
        {"kind": "insert", "id": "f", "le": 1, "re": 3, "payload": {"n": None}},
    )
    assert _read(text) == _reference(text)
    els = [e for _, e in read_jsonl_elements(io.BytesIO(text))]
    assert els[4].payload == {"d": "2020-01-01"}  # not a timestamp
    assert els[5].payload == {"n": None}


def test_batch_size_and_prefetch(tmp_path: Path) -> None:
    objs = [{"kind": "insert", "id": f"e{i}", "le": i, "re": i + 2, "payload": {"v": i}} for i in range(1000)]
    objs[500] = "garbage"
    p = tmp_path / "in.jsonl"
    p.write_bytes(_lines(*objs))
    ref = _read(p.read_bytes())
    for kw in ({"batch_size": 7}, {"batch_size": 100, "prefetch": 2}, {"block_bytes": 333}, {"fast": False}):
        batches = list(read_jsonl_batches(p, **kw))
        assert all(len(b) <= kw.get("batch_size", 65536) for b in batches)
        got = _norm([pair for b in batches for pair in b.to_elements()])
        assert got == ref, kw


def test_reader_progress_and_early_close(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    p.write_bytes(_lines(*({"kind": "cti", "t": i} for i in range(5000))))
    r = JsonlReader(p, batch_size=100, prefetch=2, block_bytes=1000)
    it = iter(r)
    next(it)
    assert 0 < r.bytes_done <= p.stat().st_size
    it.close()  # stops the background reader without hanging
    r2 = JsonlReader(p, batch_size=1000)
    for _ in r2:
        pass
    assert r2.bytes_done == p.stat().st_size


_scalars = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False).map(lambda f: round(f, 2)),
                     st.text("abc", max_size=3), st.booleans(), st.none())
_payloads = st.one_of(
    st.fixed_dictionaries({"sym": st.sampled_from("AB"), "price": st.integers(0, 9)}),
    st.dictionaries(st.sampled_from(["sym", "price", "re", "t", "q"]), _scalars, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.lists(st.integers(0, 3), max_size=2), max_size=1),
    _scalars,
)
_times = st.one_of(st.integers(-3, 20), st.integers(-3, 20), st.just("inf"), st.just("INF"), st.just(2.0),
                   st.just(True), st.just(None), st.just("5"), st.just(INF), st.just(-(2**63)))


_CORRUPTIONS: list[tuple[str, Any]] = [
    ("le", st.one_of(_times, st.just(INF))),
    ("re", _times),
    ("re_new", _times),
    ("t", _times),
    ("id", st.one_of(st.integers(0, 9), st.just(1.5), st.just(None), st.just(True))),
    ("payload", _payloads),
    ("kind", st.sampled_from(["bogus", None, 3, "insert", "retract", "cti"])),
    ("extra", _scalars),
]


@st.composite
def _valid(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["insert", "insert", "insert", "retract", "cti"]))
    if kind == "cti":
        return {"kind": "cti", "t": draw(st.one_of(st.integers(-3, 30), st.just("inf")))}
    le = draw(st.integers(-3, 20))
    re = draw(st.one_of(st.integers(le + 1, le + 6), st.just("inf")))
    obj: dict[str, Any] = {"kind": kind, "id": draw(st.sampled_from(["a", "b", "c"])), "le": le, "re": re}
    if kind == "retract":
        obj["re_new"] = draw(st.one_of(st.integers(le, le + 6), st.just("inf")))
    if kind == "insert" or draw(st.booleans()):
        obj["payload"] = {"sym": draw(st.sampled_from("AB")),
                          "price": draw(st.one_of(st.integers(0, 9), st.sampled_from([0.5, 2.0, -1.25])))}
    return obj


@st.composite
def _line(draw: Any) -> str:
    obj = draw(_valid())
    roll = draw(st.integers(0, 9))
    if roll == 0:  # one field changed to something odd (or removed)
        name, values = draw(st.sampled_from(_CORRUPTIONS))
        if draw(st.booleans()) and name in obj:
            del obj[name]
        else:
            obj[name] = draw(values)
    text = json.dumps(obj)
    if roll == 1:
        mangle = draw(st.integers(0, 3))
        if mangle == 0:
            return text[: len(text) // 2]
        if mangle == 1:
            return "   "
        if mangle == 2:
            return json.dumps([obj])
        return text.replace(": ", ":  ")
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line(), min_size=1, max_size=25), st.integers(1, 8))
def test_fast_and_per_line_paths_agree(fast_small: None, lines: list[str], batch: int) -> None:
    text = ("\n".join(lines) + "\n").encode()
    fast = _read(text, batch_size=batch)
    slow = _read(text, batch_size=batch, fast=False)
    assert fast == slow
    _same_but_json_reasons(fast, _reference(text))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.fixed_dictionaries({
    "kind": st.just("insert"), "id": st.text("ab", min_size=1, max_size=2), "le": st.integers(0, 5),
    "re": st.one_of(st.integers(6, 9), st.just("inf")),
    "payload": st.fixed_dictionaries({"sym": st.sampled_from("AB"), "p": st.integers(0, 3)})}), min_size=1))
def test_clean_inputs_take_the_fast_path(no_slow_path: None, objs: list[dict[str, Any]]) -> None:
    text = _lines(*objs)
    batches = list(read_jsonl_batches(io.BytesIO(text), batch_size=10**6))
    assert len(batches) == 1 and batches[0].payload_is_struct
    assert _read(text) == _reference(text)


# ---------------------------------------------------------------------------------------------- writing
def test_jsonl_writer_round_trip(tmp_path: Path) -> None:
    els = [Insert("o1", 0, INF, {"m": 1.5, "sym": "A"}), Retract("o1", 0, INF, 10), Cti(INF)]
    p = tmp_path / "sub" / "out.jsonl"
    with JsonlWriter(p) as w:
        w.write(els[:2])
        w.write_one(els[2])
    assert w.count == 3
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    assert rows == [element_to_json(e) for e in els]
    assert rows[0]["re"] == "inf" and rows[2] == {"kind": "cti", "t": "inf"}
    assert [e for _, e in read_jsonl_elements(p)] == els


def test_dead_letter_writer(tmp_path: Path) -> None:
    class DL:  # the engine's DeadLetter shape
        def to_json(self) -> dict[str, Any]:
            return {"line": 3, "reason": "unknown id 'z'", "element": {"kind": "retract", "id": "z"}}

    p = tmp_path / "dl.jsonl"
    with DeadLetterWriter(p) as w:
        w.write([BadElement("bad", line=1, raw="{no"), DL(), {"line": None, "reason": "r", "element": None}])
        w.write([])
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    assert rows == [
        {"line": 1, "reason": "bad", "element": "{no"},
        {"line": 3, "reason": "unknown id 'z'", "element": {"kind": "retract", "id": "z"}},
        {"line": None, "reason": "r", "element": None},
    ]


def test_int_columns_fill_their_nulls_at_any_offset_and_chunking() -> None:
    """`ints_filled` reads int64 buffers directly: sliced arrays (an offset into the bitmap and the values),
    several chunks and INF must give what pyarrow's own fill_null gives."""
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 70)
        arr = pa.array([rng.choice([None, rng.randint(-2**63, 2**63 - 1), 2**63 - 1]) for _ in range(n)], pa.int64())
        off = rng.randint(0, n - 1)
        part = arr.slice(off, rng.randint(0, n - off))
        col = pa.chunked_array([part, arr.slice(rng.randint(0, n - 1))])
        for got, src in ((ints_filled(part, -3), part), (ints_filled(col, -3), col)):
            want = src.fill_null(-3).to_numpy()
            assert got.dtype == np.int64 and got.tolist() == want.tolist()


class _ReadOnly:
    """A user's file-like object: only ``read``, and short reads of random sizes (as a socket or a pipe
    gives them)."""

    def __init__(self, data: bytes, rng: random.Random) -> None:
        self._data, self._at, self._rng = data, 0, rng

    def read(self, n: int = -1) -> bytes:
        size = len(self._data) if n < 0 else min(n, self._rng.randint(1, 97))
        out = self._data[self._at: self._at + size]
        self._at += len(out)
        return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line(), min_size=1, max_size=25), st.integers(1, 8), st.integers(0, 2**32))
def test_a_stream_with_only_read_is_read_like_a_file(fast_small: None, lines: list[str], batch: int,
                                                     seed: int) -> None:
    """`read_jsonl_elements` on a caller's stream without ``readinto``: the same elements and bad lines
    as the spec's per-line reading of its bytes, blocks cut across its short reads."""
    text = ("\n".join(lines) + "\n").encode()
    assert not hasattr(_ReadOnly(text, random.Random(seed)), "readinto")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jl, "_FIRST_BLOCK_BYTES", 64)  # several blocks, each of several short reads
        got = _norm(read_jsonl_elements(_ReadOnly(text, random.Random(seed)), batch_size=batch))
        parallel = _norm(read_jsonl_elements(_ReadOnly(text, random.Random(seed)), batch_size=batch, workers=2,
                                             block_bytes=128))
    _same_but_json_reasons(got, _reference(text))
    assert parallel == got


def _pieces(rng: random.Random, n: int) -> list[Any]:
    """Encoded pieces as the encoder hands them: bytes, and slices of a column's text buffer."""
    buf = pa.py_buffer(bytes(rng.randrange(256) for _ in range(4096)))
    out: list[Any] = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))))
        else:
            a = rng.randint(0, 4096)
            out.append(memoryview(buf)[a: rng.randint(a, 4096)])
    return out


def test_encoded_pieces_reach_a_pipe_whole_and_in_order() -> None:
    """`JsonlWriter.write_encoded` on a pipe: more pieces than one ``writev`` takes, a pipe smaller than
    what is written (a reader drains it as it fills), text lines written between them: the bytes read are
    the text and the pieces, in the order of the calls."""
    import threading

    rng = random.Random(11)
    calls: list[tuple[str, list[Any]]] = [("text", [Insert("a", 1, 2, {"v": 1}), Cti(3)]), ("enc", _pieces(rng, 2500)),
                                          ("text", [Cti(4)]), ("enc", _pieces(rng, 7))]
    want = b"".join("".join(json.dumps(element_to_json(e)) + "\n" for e in x).encode() if k == "text"
                    else b"".join(bytes(p) for p in x) for k, x in calls)
    r, w = os.pipe()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(r, 1000), b"")))
    reader.start()
    with os.fdopen(w, "w", encoding="utf-8") as stream:
        writer = JsonlWriter(stream)
        for kind, x in calls:
            if kind == "text":
                writer.write(x)  # (short: through the text layer)
            else:
                writer.write_encoded(EncodedLines(tuple(x), len(x)))
        writer.close()
    reader.join()
    os.close(r)
    assert b"".join(got) == want


def test_short_writes_go_on_where_they_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A ``writev`` that takes only part of what it is given (a pipe, a terminal, a signal) is continued
    from the first byte it did not take, mid-piece or at a piece's end."""
    rng = random.Random(5)
    real = os.writev

    def short(fd: int, bufs: list[Any]) -> int:
        total = sum(len(b) for b in bufs)
        take = rng.choice([1, 2, rng.randint(1, max(1, total)), total])
        data = b"".join(bytes(b) for b in bufs)[:take]
        return real(fd, [data])

    for n in (0, 1, 5, 300, 1500):
        pieces = _pieces(rng, n)
        path = tmp_path / f"out{n}.jsonl"
        with monkeypatch.context() as mp, JsonlWriter(path) as writer:
            mp.setattr(os, "writev", short)
            writer.write_encoded(EncodedLines(tuple(pieces), max(n, 1)))
        assert path.read_bytes() == b"".join(bytes(p) for p in pieces)
