"""A query's output `Batch` as JSON Lines (`udm.host.engine.output.encode_batch`): the bytes are what the
writer gives element by element (``json.dumps`` of each output element), whether the payloads are held
as columns or as dicts (a window's rows, read field by field), with retractions and CTIs between the
inserts, values that cannot be one typed column, inserts of different shapes and infinite ends."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from udm.host.engine.batch import CTI, INSERT, RETRACT, Batch
from udm.host.engine.output import encode_batch
from udm.host.engine.payload import Payload
from udm.host.temporal.elements import element_to_json
from udm.sdk import INF

STRINGS = ["plain", 'q"uote', "back\\slash", "é ü", "tab\t", "ctl\x01", "", "日本"]


def _want(b: Batch) -> str:
    return "".join(json.dumps(element_to_json(e)) + "\n" for e in b.to_elements())


def _rows_batch(payloads: list[Any], extra: bool = True) -> Batch:
    """Inserts with these payloads, a retraction and a CTI among them, some ends infinite."""
    kind, ids, le, re, rn, pls = [], [], [], [], [], []
    for i, p in enumerate(payloads):
        kind.append(INSERT)
        ids.append(i + 1)
        le.append(i)
        re.append(INF if i % 7 == 3 else i + 5)
        rn.append(re[-1])
        pls.append(p)
        if extra and i % 9 == 4:
            kind.append(RETRACT)
            ids.append(i)
            le.append(i - 1)
            re.append(i + 4)
            rn.append(i)
            pls.append(payloads[i - 1])
        if extra and i % 11 == 10:
            kind += [CTI]
            ids.append(0)
            le.append(i)
            re.append(i)
            rn.append(i)
            pls.append({})
    return Batch.of(kind, ids, le, re, rn, pls)


@pytest.mark.parametrize("make", [
    lambda i: {"sym": STRINGS[i % len(STRINGS)], "total": i * 7, "avg": i / 3},
    lambda i: {"v": [1, 2.5, 1e16][i % 3], "ok": i % 2 == 0},  # int beside float: not one column
    lambda i: {"big": 2**70 if i == 3 else i, "n": {"x": [i, None]}, "none": None},
    lambda i: {},
])
def test_dict_payloads_of_one_shape(make: Any) -> None:
    b = _rows_batch([make(i) for i in range(40)])
    assert not b.payload.columnar
    assert encode_batch(b).to_bytes().decode() == _want(b)


def test_dict_payloads_of_several_shapes_and_short_batches() -> None:
    mixed = _rows_batch([{"a": i} if i % 3 else {"b": i, "a": i} for i in range(40)])
    assert encode_batch(mixed).to_bytes().decode() == _want(mixed)
    order = _rows_batch([{"a": i, "b": 1} if i != 20 else {"b": 1, "a": i} for i in range(40)])
    assert encode_batch(order).to_bytes().decode() == _want(order)  # (the same keys in another order)
    short = _rows_batch([{"a": i} for i in range(5)])
    assert encode_batch(short).to_bytes().decode() == _want(short)


def test_columnar_payloads_with_ctis_between() -> None:
    n = 50
    kind = np.full(n, INSERT, dtype=np.int8)
    kind[[10, 30]] = CTI
    ids = np.arange(1, n + 1, dtype=np.int64)
    t = np.arange(n, dtype=np.int64)
    valid = kind != CTI
    cols = {"k": pa.array([STRINGS[i % len(STRINGS)] for i in range(n)]), "x": pa.array(t * 1.5)}
    b = Batch(kind, ids, t, t + 2, t + 2, np.full(n, -1, dtype=np.int64), Payload(n, fields=cols, valid=valid))
    assert encode_batch(b).to_bytes().decode() == _want(b)
