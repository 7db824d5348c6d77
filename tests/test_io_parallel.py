"""The JSONL reader's throughput changes (issue 3): blocks parsed in worker threads (``workers=``), one
single-threaded pyarrow block per chunk, newline counting and escape checks with numpy.

Every reading mode must give, line for line, what an independent reference gives: ``json.loads`` on
each non-blank line, then `parse_element` (the spec's element rules), numbered from 1 counting blank
lines. Inputs are large enough for blocks of more than ``_MIN_FAST_LINES`` lines, so the pyarrow fast
path, its per-piece retry and the per-line path all run.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.errors import BadElement
from udm.host.io import jsonl as jl
from udm.host.io.jsonl import JsonlReader, read_jsonl_batches, read_jsonl_elements
from udm.host.temporal.elements import Cti, Insert, element_to_json, parse_element

MODES: list[dict[str, Any]] = [
    {},  # the consumer's thread parses
    {"prefetch": 2},  # one background thread
    {"workers": 1, "prefetch": 2},
    {"workers": 2, "prefetch": 3},  # what ``udm run --engine local`` uses
    {"workers": 2, "prefetch": 2, "block_bytes": 2000},  # many small blocks, some fast, some per line
    {"workers": 3, "prefetch": 5, "block_bytes": 9000, "batch_size": 50},
]


def _reference(text: bytes) -> list[tuple[Any, ...]]:
    """``(line, "OK", exact JSON text)`` per good line; ``(line, "BAD", reason or None, raw)`` per bad
    one (reason None: not JSON, whose wording is json's; raw then is the line's text)."""
    out: list[tuple[Any, ...]] = []
    for i, raw in enumerate(text.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:  # includes UnicodeDecodeError
            out.append((i, "BAD", None, raw.decode("utf-8", "replace").rstrip("\r")))
            continue
        try:
            e = parse_element(obj, line=i)
        except BadElement as bad:
            out.append((i, "BAD", bad.reason, json.dumps(bad.raw, sort_keys=True)))
            continue
        out.append((i, "OK", json.dumps(element_to_json(e), sort_keys=True)))
    return out


def _got(text: bytes, **kw: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for line, e in read_jsonl_elements(io.BytesIO(text), **kw):
        if isinstance(e, BadElement):
            assert e.line == line
            if e.reason.startswith("not valid JSON") or e.reason == "line is not valid UTF-8":
                out.append((line, "BAD", None, e.raw))
            else:
                out.append((line, "BAD", e.reason, json.dumps(e.raw, sort_keys=True)))
        else:
            out.append((line, "OK", json.dumps(element_to_json(e), sort_keys=True)))
    return out


def _plain(k: int) -> str:
    return json.dumps({"kind": "insert", "id": f"e{k}", "le": k, "re": k + 3,
                       "payload": {"sym": "AB"[k % 2], "price": k / 4 + 0.5}})


def _tricky_lines() -> list[bytes]:
    """Plain inserts with odd lines spread through them (every kind of trouble the reader must keep)."""
    odd: list[bytes] = [
        '{"kind":"insert","id":"u1","le":1,"re":2,"payload":{"sym":"日本","note":"héllo 🎉"}}'.encode(),
        b'{"kind":"insert","id":"u2","le":1,"re":2,"payload":{"sym":"\\u00e9\\ud83c\\udf89"}}',
        b'{"kind":"insert","id":"n1","le":1,"re":2,"payload":{"a":{"b":[1,2,{"c":null}],"d":{}}}}',
        b'{"kind":"insert","id":"i1","le":3,"re":"inf","payload":{"p":1.5}}',
        b'{"kind":"insert","id":"i2","le":3,"re":"INF","payload":{"p":2.5}}',
        b'{"kind":"retract","id":"i1","le":3,"re":"inf","re_new":"inf"}',
        b'{"kind":"cti","t":"inf"}',
        b'{"kind":"insert","id":"b1","le":4611686018427387904,"re":4611686018427387905,"payload":{"big":123456789012345678901234567890}}',
        b'{"kind":"insert","id":"b2","le":0,"re":9223372036854775808}',
        b'{"kind":"insert","id":"b3","le":-9223372036854775808,"re":5}',
        b'{"kind":"insert","id":"f1","le":1,"re":2,"payload":{"price":28}}',
        b'{"kind":"insert","id":"f2","le":1,"re":2,"payload":{"price":28.0}}',
        b'{"kind":"insert","id":"f3","le":1,"re":2,"payload":{"price":-1e2}}',
        b'{"kind":"insert","id":"np","le":1,"re":2,"payload":null}',
        b'{"kind":"insert","id":"x1","le":5,"re":5}',
        b'{"kind":"bogus","id":"x2","le":1,"re":2}',
        b'{"kind":"insert","le":1,"re":2}',
        b'not json at all',
        b'{"kind":"insert","id":"trunc","le":1,',
        b'\xff\xfe{"kind":"cti","t":1}',
        b'[1, 2, 3]',
        b'',
        b'   \t ',
        b'{"kind":"insert","id":"crlf","le":7,"re":9,"payload":{"sym":"A","price":1.25}}\r',
        b'{"kind":"cti","t":8}\r',
        b'{"kind":"insert","id":"sp","le":1,"re":2,"payload":{"price" : 7}}',
        b'{"kind":"insert","id":"esc","le":1,"re":2,"payload":{"pr\\/ice":7,"q":"a\\"b\\\\c"}}',
    ]
    rng = random.Random(7)
    lines = [_plain(k).encode() for k in range(1500)]
    for i, o in enumerate(odd):
        lines.insert(rng.randrange(len(lines)) if i % 3 else 60 * i, o)
    return lines


@pytest.mark.parametrize("kw", MODES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_every_reading_mode_matches_the_per_line_reference(kw: dict[str, Any]) -> None:
    text = b"\n".join(_tricky_lines()) + b"\n"
    got = _got(text, **kw)
    assert got == _reference(text)
    assert sum(1 for g in got if g[1] == "BAD") >= 8  # the odd lines really are bad ones


@pytest.mark.parametrize("kw", MODES[2:], ids=str)
def test_parallel_modes_give_the_same_batches_as_the_sequential_reader(kw: dict[str, Any]) -> None:
    """Also the bad rows' exact reasons and raw values (not only the facts the reference can check)."""
    text = b"\n".join(_tricky_lines()) + b"\n"
    block = {"block_bytes": kw["block_bytes"]} if "block_bytes" in kw else {}
    seq = read_jsonl_elements(io.BytesIO(text), **block)
    par = read_jsonl_elements(io.BytesIO(text), **kw)
    assert [(ln, repr(e)) for ln, e in par] == [(ln, repr(e)) for ln, e in seq]


def test_crlf_file_and_no_final_newline() -> None:
    text = b"\r\n".join(_plain(k).encode() for k in range(300)) + b"\r\n\r\n" + b'{"kind":"cti","t":400}'
    for kw in MODES:
        assert _got(text, **kw) == _reference(text), kw


@pytest.mark.parametrize(("key", "spelled"), [("prïce", "prïce"), ("prix €", "prix €"), ("pr/ice", "pr\\/ice"),
                                              ("price", "pr\\u0069ce")])
def test_integer_literals_keep_their_type_whatever_the_key_spelling(key: str, spelled: str) -> None:
    """A float column with one integer literal: the element must hold int 28, as json.loads gives, even
    when the key is non-ASCII or written with an escape (the fast path's literal check used to search
    for the ``\\u``-escaped spelling only, and gave 28.0)."""
    rows = [f'{{"kind":"insert","id":"a{k}","le":{k},"re":{k + 1},"payload":{{"{spelled}":{k}.5}}}}'
            for k in range(100)]
    rows[40] = f'{{"kind":"insert","id":"int","le":40,"re":41,"payload":{{"{spelled}":28}}}}'
    text = ("\n".join(rows) + "\n").encode()
    for kw in MODES:
        els = {e.id: e for _, e in read_jsonl_elements(io.BytesIO(text), **kw) if isinstance(e, Insert)}
        assert type(els["int"].payload[key]) is int and els["int"].payload[key] == 28, kw
        assert els["a3"].payload == {key: 3.5}
        assert _got(text, **kw) == _reference(text)


def test_clean_input_takes_the_fast_path_in_worker_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any) -> None:
        raise AssertionError("the per-line path was used")

    monkeypatch.setattr(jl, "_slow_batch", refuse)
    text = ("\n".join(_plain(k) for k in range(3000)) + "\n").encode()
    batches = list(read_jsonl_batches(io.BytesIO(text), workers=2, prefetch=3, block_bytes=20_000))
    assert len(batches) > 5 and all(b.payload_is_struct for b in batches)
    assert [int(x) for b in batches for x in b.lines] == list(range(1, 3001))
    assert _got(text, workers=2, block_bytes=20_000) == _reference(text)


def test_worker_errors_reach_the_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any) -> None:
        raise RuntimeError("parse failed")

    monkeypatch.setattr(jl, "_parse_block", boom)
    text = ("\n".join(_plain(k) for k in range(500)) + "\n").encode()
    with pytest.raises(RuntimeError, match="parse failed"):
        list(read_jsonl_batches(io.BytesIO(text), workers=2, block_bytes=5000))


def test_parallel_progress_and_early_close(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    p.write_bytes(("\n".join(_plain(k) for k in range(5000)) + "\n").encode())
    r = JsonlReader(p, batch_size=100, workers=2, prefetch=3, block_bytes=10_000)
    it = iter(r)
    next(it)
    assert 0 < r.bytes_done <= p.stat().st_size
    it.close()  # cancels the pending blocks without hanging, closes the file
    assert r._file is None
    r2 = JsonlReader(p, workers=2, block_bytes=10_000)
    seen = []
    for _ in r2:
        seen.append(r2.bytes_done)
    assert seen == sorted(seen) and seen[-1] == p.stat().st_size


def test_negative_workers_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        JsonlReader(io.BytesIO(b""), workers=-1)


def test_ready_made_columns_equal_the_table_and_ignore_stray_fields() -> None:
    """The reader hands the engine kind codes and int64 columns in numpy form; they must equal what
    `ElementBatch` computes from the table, also when lines carry fields their kind does not use (a CTI's
    ``le``/``payload``, an insert's ``t``/``re_new``), which the table holds as null."""
    from udm.host.io.batch import ElementBatch

    rows = [_plain(k) for k in range(200)]
    rows[10] = '{"kind":"cti","t":10,"le":3,"re":4,"payload":{"sym":"A","price":1.5}}'
    rows[20] = '{"kind":"insert","id":"s","le":20,"re":21,"t":99,"re_new":5,"payload":{"sym":"B","price":2.5}}'
    rows[30] = '{"kind":"retract","id":"e1","le":1,"re":4,"re_new":2,"t":7}'
    text = ("\n".join(rows) + "\n").encode()
    for kw in ({}, {"workers": 2, "block_bytes": 10_000}, {"batch_size": 64}):
        batches = list(read_jsonl_batches(io.BytesIO(text), **kw))
        assert any(b.payload_is_struct for b in batches), kw
        for b in batches:
            plain = ElementBatch(b.table)  # no ready-made columns: computed from the table
            assert b.kind_codes().tolist() == plain.kind_codes().tolist()
            for name in ("le", "re", "re_new", "t"):
                assert b.column(name).tolist() == plain.column(name).tolist(), (kw, name)
            assert b.sync_times().tolist() == plain.sync_times().tolist()
        assert _got(text, **kw) == _reference(text)
    cti = read_jsonl_elements(io.BytesIO(text))[10][1]
    assert cti == Cti(10)


def test_engine_gives_the_same_answer_from_reader_batches_and_from_elements() -> None:
    """The engine over the reader's batches (fast path, ready-made columns) == the engine over the
    reference's element objects one by one, dead letters included (a duplicate id, a late insert)."""
    from udm.host.engine import QueryRunner
    from udm.host.model.plan import bind
    from udm.host.model.spec import parse_query

    q = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 50}, "group_by": ["sym"],
                    "udm": "avg", "input": "price", "as": "m"}]}
    rows = [_plain(k) for k in range(2000)]
    rows[500] = '{"kind":"cti","t":480}'
    rows[900] = _plain(850)  # duplicate id e850
    rows[1200] = '{"kind":"insert","id":"late","le":3,"re":4,"payload":{"sym":"A","price":1.5}}'
    text = ("\n".join(rows) + "\n").encode()

    def run(batches: Any) -> tuple[list[Any], list[Any]]:
        r = QueryRunner(bind(parse_query(q)))
        out = []
        for b in batches:
            out.extend(element_to_json(e) for e in r.process_batch(b))
        out.extend(element_to_json(e) for e in r.finish())
        return out, [repr(d) for d in r.take_dead_letters()]

    from udm.host.io.batch import ElementBatch

    batches = list(read_jsonl_batches(io.BytesIO(text), workers=2, block_bytes=30_000))
    assert len(batches) > 3 and all(b.payload_is_struct for b in batches)
    got = run(batches)
    by_line = {i: parse_element(json.loads(raw), line=i) for i, raw in enumerate(text.split(b"\n"), start=1)
               if raw.strip()}
    # the same batch boundaries (output ids and release order follow them), built from element objects
    ref = run([ElementBatch.from_elements([by_line[i] for i in b.lines.tolist()], b.lines.tolist())
               for b in batches])
    assert got == ref
    assert len(got[1]) == 2
