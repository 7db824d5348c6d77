"""An input's gate (`udm.host.engine.gate.InputGate`): its column-wise validation gives what its row-by-row
validation gives — the same valid rows, engine ids, lifetimes, CTIs, dead letters (reasons and order) and
live registry — on random streams with late, bad, duplicate and reused ids, adjusted inserts and CTIs in the
middle of batches; and the case that two copies of the rules once disagreed on (issue 26) is right."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.engine.context import Context
from udm.host.engine.gate import InputGate
from udm.host.errors import BadElement
from udm.host.io.batch import ElementBatch
from udm.host.io.jsonl import JsonlReader
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, run_local
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.sdk import INF


def _stream(seed: int, n: int = 300) -> list[Element | BadElement]:
    rng = random.Random(seed)
    out: list[Element | BadElement] = []
    t = 0
    c = None
    for i in range(n):
        r = rng.random()
        if r < 0.06:
            c = max(0, t - rng.randrange(5))
            out.append(Cti(c))
            continue
        if r < 0.08:
            out.append(BadElement("not JSON", raw="{oops"))
            continue
        t += rng.randrange(3)
        le = t - (rng.randrange(8) if rng.random() < 0.1 else 0)  # some late
        re = le + rng.choice([1, 1, 2, 5, 0]) if rng.random() > 0.02 else INF
        k = rng.randrange(i + 1) if rng.random() < 0.05 else i  # some ids again
        out.append(Insert(f"e{k}", le, re, {"v": i % 7, "g": f"k{i % 3}"}))
    return out


def _retracting_stream(seed: int, n: int = 400) -> list[Element | BadElement]:
    """Inserts with retractions of every sort: of events inserted in the same batch or batches before,
    right ones (shortening, deleting, extending, to the same end), of unknown ids, with a wrong lifetime or
    a bad one, late ones, chains on one id, retractions above their insert, ids reused after a delete;
    CTIs (some closing events that are retracted later) and a few late and adjusted inserts."""
    rng = random.Random(seed)
    out: list[Element | BadElement] = []
    given: dict[str, tuple[int, int]] = {}  # what the stream believes of each id: (LE as given, current RE)
    t = 0
    for i in range(n):
        r = rng.random()
        if r < 0.04:
            out.append(Cti(max(0, t - rng.randrange(12))))
            continue
        if r < 0.05:
            out.append(BadElement("not JSON", raw="{oops"))
            continue
        if r < 0.35 and given:
            name = rng.choice(list(given)[-12:] if rng.random() < 0.8 else list(given))
            le, re = given[name]
            pick = rng.random()
            if pick < 0.05:
                name = f"nobody{i}"
            elif pick < 0.1:
                re = min(re + rng.choice([1, 30]), INF) if re < INF else re - 1  # not the live event's lifetime
            elif pick < 0.12:
                out.append(Retract(name, le, re, le - 1))  # RE_new below LE: a bad lifetime
                continue
            rn = min(INF, rng.choice([le, le, le + 1, re, re + 2, max(le, re - 1)]))
            out.append(Retract(name, le, re, rn))
            if name in given and pick >= 0.1:
                if rn <= le:
                    del given[name]
                else:
                    given[name] = (le, rn)
            if rng.random() < 0.05:  # the insert comes after its retraction
                out.insert(len(out) - 1, Insert(f"pre{i}", t, t + 3, {"v": i % 5, "g": "a"}))
                out.append(Retract(f"pre{i}", t, t + 3, t + 1))
            continue
        t += rng.randrange(3)
        le = t - (rng.randrange(10) if rng.random() < 0.1 else 0)  # some late
        re = le + rng.choice([1, 2, 3, 5, 8]) if rng.random() > 0.02 else INF
        name = f"e{i}"
        if rng.random() < 0.03 and given:
            name = rng.choice(list(given))  # an id again (maybe deleted by now: then reused)
        out.append(Insert(name, le, re, {"v": i % 7, "g": f"k{i % 3}"}))
        given.setdefault(name, (le, re))
    return out


def _run(stream: list[Element | BadElement], policy: str, columns: bool, size: int = 64) -> tuple[Any, ...]:
    ctx = Context(policy)
    gate = InputGate("main", ctx)
    outs = []
    for a in range(0, len(stream), size):
        part = stream[a:a + size]
        raw = ElementBatch.from_elements(part, list(range(a + 1, a + len(part) + 1)))
        b = gate.process(raw) if columns else gate.process_elements(raw.to_elements())
        outs.append((b.kind.tolist(), b.id.tolist(), b.le.tolist(), b.re.tolist(), b.rn.tolist(), b.line.tolist(),
                     b.payload.rows() if len(b) else [], [b.id_text(i) for i in range(len(b))]))
    dead = [(d.line, d.reason, d.category) for d in ctx.dead_letters]
    names = sorted({e.id for e in stream if isinstance(e, (Insert, Retract))})
    live = {}
    for name in names:
        rec = gate.live.peek(name)
        if rec is not None:
            live[name] = (rec.eid, rec.le, rec.ole, rec.re)
    return outs, dead, len(gate.live), live, gate.cti, ctx.reached


@pytest.mark.parametrize("policy", ["dead_letter", "adjust"])
def test_columns_equal_rows(policy: str) -> None:
    used = 0
    for seed in range(40):
        stream = _stream(seed)
        assert _run(stream, policy, True) == _run(stream, policy, False), seed
        used += 1
    assert used == 40


@pytest.mark.parametrize("policy", ["dead_letter", "adjust"])
@pytest.mark.parametrize("size", [16, 64, 500])
def test_columns_equal_rows_with_retractions(policy: str, size: int) -> None:
    """Retractions of every sort (`_retracting_stream`): the same output, dead letters and live registry as
    the row path, batch by batch."""
    for seed in range(25):
        stream = _retracting_stream(seed)
        assert _run(stream, policy, True, size) == _run(stream, policy, False, size), seed


def test_a_retraction_of_an_event_a_cti_closed_in_the_same_batch_names_an_unknown_id() -> None:
    """A CTI forgets the events ending before it (semantics-notes 63): a retraction after it that names
    such an event with another lifetime (late by neither its RE nor its RE_new) names an unknown id, whether
    the event came in this batch or an earlier one."""
    fill: list[Element] = [Insert(f"f{i}", 20 + i, 21 + i, {"v": i}) for i in range(20)]
    a = Insert("a", 0, 5, {"v": 1})
    late = [Cti(10), Retract("a", 0, 40, 35)]
    for batches in ([[a, *fill, *late]], [[a, *fill], [*fill[:0], *late]]):
        got = []
        for columns in (True, False):
            ctx = Context("dead_letter")
            g = InputGate("main", ctx)
            line = 1
            for part in batches:
                raw = ElementBatch.from_elements(part, list(range(line, line + len(part))))
                line += len(part)
                g.process(raw) if columns else g.process_elements(raw.to_elements())
            got.append([(d.line, d.category, d.reason) for d in ctx.dead_letters])
        assert got[0] == got[1] == [(23, "unknown_id", "retraction of unknown id 'a'")]


def test_a_batch_with_retractions_goes_column_wise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retractions of distinct ids, of events of this batch and of the one before, do not send the batch
    row by row; a chain on one id does."""
    from udm.host.engine import gate as gate_mod

    ran = []
    real = gate_mod._Rows.run
    monkeypatch.setattr(gate_mod._Rows, "run", lambda self: ran.append(1) or real(self))
    g = InputGate("main", Context("dead_letter"))
    first: list[Element] = [Insert(f"a{i}", i, i + 10, {"v": i}) for i in range(50)]
    g.process(ElementBatch.from_elements(first, list(range(1, 51))))
    second: list[Element] = [Insert(f"b{i}", 60 + i, 70 + i, {"v": i}) for i in range(50)]
    second += [Retract(f"b{i}", 60 + i, 70 + i, 61 + i) for i in range(0, 50, 5)]
    second += [Retract(f"a{i}", i, i + 10, i) for i in range(0, 50, 7)] + [Cti(5)]
    b = g.process(ElementBatch.from_elements(second, list(range(51, 51 + len(second)))))
    assert ran == []
    assert b.kind.tolist().count(1) == 10 + 8
    assert [b.payload.row(i)["v"] for i in range(len(b)) if b.kind[i] == 1][-8:] == list(range(0, 50, 7))
    assert g.live.peek("a0") is None and g.live.peek("a1") is not None and g.live.peek("b0").re == 61
    chain: list[Element] = [Retract("b1", 61, 71, 65), Retract("b1", 61, 65, 62)]
    g.process(ElementBatch.from_elements(chain, [200, 201]))
    assert ran == [1] and g.live.peek("b1").re == 62


def test_the_column_path_really_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clean in-order batch the gate validates column-wise (no row is looked at one by one)."""
    from udm.host.engine import gate as gate_mod

    def no_rows(*a: Any, **kw: Any) -> Any:
        raise AssertionError("the row path ran")

    monkeypatch.setattr(gate_mod._Rows, "run", no_rows)
    g = InputGate("main", Context("dead_letter"))
    els: list[Element] = [Insert(f"e{i}", i, i + 1, {"v": i}) for i in range(100)] + [Cti(50)]
    b = g.process(ElementBatch.from_elements(els, list(range(1, 102))))
    assert len(b) == 101 and b.id.tolist()[:3] == [1, 2, 3]


def test_a_late_insert_after_a_bad_line_is_refused_however_long_the_batch(tmp_path: Path) -> None:
    """Issue 26: cti(73), a line that is not JSON, an insert [72, 78) (late: sync time 72 < CTI 73), then 60
    in-order point inserts: two dead letters, and [72, 76) counts 3 (73, 74, 75), whatever the batch size.
    The old columnar route kept the late insert once more than ~60 lines followed it."""
    lines = ['{"kind": "cti", "t": 73}', "this is not JSON",
             '{"kind": "insert", "id": "late", "le": 72, "re": 78, "payload": {"v": 1}}']
    lines += [json.dumps({"kind": "insert", "id": f"e{t}", "le": t, "re": t + 1, "payload": {"v": 1}})
              for t in range(73, 133)]
    lines.append('{"kind": "cti", "t": "inf"}')
    assert len(lines) == 64
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 4}, "udm": "count",
                                     "input": "v"}]}))
    for batch_size in (1, 7, 64, 1000):  # the engine API, batch by batch
        r = QueryRunner(q)
        out = []
        for batch in JsonlReader(str(path), batch_size=batch_size):
            out += r.process_batch(batch)
        out += r.finish()
        counts = {(e.le, e.re): e.payload["count"] for e in out if isinstance(e, Insert)}
        assert counts[(72, 76)] == 3, batch_size
        assert [d.line for d in r.dead_letters] == [2, 3], batch_size
        assert "CTI violation: sync time 72 < CTI 73" in r.dead_letters[1].reason
    # and `udm run`, the route the old engine got wrong
    res = run_local(RunRequest(bound=q, input=str(path), output=str(tmp_path / "out.jsonl"),
                               dead_letter=str(tmp_path / "dl.jsonl")))
    assert res.dead_lettered == 2
    got = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [e["payload"]["count"] for e in got if e["kind"] == "insert" and e["le"] == 72] == [3]
