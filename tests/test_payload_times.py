"""SEMANTICS §1: a time written into a payload (``members``' ``re``) is ``"inf"`` when infinite, never the
internal 2**63-1 — in the UDM's output, the oracle, and every engine path's output file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import run

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, get_engine, run_local
from udm.host.temporal.elements import Cti, Element, Insert, parse_element, time_to_json
from udm.host.testing.cht import cht
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.oracle import oracle
from udm.sdk import INF, time_json

SNAP_MEMBERS = {"steps": [{"op": "window", "window": {"type": "snapshot"}, "udm": "members"}]}
STREAM: list[Element] = [Insert("a", 1, INF, {"s": "x"}), Insert("b", 3, 5, {"s": "y"}), Cti(4),
                         Insert("c", 6, INF, {"s": "z"})]
#: by hand (SEMANTICS §3 snapshot windows over endpoints 1, 3, 5, 6; members unclipped; output policy window)
EXPECTED = sorted([
    (1, 3, {"le": 1, "re": "inf", "s": "x"}),
    (3, 5, {"le": 1, "re": "inf", "s": "x"}), (3, 5, {"le": 3, "re": 5, "s": "y"}),
    (5, 6, {"le": 1, "re": "inf", "s": "x"}),
    (6, INF, {"le": 1, "re": "inf", "s": "x"}), (6, INF, {"le": 6, "re": "inf", "s": "z"}),
], key=json.dumps)


def _table(c: Any) -> list[tuple[int, int, dict]]:
    return sorted([(le, re, json.loads(p)) for (le, re, p), n in c.items() for _ in range(n)], key=json.dumps)


def test_time_json_is_the_element_encoding() -> None:
    assert (time_json(INF), time_json(7), time_json(-3)) == ("inf", 7, -3)
    assert time_to_json is time_json


def test_oracle_and_engine_write_inf() -> None:
    q = parse_query(SNAP_MEMBERS)
    assert _table(oracle(q, STREAM)) == EXPECTED
    for mode in ("each", "many"):
        out, _ = run(SNAP_MEMBERS, STREAM, mode=mode)
        assert _table(cht(out)) == EXPECTED


def _file_run(engine: str, tmp_path: Path) -> str:
    src = tmp_path / "in.jsonl"
    write_stream(src, STREAM)
    out = tmp_path / f"{engine}.jsonl"
    req = RunRequest(bind(parse_query(SNAP_MEMBERS)), src, out, tmp_path / f"{engine}.dl.jsonl",
                     batch_size=2 if engine == "spark-streaming" else None, checkpoint=None, options={})
    (run_local if engine == "local" else get_engine(engine))(req)
    return out.read_text(encoding="utf-8")


def _check_file(text: str) -> None:
    assert str(INF) not in text  # neither as a time nor inside a payload
    out = [parse_element(json.loads(x)) for x in text.splitlines() if x.strip()]
    assert _table(cht(out)) == EXPECTED


def test_local_file_run(tmp_path: Path) -> None:
    _check_file(_file_run("local", tmp_path))


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_spark_paths(spark: Any, tmp_path: Path, engine: str) -> None:
    _check_file(_file_run(engine, tmp_path))
