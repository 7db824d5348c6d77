"""Engine: state snapshot / restore — checkpoint mid-stream, restore, continue = the uninterrupted run."""

from __future__ import annotations

import pickle
import random

import pytest
from test_engine_support import gen_stream, runner, window_query

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Insert

QUERIES = [
    window_query({"type": "tumbling", "size": 5}, "avg", input="v", group_by=["g"]),
    window_query({"type": "hopping", "size": 6, "hop": 4}, "sum", input="v"),  # panes
    window_query({"type": "hopping", "size": 6, "hop": 4}, "median", input="v"),
    window_query({"type": "snapshot"}, "twa", input="v", clip="right"),
    window_query({"type": "count_by_start", "n": 3, "hop": 2}, "topk", params={"k": 2, "by": "v"}),
    window_query({"type": "count_by_end", "n": 2}, "members", input="v", clip="left", output="unaltered"),
    # time-sensitive, open member ends: windows held while an end can move, groups holding endless events
    window_query({"type": "tumbling", "size": 5}, "members", input="v", clip="left", output="unaltered",
                 group_by=["g"]),
    window_query({"type": "hopping", "size": 6, "hop": 3}, "members", input="v", clip="left", output="unaltered",
                 group_by=["g"], max_delay="inf"),
    {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 1}},
               {"op": "window", "window": {"type": "tumbling", "size": 5}, "udm": "count", "group_by": ["g"]},
               {"op": "window", "window": {"type": "snapshot"}, "udm": "max", "input": "count"}]},
]


@pytest.mark.parametrize("q", QUERIES, ids=["tumbling", "panes", "median", "snapshot", "cbs", "cbe", "held",
                                             "held_strong", "multi"])
def test_checkpoint_restore_continue_equals_uninterrupted(q: dict) -> None:
    bound = bind(parse_query(q))
    for seed in range(6):
        rng = random.Random(seed)
        stream = gen_stream(rng, n=40, p_cti=0.2, p_retract=0.3)
        full = QueryRunner(bound)
        per_el = [full.process(el, i) for i, el in enumerate(stream)]
        tail_full = full.finish()
        for cut in (0, len(stream) // 3, len(stream) // 2, len(stream) - 1):
            r = QueryRunner(bound)
            for i, el in enumerate(stream[:cut]):
                r.process(el, i)
            data = r.snapshot()
            r2 = QueryRunner.restore(data, bound)
            got = [r2.process(el, i) for i, el in enumerate(stream[cut:], start=cut)]
            assert got == per_el[cut:], (seed, cut)
            assert r2.finish() == tail_full
            assert r2.stats == full.stats and r2.dead_letters == full.dead_letters


def test_snapshot_of_the_bulk_insert_state() -> None:
    q = window_query({"type": "tumbling", "size": 10}, "sum", input="v", group_by=["g"])
    bound = bind(parse_query(q))
    rng = random.Random(5)
    stream = [Insert(f"e{i}", i, i + 1 + rng.randrange(3), {"g": i % 3, "v": i}) for i in range(400)]
    a = QueryRunner(bound)
    out_a = a.process_batch(ElementBatch.from_elements(stream[:300])) + a.process_batch(
        ElementBatch.from_elements(stream[300:])) + a.finish()
    b = QueryRunner(bound)
    out_b = b.process_batch(ElementBatch.from_elements(stream[:300]))
    assert b.state_size()["events"] > 0  # a snapshot with events held
    b = QueryRunner.restore(b.snapshot(), bound)
    out_b += b.process_batch(ElementBatch.from_elements(stream[300:])) + b.finish()
    assert out_a == out_b


def test_state_is_plain_picklable_data() -> None:
    r = runner(QUERIES[-1])
    for el in gen_stream(random.Random(1), n=30):
        r.process(el)
    blob = r.snapshot()
    assert isinstance(blob, bytes)
    state = pickle.loads(blob)  # no UDM instances, no bound query inside
    assert "udm" not in repr(type(state))
    assert b"udm_stats" not in blob and b"udm_patterns" not in blob


def test_restore_checks_the_query_shape() -> None:
    r = runner(QUERIES[0])
    with pytest.raises(ValueError, match="query with other steps"):
        QueryRunner.restore(r.snapshot(), bind(parse_query(QUERIES[-1])))
    with pytest.raises(ValueError, match="not a udmkit engine snapshot"):
        QueryRunner.restore(pickle.dumps({"v": 99}), bind(parse_query(QUERIES[0])))
