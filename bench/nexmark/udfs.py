"""The benchmark's own UDFs (Nexmark q1, q2, q14), each with its scalar ``compute`` and the vectorized
``compute_batch`` (`udm.sdk.UDF`) the engine uses over columnar batches. Loaded into the run's catalog by
`bench.nexmark._child` (they are not an installed plugin)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel

from udm.sdk import UDF, hookimpl, udm

__all__ = ["DollarToEuro", "ModEq", "register_udms"]


@udm(name="nexmark_dollar_to_euro", version="1.0.0", input_type="float", output_type="float")
class DollarToEuro(UDF):
    """Nexmark q1: ``price * 0.908``."""

    def compute(self, price: float) -> float:
        return price * 0.908

    def compute_batch(self, price: Any) -> Any:
        return np.asarray(price, dtype=np.float64) * 0.908


class ModParams(BaseModel):
    mod: int = 123
    rem: int = 0


@udm(name="nexmark_mod_eq", version="1.0.0", input_type="int", output_type="bool")
class ModEq(UDF):
    """Nexmark q2: ``field % mod == rem``."""

    Params = ModParams

    def compute(self, field: int) -> bool:
        return field % self.params.mod == self.params.rem  # type: ignore[no-any-return]

    def compute_batch(self, field: Any) -> Any:
        return np.asarray(field) % self.params.mod == self.params.rem


@hookimpl
def register_udms(register: Any) -> None:
    register(DollarToEuro)
    register(ModEq)
