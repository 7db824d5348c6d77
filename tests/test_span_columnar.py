"""The columnar span path (`udm.host.engine.span_columnar`) against the row path and the kit's oracle.

Random streams — disorder, retractions (valid, mismatched, of unknown ids, of filtered-out inserts),
CTIs (advancing or not), late inserts, duplicate ids, bad lines, wrong-typed values, missing fields,
payloads without an object, strings needing escapes — run through ``run_local`` twice: with the columnar
path on and forced off (`span_columnar.ENABLED`). Output and dead-letter files must be equal byte for
byte, the output's CHT must be the oracle's, and both paths must really have run (the reader is set to
small blocks so clean and dirty batches alternate)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import udm.host.engine.runner as runner_mod
import udm.host.io.jsonl as jsonl
import udm.host.query.runners as runners
from udm.host.catalog import Catalog
from udm.host.engine import span_columnar
from udm.host.errors import BadElement
from udm.host.io.jsonl import read_jsonl_elements
from udm.host.query.plan import bind
from udm.host.query.runners import RunRequest, run_local
from udm.host.query.spec import parse_query
from udm.host.testing.cht import cht
from udm.host.testing.oracle_graph import graph_oracle_run
from udm.sdk import UDF, udm


@udm(name="t_span_scale", version="1.0.0", input_type="float", output_type="float")
class Scale(UDF):
    """``x * 0.908``, with its batch form; counts the batch calls."""

    calls: ClassVar[list[int]] = [0]

    def compute(self, x: float) -> float:
        return x * 0.908

    def compute_batch(self, x: Any) -> Any:
        Scale.calls[0] += 1
        return np.asarray(x, dtype=np.float64) * 0.908


@udm(name="t_span_odd", version="1.0.0", input_type="int", output_type="bool")
class Odd(UDF):
    """``x % 2 == 1``, with its batch form."""

    def compute(self, x: int) -> bool:
        return x % 2 == 1

    def compute_batch(self, x: Any) -> Any:
        return np.asarray(x) % 2 == 1


def _catalog() -> Catalog:
    cat = Catalog.discover()
    cat.add(Scale)
    cat.add(Odd)
    return cat


QUERIES: dict[str, dict[str, Any]] = {
    "filter_map": {"steps": [
        {"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 300}},
        {"op": "map", "udf": "t_span_scale", "args": {"x": "price"}, "as": "eur"}]},
    "map_in_place": {"steps": [{"op": "map", "udf": "t_span_scale", "args": {"x": "price"}, "as": "price"}]},
    "project": {"steps": [{"op": "project", "keep": ["sym", "price", "note"], "rename": {"sym": "symbol"},
                           "set": {"src": "feed", "price": 0, "w": [1, 2.5]}}]},
    "project_drop_filter": {"steps": [
        {"op": "project", "drop": ["note"]},
        {"op": "filter", "udf": "t_span_odd", "args": {"x": "price"}}]},
    "alter_shift_filter": {"steps": [
        {"op": "alter_lifetime", "le": {"shift": 7}, "duration": "keep"},
        {"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 300}}]},
    "map_alter_snap": {"steps": [
        {"op": "map", "udf": "t_span_scale", "args": {"x": "price"}, "as": "eur"},
        {"op": "alter_lifetime", "le": {"snap": {"size": 10, "offset": 3}}, "duration": {"const": 25}}]},
    "alter_inf_project": {"steps": [
        {"op": "alter_lifetime", "le": {"shift": -4}, "duration": "inf"},
        {"op": "project", "keep": ["sym", "price"]}]},
}

SYMS = ("a", "b", 'q"x', "é", "tab\there")


def _stream(seed: int, n: int, *, odd_lines: bool = True) -> list[str]:
    """JSON Lines of a disordered stream; about half of its 20-line segments are clean. ``odd_lines=False``:
    no line the reader's fast path refuses (bad JSON, wrong-typed or missing values, no payload), so
    retractions, duplicate ids and late inserts are all that is dirty."""
    rng = random.Random(seed)
    out: list[str] = []
    clock = 0
    cti = -1
    live: dict[str, tuple[int, int]] = {}
    k = 0
    while len(out) < n:
        dirty = rng.random() < 0.5
        floats = odd_lines and rng.random() < 0.25  # (ints beside floats in one block: the slow reader)
        for _ in range(20):
            k += 1
            clock += rng.randrange(3)
            r = rng.random()
            if r < 0.07:
                t = clock - 15 if rng.random() < 0.9 else cti - 3  # some CTIs do not advance
                out.append(json.dumps({"kind": "cti", "t": t}, separators=(",", ":")))
                cti = max(cti, t)
                continue
            if dirty and r < 0.25 and live:
                eid = rng.choice(sorted(live))
                le, re = live[eid]
                what = rng.random()
                if what < 0.6:  # valid: shorten (or delete)
                    rn = max(le, re - rng.randrange(1, 6))
                    live[eid] = (le, rn)
                    if rn == le:
                        del live[eid]
                    out.append(json.dumps({"kind": "retract", "id": eid, "le": le, "re": re, "re_new": rn}))
                elif what < 0.8:
                    out.append(json.dumps({"kind": "retract", "id": eid, "le": le, "re": re + 1, "re_new": le}))
                else:
                    out.append(json.dumps({"kind": "retract", "id": "nope", "le": le, "re": re, "re_new": le}))
                continue
            le = max(0, clock - rng.randrange(12))
            if dirty and rng.random() < 0.08:
                le = cti - 2  # late: a CTI violation
            re = "inf" if rng.random() < 0.03 else le + 1 + rng.randrange(40)
            eid = f"e{k}"
            if dirty and live and rng.random() < 0.05:
                eid = rng.choice(sorted(live))  # a duplicate live id
            price: Any = rng.randrange(1000) + (0.5 if floats else 0)
            payload: Any = {"sym": rng.choice(SYMS), "price": price, "note": f"n{k % 7}", "ok": k % 3 == 0}
            if dirty and odd_lines:
                bad = rng.random()
                if bad < 0.05:
                    out.append('{"kind":"insert","id":"x' + str(k) + '","le":')  # not JSON
                    continue
                if bad < 0.10:
                    payload["price"] = str(price)  # wrong type for the UDFs
                elif bad < 0.15:
                    del payload["price"]
                elif bad < 0.18:
                    payload = None
            el = {"kind": "insert", "id": eid, "le": le, "re": re}
            if payload is not None:
                el["payload"] = payload
            out.append(json.dumps(el, ensure_ascii=rng.random() < 0.5))
            if isinstance(re, int) and le >= cti and eid not in live:
                live[eid] = (le, re)
            for old in [i for i, (_, r2) in live.items() if r2 < cti]:
                del live[old]
    return out[:n]


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Reader blocks of a dozen lines (pieces of 6 on a bad line), batches of at most 7 rows, one thread;
    counts the batches the columnar path took and declined."""
    monkeypatch.setattr(runners, "READER_OPTIONS", {"block_bytes": 1500})
    monkeypatch.setattr(jsonl, "_PIECE_LINES", 6)
    monkeypatch.setattr(jsonl, "_MIN_FAST_LINES", 4)
    seen = {"columnar": 0, "row": 0}
    real = span_columnar.run_columnar

    def counting(runner: Any, batch: Any, **kw: Any) -> Any:
        got = real(runner, batch, **kw)
        seen["columnar" if got is not None else "row"] += 1
        return got

    monkeypatch.setattr(runner_mod, "run_columnar", counting)
    return seen


def _run(query: dict[str, Any], inp: Path, out: Path, columnar: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_columnar, "ENABLED", columnar)
    bound = bind(parse_query(query), _catalog())
    run_local(RunRequest(bound, inp, out, dead_letter=out.with_suffix(".dl"), batch_size=7))


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("seed", [1, 2])
def test_columnar_equals_row_path_and_oracle(name: str, seed: int, tmp_path: Path, small_blocks: dict[str, int],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    query = QUERIES[name]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(_stream(seed, 700)) + "\n", encoding="utf-8")
    col, row = tmp_path / "col.jsonl", tmp_path / "row.jsonl"
    _run(query, inp, col, True, monkeypatch)
    taken = dict(small_blocks)
    _run(query, inp, row, False, monkeypatch)
    assert taken["columnar"] >= 10 and taken["row"] >= 10  # both paths ran on this stream
    assert col.read_bytes() == row.read_bytes()
    assert col.with_suffix(".dl").read_bytes() == row.with_suffix(".dl").read_bytes()
    # the output against the oracle (which calls each UDF's scalar form row by row)
    parsed = read_jsonl_elements(inp)
    good = [el for _, el in parsed if not isinstance(el, BadElement)]
    bound = bind(parse_query(query), _catalog())
    # (the graph oracle: the linear one knows no project step)
    want = graph_oracle_run(bound, {bound.graph.inputs[0]: good})
    got = cht([el for _, el in read_jsonl_elements(col)])
    assert got == want.cht
    # dead letters: the bad lines and the stream's invalid elements (the oracle's), plus the rows a step
    # refuses for a missing or wrong-typed field; one per line, in line order
    dead = [json.loads(x)["line"] for x in col.with_suffix(".dl").read_text().splitlines()]
    assert len(dead) >= len(want.rejected) + (len(parsed) - len(good))
    assert dead == sorted(set(dead))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_filtered_insert_and_a_kept_one_retracted_in_a_later_batch(tmp_path: Path, small_blocks: dict[str, int],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Inserts taken by the columnar path (one filtered out, one kept) are retracted from a later batch
    that takes the row path: the dropped one's retraction has no output, the kept one's names the id the
    columnar path gave it. Hand-computed output."""
    ins = [{"kind": "insert", "id": f"e{i}", "le": i, "re": 100, "payload": {"price": p}}
           for i, p in enumerate([100, 900, 50, 700, 20, 10, 5])]
    rets = [{"kind": "retract", "id": "e0", "le": 0, "re": 100, "re_new": 50},
            {"kind": "retract", "id": "e1", "le": 1, "re": 100, "re_new": 60},
            {"kind": "cti", "t": 10}]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(x) for x in [*ins, *rets]) + "\n")
    out = tmp_path / "out.jsonl"
    query = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 500}}]}
    _run(query, inp, out, True, monkeypatch)
    assert small_blocks["columnar"] >= 1 and small_blocks["row"] >= 1
    assert _lines(out) == [
        {"kind": "insert", "id": "o2", "le": 1, "re": 100, "payload": {"price": 900}},
        {"kind": "insert", "id": "o4", "le": 3, "re": 100, "payload": {"price": 700}},
        {"kind": "retract", "id": "o2", "le": 1, "re": 100, "re_new": 60},
        {"kind": "cti", "t": 10},
        {"kind": "cti", "t": "inf"},
    ]


def test_a_batch_that_would_dead_letter_goes_to_the_row_path_in_line_order(
        tmp_path: Path, small_blocks: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A late insert inside an otherwise clean batch: the whole batch takes the row path, the dead letter
    names its line, and the rows before it are still output."""
    rows = [{"kind": "insert", "id": f"e{i}", "le": 40 + i, "re": 41 + i, "payload": {"price": 600 + i}}
            for i in range(3)]
    rows.insert(1, {"kind": "cti", "t": 30})
    rows.insert(2, {"kind": "insert", "id": "late", "le": 5, "re": 50, "payload": {"price": 999}})
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    out = tmp_path / "out.jsonl"
    query = {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"}, "params": {"lo": 500}}]}
    _run(query, inp, out, True, monkeypatch)
    assert small_blocks["columnar"] == 0
    dead = _lines(out.with_suffix(".dl"))
    assert [(d["line"], d["reason"]) for d in dead] == [(3, "CTI violation: sync time 5 < CTI 30")]
    assert [x["kind"] for x in _lines(out)] == ["insert", "cti", "insert", "insert", "cti"]


@pytest.mark.parametrize(("nulls", "stamps"), [(False, False), (True, False), (False, True)])
def test_a_table_input_gives_the_row_paths_bytes(nulls: bool, stamps: bool, tmp_path: Path,
                                                 small_blocks: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Parquet input (its own column types: int32, timestamps; with or without nulls) through a filter +
    map: the same output bytes on both paths (the columnar one takes the plain batches)."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from udm.host.io.table_options import TableOptions, TableSource

    n = 300
    rng = random.Random(5)
    price = [rng.randrange(1000) for _ in range(n)]
    cols = {
        "t": pa.array(range(n), pa.int64()),
        "price": pa.array([None if nulls and i % 17 == 3 else p for i, p in enumerate(price)], pa.int64()),
        "qty": pa.array([i % 7 for i in range(n)], pa.int32()),
        "at": pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i) for i in range(n)]),
        "sym": pa.array([None if nulls and i % 5 == 0 else f"s{i % 3}" for i in range(n)]),
    }
    if not stamps:
        del cols["at"]
    table = pa.table(cols)
    inp = tmp_path / "in.parquet"
    pq.write_table(table, inp)
    src = TableSource(inp, TableOptions(time="t", cti_every=20))
    outs = {}
    for columnar in (True, False):
        monkeypatch.setattr(span_columnar, "ENABLED", columnar)
        out = tmp_path / f"out-{columnar}.jsonl"
        bound = bind(parse_query(QUERIES["filter_map"]), _catalog())
        run_local(RunRequest(bound, src, out, dead_letter=out.with_suffix(".dl"), batch_size=50))
        outs[columnar] = (out.read_bytes(), out.with_suffix(".dl").read_bytes())
        if columnar:
            assert (small_blocks["columnar"] > 0) == (not nulls)  # (a table's timestamps come as plain values)
    assert outs[True] == outs[False]
    assert outs[True][0].count(b'"insert"') == sum(1 for i, p in enumerate(price)
                                                   if p >= 300 and not (nulls and i % 17 == 3))


@pytest.mark.parametrize("name", ["filter_map", "alter_shift_filter", "project"])
def test_batches_split_around_retractions(name: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole-file batches holding retractions (valid, mismatched, unknown), late inserts and duplicate ids:
    their stretches of inserts and CTIs run columnar between row-path spans (`span_columnar.MIN_SEGMENT`
    lowered so a random stream has many), and the output and dead letters are still the row path's bytes."""
    monkeypatch.setattr(span_columnar, "MIN_SEGMENT", 12)
    monkeypatch.setattr(runners, "READER_OPTIONS", {})
    calls = {"segments": 0}
    real = span_columnar._commit

    def counting(runner: Any, batch: Any, plan: Any, **kw: Any) -> Any:
        if len(batch) < 60:  # (a slice of a whole-file batch: a segment)
            calls["segments"] += 1
        return real(runner, batch, plan, **kw)

    monkeypatch.setattr(span_columnar, "_commit", counting)
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(_stream(3, 900, odd_lines=False)) + "\n", encoding="utf-8")
    got = {}
    for columnar in (True, False):
        out = tmp_path / f"out-{columnar}.jsonl"
        monkeypatch.setattr(span_columnar, "ENABLED", columnar)
        bound = bind(parse_query(QUERIES[name]), _catalog())
        run_local(RunRequest(bound, inp, out, dead_letter=out.with_suffix(".dl")))
        got[columnar] = (out.read_bytes(), out.with_suffix(".dl").read_bytes())
    assert calls["segments"] >= 5
    assert got[True] == got[False]
