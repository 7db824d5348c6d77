"""The chattiness counters of ``lmerge`` in the run summary (seeds/001 Theorem 1): `RunResult.lmerge`, the
``udm run --json`` document and the one-line summary report inserts, partial and full retractions and CTIs
out against the inserts and CTIs in, counted by hand here from seeds/001 §IV.D with semantics-notes 22."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_harness import udm

from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json
from udm.sdk import INF

QUERY = {"inputs": {"a": {}, "b": {}}, "steps": [{"id": "m", "op": "lmerge", "from": ["a", "b"],
                                                   "algorithm": "R3"}]}
# `udm run` reads the files in sync-time order: a's x, p, p's deletion, z; b's x, z, cti(4); a's cti(6) ...
# b's cti(4) leads first: x [1,12) and z [3,5) are open on b: out [1, INF) and [3, INF); the phantom p
# (deleted on a, absent on b) is never output. a's cti(6) froze z at 5 (partial retraction), a's cti(INF)
# freezes x at 12 (partial retraction); b's cti(INF) comes after the output ended.
A: list[Element] = [Insert("x", 1, 10, {"v": 1}), Insert("p", 2, 3, {"v": 9}), Retract("p", 2, 3, 2),
                    Insert("z", 3, 5, {"v": 2}), Cti(6), Retract("x", 1, 10, 12), Cti(INF)]
B: list[Element] = [Insert("x", 1, 12, {"v": 1}), Insert("z", 3, 5, {"v": 2}), Cti(4), Cti(INF)]
WANT = {"inserts_in": 5, "retractions_in": 2, "ctis_in": 4, "inserts_out": 2, "partial_retractions_out": 2,
        "full_retractions_out": 0, "ctis_out": 3}


def write(path: Path, elements: list[Element]) -> str:
    path.write_text("".join(json.dumps(element_to_json(e)) + "\n" for e in elements))
    return str(path)


def test_run_summary_reports_the_theorem_1_counters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump(QUERY, sort_keys=False))
    args = ["run", str(q), "--input", f"a={write(tmp_path / 'a.jsonl', A)}", "--input",
            f"b={write(tmp_path / 'b.jsonl', B)}", "-o", str(tmp_path / "out.jsonl")]
    code, out, err = udm(capsys, *args, "--json")
    assert code == 0, err
    counts = json.loads(out)["lmerge"]["m"]
    assert counts == WANT
    assert counts["inserts_out"] + counts["partial_retractions_out"] <= counts["inserts_in"]
    assert counts["ctis_out"] <= counts["ctis_in"]
    code, out, err = udm(capsys, *args)
    assert code == 0 and "lmerge m: 2 inserts + 2 retractions out for 5 inserts in, 3 CTIs out for 4 in" in err


def test_queries_without_lmerge_keep_their_summary(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    q = tmp_path / "q.yaml"
    q.write_text(yaml.safe_dump({"inputs": {"a": {}, "b": {}}, "steps": [{"op": "union", "from": ["a", "b"]}]}))
    code, out, err = udm(capsys, "run", str(q), "--input", f"a={write(tmp_path / 'a.jsonl', A)}", "--input",
                         f"b={write(tmp_path / 'b.jsonl', B)}", "-o", str(tmp_path / "o.jsonl"), "--json")
    assert code == 0, err
    assert "lmerge" not in json.loads(out)
