"""Hypothesis fuzzing of what users hand the host: event files (the reader, then the engine) and query specs.
Whatever comes in — bad JSON, huge integers, NaN/Infinity, deep nesting, non-UTF-8 bytes, wrong types in every
field — the outcome is elements, dead letters or one clear `UdmError`; never another exception."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udm.host.engine import QueryRunner
from udm.host.errors import UdmError
from udm.host.io.jsonl import read_jsonl_batches
from udm.host.model.plan import bind
from udm.host.model.spec import load_query, parse_query

QUERY = {"steps": [{"op": "window", "window": {"type": "hopping", "size": 10, "hop": 5}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# ---------------------------------------------------------------------------------------------------------
# event files

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.sampled_from(["inf", "INF", "-inf"]),
)
_json = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=8)
_times = st.one_of(st.integers(min_value=-50, max_value=60), _scalars)


@st.composite
def _element(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["insert", "retract", "cti", "ecti", "bogus", 7, None]))
    obj: dict[str, Any] = {"kind": kind}
    for name in ("id", "le", "re", "re_new", "t"):
        if draw(st.booleans()):
            obj[name] = draw(st.one_of(st.sampled_from(["a", "b", "c"]), _times)) if name == "id" else draw(_times)
    if draw(st.booleans()):
        obj["payload"] = draw(st.one_of(st.fixed_dictionaries({"g": st.sampled_from(["x", "y"]), "v": _scalars}),
                                        _json))
    return obj


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=True).encode()  # NaN / Infinity literals are in the fuzz on purpose


_lines = st.one_of(
    _element().map(_dump),
    st.binary(max_size=20),  # arbitrary bytes, mostly not UTF-8 / not JSON
    st.integers(min_value=1, max_value=3000).map(lambda d: b"[" * d + b"]" * d),  # deep nesting
    st.integers(min_value=1, max_value=3000).map(lambda d: b'{"kind":"insert","payload":' + b"[" * d + b"]" * d
                                                  + b"}"),
    st.sampled_from([b"", b"   ", b"{", b"null", b"[]", b'{"kind": "cti", "t": 1e400}',
                     b'{"kind":"insert","id":"z","le":1,"re":2,"payload":{"v":NaN,"g":"x"}}',
                     b'{"kind":"insert","id":"h","le":99999999999999999999999,"re":2}',
                     b'{"kind":"insert","id":"u","le":1,"re":2,"payload":{"g":"\xff\xfe"}}']),
)

FUZZ_COUNT = {"files": 0, "lines": 0, "specs": 0}


def _good(i: int) -> bytes:
    return _dump({"kind": "insert", "id": f"ok{i}", "le": i, "re": i + 3, "payload": {"g": "x", "v": i}})


@SETTINGS
@given(st.lists(_lines, max_size=40), st.booleans(), st.integers(min_value=1, max_value=9))
def test_reader_and_engine_never_raise(lines: list[bytes], fast: bool, batch: int) -> None:
    # a run of good lines around the fuzz keeps the fast path (pyarrow) in play
    body = b"\n".join([*(_good(i) for i in range(5)), *(x.replace(b"\n", b" ") for x in lines),
                       *(_good(i) for i in range(5, 60))]) + b"\n"
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "in.jsonl"
        p.write_bytes(body)
        runner = QueryRunner(bind(parse_query(QUERY)))
        n_rows = 0
        for b in read_jsonl_batches(p, batch_size=batch, fast=fast):
            n_rows += len(b)
            runner.process_batch(b)
        runner.finish()
    # nothing silently lost: every non-blank line is an element in, and the 60 good lines were read
    non_blank = sum(1 for x in body.split(b"\n") if x.strip())
    assert n_rows == non_blank == runner.stats.elements_in
    assert runner.stats.dead_lettered >= 0
    FUZZ_COUNT["files"] += 1
    FUZZ_COUNT["lines"] += len(body.split(b"\n"))


# ---------------------------------------------------------------------------------------------------------
# query specs


def _mutate(draw: Any, node: Any, depth: int = 0) -> Any:
    """Replace a random subtree of a valid spec with fuzz (or keep it)."""
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        return draw(_json)
    if isinstance(node, dict):
        return {k: _mutate(draw, v, depth + 1) for k, v in node.items()
                if draw(st.integers(min_value=0, max_value=9)) > 0}
    if isinstance(node, list):
        return [_mutate(draw, v, depth + 1) for v in node]
    return node


_VALID = [
    QUERY,
    {"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 0, "hi": 9}},
               {"op": "window", "window": {"type": "snapshot"}, "udm": "members", "output": "clip"}]},
    {"inputs": {"a": {"on_violation": "adjust", "repair": {"horizon": 5}}, "b": {}},
     "steps": [{"id": "j", "op": "join", "from": ["a", "b"], "on": [["k", "k"]]},
               {"op": "window", "window": {"type": "rows", "n": 3}, "udm": "median", "input": "v"}],
     "repair": {"horizon": "inf"}},
]


@st.composite
def _spec(draw: Any) -> Any:
    base = draw(st.sampled_from(_VALID))
    return draw(st.one_of(st.just(_mutate(draw, base)), _json))


@SETTINGS
@given(_spec())
def test_query_spec_parse_and_bind_never_raise_anything_but_udm_errors(data: Any) -> None:
    try:
        bind(parse_query(data))
    except UdmError as exc:
        assert str(exc) and "Traceback" not in str(exc)
    FUZZ_COUNT["specs"] += 1


@SETTINGS
@given(st.one_of(st.binary(max_size=200), _spec().map(lambda d: json.dumps(d, allow_nan=True).encode())),
       st.sampled_from([".json", ".yaml"]))
def test_query_spec_files_never_raise_anything_but_udm_errors(raw: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"q{suffix}"
        p.write_bytes(raw)
        try:
            bind(load_query(p))
        except UdmError as exc:
            assert str(exc)
    FUZZ_COUNT["specs"] += 1


def test_report_counts() -> None:
    """Printed for the closing note (run with -s); zero tracebacks is the assertion of the tests above."""
    print(f"fuzz: {FUZZ_COUNT}")
