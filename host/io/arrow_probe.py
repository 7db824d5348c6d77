"""`skip_pandas_probe`: keep pyarrow from importing pandas only to ask whether an array is a pandas object.

pyarrow imports pandas (~0.2 s of CPU, most of a local run's start-up beyond the interpreter) the first
time it converts a numpy array or hands one back (``pa.array``, ``to_numpy``): it checks whether the
input is a pandas Series or Categorical. A local ``udm run`` never gives pyarrow a pandas object, so the
CLI lets that first check run with pandas hidden; pyarrow then takes "no pandas" for its implicit checks
and does not import it. Anything that really uses pandas still can: ``import pandas`` is untouched
afterwards, and pyarrow's explicit conversions (``to_pandas``, ``from_pandas``, ``pa.array`` of a
Series) import it on first use (pyarrow retries the import when pandas is asked for by name).
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

__all__ = ["skip_pandas_probe"]


class _HidePandas:
    """A meta-path finder that makes ``import pandas`` fail while it is installed."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is hidden from pyarrow's first probe (udm.host.io.arrow_probe)")


def skip_pandas_probe() -> None:
    """Run pyarrow's first pandas probes with pandas hidden (nothing to do once pandas is loaded)."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _HidePandas)
    try:
        # the Python-side probe (is it a Series?): a list asks it as an array would, without the
        # ndarray path's ``np.ma`` check, which imports numpy.ma (~5 ms) that a small run never needs
        arr = pa.array([0], pa.int64())
        arr.to_numpy()  # the C++ side's, on the first conversion back to numpy
        pa.chunked_array([arr]).to_numpy()
    finally:
        sys.meta_path.remove(_HidePandas)
