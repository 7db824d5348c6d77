"""``approx_quantile``: values at given ranks, from a KLL sketch (Apache DataSketches)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import datasketches as ds
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from udm.sdk import ErrorBound, IncrementalUDA, udm

__all__ = ["ApproxQuantile", "QuantileParams", "rank_error"]

Rank = Annotated[float, Field(ge=0.0, le=1.0)]


def rank_error(k: int) -> float:
    """KLL's normalized rank error for a single quantile at this ``k`` (DataSketches: the 99th percentile
    of the largest error measured over many trials)."""
    return float(ds.kll_doubles_sketch.get_normalized_rank_error(k, False))


class QuantileParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    q: Rank | None = Field(None, description="the normalized rank in [0, 1] (0.5: the median); the default "
                           "when neither q nor qs is given is 0.5")
    qs: tuple[Rank, ...] | None = Field(None, min_length=1, description="several ranks: the value is a list "
                                        "of quantiles in this order")
    k: int = Field(200, ge=8, le=65535, description="KLL's size parameter: more retained values, smaller error "
                   "(rank error 1.33 % at 200)")

    @model_validator(mode="after")
    def _one_of(self) -> QuantileParams:
        if self.q is not None and self.qs is not None:
            raise ValueError("give q (one rank) or qs (a list of ranks), not both")
        return self


@udm(name="approx_quantile", version="1.0.0", algebraic=True, deterministic=False, input_type="float",
     output_type="float | list[float]",
     error_bound=ErrorBound(estimates="quantile", bound=rank_error(200), confidence=0.99))
class ApproxQuantile(IncrementalUDA):
    """Approximate quantiles of a numeric input (KLL, Apache DataSketches).

    Value: for param q (default 0.5), the value x at normalized rank q: the smallest member x such that at
    least a fraction q of the members are <= x (q = 0: the smallest member, q = 1: the largest). For param
    qs, a list of those values, one per rank, in the order given. Always a float (an integer member 2 comes
    out as 2.0), and always one of the members' values.

    Exact while the window holds at most k members. Beyond, the sketch keeps a sample and x is within the
    declared rank error of q: x's rank among the members, [#(< x) / n, #(<= x) / n], lies within e of q,
    with e the sketch's normalized rank error for k (0.0133 at the default k = 200) at 99 % confidence; the
    conformance kit checks it.

    Not deterministic beyond k members: KLL compacts its sample with random coin flips, so two runs (or
    two engines) may give different values, each within the bound.

    Incremental and algebraic; the state is the sketch's serialization (at most ~5 KB at k = 200 however
    many members). There is no remove: when members leave a window the host rebuilds that window's
    state from the members that remain.
    """

    Params = QuantileParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        p = self.params
        self.k: int = p.k
        self.ranks: list[float] = list(p.qs) if p.qs is not None else [0.5 if p.q is None else p.q]
        self.many = p.qs is not None
        self._empty = ds.kll_doubles_sketch(self.k).serialize()

    def error_bound(self) -> float:
        return rank_error(self.k)

    def quantile_ranks(self) -> list[float]:
        return list(self.ranks)

    def initial_state(self) -> bytes:
        return self._empty

    def _fold(self, state: bytes, values: np.ndarray) -> bytes:
        if len(values) == 0:
            return state
        sk = ds.kll_doubles_sketch.deserialize(state)
        sk.update(values)
        return sk.serialize()  # type: ignore[no-any-return]

    def add(self, state: bytes, delta: Sequence[float]) -> bytes:
        for v in delta:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"approx_quantile needs numbers, got {type(v).__name__} {v!r}")
        return self._fold(state, np.asarray(delta, dtype=np.float64))

    def add_array(self, state: bytes, values: Any) -> bytes:
        return self._fold(state, np.asarray(values, dtype=np.float64))

    def merge(self, a: bytes, b: bytes) -> bytes:
        sk = ds.kll_doubles_sketch.deserialize(a)
        sk.merge(ds.kll_doubles_sketch.deserialize(b))
        return sk.serialize()  # type: ignore[no-any-return]

    def compute(self, state: bytes) -> float | list[float] | None:
        sk = ds.kll_doubles_sketch.deserialize(state)
        if sk.is_empty():
            return None  # (no window is empty: the host never asks)
        values = [float(sk.get_quantile(q, True)) for q in self.ranks]
        return values if self.many else values[0]
