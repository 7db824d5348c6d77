"""Engine: a value-blind UDA (`udm.sdk.Properties.value_blind`) gets placeholders, never payloads, on every
route — pane store and panes, windows a batch fills and closes, rows, sessions, count and snapshot windows,
the per-row route of retractions, snapshot/restore — and its output is still the kit's oracle's, which
hands it the real members. The spies fail on any member value other than the placeholder ``0``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from test_engine_support import catalog_with, check_physical, gen_stream

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing import oracle, verify
from udm.sdk import UDA, UDO, Event, IncrementalUDA, TimeSensitiveUDA, WindowDescriptor, udm

#: how many member values each spy saw in the engine, by the form it saw them in
SEEN: dict[str, int] = {}
#: the spies check only while the engine runs (the oracle hands them the real members)
ENGINE = [False]


def _placeholders(form: str, values: Any) -> None:
    if not ENGINE[0]:
        return
    vals = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if isinstance(values, np.ndarray):
        assert values.dtype == np.int64, (form, values.dtype)
    assert all(type(v) is int and v == 0 for v in vals), (form, vals[:5])
    SEEN[form] = SEEN.get(form, 0) + len(vals)


@udm(name="spy_count", version="1.0.0", algebraic=True, value_blind=True, input_type="any", output_type="int")
class SpyCount(IncrementalUDA):
    """A count with every column form, asserting that it only ever sees placeholders."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        _placeholders("add", delta)
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[Any]) -> int:
        _placeholders("remove", delta)
        return state - len(delta)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def add_array(self, state: int, values: np.ndarray) -> int:
        _placeholders("add_array", values)
        return state + len(values)

    def add_batch(self, states: list[int], values: np.ndarray, offsets: np.ndarray) -> list[int]:
        _placeholders("add_batch", values)
        return [s + int(k) for s, k in zip(states, np.diff(offsets).tolist(), strict=True)]

    def compute_slices(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        _placeholders("compute_slices", values)
        return np.diff(np.asarray(offsets, dtype=np.int64))

    def compute_prefixes(self, state: int, values: np.ndarray, ends: np.ndarray) -> np.ndarray:
        _placeholders("compute_prefixes", values)
        return state + np.asarray(ends, dtype=np.int64)

    def compute_ranges(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        _placeholders("compute_ranges", values)
        return np.asarray(ends, dtype=np.int64) - np.asarray(starts, dtype=np.int64)

    def compute(self, state: int) -> int:
        return state


@udm(name="spy_cover", version="1.0.0", value_blind=True, input_type="any", output_type="int")
class SpyCover(TimeSensitiveUDA):
    """Time-sensitive and blind: the members' clipped lifetimes summed (their payloads are placeholders)."""

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> int:
        _placeholders("events", [e.payload for e in events])
        return sum(min(e.re, window.re) - max(e.le, window.le) for e in events)


CAT = catalog_with(SpyCount, SpyCover)
WINDOWS = [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 6, "hop": 2},
           {"type": "hopping", "size": 10, "hop": 3}, {"type": "cumulate", "size": 12, "step": 4},
           {"type": "snapshot"}, {"type": "session", "gap": 3}, {"type": "rows", "n": 3, "slide": 2},
           {"type": "count_by_start", "n": 2}, {"type": "count_by_end", "n": 3, "hop": 2}]


def _query(win: dict[str, Any], name: str, grouped: bool) -> dict[str, Any]:
    step: dict[str, Any] = {"op": "window", "window": win, "udm": name, **({"group_by": ["g"]} if grouped else {})}
    if name == "spy_cover":
        step["clip"] = "full"
    return {"steps": [step]}


def _run(q: dict[str, Any], stream: list[Element], cut: int, restore_at: int | None) -> list[Element]:
    """``stream`` in batches of ``cut`` (the bulk intake from 16 inserts), restored from a snapshot once."""
    bound = bind(parse_query(q), CAT)
    ENGINE[0] = True
    try:
        r = QueryRunner(bound)
        out: list[Element] = []
        for a in range(0, len(stream), cut):
            part = stream[a:a + cut]
            out += r.process_batch(ElementBatch.from_elements(part, list(range(a + 1, a + 1 + len(part)))))
            if restore_at is not None and a <= restore_at < a + cut:
                r = QueryRunner.restore(r.snapshot(), bound)
        return out + r.finish()
    finally:
        ENGINE[0] = False


@pytest.mark.parametrize("win", WINDOWS, ids=lambda w: "-".join(str(v) for v in w.values()))
@pytest.mark.parametrize("name", ["spy_count", "spy_cover"])
def test_every_route_hands_placeholders_and_equals_the_oracle(win: dict[str, Any], name: str) -> None:
    SEEN.clear()
    for seed in range(10):
        rng = random.Random(seed)
        q = _query(win, name, grouped=seed % 2 == 1)
        stream = gen_stream(rng, n=rng.choice([30, 120]), maxlen=rng.choice([1, 3, 15]), p_inf=0.05,
                            p_retract=rng.choice([0.0, 0.3]), values=6)
        out = _run(q, stream, rng.choice([1, 7, 40, 500]), rng.choice([None, len(stream) // 2]))
        check_physical(out)
        verdict = verify(out, oracle(bind(parse_query(q), CAT), stream), rel_tol=0.0, abs_tol=0.0)
        assert verdict.ok, f"seed {seed}: {verdict.diff}"
    assert SEEN and all(n > 0 for n in SEEN.values()), SEEN


def test_the_bulk_routes_hand_columns_of_zeros() -> None:
    """Long in-order batches: the pane store, the windows a batch fills and closes (``compute_slices``) and
    a cumulate period all see int64 zero columns."""
    SEEN.clear()
    stream: list[Element] = []
    for i in range(3000):
        stream.append(Insert(f"e{i}", i, i + 1, {"g": i % 3, "v": f"x{i}"}))
        if i % 250 == 249:
            stream.append(Cti(i - 5))
    for win in ({"type": "hopping", "size": 30, "hop": 10}, {"type": "tumbling", "size": 20},
                {"type": "cumulate", "size": 40, "step": 10}):
        q = _query(win, "spy_count", grouped=True)
        out = _run(q, stream, 1000, None)
        verdict = verify(out, oracle(bind(parse_query(q), CAT), stream), rel_tol=0.0, abs_tol=0.0)
        assert verdict.ok, verdict.diff
    assert "compute_slices" in SEEN and set(SEEN) <= {"add", "add_array", "add_batch", "compute_slices"}, SEEN


def test_an_input_field_still_must_be_there() -> None:
    """A blind UDA's ``input`` reads no value, but an event without the field is still a dead letter."""
    stream = gen_stream(random.Random(4), n=80, p_retract=0.3)
    for i in range(0, len(stream), 5):
        el = stream[i]
        if isinstance(el, Insert):
            stream[i] = Insert(el.id, el.le, el.re, {"g": el.payload["g"]})
    q = {"steps": [{"op": "window", "window": {"type": "hopping", "size": 8, "hop": 4}, "udm": "count",
                    "input": "v", "as": "n"}]}
    bound = bind(parse_query(q), CAT)
    r = QueryRunner(bound)
    out = r.process_many(stream, range(1, len(stream) + 1)) + r.finish()
    assert r.stats.dead_lettered > 0
    verdict = verify(out, oracle(bound, stream), rel_tol=0.0, abs_tol=0.0)
    assert verdict.ok, verdict.diff



def test_only_an_aggregate_can_be_value_blind() -> None:
    class Op(UDO):
        def compute(self, payloads: Sequence[Any]) -> list[dict[str, Any]]:
            return [{"n": len(payloads)}]

    with pytest.raises(ValueError, match="value_blind: only an aggregate"):
        udm(name="blind_op", value_blind=True)(Op)

    class Seeing(UDA):
        def compute(self, payloads: Sequence[Any]) -> int:
            return len(payloads)

    assert udm(name="seeing")(Seeing).manifest.properties.value_blind is False
