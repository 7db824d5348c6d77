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


def _mixed_parts(seed: int) -> list[Payload]:
    """Parts of one batch: column blocks whose CTI rows are masked out, dict rows with CTIs ({}) among them,
    and runs of CTIs alone."""
    rng = np.random.default_rng(seed)
    parts: list[Payload] = []
    for _ in range(int(rng.integers(2, 6))):
        n = int(rng.integers(1, 6))
        pick = rng.random()
        if pick < 0.2:
            parts.append(Payload.absent(n))
            continue
        cti = rng.random(n) < 0.4
        if pick < 0.6:
            parts.append(_cols(n, None if not cti.any() else ~cti))
        else:
            parts.append(Payload.from_rows([{} if c else {"k": f"r{i}", "v": float(i), "c": "x"}
                                            for i, c in enumerate(cti.tolist())]))
    return parts


def test_concat_of_a_batch_mixing_ctis_and_inserts_keeps_the_column_blocks() -> None:
    """CTI rows carry no payload: a part holding both CTIs and data rows does not turn the batch into dicts."""
    kept = 0
    for seed in range(200):
        parts = _mixed_parts(seed)
        want = [r for p in parts for r in p.rows()]  # (each part read by itself: the reference)
        got = concat_payloads(parts)
        assert len(got) == len(want) and got.rows() == want, seed
        if any(p.fields for p in parts):
            assert got.columnar and set(got.names or ()) == {"k", "v", "c"}, seed
            assert all(isinstance(c, (pa.Array, ConstColumn)) for c in (got.fields or {}).values()), seed
            assert got.valid is None or got.valid.tolist() == [r != {} for r in want], seed
            kept += 1
    assert kept > 100
    masked = _cols(3, np.array([True, False, True]))  # (the case that once became dicts: a CTI inside a block)
    got = concat_payloads([_cols(2), masked, Payload.from_rows([{"k": "d", "v": 2.0, "c": "x"}, {}])])
    assert got.columnar and isinstance(got.fields["v"], pa.Array)  # type: ignore[index]
    assert got.rows() == [*_cols(2).rows(), *masked.rows(), {"k": "d", "v": 2.0, "c": "x"}, {}]
