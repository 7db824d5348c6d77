"""Dead letters written column-wise (`udm.host.io.dead_letters`, `udm.host.engine.dead_letters`): the
dead-letter file holds, byte for byte, what the gate's row path refuses, each record encoded by itself as
``json.dumps(echo(record), allow_nan=False)`` (the reference: the row path and ``json``, not the code under
test), on random JSON Lines inputs with every reason the engine has — bad JSON, a payload that is not an
object, a missing field, a field of the wrong type, a late insert, a bad lifetime, a duplicate id, a
retraction of an unknown id, with a lifetime that is not the live event's, a late retraction — read by
the fast (struct payload) and the per-line reader, in one-input and two-input queries."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.engine import gate as gate_mod
from udm.host.engine.context import Context
from udm.host.engine.gate import InputGate
from udm.host.errors import BadElement, ViolationError
from udm.host.io.batch import ElementBatch
from udm.host.io.jsonl import DeadLetterWriter, JsonlReader
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, run_local
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.temporal.strict import echo
from udm.sdk import INF

_ROWS = {"steps": [{"op": "window", "window": {"type": "rows", "n": 3}, "group_by": ["g"], "udm": "avg",
                    "input": "price", "as": "avg_price"}]}
#: grouped by a field no payload has: every insert refused for it, its payload a struct column (issue 26's q6)
_ROWS_H = {"steps": [{**_ROWS["steps"][0], "group_by": ["h"]}]}
_JOIN = {"inputs": {"a": {}, "b": {}}, "steps": [{"op": "join", "from": ["a", "b"], "on": "g",
                                                  "right_prefix": "b_"}]}
_KEYS = ["k0", "k1", "ké", 'k"q', "k\\b"]


def _lines(seed: int, n: int, floats_only: bool) -> list[str]:
    """JSON Lines with every kind of bad element among good ones (``floats_only``: payloads of one shape,
    prices written as floats, so the fast reader takes whole blocks with payloads as structs)."""
    rng = random.Random(seed)
    out: list[str] = []
    given: dict[str, tuple[int, int]] = {}
    t = 0
    for i in range(n):
        r = rng.random()
        if r < 0.03:
            out.append(json.dumps({"kind": "cti", "t": max(0, t - rng.randrange(6))}))
            continue
        if r < 0.04 and not floats_only:
            out.append(rng.choice(["{oops", "[1, 2]", '"text"', '{"kind": "insert", "id": "x", "le": 1, "re": 0}',
                                   '{"kind": "insert", "id": "p", "le": 1, "re": 2, "payload": 5}']))
            continue
        if r < 0.25 and given:
            name = rng.choice(list(given)[-10:])  # (recent ones: an older one is mostly closed by now)
            le, re = given[name]
            pick = rng.random()
            if pick < 0.2:
                name = f"nobody{i}"
            elif pick < 0.35:
                re = re + 1 if re < INF else re  # not the live event's lifetime
            rn = rng.choice([le, re, re + 3, le + 1 if le + 1 < re else re])
            rec: dict[str, Any] = {"kind": "retract", "id": name, "le": le, "re": "inf" if re >= INF else re,
                                   "re_new": "inf" if rn >= INF else rn}
            if rng.random() < 0.5:
                rec["payload"] = {"g": rng.choice(_KEYS), "price": 1.5}
                if floats_only:
                    rec["payload"]["tags"] = {"a": [0.5], "b": "r"}
            out.append(json.dumps(rec, ensure_ascii=rng.random() < 0.5))
            continue
        t += rng.randrange(3)
        le = t - (rng.randrange(8) if rng.random() < 0.15 else 0)
        re: Any = le + rng.choice([1, 2, 5]) if rng.random() > 0.05 else "inf"
        name = f"e{i}" if rng.random() > 0.03 or not given else rng.choice(list(given))
        payload: dict[str, Any] = {"g": rng.choice(_KEYS), "price": rng.choice([0.5, 62.5, 1e-7, 3.25, 1e12 + 0.5])}
        if not floats_only and rng.random() < 0.3:
            payload["price"] = rng.choice([7, -3, 62.0, "cheap", None, [1, 2]])
        if floats_only:  # (every payload of one shape: the reader's struct column)
            payload["tags"] = {"a": [1.5, rng.choice([2.5, 0.25])], "b": rng.choice(["ü", "x"])}
        elif rng.random() < 0.1:
            del payload[rng.choice(["g", "price"])]
        out.append(json.dumps({"kind": "insert", "id": name, "le": le, "re": re, "payload": payload},
                              ensure_ascii=rng.random() < 0.5))
        given.setdefault(name, (le, INF if re == "inf" else re))
    return out


def _reference(dead: list[Any]) -> str:
    """The dead-letter file as the per-record writer wrote it: one ``json.dumps`` of each record."""
    return "".join(json.dumps(echo(d.to_json()), allow_nan=False) + "\n" for d in dead)


def _written(dead: Any) -> str:
    buf = io.StringIO()
    DeadLetterWriter(buf).write(dead)
    return buf.getvalue()


def _run(spec: dict[str, Any], files: dict[str, Path], batch_size: int, fast: bool) -> tuple[str, list[Any]]:
    """The dead letters of a run (inputs fed in turn, batch by batch) as written, and as records."""
    r = QueryRunner(bind(parse_query(spec)))
    text = ""
    records: list[Any] = []
    for name, path in files.items():
        for batch in JsonlReader(str(path), batch_size=batch_size, fast=fast):
            r.process_batch(batch, None if len(files) == 1 else name)
            dead = r.take_dead_letters()
            text += _written(dead)
            records += list(dead)
    r.finish()
    dead = r.take_dead_letters()
    return text + _written(dead), records + list(dead)


def _rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_mod, "columns", lambda gate, raw: None)


@pytest.mark.parametrize("floats_only", [True, False])
@pytest.mark.parametrize("query", ["rows", "rows_h", "join"])
def test_the_dead_letter_file_is_the_row_paths_records_each_dumped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   floats_only: bool, query: str) -> None:
    spec = {"rows": _ROWS, "rows_h": _ROWS_H, "join": _JOIN}[query]
    reasons: set[str] = set()
    for seed in range(6):
        files = {}
        for k, name in enumerate(["a", "b"] if query == "join" else ["main"]):
            files[name] = tmp_path / f"{seed}-{name}.jsonl"
            files[name].write_text("\n".join(_lines(seed * 7 + k, 700, floats_only)) + "\n", encoding="utf-8")
        for batch_size, fast in ((64, True), (1000, True), (100, False)):
            got, got_records = _run(spec, files, batch_size, fast)
            with monkeypatch.context() as m:
                _rows_only(m)
                _, ref_records = _run(spec, files, batch_size, fast)
            ref = _reference(ref_records)
            assert got == ref, (seed, batch_size, fast)
            assert [d.to_json() for d in got_records] == [d.to_json() for d in ref_records]
            assert [d.category for d in got_records] == [d.category for d in ref_records]
            reasons |= {d.category for d in ref_records}
    want = {"unknown_id", "cti_violation"} | ({"missing_field"} if query == "rows_h" else {"lifetime_mismatch"})
    if not floats_only:  # (a refused insert's id is free again: with every insert refused, none repeats)
        want |= {"malformed", "missing_field"} | ({"duplicate_id"} if query != "rows_h" else set())
    assert want <= reasons, reasons


def _elements(seed: int) -> list[Element | BadElement]:
    """Elements no file can hold (bad lifetimes reach the gate only from the engine API)."""
    rng = random.Random(seed)
    out: list[Element | BadElement] = []
    for i in range(300):
        r = rng.random()
        le = i + rng.randrange(3)
        if r < 0.05:
            out.append(Cti(i))
        elif r < 0.1:
            out.append(BadElement("not JSON", raw=rng.choice(["{oops", 5, [1], {"a": float("nan")}])))
        elif r < 0.15:
            out.append(Insert(f"x{i}", le, rng.choice([le, le - 1, INF]) if rng.random() < 0.7 else le + 1,
                              {"g": "k", "price": 1.0}))
        elif r < 0.25 and i > 10:
            j = rng.randrange(i)
            out.append(Retract(f"e{j}", j, j + 2, rng.choice([j - 1, j + 1, j])))
        else:
            out.append(Insert(f"e{i}", i, i + 2, {"g": rng.choice(_KEYS), "price": rng.choice([1.5, 2.0, 7])}))
    return out


@pytest.mark.parametrize("policy", ["dead_letter", "adjust"])
def test_bad_lifetimes_and_unreadable_rows_from_the_engine_api(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    for seed in range(10):
        els = _elements(seed)
        got = []
        for rows_only in (False, True):
            with monkeypatch.context() as m:
                if rows_only:
                    _rows_only(m)
                ctx = Context(policy)
                g = InputGate("main", ctx)
                for a in range(0, len(els), 50):
                    g.process(ElementBatch.from_elements(els[a:a + 50], list(range(a + 1, a + 51))))
                got.append(ctx.dead_letters)
        assert _written(got[0]) == _reference(list(got[1])), seed
        assert {d.category for d in got[1]} >= {"invalid_lifetime", "malformed"}


def test_the_first_refused_row_stops_an_error_run_as_on_the_row_path(monkeypatch: pytest.MonkeyPatch) -> None:
    els: list[Element | BadElement] = [Insert(f"e{i}", i, i + 1, {"g": "k", "price": 1.0}) for i in range(40)]
    els[20] = Insert("late", 5, 9, {"g": "k", "price": 1.0})
    els[25] = BadElement("not JSON", raw="{oops")
    msgs = []
    for rows_only in (False, True):
        with monkeypatch.context() as m:
            if rows_only:
                _rows_only(m)
            g = InputGate("main", Context("error"))
            with pytest.raises(ViolationError) as exc:
                g.process(ElementBatch.from_elements([*els[:10], Cti(10), *els[10:]], list(range(1, 42))))
            msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]
    assert "line 22" in msgs[0] and "CTI violation" in msgs[0]


def test_udm_run_writes_the_same_dead_letter_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_lines(3, 3000, False)) + "\n", encoding="utf-8")
    q = bind(parse_query(_ROWS))
    files = []
    for rows_only in (False, True):
        with monkeypatch.context() as m:
            if rows_only:
                _rows_only(m)
            dl = tmp_path / f"dl{rows_only}.jsonl"
            run_local(RunRequest(bound=q, input=str(src), output=str(tmp_path / "out.jsonl"), dead_letter=str(dl)))
            files.append(dl.read_bytes())
    assert files[0] == files[1] and files[0].count(b"\n") > 100


def test_a_snapshot_keeps_the_dead_letters_not_yet_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner snapshot taken with dead letters pending (a block of refused rows among records) restores
    them as records, written as before."""
    import pickle

    els = _elements(1)
    ctx = Context("dead_letter")
    g = InputGate("main", ctx)
    g.process(ElementBatch.from_elements(els[:150], list(range(1, 151))))
    g.process_elements(ElementBatch.from_elements(els[150:], list(range(151, 301))).to_elements())
    back = pickle.loads(pickle.dumps(ctx)).dead_letters
    assert len(back) == len(ctx.dead_letters) > 10
    assert _written(back) == _written(ctx.dead_letters) == _reference(list(ctx.dead_letters))
    assert pickle.loads(pickle.dumps(Context("dead_letter"))).dead_letters == []
