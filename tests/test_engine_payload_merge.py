"""Payloads put together (`udm.host.engine.payload_merge`): the rows are exactly the parts' rows in order
(or the payload with the given rows replaced), and they stay columns when the parts share one shape (a
gate's batch with older events' payloads patched in, a window's column block beside a few dict rows)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from udm.host.engine.payload import Payload
from udm.host.engine.payload_merge import concat_payloads, patched
from udm.host.io.encode import ConstColumn


def _cols(n: int, valid: np.ndarray | None = None) -> Payload:
    return Payload(n, fields={"k": pa.array([f"g{i}" for i in range(n)]), "v": pa.array(np.arange(n) * 1.5),
                              "c": ConstColumn("x")}, valid=valid)


def test_patched_rows_of_the_same_shape_stay_columns() -> None:
    valid = np.ones(6, dtype=bool)
    valid[[2, 4]] = False  # (CTI rows)
    p = _cols(6, valid)
    got = patched(p, np.array([2, 4]), [{"k": "old", "v": 7.5, "c": "x"}, {"k": "o2", "v": 0.0, "c": "x"}])
    assert got.columnar and got.valid is not None and got.valid.all()
    want = [p.row(i) for i in range(6)]
    want[2] = {"k": "old", "v": 7.5, "c": "x"}
    want[4] = {"k": "o2", "v": 0.0, "c": "x"}
    assert got.rows() == want


def test_patched_rows_of_another_shape_or_type_become_dicts() -> None:
    p = _cols(4)
    for new in ({"v": 1.0, "k": "a", "c": "x"},  # another field order
                {"k": "a", "v": 1, "c": "x"},  # an int where the column holds floats
                {"k": "a", "v": 1.0, "c": "y"}):  # not the constant
        got = patched(p, np.array([1]), [new])
        assert not got.columnar
        assert got.rows() == [p.row(0), new, p.row(2), p.row(3)]
        assert list(got.rows()[1]) == list(new)


def test_concat_keeps_columns_across_absent_rows_and_dict_rows() -> None:
    a = _cols(3)
    ctis = Payload.absent(2)
    dicts = Payload.from_rows([{"k": "d", "v": 9.0, "c": "x"}])
    got = concat_payloads([a, ctis, dicts])
    assert got.columnar and len(got) == 6
    assert got.rows() == [*a.rows(), {}, {}, {"k": "d", "v": 9.0, "c": "x"}]
    mixed = concat_payloads([a, Payload.from_rows([{"other": 1}])])
    assert not mixed.columnar and mixed.rows() == [*a.rows(), {"other": 1}]
