"""Span-based functions (UDFs) for filter/map steps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from udm.sdk import UDF, udm

__all__ = ["InRange"]


class RangeParams(BaseModel):
    # infinite bounds must survive a JSON round trip (as Infinity), or the query spec cannot carry them
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
    lo: float = -math.inf
    hi: float = math.inf


@udm(name="in_range", version="1.0.0", input_type="float", output_type="bool")
class InRange(UDF):
    """True when ``lo <= field <= hi`` (inclusive); a non-number is out of range."""

    Params = RangeParams

    def compute(self, field: float) -> bool:
        if isinstance(field, bool) or not isinstance(field, (int, float)):
            return False
        return bool(self.params.lo <= field <= self.params.hi)

    def compute_batch(self, field: Any) -> Any:
        """Vectorized over a numeric column (an object column: element by element)."""
        col = np.asarray(field)
        if col.dtype.kind not in "iuf":
            return [self.compute(v) for v in col.tolist()]
        return (self.params.lo <= col) & (col <= self.params.hi)
