"""``frequent_items``: the heavy hitters of a window, from a frequent-items sketch (Apache DataSketches)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import datasketches as ds
from pydantic import BaseModel, ConfigDict, Field

from udm.sdk import ErrorBound, IncrementalUDA, udm

from ._values import canonical_numbers, item_key, item_value

__all__ = ["FrequentItems", "FrequentParams", "frequency_error"]

_ERROR_TYPES = {"no_false_positives": ds.frequent_items_error_type.NO_FALSE_POSITIVES,
                "no_false_negatives": ds.frequent_items_error_type.NO_FALSE_NEGATIVES}


def frequency_error(lg_max_map_size: int) -> float:
    """The sketch's a-priori error per member: an estimate is within this times the number of members
    (DataSketches' epsilon, 3.5 / map size)."""
    return float(ds.frequent_strings_sketch.get_epsilon_for_lg_size(lg_max_map_size))


class FrequentParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(10, ge=1, le=100_000, description="report at most the k most frequent items")
    lg_max_map_size: int = Field(10, ge=3, le=26, description="log2 of the sketch's map size: exact up to "
                                 "0.75 * 2^lg distinct values, error 3.5 / 2^lg of the members beyond")
    error_type: Literal["no_false_positives", "no_false_negatives"] = Field(
        "no_false_positives", description="no_false_positives: only items surely more frequent than the "
        "sketch's error; no_false_negatives: every item that may be")


@udm(name="frequent_items", version="1.0.0", algebraic=True, deterministic=False, input_type="float | str",
     output_type="list[dict]",
     error_bound=ErrorBound(estimates="frequencies", bound=frequency_error(10), confidence=0.99))
class FrequentItems(IncrementalUDA):
    """The most frequent values of a window, with estimated counts and bounds (Apache DataSketches).

    Value: a JSON list of at most k objects {"item": value, "estimate": int, "lower_bound": int,
    "upper_bound": int}, most frequent first: sorted by estimate descending, ties by the item's canonical
    JSON text ascending. Values are counted as JSON values (`1` and `1.0` are one item, reported as `1`; the
    string `"1"` is another item). The true count f of every listed item satisfies
    lower_bound <= f <= upper_bound, always.

    Exact (estimate = lower_bound = upper_bound = the count, every value listed up to k) while the window
    holds fewer than 0.75 * 2^lg_max_map_size distinct values (768 at the default 10). Beyond, the sketch
    keeps the largest counters: |estimate - f| <= e * n for n members, e = 3.5 / 2^lg_max_map_size
    (0.0034 at the default), declared in the manifest at 99 % confidence and checked by the conformance
    kit; which items are listed follows error_type: with no_false_positives (the default) an item is listed
    only if its lower bound exceeds the sketch's largest possible error (it surely is that frequent), with
    no_false_negatives every item whose upper bound does (no item that frequent is missing).

    Not deterministic beyond that size: the counts the sketch keeps depend on the order in which the
    engine folds members and merges states, so two engines may list different estimates, each within the
    bound. Incremental and algebraic; the state is the sketch's serialization. There is no remove: when
    members leave a window the host rebuilds that window's state from the members that remain.
    """

    Params = FrequentParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        p = self.params
        self.k: int = p.k
        self.lg: int = p.lg_max_map_size
        self.error_type = _ERROR_TYPES[p.error_type]
        self._empty = ds.frequent_strings_sketch(self.lg).serialize()

    def error_bound(self) -> float:
        return frequency_error(self.lg)

    def initial_state(self) -> bytes:
        return self._empty

    def _fold(self, state: bytes, keys: list[str]) -> bytes:
        if not keys:
            return state
        sk = ds.frequent_strings_sketch.deserialize(state)
        up = sk.update
        for key in keys:
            up(key)
        return sk.serialize()  # type: ignore[no-any-return]

    def add(self, state: bytes, delta: Sequence[float | str]) -> bytes:
        return self._fold(state, [item_key(v) for v in delta])

    def add_array(self, state: bytes, values: Any) -> bytes:
        return self._fold(state, [repr(v) for v in canonical_numbers(values)])

    def merge(self, a: bytes, b: bytes) -> bytes:
        sk = ds.frequent_strings_sketch.deserialize(a)
        sk.merge(ds.frequent_strings_sketch.deserialize(b))
        return sk.serialize()  # type: ignore[no-any-return]

    def compute(self, state: bytes) -> list[dict[str, Any]]:
        sk = ds.frequent_strings_sketch.deserialize(state)
        rows = sorted(sk.get_frequent_items(self.error_type), key=lambda r: (-r[1], r[0]))
        return [{"item": item_value(key), "estimate": est, "lower_bound": lb, "upper_bound": ub}
                for key, est, lb, ub in rows[: self.k]]

    @classmethod
    def example_payloads(cls, rng: Any) -> list[Any]:
        """Numbers (integral floats among them) and strings, for the conformance kit."""
        return [rng.randint(0, 4) for _ in range(8)] + [2.0, 3.5, "a", "b", "3", ""]
