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
from udm.host.temporal.elements import Cti, Element, Insert
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


def _run(stream: list[Element | BadElement], policy: str, columns: bool) -> tuple[Any, ...]:
    ctx = Context(policy)
    gate = InputGate("main", ctx)
    outs = []
    for a in range(0, len(stream), 64):
        part = stream[a:a + 64]
        raw = ElementBatch.from_elements(part, list(range(a + 1, a + len(part) + 1)))
        b = gate.process(raw) if columns else gate.process_elements(raw.to_elements())
        outs.append((b.kind.tolist(), b.id.tolist(), b.le.tolist(), b.re.tolist(), b.line.tolist(),
                     b.payload.rows() if len(b) else []))
    dead = [(d.line, d.reason, d.category) for d in ctx.dead_letters]
    return outs, dead, len(gate.live), gate.cti, ctx.reached


@pytest.mark.parametrize("policy", ["dead_letter", "adjust"])
def test_columns_equal_rows(policy: str) -> None:
    used = 0
    for seed in range(40):
        stream = _stream(seed)
        assert _run(stream, policy, True) == _run(stream, policy, False), seed
        used += 1
    assert used == 40


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
