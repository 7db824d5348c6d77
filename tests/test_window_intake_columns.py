"""A window step's intake over typed payload columns (`udm.host.engine.window.intake`): when the batch's
``group_by`` field is an arrow column, each row's group comes from one dictionary encoding per batch, and a
group made there takes its key field from the dictionary's value, not from the row. The output must be the
kit's oracle's on the same elements — int, float, bool and text keys (an int key stays an int in the output
JSON, ``1`` and ``1.0`` and ``True`` are three groups), whole-payload UDAs (``count`` without input),
hopping and tumbling windows, late elements, CTIs inside batches, batches cut anywhere."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from test_engine_support import check_physical, cht

from udm.host.engine import QueryRunner
from udm.host.engine.window.state import group_key, group_keys
from udm.host.engine.window.step import WindowOp
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing import oracle

KEYS: dict[str, list[Any]] = {"int": [1, 2, 3, -7], "float": [1.0, 2.5, -0.5], "bool": [True, False],
                              "text": ["a", "b", "1"]}


def _stream(seed: int, keys: list[Any], n: int = 1500) -> list[Element]:
    rng = random.Random(seed)
    out: list[Element] = []
    for i in range(n):
        le = i - (rng.randrange(15) if rng.random() < 0.1 else 0)
        out.append(Insert(f"e{i}", le, le + 1, {"k": rng.choice(keys), "v": rng.randrange(50), "w": "x"}))
        if i % 89 == 88:
            out.append(Cti(i - 20))
    return [*out, Cti(10**18)]


def _table(part: list[Element]) -> pa.Table:
    """Elements as a batch table whose payload is a struct column (typed fields, as the JSON reader gives)."""
    ins = [isinstance(e, Insert) for e in part]
    m = len(part)
    return pa.table({
        "kind": pa.array(["insert" if x else "cti" for x in ins], pa.string()),
        "id": pa.array([e.id if isinstance(e, Insert) else None for e in part], pa.string()),
        "le": pa.array([e.le if isinstance(e, Insert) else None for e in part], pa.int64()),
        "re": pa.array([e.re if isinstance(e, Insert) else None for e in part], pa.int64()),
        "re_new": pa.nulls(m, pa.int64()),
        "t": pa.array([None if isinstance(e, Insert) else e.t for e in part], pa.int64()),
        "payload": pa.array([e.payload if isinstance(e, Insert) else None for e in part]),
        "line": pa.array(range(1, m + 1), pa.int64()),
        "error": pa.nulls(m, pa.string()),
        "raw": pa.nulls(m, pa.string()),
    })


@pytest.mark.parametrize("kind", list(KEYS))
@pytest.mark.parametrize("step", [{"udm": "count", "window": {"type": "hopping", "size": 30, "hop": 10}},
                                  {"udm": "sum", "input": "v", "window": {"type": "tumbling", "size": 20}}])
def test_group_codes_from_an_arrow_column_equal_the_oracle(kind: str, step: dict[str, Any]) -> None:
    spec = {"steps": [{"op": "window", "group_by": ["k"], **step}]}
    q = bind(parse_query(spec))
    for seed in range(2):
        stream = _stream(seed, KEYS[kind])
        want = oracle(q.spec, stream)
        for chunk in (97, 700):
            r = QueryRunner(q)
            got = []
            for a in range(0, len(stream), chunk):
                b = ElementBatch.from_table(_table(stream[a:a + chunk]))
                assert b.table.column("payload").type.get_field_index("k") >= 0  # (a typed column)
                got += r.process_batch(b)
            got += r.finish()
            check_physical(got)
            assert cht(got) == want, (kind, seed, chunk)


def test_group_keys_are_group_key_of_each_value() -> None:
    """`group_keys` (a batch's distinct key values at once) is `group_key` per value: one kind or mixed,
    ``1``, ``1.0`` and ``True`` apart, unhashable values by their JSON."""
    rng = random.Random(5)
    pools: list[list[Any]] = [*KEYS.values(), [1, 1.0, True, "1", None], [[1, 2], {"a": 1}, 3], [None, None]]
    for _ in range(300):
        pool = rng.choice(pools)
        values = [rng.choice(pool) for _ in range(rng.randrange(0, 12))]
        got = group_keys(list(values))
        want = [group_key(v) for v in values]
        assert got == want and [type(k) for k in got] == [type(k) for k in want], values
        assert all(type(a[1]) is type(b[1]) for a, b in zip(got, want, strict=True) if isinstance(a, tuple))


def test_a_store_groups_bulk_insert_keeps_the_step_busy_until_its_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups whose inserts the pane store takes are not touched one by one (the store values them at the
    flush): the step still reports work queued (`WindowOp.busy`, which the engine's progress reads) from the
    insert to the flush, and none after it; the output is still the oracle's."""
    spec = {"steps": [{"op": "window", "group_by": ["k"], "udm": "count",
                       "window": {"type": "hopping", "size": 30, "hop": 10}}]}
    q = bind(parse_query(spec))
    seen: list[tuple[bool, bool, int]] = []
    real = WindowOp.flush

    def flush(self: WindowOp) -> Any:
        before = self.busy()
        stored = sum(g.data.num >= 0 for g in self.touched.values())
        res = real(self)
        seen.append((before, self.busy(), stored))
        return res

    monkeypatch.setattr(WindowOp, "flush", flush)
    stream = _stream(3, KEYS["int"])
    r = QueryRunner(q)
    got = []
    for a in range(0, len(stream), 300):
        got += r.process_batch(ElementBatch.from_table(_table(stream[a:a + 300])))
    got += r.finish()
    check_physical(got)
    assert cht(got) == oracle(q.spec, stream)
    op = next(o for o in r.ops if isinstance(o, WindowOp))
    assert op.family.store.on and seen
    assert all(before for before, _, _ in seen[:-1]) and not any(after for _, after, _ in seen)
    assert not any(stored for _, _, stored in seen)  # (no group of the store was touched one by one)
