"""`udm run` over query graphs (INTERFACES §3): one `--input NAME=PATH` per input, dead letters and the
`--json` summary per input, clear one-line errors for inputs that do not match the query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_harness import udm

from udm.host.query import Stream
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json
from udm.host.testing import cht

QUERY = {
    "inputs": {"bids": {}, "auctions": {"on_violation": "adjust"}},
    "steps": [
        {"id": "hot", "from": "bids", "op": "window", "window": {"type": "tumbling", "size": 10},
         "group_by": ["auction"], "udm": "count", "as": "num"},
        {"id": "j", "op": "join", "from": ["hot", "auctions"], "on": [["auction", "id"]], "right_prefix": "a_"},
        {"id": "out", "op": "project", "keep": ["auction", "num", "a_seller"]},
    ],
    "output": "out",
}
BIDS: list[Element] = [Insert("b1", 1, 2, {"auction": 1}), Insert("b2", 3, 4, {"auction": 1}),
                       Insert("b3", 4, 5, {"auction": 2}), Retract("b2", 3, 4, 3), Cti(12),
                       Insert("b4", 14, 15, {"auction": 1})]
AUCTIONS: list[Element] = [Insert("a1", 0, 2**63 - 1, {"id": 1, "seller": "ann"}),
                           Insert("a2", 0, 30, {"id": 2, "seller": "bob"}), Insert("a3", 0, 30, {"seller": "x"})]


def write(path: Path, elements: list[Element], bad: str | None = None) -> str:
    lines = [json.dumps(element_to_json(e)) for e in elements]
    if bad is not None:
        lines.insert(2, bad)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump(QUERY, sort_keys=False))
    return {"q": str(q), "bids": write(tmp_path / "bids.jsonl", BIDS, bad="{not json"),
            "auctions": write(tmp_path / "auctions.jsonl", AUCTIONS), "out": str(tmp_path / "out.jsonl"),
            "dl": str(tmp_path / "dl.jsonl")}


def read(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_run_a_join_graph_from_two_files(capsys: pytest.CaptureFixture[str], files: dict[str, str]) -> None:
    code, out, err = udm(capsys, "run", files["q"], "--input", f"bids={files['bids']}",
                         "--input", f"auctions={files['auctions']}", "-o", files["out"],
                         "--dead-letter", files["dl"], "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["inputs"] == {"bids": {"elements_in": 7, "dead_lettered": 1},
                                 "auctions": {"elements_in": 3, "dead_lettered": 1}}
    # by hand (SEMANTICS §10): auction 1 has b1 in [0, 10) (b2 was deleted) and b4 in [10, 20); auction 2 has b3;
    # auction 1 lives [0, inf), auction 2 [0, 30): every window overlaps its auction
    expected = [Insert("x", 0, 10, {"auction": 1, "num": 1, "a_seller": "ann"}),
                Insert("y", 0, 10, {"auction": 2, "num": 1, "a_seller": "bob"}),
                Insert("z", 10, 20, {"auction": 1, "num": 1, "a_seller": "ann"})]
    from udm.host.temporal.elements import parse_element

    assert cht([parse_element(r) for r in read(files["out"])]) == cht(expected)
    dls = read(files["dl"])
    assert {(d["input"], d["line"]) for d in dls} == {("bids", 3), ("auctions", 3)}
    assert any("missing join field 'id'" in d["reason"] for d in dls)


def test_the_fluent_api_runs_the_same_graph(files: dict[str, str], tmp_path: Path) -> None:
    bids = Stream.from_jsonl(files["bids"], name="bids")
    auctions = Stream.from_jsonl(files["auctions"], name="auctions")
    hot = bids.group_by("auction").tumbling(10).aggregate("count", as_="num")
    q = hot.join(auctions, on=[("auction", "id")], right_prefix="a_").project(keep=["auction", "num", "a_seller"])
    res = q.run(tmp_path / "fluent.jsonl")
    from udm.host.temporal.elements import parse_element

    got = cht([parse_element(r) for r in read(str(tmp_path / "fluent.jsonl"))])
    assert got == cht(q.to_elements()) and len(got) == 3 and res.inputs["bids"]["elements_in"] == 7


@pytest.mark.parametrize(("inputs", "message"), [
    (["bids.jsonl"], "the query reads inputs bids, auctions; give each as --input NAME=PATH"),
    (["bids=B"], "no events given for input 'auctions': add --input auctions=PATH"),
    (["bids=B", "bids=B", "auctions=A"], "--input bids= given twice"),
    (["bids=B", "auctions=missing.jsonl"], "input file missing.jsonl (input 'auctions') does not exist"),
    (["bids=B", "auctions=B"], "are the same file"),
])
def test_inputs_that_do_not_match_the_query_are_one_line_errors(
        capsys: pytest.CaptureFixture[str], files: dict[str, str], inputs: list[str], message: str) -> None:
    args: list[str] = []
    for value in inputs:
        args += ["--input", value.replace("=B", f"={files['bids']}").replace("=A", f"={files['auctions']}")]
    code, _, err = udm(capsys, "run", files["q"], *args, "-o", files["out"])
    assert code != 0 and message in err and "Traceback" not in err
    assert not Path(files["out"]).exists()


def test_a_single_input_query_still_takes_a_bare_path_and_names_it_main(
        capsys: pytest.CaptureFixture[str], files: dict[str, str], tmp_path: Path) -> None:
    q = tmp_path / "lin.json"
    q.write_text(json.dumps({"steps": [{"op": "project", "drop": ["auction"]}]}))
    for given in (files["bids"], f"main={files['bids']}"):
        code, out, err = udm(capsys, "run", str(q), "--input", given, "-o", files["out"], "--json")
        assert code == 0, err
        assert json.loads(out)["inputs"] == {"main": {"elements_in": 7, "dead_lettered": 1}}
