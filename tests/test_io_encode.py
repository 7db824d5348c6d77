"""`udm.host.io.encode` builds output lines column-wise; they must be the bytes ``json.dumps`` gives for
each element (what `JsonlWriter` writes one by one): escapes, non-ASCII text, Python's float repr,
booleans, lists, constants, infinite ends, CTIs between inserts; a non-finite float is an error on both
(output is strict JSON, SEMANTICS §1)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from udm.host.errors import UdmError
from udm.host.io.encode import ConstColumn, cti_line, insert_lines, merge_lines
from udm.host.temporal.elements import Cti, Insert, element_to_json
from udm.sdk import INF

STRINGS = ["plain", 'q"uote', "back\\slash", "é ü", "tab\t", "ctl\x01", "del\x7f", "", "日本"]
FLOATS = [0.1, 1e16, 123456789.0, -0.0, 1.5e-07, 2.5, 5e-324, -1.7976931348623157e308, 1e-300]


def _want(oids: list[int], le: list[int], re: list[int], payloads: list[dict]) -> list[str]:
    return [json.dumps(element_to_json(Insert(f"o{o}", a, b, p))) + "\n"
            for o, a, b, p in zip(oids, le, re, payloads, strict=True)]


def test_insert_lines_match_json_dumps_for_every_value_kind() -> None:
    n = len(STRINGS)
    floats = FLOATS[:n]
    ints = [0, -5, 2**62, 7, 1, 2, 3, 4, 5]
    bools = [True, False] * 4 + [True]
    lists = [[1, 2], [], [3], [4, 5, 6], [7], [8], [9], [10], [11]]
    oids = list(range(1, n + 1))
    le = list(range(n))
    re = [x + 1 for x in le]
    re[3] = INF
    cols = [("s", pa.array(STRINGS)), ("f", pa.array(floats, pa.float64())), ("i", pa.array(ints)),
            ("b", pa.array(bools)), ("l", pa.array(lists, pa.list_(pa.int64()))),
            ("k\u00e9y", ConstColumn({"x": [1, 2.5]}))]
    got = insert_lines(np.array(oids), np.array(le, dtype=np.int64), np.array(re, dtype=np.int64), cols).to_pylist()
    payloads = [{"s": s, "f": f, "i": i, "b": b, "l": lst, "k\u00e9y": {"x": [1, 2.5]}}
                for s, f, i, b, lst in zip(STRINGS, floats, ints, bools, lists, strict=True)]
    assert got == _want(oids, le, re, payloads)


def test_plain_ascii_strings_and_finite_floats() -> None:
    """The no-escape and finite-float branches on their own (the test above mixes in the other branches)."""
    s = ["abc", "x y", "~!"]
    f = [0.1, 1e300, 3.0]
    got = insert_lines(np.array([4, 5, 6]), np.array([1, 2, 3]), np.array([2, 3, 4]),
                       [("s", pa.array(s)), ("f", pa.array(f))]).to_pylist()
    assert got == _want([4, 5, 6], [1, 2, 3], [2, 3, 4], [{"s": a, "f": b} for a, b in zip(s, f, strict=True)])


def test_an_empty_payload() -> None:
    got = insert_lines(np.array([1]), np.array([0]), np.array([1]), []).to_pylist()
    assert got == _want([1], [0], [1], [{}])


def test_ctis_are_placed_between_the_inserts_in_row_order() -> None:
    lines = insert_lines(np.array([1, 2, 3]), np.array([0, 1, 2]), np.array([5, 6, 7]), [("v", pa.array([1, 2, 3]))])
    # rows: insert, cti, cti, insert, insert, cti
    enc = merge_lines(np.array([0, 3, 4]), lines, [1, 2, 5], [cti_line(3), cti_line(INF), cti_line(9)])
    want = [element_to_json(x) for x in (Insert("o1", 0, 5, {"v": 1}), Cti(3), Cti(INF),
                                          Insert("o2", 1, 6, {"v": 2}), Insert("o3", 2, 7, {"v": 3}), Cti(9))]
    assert enc.count == 6
    assert enc.to_bytes().decode() == "".join(json.dumps(w) + "\n" for w in want)


def test_only_ctis() -> None:
    enc = merge_lines(np.zeros(0, dtype=np.int64), pa.array([], pa.string()), [0], [cti_line(4)])
    assert enc.to_bytes() == b'{"kind": "cti", "t": 4}\n'


def test_element_lines_equal_the_writer_line_by_line() -> None:
    """Runs of like inserts (column-wise) between retractions, CTIs and inserts of other shapes, with
    values that must not become a typed column (int beside float, a huge integer, nested values)."""
    from udm.host.io.encode import MIN_RUN, element_lines
    from udm.host.io.jsonl import _line
    from udm.host.temporal.elements import Retract

    els: list = []
    for i in range(MIN_RUN + 3):
        payload = {"sym": STRINGS[i % len(STRINGS)], "total": i * 7, "avg": i / 3}
        els.append(Insert(f"w{i}" if i != 4 else 'w"é', i * 10, i * 10 + 10 if i % 5 else INF, payload))
    els.append(Retract("w3", 30, 40, 35))
    els.append(Cti(40))
    els += [Insert(f"m{i}", i, i + 1, {"v": [1, 2.5, 1e16][i % 3]}) for i in range(MIN_RUN)]  # int/float mix
    els += [Insert(f"b{i}", i, i + 1, {"v": 2**70 if i == 3 else i, "n": {"x": i}}) for i in range(MIN_RUN)]
    els += [Insert(f"t{i}", i, i + 1, {"ok": i % 2 == 0, "f": 1e300 if i == 2 else 0.5}) for i in range(MIN_RUN)]
    els += [Insert("q\"id", 1, 2, {}), Insert("x", 0, 1, {"a": 1})]  # short runs
    enc = element_lines(els, _line)
    assert enc.count == len(els)
    assert enc.to_bytes().decode() == "".join(json.dumps(element_to_json(e)) + "\n" for e in els)


def test_float_text_is_python_repr_over_many_magnitudes() -> None:
    """pyarrow formats the floats of a common magnitude; ``repr`` is the reference for every value, across
    magnitudes (1e-30 .. 1e30), integral values, negative zero and subnormals."""
    from udm.host.io.encode import _float_text

    rng = np.random.default_rng(7)
    n = 60_000
    vals = np.concatenate([
        rng.random(n) * 10.0 ** rng.integers(-30, 30, n),
        -rng.random(n // 4) * 10.0 ** rng.integers(-6, 11, n // 4),
        rng.integers(-10**9, 10**9, n // 4).astype(float),
        rng.integers(-10**6, 10**6, n // 4) * 0.908,
        np.array([0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e9, 999999999.9999999, 5e-324, 1e16, 123456789.0]),
    ])
    got = _float_text(pa.array(vals)).to_pylist()
    assert got == [json.dumps(v) for v in vals.tolist()]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_is_an_error_not_a_line(bad: float) -> None:
    """``json.dumps`` would write ``NaN``/``Infinity``, which strict parsers refuse: every encoder path
    (one element, a column-wise run, a column, a constant) refuses it with the field's name instead."""
    from udm.host.io.encode import MIN_RUN, element_lines, element_text
    from udm.host.io.jsonl import _line

    with pytest.raises(UdmError, match="'f' is not a finite number"):
        element_text(Insert("a", 0, 1, {"f": bad}))
    with pytest.raises(UdmError, match="'f' holds a number that is not finite"):
        element_lines([Insert(f"t{i}", i, i + 1, {"f": bad if i == 3 else 0.5}) for i in range(MIN_RUN)], _line)
    with pytest.raises(UdmError, match="'f' holds a number that is not finite"):
        insert_lines(np.array([1]), np.array([0]), np.array([1]), [("f", pa.array([bad]))])
    with pytest.raises(UdmError, match="'x' is not a finite number"):
        insert_lines(np.array([1]), np.array([0]), np.array([1]), [("c", ConstColumn({"x": bad}))])


def test_columns_with_nulls_write_null() -> None:
    cols = [("i", pa.array([1, None], pa.int64())), ("s", pa.array([None, "x"])), ("b", pa.array([None, True])),
            ("f", pa.array([0.5, None]))]
    got = insert_lines(np.array([1, 2]), np.array([0, 1]), np.array([1, 2]), cols).to_pylist()
    assert got == _want([1, 2], [0, 1], [1, 2], [{"i": 1, "s": None, "b": None, "f": 0.5},
                                                 {"i": None, "s": "x", "b": True, "f": None}])


def test_writer_mixes_short_and_long_writes_in_order(tmp_path: Path) -> None:
    """`JsonlWriter.write`: short lists go through the text layer, long ones as encoded bytes; the file
    (and a text stream without a byte buffer) keeps the order of the calls."""
    import io

    from udm.host.io.encode import MIN_RUN
    from udm.host.io.jsonl import JsonlWriter

    batches = [[Insert(f"a{i}", i, i + 1, {"v": i}) for i in range(3)],
               [Insert(f"b{i}", i, i + 2, {"v": i * 0.5, "s": "x"}) for i in range(MIN_RUN + 4)],
               [Cti(7), Insert("c", 9, INF, {"v": 1})]]
    want = "".join(json.dumps(element_to_json(e)) + "\n" for b in batches for e in b)
    path = tmp_path / "out.jsonl"
    with JsonlWriter(path) as w:
        for b in batches:
            w.write(b)
    assert path.read_text() == want
    buf = io.StringIO()
    w2 = JsonlWriter(buf)
    for b in batches:
        w2.write(b)
    assert buf.getvalue() == want
    assert w2.count == sum(map(len, batches))


def test_float_text_on_a_slice_with_integral_rows_at_both_ends() -> None:
    """The ``.0`` fix works on the text buffer: a sliced column, integral first and last rows, all rows
    integral, none integral."""
    from udm.host.io.encode import _float_text

    base = [7.0, 1.5, -3.0, 0.25, 2.0, 100.0, 0.1, 12.0]
    for vals in (base, [2.0, 3.0, -0.0], [0.5, 1.25]):
        arr = pa.array([9.5, *vals, 4.0]).slice(1, len(vals))
        assert _float_text(arr).to_pylist() == [json.dumps(v) for v in vals]


def test_constant_pieces_are_right_for_batches_of_every_size_in_any_order(monkeypatch: Any) -> None:
    """The constant pieces of a line come from kept columns sliced to the batch (`_const_column`): batches
    smaller and larger than a kept column, one after the other, and with eviction forced by a tiny budget,
    still give ``json.dumps``'s lines; a piece too big to keep goes in as a scalar."""
    from udm.host.io import encode

    rng = np.random.default_rng(7)
    for budget in (encode._CONST_BYTES, 64 << 10):
        monkeypatch.setattr(encode, "_CONST_BYTES", budget)
        encode._consts.clear()
        for n in (1, 1500, 3, 1024, 1025, 5000, 2, 70000):
            names = [f"f{n % 3}", "g\u00e9"]  # (field names change between batches: other constants)
            vals = rng.integers(-(2**40), 2**40, size=n)
            le = rng.integers(0, 1000, size=n)
            cols = [(names[0], pa.array(vals)), (names[1], ConstColumn("c\"x"))]
            got = insert_lines(np.arange(n), le, le + 1, cols).to_pylist()
            want = _want(list(range(n)), le.tolist(), (le + 1).tolist(),
                         [{names[0]: v, names[1]: 'c"x'} for v in vals.tolist()])
            assert got == want
        assert sum(len(k) * len(v) for k, v in encode._consts.items()) <= max(budget, 1 << 20)
