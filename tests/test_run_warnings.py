"""The run summary warns when an input never sends a CTI (SEMANTICS §7: without CTIs nothing is cleaned up),
with the live events and windows the engine held; ``max_memory_time`` bounds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.query.runners import RunRequest, run_local
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing.engine_conformance import write_stream

TUMBLE = {"op": "window", "window": {"type": "tumbling", "size": 10}, "udm": "count"}


def _run(tmp_path: Path, query: dict[str, Any], stream: list[Element] | dict[str, list[Element]]) -> Any:
    if isinstance(stream, dict):
        src: Any = {}
        for name, els in stream.items():
            write_stream(tmp_path / f"{name}.jsonl", els)
            src[name] = tmp_path / f"{name}.jsonl"
    else:
        write_stream(tmp_path / "in.jsonl", stream)
        src = tmp_path / "in.jsonl"
    return run_local(RunRequest(bind(parse_query(query)), src, tmp_path / "out.jsonl", batch_size=16))


def _points(n: int, cti_every: int = 0) -> list[Element]:
    out: list[Element] = []
    for i in range(n):
        out.append(Insert(f"e{i}", i, i + 1, {"v": i}))
        if cti_every and i % cti_every == cti_every - 1:
            out.append(Cti(i))
    return out


def test_no_cti_warns_with_what_was_held(tmp_path: Path) -> None:
    res = _run(tmp_path, {"steps": [TUMBLE]}, _points(100))
    # by hand: no CTI, so every one of the 100 point events and all 10 windows [10k, 10k+10) stay live
    assert res.warnings == ["input 'main' sent no CTI: the engine held up to 100 live events and 10 live windows "
                            "until the end of input (send CTIs, or set max_memory_time on the window steps, to "
                            "bound memory)"]
    lines = res.summary().splitlines()
    assert len(lines) == 2 and lines[1].startswith("warning: input 'main' sent no CTI")
    assert json.loads(json.dumps(res.to_json_dict()))["warnings"] == res.warnings


def test_ctis_mean_no_warning(tmp_path: Path) -> None:
    res = _run(tmp_path, {"steps": [TUMBLE]}, _points(100, cti_every=10))
    assert res.warnings == [] and "warning" not in res.summary()


def test_max_memory_time_bounds_the_state(tmp_path: Path) -> None:
    res = _run(tmp_path, {"steps": [{**TUMBLE, "max_memory_time": 20}]}, _points(400))
    (w,) = res.warnings
    assert "max_memory_time bounds what the window steps hold" in w
    held = int(w.split("held up to ")[1].split(" live events")[0])
    assert held <= 20 + 16 + 1  # m - max_memory_time acts as a CTI: at most 20 ticks of points (+ one batch)


def test_multi_input_names_the_silent_input(tmp_path: Path) -> None:
    q = {"inputs": {"a": {}, "b": {}}, "steps": [{"id": "u", "op": "union", "from": ["a", "b"]},
                                                  {**TUMBLE, "id": "w"}]}
    res = _run(tmp_path, q, {"a": _points(30, cti_every=5), "b": _points(30)})
    assert len(res.warnings) == 1 and res.warnings[0].startswith("input 'b' sent no CTI")


@pytest.mark.spark
@pytest.mark.parametrize("graph", [False, True], ids=["linear", "graph"])
def test_spark_batch_warns_about_an_input_without_ctis(spark: Any, tmp_path: Path, graph: bool) -> None:
    from udm.host.query.runners import get_engine

    if graph:
        query: dict[str, Any] = {"inputs": {"a": {}, "b": {}}, "steps": [
            {"id": "u", "op": "union", "from": ["a", "b"]}, {**TUMBLE, "id": "w"}]}
        streams: dict[str, list[Element]] = {"a": _points(30, cti_every=5), "b": _points(30)}
        src: Any = {}
        for name, els in streams.items():
            write_stream(tmp_path / f"{name}.jsonl", els)
            src[name] = tmp_path / f"{name}.jsonl"
    else:
        query = {"steps": [TUMBLE]}
        write_stream(tmp_path / "in.jsonl", _points(30))
        src = tmp_path / "in.jsonl"
    res = get_engine("spark")(RunRequest(bind(parse_query(query)), src, tmp_path / "out.jsonl",
                                         options={"buckets": 2}))
    silent = "b" if graph else "main"
    assert res.warnings == [f"input {silent!r} sent no CTI: each bucket's engine held its live events and windows "
                            "until the end of input (send CTIs, or set max_memory_time on the window steps, to "
                            "bound memory)"]
