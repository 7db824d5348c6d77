"""numpy columns to arrow without the masked-array probe (`udm.host.io.arrow_numpy`): `arrow_of` builds what
``pa.array`` builds (type, values, NaN a value, no nulls) for every dtype the engine hands it, strided and
empty columns too, and `sorted_unique` is ``np.unique`` of an int column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from udm.host.io.arrow_numpy import arrow_of, sorted_unique

_DTYPES = [np.int64, np.int32, np.int8, np.uint64, np.uint8, np.float64, np.float32, np.bool_]


@pytest.mark.parametrize("dtype", _DTYPES)
def test_arrow_of_is_what_pa_array_builds(dtype: type) -> None:
    rng = np.random.default_rng(7)
    for n in (0, 1, 7, 8, 9, 64, 1000):
        x = (rng.integers(-100, 100, n * 2) if dtype is not np.bool_ else rng.random(n * 2) < 0.5).astype(dtype)
        if np.dtype(dtype).kind == "f" and n:
            x[::5] = np.nan
        for col in (x[:n], x[::2], x[n:][::-1]):  # contiguous, strided, reversed
            got, want = arrow_of(col), pa.array(col)
            assert got.type == want.type and got.null_count == 0
            assert got.equals(want) or (np.dtype(dtype).kind == "f" and got.to_pylist() == pytest.approx(
                want.to_pylist(), nan_ok=True)), (dtype, n)


def test_arrow_of_a_dtype_and_of_what_goes_through_pa_array() -> None:
    rows = np.array([3, 0, 2], dtype=np.int32)
    assert arrow_of(rows, np.int64).equals(pa.array(rows, pa.int64()))
    for other in (np.array(["a", "b"]), np.array([1.5, 2.5], dtype=np.float16), np.array([[1, 2], [3, 4]])[:, 0]):
        assert arrow_of(other).equals(pa.array(other))


def test_sorted_unique_is_np_unique() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 5, 100, 2000):
        x = rng.integers(-20, 20, n)
        assert sorted_unique(x).tolist() == np.unique(x).tolist()
