"""`udm run` over users' tables: the README quickstart on the demo's real series (Parquet with ``--time``
gives what the equivalent element JSON Lines gives, and what the oracle says), per-input options for a
query graph, dead letters with row numbers, table output (final CHT and physical views)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import yaml
from cli_harness import udm

from udm.host.io.jsonl import read_jsonl_elements
from udm.host.model.spec import load_query, parse_query
from udm.host.testing.cht import CHT, cht
from udm.host.testing.oracle import oracle
from udm.sdk import INF


def _elements(path: Path) -> list[Any]:
    return [e for _, e in read_jsonl_elements(path)]


def test_readme_quickstart_parquet_equals_jsonl_and_the_oracle(capsys: Any, tmp_path: Path) -> None:
    code, _out, err = udm(capsys, "demo", "--data", str(tmp_path / "data"))
    assert code == 0, err
    data = tmp_path / "data"
    q = str(data / "yearly_median.yaml")
    code, _, err = udm(capsys, "run", q, "--input", str(data / "stocks.parquet"), "--time", "date",
                       "--output", str(tmp_path / "from_parquet.jsonl"))
    assert code == 0, err
    code, _, err = udm(capsys, "run", q, "--input", str(data / "stocks.jsonl"), "--output",
                       str(tmp_path / "from_jsonl.jsonl"))
    assert code == 0, err
    got = cht(_elements(tmp_path / "from_parquet.jsonl"))
    assert got == cht(_elements(tmp_path / "from_jsonl.jsonl"))
    # independently: the rows pyarrow reads from the Parquet file, as point events in µs ticks
    table = pq.read_table(data / "stocks.parquet")
    from udm.host.temporal.elements import Insert

    ticks = table.column("date").cast(pa.int64()).to_pylist()
    events = [Insert(f"e{i}", t, t + 1, {"symbol": s, "price": p}) for i, (t, s, p) in
              enumerate(zip(ticks, table.column("symbol").to_pylist(), table.column("price").to_pylist(),
                            strict=True))]
    assert got == oracle(load_query(q), events)
    assert len(got) > 40  # 5 symbols x ~11 years


QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["sym"],
                    "udm": "sum", "input": "price", "as": "total"}]}


@pytest.fixture
def query(tmp_path: Path) -> str:
    p = tmp_path / "q.yaml"
    p.write_text(yaml.safe_dump(QUERY))
    return str(p)


def test_bad_rows_go_to_the_dead_letter_file_with_their_row_numbers(capsys: Any, tmp_path: Path, query: str) -> None:
    (tmp_path / "in.csv").write_text("ts,sym,price\n1,A,2\n,A,3\nlater,B,4\n12,B,5\n")
    code, _, err = udm(capsys, "run", query, "-i", str(tmp_path / "in.csv"), "--time", "ts", "-o",
                       str(tmp_path / "out.jsonl"), "--dead-letter", str(tmp_path / "dl.jsonl"), "--json")
    assert code == 0, err
    dead = [json.loads(x) for x in (tmp_path / "dl.jsonl").read_text().splitlines()]
    assert [d["line"] for d in dead] == [2, 3]
    assert all("column 'ts'" in d["reason"] for d in dead)
    assert dead[1]["element"] == {"ts": "later", "sym": "B", "price": 4}
    assert cht(_elements(tmp_path / "out.jsonl")) == CHT.from_events(
        [(0, 10, {"sym": "A", "total": 2}), (10, 20, {"sym": "B", "total": 5})])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_final_table_output_is_the_cht_of_the_physical_output(capsys: Any, tmp_path: Path, query: str,
                                                               fmt: str) -> None:
    rows = [{"ts": t, "sym": "AB"[t % 2], "price": float(t)} for t in range(0, 40, 3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    base = ["run", query, "-i", str(tmp_path / "in.parquet"), "--time", "ts", "--cti-every", "7"]
    assert udm(capsys, *base, "-o", str(tmp_path / "phys.jsonl"))[0] == 0
    out = tmp_path / f"final.{'jsonl' if fmt == 'json' else fmt}"
    code, _, err = udm(capsys, *base, "-o", str(out), "--output-format", fmt, "--final")
    assert code == 0, err
    if fmt == "parquet":
        got = pq.read_table(out).to_pylist()
    elif fmt == "csv":
        # (CSV has no types: 6.0 is written "6", so say that ``total`` is a float)
        got = pcsv.read_csv(out, convert_options=pcsv.ConvertOptions(column_types={"total": pa.float64()})).to_pylist()
    else:
        got = [json.loads(x) for x in out.read_text().splitlines()]
    assert list(got[0]) == ["le", "re", "sym", "total"]
    final = CHT.from_events((r["le"], r["re"], {"sym": r["sym"], "total": r["total"]}) for r in got)
    assert final == cht(_elements(tmp_path / "phys.jsonl"))


def test_physical_table_output_keeps_retractions_and_timestamps(capsys: Any, tmp_path: Path) -> None:
    # edge samples: open-ended then shortened, so a time-weighted query retracts as samples arrive
    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                            "udm": "count", "as": "n"}]}))
    rows = [{"t": 1, "k": "x"}, {"t": 4, "k": "x"}, {"t": 15, "k": "x"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "e.parquet")
    code, _, err = udm(capsys, "run", str(q), "-i", str(tmp_path / "e.parquet"), "--edge", "t", "--key", "k",
                       "-o", str(tmp_path / "o.parquet"), "--times", "timestamps")
    assert code == 0, err
    t = pq.read_table(tmp_path / "o.parquet")
    assert t.schema.field("le").type == pa.timestamp("us", tz="UTC")
    assert set(t.column("kind").to_pylist()) >= {"insert", "cti"}
    assert t.column_names[:6] == ["kind", "id", "le", "re", "re_new", "t"]


def test_graph_inputs_take_per_input_options(capsys: Any, tmp_path: Path) -> None:
    q = tmp_path / "g.yaml"
    q.write_text(yaml.safe_dump({
        "inputs": {"bids": {}, "auctions": {}},
        "steps": [{"id": "n", "from": "bids", "op": "window", "window": {"type": "tumbling", "size": 10},
                   "group_by": ["auction"], "udm": "count", "as": "num"},
                  {"id": "j", "op": "join", "from": ["n", "auctions"], "on": [["auction", "id"]],
                   "right_prefix": "a_"}],
        "output": "j"}, sort_keys=False))
    pq.write_table(pa.Table.from_pylist([{"at": 1, "auction": 1}, {"at": 3, "auction": 1},
                                         {"at": 4, "auction": 2}]), tmp_path / "bids.parquet")
    (tmp_path / "auctions.csv").write_text("open,close,id,seller\n0,,1,ann\n0,30,2,bob\n")
    code, _, err = udm(capsys, "run", str(q), "--input", f"bids={tmp_path / 'bids.parquet'}", "--time", "bids=at",
                       "--input", f"auctions={tmp_path / 'auctions.csv'}", "--start", "auctions=open",
                       "--end", "auctions=close", "-o", str(tmp_path / "out.jsonl"))
    assert code == 0, err
    got = cht(_elements(tmp_path / "out.jsonl"))
    assert got == CHT.from_events([(0, 10, {"auction": 1, "num": 2, "a_id": 1, "a_seller": "ann"}),
                                   (0, 10, {"auction": 2, "num": 1, "a_id": 2, "a_seller": "bob"})])
    assert INF not in {r[1] for r in got}


@pytest.mark.parametrize("args,message", [
    (["--input", "{p}"], "is a table: say which column holds the time"),
    (["--input", "{j}", "--key", "k"], "--key is a table option, but --input"),
    (["--input", "{p}", "--time", "ts", "--cti-every", "soon"], "--cti-every soon: expected a number"),
    (["--input", "{p}", "--time", "ts", "--output-format", "xlsx"], "unknown --output-format 'xlsx'"),
    (["--input", "{p}", "--time", "ts", "--unit", "weeks"], "unknown time unit 'weeks'"),
    (["--input", "{p}", "--time", "nope"], "no column 'nope'"),
])
def test_table_option_errors_are_one_line(capsys: Any, tmp_path: Path, query: str, args: list[str],
                                          message: str) -> None:
    pq.write_table(pa.table({"ts": [1], "sym": ["A"], "price": [1.0]}), tmp_path / "in.parquet")
    (tmp_path / "in.jsonl").write_text('{"kind":"cti","t":1}\n')
    args = [a.format(p=tmp_path / "in.parquet", j=tmp_path / "in.jsonl") for a in args]
    code, _, err = udm(capsys, "run", query, *args, "-o", str(tmp_path / "o.jsonl"))
    assert code == 1 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_element_jsonl_input_is_unchanged_and_format_can_be_forced(capsys: Any, tmp_path: Path,
                                                                   query: str) -> None:
    rows = [{"ts": 1, "sym": "A", "price": 2.0}, {"ts": 2, "sym": "A", "price": 3.0}]
    (tmp_path / "rows.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = udm(capsys, "run", query, "-i", str(tmp_path / "rows.json"), "--format", "json", "--time", "ts",
                       "-o", str(tmp_path / "o.jsonl"))
    assert code == 0, err
    assert cht(_elements(tmp_path / "o.jsonl")) == CHT.from_events([(0, 10, {"sym": "A", "total": 5.0})])
    elements = "".join(json.dumps({"kind": "insert", "id": f"e{r['ts']}", "le": r["ts"], "re": r["ts"] + 1,
                                   "payload": {"sym": r["sym"], "price": r["price"]}}) + "\n" for r in rows)
    (tmp_path / "el.jsonl").write_text(elements)
    assert udm(capsys, "run", query, "-i", str(tmp_path / "el.jsonl"), "-o", str(tmp_path / "o2.jsonl"))[0] == 0
    assert cht(_elements(tmp_path / "o2.jsonl")) == cht(_elements(tmp_path / "o.jsonl"))
    assert parse_query(QUERY)  # the query the tests use is valid as written
