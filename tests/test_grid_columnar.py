"""The columnar grid window path (`udm.host.engine.window.grid_columnar`) against the row path and the
oracle: the same output bytes, dead letters, run statistics and engine state, on generated streams
(the kit's `generate`) with CTIs mid-batch, many groups, empty windows, lifetimes over several windows,
hopping windows (of the grid step; panes take the row path), and hand-overs both ways (in-order
batches, then a retraction, a late or bad element, then in order again)."""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import udm.host.engine.runner as runner_mod
import udm.host.io.jsonl as jsonl
import udm.host.query.runners as runners
from udm.host.catalog import Catalog
from udm.host.engine.runner import QueryRunner
from udm.host.engine.window import grid_columnar
from udm.host.errors import BadElement, ContractViolation
from udm.host.io.jsonl import JsonlReader, read_jsonl_elements
from udm.host.query.plan import bind
from udm.host.query.runners import RunRequest, run_local
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import Cti, Insert, Retract
from udm.host.testing import generate
from udm.host.testing.cht import CHT, cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.oracle_graph import graph_oracle_run
from udm.sdk import IncrementalUDA, udm


@udm(name="t_grid_total", version="1.0.0")
class Total(IncrementalUDA):
    """A sum that does not declare ``algebraic`` (no panes): hopping windows over it are `GridStep`'s."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[int]) -> int:
        return state + sum(delta)

    def add_array(self, state: int, values: Any) -> int:
        return state + int(values.sum())

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        return [s + int(values[a:b].sum()) for s, a, b in zip(states, offsets[:-1], offsets[1:], strict=True)]

    def remove(self, state: int, delta: Sequence[int]) -> int:
        return state - sum(delta)

    def compute(self, state: int) -> int:
        return state


_CATALOG = Catalog.discover()
_CATALOG.add(Total)


def _query(window: dict[str, Any], udm: str = "sum", **kw: Any) -> dict[str, Any]:
    return {"steps": [{"op": "window", "window": window, "group_by": ["g"], "udm": udm, "input": "v", "as": "out",
                       **kw}]}


def _string_field(stream: list[Any]) -> list[Any]:
    """Each insert's value also as a string field ``s`` (a second group key)."""
    return [Insert(el.id, el.le, el.re, {**el.payload, "s": f"s{el.payload['v'] % 3}"}) if isinstance(el, Insert)
            else el for el in stream]


def count_paths(mp: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the batches the columnar grid path took and declined (from this call on)."""
    seen = {"columnar": 0, "row": 0}
    real = grid_columnar.run_grid

    def counting(runner: Any, batch: Any) -> Any:
        got = real(runner, batch)
        seen["columnar" if got is not None else "row"] += 1
        return got

    mp.setattr(runner_mod, "run_grid", counting)
    return seen


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the batches the columnar grid path took and declined."""
    return count_paths(monkeypatch)


def _run(query: dict[str, Any], inp: Path, out: Path, on: bool, monkeypatch: pytest.MonkeyPatch,
         batch: int = 100) -> Any:
    monkeypatch.setattr(grid_columnar, "ENABLED", on)
    bound = bind(parse_query(query), _CATALOG)
    return run_local(RunRequest(bound, inp, out, dead_letter=out.with_suffix(".dl"), batch_size=batch))


def _compare(query: dict[str, Any], stream: list[Any] | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             taken: dict[str, int], batch: int = 100) -> dict[str, int]:
    """Run ``stream`` (elements, or an event file) with the path on and off: same bytes, dead letters and
    statistics; the output's CHT is the oracle's. Returns how many batches the columnar path took (on) and
    declined."""
    if isinstance(stream, Path):
        inp = stream
    else:
        inp = tmp_path / "in.jsonl"
        write_stream(inp, stream)
    col, row = tmp_path / "col.jsonl", tmp_path / "row.jsonl"
    r_col = _run(query, inp, col, True, monkeypatch, batch)
    seen = dict(taken)
    r_row = _run(query, inp, row, False, monkeypatch, batch)
    assert col.read_bytes() == row.read_bytes()
    assert col.with_suffix(".dl").read_bytes() == row.with_suffix(".dl").read_bytes()
    s_col, s_row = r_col.to_json_dict(), r_row.to_json_dict()
    s_col.pop("seconds", None)
    s_row.pop("seconds", None)
    assert s_col == s_row
    good = [el for _, el in read_jsonl_elements(inp) if not isinstance(el, BadElement)]
    bound = bind(parse_query(query), _CATALOG)
    want = graph_oracle_run(bound, {bound.graph.inputs[0]: good})
    assert _rounded(cht([el for _, el in read_jsonl_elements(col)])) == _rounded(want.cht)
    return seen


def _rounded(c: CHT) -> CHT:
    """Float results to 9 significant digits (the oracle sums in its own order)."""
    return CHT.from_events((le, re, {k: float(f"{v:.9g}") if type(v) is float else v for k, v in p.items()})
                           for le, re, p in c.events())


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # (query, generator knobs)
    "tumbling_points": (_query({"type": "tumbling", "size": 10}),
                        {"duration": "point", "overlap": "high", "groups": 3, "cti": "regular"}),
    "tumbling_many_groups": (_query({"type": "tumbling", "size": 7, "offset": 3}),
                             {"duration": "point", "overlap": "high", "groups": 60, "cti": "eager"}),
    # (lifetimes over several windows; one reaching past the frontier sends its batch to the row path)
    "tumbling_spanning": (_query({"type": "tumbling", "size": 4}),
                          {"duration": "short", "short_max": 9, "groups": 5, "cti": "regular"}),
    "tumbling_gaps_float": (_query({"type": "tumbling", "size": 5}),
                            {"duration": "point", "overlap": "low", "groups": 4, "cti": "lazy", "values": "float"}),
    "hopping": (_query({"type": "hopping", "size": 10, "hop": 5}),
                {"duration": "point", "overlap": "high", "groups": 4, "cti": "regular"}),
    "hopping_gaps": (_query({"type": "hopping", "size": 3, "hop": 5}),
                     {"duration": "point", "overlap": "high", "groups": 3, "cti": "regular"}),
    "no_group_by": (_query({"type": "tumbling", "size": 10}, group_by=[]),
                    {"duration": "point", "overlap": "high", "groups": 3, "cti": "regular"}),
    "two_keys": (_query({"type": "tumbling", "size": 10}, group_by=["s", "g"]),
                     {"duration": "point", "overlap": "high", "groups": 4, "cti": "regular"}),
    # (a UDA without panes: hopping windows of the grid step itself, an event in up to 3 of them)
    "hopping_grid": (_query({"type": "hopping", "size": 10, "hop": 4}, "t_grid_total"),
                     {"duration": "point", "overlap": "high", "groups": 4, "cti": "regular"}),
    # (released by CTIs only: windows due at a later CTI of the batch stay objects)
    "max_delay_inf": (_query({"type": "tumbling", "size": 4}, max_delay="inf"),
                      {"duration": "point", "overlap": "high", "groups": 3, "cti": "eager"}),
    "count": (_query({"type": "tumbling", "size": 10}, "count"),
              {"duration": "point", "overlap": "high", "groups": 6, "cti": "regular"}),
    "max_delay": (_query({"type": "tumbling", "size": 10}, "avg", max_delay=15),
                  {"duration": "point", "overlap": "high", "groups": 3, "cti": "lazy"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [1, 2])
def test_in_order_streams_give_the_row_paths_bytes(name: str, seed: int, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, taken: dict[str, int]) -> None:
    query, knobs = CASES[name]
    stream = _string_field(generate(seed=seed, events=1500, disorder="in_order", **knobs))
    seen = _compare(query, stream, tmp_path, monkeypatch, taken)
    if name in ("hopping", "hopping_gaps"):  # (hopping windows of an algebraic UDA are panes: not covered)
        assert seen["columnar"] == 0
    elif name == "tumbling_spanning":
        assert seen["row"] >= 5
    else:
        assert seen["columnar"] >= 5


def _dirty_in_order(seed: int, n: int) -> list[str]:
    """JSON Lines of an in-order stream (5 groups, points, a CTI every ~20 lines) with, every ~150 lines,
    one element the columnar path must leave to the row path: a retraction of a live event (shortened or
    deleted), a late but valid insert (into a window that may have been emitted), a CTI violation, a
    duplicate id, a line that is not JSON."""
    rng = random.Random(seed)
    out: list[str] = []
    t = 0
    cti = -1
    live: list[tuple[str, int, int]] = []
    for k in range(n):
        if k % 150 == 149:
            what = rng.randrange(5)
            if what == 0 and live:
                eid, le, re = live.pop(rng.randrange(len(live)))
                el: dict[str, Any] = {"kind": "retract", "id": eid, "le": le, "re": re, "re_new": le}
            elif what == 1:
                el = {"kind": "insert", "id": f"late{k}", "le": max(cti, 0), "re": max(cti, 0) + 1,
                      "payload": {"g": f"k{rng.randrange(5)}", "v": rng.randrange(100)}}
            elif what == 2:
                el = {"kind": "insert", "id": f"old{k}", "le": cti - 3, "re": cti - 2,
                      "payload": {"g": "k0", "v": 1}}
            elif what == 3 and live:
                eid, le, re = live[-1]
                el = {"kind": "insert", "id": eid, "le": t, "re": t + 1, "payload": {"g": "k1", "v": 2}}
            else:
                out.append('{"kind": "insert", "id": ')
                continue
            out.append(json.dumps(el))
            continue
        if rng.random() < 0.05:
            cti = max(cti, t - rng.randrange(8))
            out.append(json.dumps({"kind": "cti", "t": cti}))
            continue
        t += rng.randrange(3)
        eid = f"e{k}"
        out.append(json.dumps({"kind": "insert", "id": eid, "le": t, "re": t + 1,
                               "payload": {"g": f"k{rng.randrange(5)}", "v": rng.randrange(100)}}))
        live = [x for x in live if x[2] > cti][-50:]
        live.append((eid, t, t + 1))
    return out


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_hand_over_to_the_row_path_and_back(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            taken: dict[str, int]) -> None:
    """Retractions, duplicates, late (valid and CTI-violating) and bad lines here and there: their batches
    take the row path, the clean ones between them the columnar path, each starting from the state the
    other left (small reader blocks, so a bad line spoils only its own)."""
    monkeypatch.setattr(runners, "READER_OPTIONS", {"block_bytes": 12000})
    monkeypatch.setattr(jsonl, "_PIECE_LINES", 20)
    monkeypatch.setattr(jsonl, "_MIN_FAST_LINES", 10)
    query = _query({"type": "tumbling", "size": 8})
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(_dirty_in_order(seed, 3000)) + "\n", encoding="utf-8")
    seen = _compare(query, inp, tmp_path, monkeypatch, taken, batch=60)
    assert seen["columnar"] >= 10 and seen["row"] >= 10
    dead = (tmp_path / "col.dl").read_text().splitlines()
    assert len(dead) >= 5


def test_a_late_event_into_an_emitted_window_after_a_columnar_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     taken: dict[str, int]) -> None:
    """Hand-computed: windows of 10, one group; a columnar batch emits [0, 10) .. [80, 90) (the
    watermark 95 releases them; the CTI 85 keeps [80, 90) alive), then an event at 86 changes the
    emitted [80, 90): a retraction and a new insert, from the state the columnar batch left."""
    els: list[Any] = [Insert(f"e{t}", t, t + 1, {"g": "a", "v": 1}) for t in range(96)]
    els.insert(86, Cti(85))
    els += [Insert("late", 86, 87, {"g": "a", "v": 100}), Cti(200)]
    query = _query({"type": "tumbling", "size": 10})
    seen = _compare(query, els, tmp_path, monkeypatch, taken, batch=97)
    assert seen["columnar"] == 1
    out = [json.loads(x) for x in (tmp_path / "col.jsonl").read_text().splitlines()]
    ins = [(o["le"], o["payload"]["out"]) for o in out if o["kind"] == "insert"]
    assert ins[:9] == [(k * 10, 10) for k in range(9)]
    assert [o for o in out if o["kind"] == "retract"] == [
        {"kind": "retract", "id": "o9", "le": 80, "re": 90, "re_new": 80}]
    assert (80, 110) in ins and (90, 6) in ins


def _snapshot_after(stream: list[Any], path: Path, query: dict[str, Any], on: bool,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, dict[str, int], list[bool]]:
    monkeypatch.setattr(grid_columnar, "ENABLED", on)
    write_stream(path, stream)
    r = QueryRunner(bind(parse_query(query), _CATALOG))
    took = []
    for b in JsonlReader(path, batch_size=80):
        got = r.process_batch_encoded(b)
        took.append(got is not None)
        if got is None:
            r.process_batch(b)
    return r.snapshot(), r.state_size(), took


def test_the_state_left_behind_is_the_row_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine snapshot after a stream without its end (open windows, emitted windows not yet purged,
    columnar events; the last batch a columnar one) is byte for byte the row path's, but for the layout
    of its heaps."""
    query = _query({"type": "tumbling", "size": 6})
    rng = random.Random(9)
    stream: list[Any] = []
    t = 0
    for k in range(960):
        if k % 25 == 24:
            stream.append(Cti(t - 3))
            continue
        t += rng.randrange(2)
        stream.append(Insert(f"e{k}", t, t + 1 + rng.randrange(3), {"g": f"k{rng.randrange(7)}", "v": k % 13}))
    a, size_a, took = _snapshot_after(stream, tmp_path / "a.jsonl", query, True, monkeypatch)
    b, size_b, _ = _snapshot_after(stream, tmp_path / "b.jsonl", query, False, monkeypatch)
    assert took[-1] and sum(took) >= 5
    assert size_a == size_b and size_a["windows"] > 0 and size_a["events"] > 0
    assert _heaps_sorted(a) == _heaps_sorted(b)


def _heaps_sorted(snapshot: bytes) -> bytes:
    """The snapshot with the window step's heaps as sorted lists: the same entries pop in the same order
    whatever the heap's layout (the columnar path never pushes, then pops, its transient windows)."""
    state = pickle.loads(snapshot)
    for op in state["ops"].values():
        for name in ("close_heap", "wait"):
            h = getattr(op, name, None)
            if h:
                h.sort(key=lambda e: (e[0], e[1]))
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


@pytest.mark.parametrize("query", [
    {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                "aggregates": [{"udm": "sum", "input": "v", "as": "s"}, {"udm": "max", "input": "v", "as": "m"}]}]},
    _query({"type": "tumbling", "size": 10}, early=5),
    _query({"type": "tumbling", "size": 10}, "min"),
], ids=["aggregates", "early", "no_batch_form"])
def test_steps_it_does_not_cover_take_the_row_path(query: dict[str, Any], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, taken: dict[str, int]) -> None:
    stream = generate(seed=1, events=400, disorder="in_order", duration="point", overlap="high", groups=3)
    seen = _compare(query, stream, tmp_path, monkeypatch, taken)
    assert seen["columnar"] == 0


def test_retractions_in_a_batch_decline_it_before_any_change(tmp_path: Path) -> None:
    """A batch holding a retraction is declined (None) and leaves the runner as it found it."""
    query = _query({"type": "tumbling", "size": 10})
    els: list[Any] = [Insert(f"e{t}", t, t + 1, {"g": "a", "v": t}) for t in range(60)]
    els.append(Retract("e59", 59, 60, 59))
    path = tmp_path / "r.jsonl"
    write_stream(path, els)
    r = QueryRunner(bind(parse_query(query), _CATALOG))
    before = r.snapshot()
    batches = list(JsonlReader(path, batch_size=100))
    assert len(batches) == 1
    assert r.process_batch_encoded(batches[0]) is None
    assert r.snapshot() == before


def test_a_raising_initial_state_or_compute_is_the_row_paths_contract_violation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`test_window_bulk.BadInit` (``initial_state`` raises after two windows; ``compute`` raises on a big
    state): the same contract violation, naming the same window, with the path on and off."""
    from test_engine_support import catalog_with
    from test_window_bulk import BadInit

    cat = catalog_with(BadInit)
    q = _query({"type": "tumbling", "size": 10}, "bad_init_sum")
    stream: list[Any] = [Insert(f"e{i}", i, i + 1, {"v": 1 if i < 150 else 5000, "g": "a"}) for i in range(200)]
    stream.insert(190, Cti(185))
    path = tmp_path / "in.jsonl"
    write_stream(path, stream)
    messages = []
    for made, on in ((0, True), (0, False), (-(10**6), True), (-(10**6), False)):
        monkeypatch.setattr(grid_columnar, "ENABLED", on)
        BadInit.made = made
        r = QueryRunner(bind(parse_query(q), cat))
        with pytest.raises(ContractViolation) as err:
            for b in JsonlReader(path, batch_size=300):
                if r.process_batch_encoded(b) is None:
                    r.process_batch(b)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "initial_state raised RuntimeError" in messages[0]
    assert messages[2] == messages[3] and "compute raised ValueError" in messages[2]


@pytest.mark.parametrize("seed", range(8))
def test_random_shapes_give_the_row_paths_bytes(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                taken: dict[str, int]) -> None:
    """Window size and offset, groups, CTI eagerness, lifetimes, max_delay and batch size drawn at random."""
    rng = random.Random(seed)
    window: dict[str, Any] = {"type": "tumbling", "size": rng.randint(1, 20), "offset": rng.randint(0, 5)}
    if rng.random() < 0.3:
        window = {"type": "hopping", "size": rng.randint(4, 12), "hop": rng.randint(1, 4)}
    query = _query(window, rng.choice(["sum", "count", "t_grid_total"]),
                   max_delay=rng.choice([0, 0, 3, 50, "inf"]))
    stream = generate(seed=seed, events=rng.randint(600, 1500), disorder="in_order",
                      duration=rng.choice(["point", "point", "short"]), short_max=3,
                      overlap=rng.choice(["high", "medium"]), groups=rng.choice([1, 2, 7, 40]),
                      cti=rng.choice(["lazy", "regular", "eager"]))
    _compare(query, stream, tmp_path, monkeypatch, taken, batch=rng.choice([60, 100, 250]))
