"""``approx_distinct``: the number of distinct values, from an HyperLogLog sketch (Apache DataSketches)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasketches as ds
from pydantic import BaseModel, ConfigDict, Field

from udm.sdk import ErrorBound, IncrementalUDA, udm

from ._values import canonical_numbers, hash_value

__all__ = ["ApproxDistinct", "DistinctParams", "relative_error"]

#: standard deviations the declared bound covers (a normal tail: 99.7 % of estimates fall inside)
_STD_DEVS = 3


def relative_error(lg_k: int) -> float:
    """The sketch's a-priori relative error at `_STD_DEVS` standard deviations, for an estimate taken
    from a merged ("unioned") sketch, as every estimate here is (`ApproxDistinct.compute`)."""
    return max(abs(ds.hll_sketch.get_rel_err(up, True, lg_k, _STD_DEVS)) for up in (True, False))


class DistinctParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lg_k: int = Field(12, ge=4, le=21, description="log2 of the number of HLL buckets (4..21): state is about "
                      "2^(lg_k-1) bytes, the relative error about 3.1/sqrt(2^lg_k) at 99.7 %")


@udm(name="approx_distinct", version="1.0.0", algebraic=True, input_type="float | str", output_type="int",
     error_bound=ErrorBound(estimates="distinct_count", bound=relative_error(12), confidence=0.997))
class ApproxDistinct(IncrementalUDA):
    """Approximate number of distinct values (HyperLogLog, Apache DataSketches).

    Value: an integer estimate of how many distinct values the window's members hold. Numbers and strings
    are counted as JSON values: `1` and `1.0` are one value, the string `"1"` another. Error bound, declared
    in the manifest and checked by the conformance kit: |estimate - exact| <= e * exact at 99.7 %
    confidence, where e is the sketch's a-priori relative error at 3 standard deviations for lg_k (0.0497
    for the default lg_k = 12; about 3.1 / sqrt(2^lg_k)). Up to a few hundred distinct values (lg_k = 12)
    the sketch keeps a list of hashes and the count is exact but for a hash collision.

    Deterministic: the estimate is a function of the set of values alone (the sketch's registers, read
    with the estimator of merged sketches), so windows evaluated from panes, merged across Spark
    partitions or built value by value give the same number.

    Incremental and algebraic; the state is the sketch's compact serialization (HLL_4, ~2 KB at lg_k 12).
    There is no remove: a sketch cannot forget a value, so when members leave a window the host rebuilds
    that window's state from the members that remain.
    """

    Params = DistinctParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        self.lg_k: int = self.params.lg_k
        self._empty = ds.hll_sketch(self.lg_k, ds.HLL_4).serialize_compact()

    def error_bound(self) -> float:
        return relative_error(self.lg_k)

    def initial_state(self) -> bytes:
        return self._empty

    def add(self, state: bytes, delta: Sequence[float | str]) -> bytes:
        if not delta:
            return state
        sk = ds.hll_sketch.deserialize(state)
        up = sk.update
        for v in delta:
            up(hash_value(v))
        return sk.serialize_compact()  # type: ignore[no-any-return]

    def add_array(self, state: bytes, values: Any) -> bytes:
        if len(values) == 0:
            return state
        sk = ds.hll_sketch.deserialize(state)
        up = sk.update
        for v in canonical_numbers(values):
            up(v)
        return sk.serialize_compact()  # type: ignore[no-any-return]

    def merge(self, a: bytes, b: bytes) -> bytes:
        u = ds.hll_union(self.lg_k)
        u.update(ds.hll_sketch.deserialize(a))
        u.update(ds.hll_sketch.deserialize(b))
        return u.get_result(ds.HLL_4).serialize_compact()  # type: ignore[no-any-return]

    def compute(self, state: bytes) -> int:
        sk = ds.hll_sketch.deserialize(state)
        # A sketch built value by value estimates with its insertion history (HIP); a merged one from its
        # registers alone. Taking every estimate from a union that has seen the sketch twice (a union of a
        # single sketch is that sketch, history included) makes it the registers' estimate: one number
        # for one set of values, however the state was folded.
        u = ds.hll_union(self.lg_k)
        u.update(sk)
        u.update(sk)
        return round(u.get_estimate())

    @classmethod
    def example_payloads(cls, rng: Any) -> list[Any]:
        """Numbers (integral floats among them) and strings, for the conformance kit."""
        return [rng.randint(0, 6) for _ in range(8)] + [2.0, 3.5, "a", "b", "3", ""]
