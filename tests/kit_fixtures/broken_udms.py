"""Deliberately broken UDMs, one per contract check (and a correct one for contrast).

`BROKEN` maps each class to the contract checks it must fail — and only those. The module is also a
plugin file (`register_udms`), so `udm validate tests/kit_fixtures/broken_udms.py` can load it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer

from udm.sdk import (
    UDA,
    UDF,
    UDM,
    ErrorBound,
    Event,
    IncrementalUDA,
    MalformedPayload,
    SpanUDO,
    TimeSensitiveSpanUDO,
    TimeSensitiveUDO,
    hookimpl,
    udm,
)


@udm(name="good_count", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class GoodCount(IncrementalUDA):
    """A correct algebraic count (the contrast)."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[Any]) -> int:
        return state - len(delta)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def compute(self, state: int) -> int:
        return state


# -- value_blind --------------------------------------------------------------------------------


@udm(name="blind_distinct", version="1.0.0", value_blind=True, input_type="any", output_type="int")
class BlindDistinct(UDA):
    """Declares it reads no values, and counts the distinct ones (the engine would hand it placeholders)."""

    def compute(self, payloads: Sequence[Any]) -> int:
        return len({repr(p) for p in payloads})


# -- manifest -----------------------------------------------------------------------------------


@udm(name="lying_output_type", version="1.0.0", input_type="float", output_type="int")
class LyingOutputType(UDA):
    """Declares an int result but returns text."""

    def compute(self, payloads: Sequence[float]) -> Any:
        return f"{len(payloads)} values"


@udm(name="claims_algebraic", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class ClaimsAlgebraic(IncrementalUDA):
    """Declares algebraic but has no merge."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[Any]) -> int:
        return state - len(delta)

    def compute(self, state: int) -> int:
        return state


# -- params -------------------------------------------------------------------------------------


class LossyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: Annotated[float, PlainSerializer(lambda v: int(v), return_type=int)] = 1.5


@udm(name="lossy_params", version="1.0.0", input_type="float", output_type="float")
class LossyParams_(UDA):
    """Its parameter model serializes 1.5 as 1: the query file written from `udm info` means another UDM."""

    Params = LossyParams

    def compute(self, payloads: Sequence[float]) -> float:
        return self.params.scale * sum(payloads)


# -- determinism --------------------------------------------------------------------------------


@udm(name="noisy_sum", version="1.0.0", input_type="float", output_type="float")
class NoisySum(UDA):
    """Nondeterministic (and says it is deterministic)."""

    def compute(self, payloads: Sequence[float]) -> float:
        return sum(payloads) + random.random()


@udm(name="sorting_median", version="1.0.0", input_type="float", output_type="float")
class SortingMedian(UDA):
    """Sorts its members in place: mutates what the host handed it."""

    def compute(self, payloads: Sequence[float]) -> float:
        payloads.sort()  # type: ignore[attr-defined]
        return payloads[len(payloads) // 2]


@udm(name="stateful_self", version="1.0.0", input_type="any", output_type="int")
class StatefulSelf(UDA):
    """Keeps data across windows in ``self``: a fresh instance is deterministic, a long-lived one is not."""

    def __init__(self, params: Any = None) -> None:
        super().__init__(params)
        self.calls = 0

    def compute(self, payloads: Sequence[Any]) -> int:
        self.calls += 1
        return len(payloads) + (self.calls if self.calls > 7 else 0)


# -- incremental --------------------------------------------------------------------------------


@udm(name="bad_remove", version="1.0.0", input_type="any", output_type="int")
class BadRemove(IncrementalUDA):
    """remove() forgets to subtract."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[Any]) -> int:
        return state

    def compute(self, state: int) -> int:
        return state


# -- algebraic merge ----------------------------------------------------------------------------


class _CountBase(IncrementalUDA):
    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        return state + len(delta)

    def remove(self, state: int, delta: Sequence[Any]) -> int:
        return state - len(delta)

    def compute(self, state: int) -> int:
        return state


@udm(name="skewed_merge", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class SkewedMerge(_CountBase):
    """merge is not commutative."""

    def merge(self, a: int, b: int) -> int:
        return a + b + (1 if a > b else 0)


@udm(name="no_identity_merge", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class NoIdentityMerge(_CountBase):
    """merge(initial, a) != a."""

    def merge(self, a: int, b: int) -> int:
        return a + b + 1


@udm(name="mutating_merge", version="1.0.0", algebraic=True, input_type="any", output_type="int")
class MutatingMerge(IncrementalUDA):
    """merge extends its first argument in place."""

    def initial_state(self) -> list[Any]:
        return []

    def add(self, state: list[Any], delta: Sequence[Any]) -> list[Any]:
        return state + list(delta)

    def remove(self, state: list[Any], delta: Sequence[Any]) -> list[Any]:
        out = list(state)
        for d in delta:
            out.remove(d)
        return out

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        a.extend(b)
        return a

    def compute(self, state: list[Any]) -> int:
        return len(state)


# -- pickling -----------------------------------------------------------------------------------


@udm(name="lambda_state", version="1.0.0", input_type="float", output_type="float")
class LambdaState(IncrementalUDA):
    """Keeps a lambda in its state: the engine cannot snapshot it."""

    def initial_state(self) -> dict[str, Any]:
        return {"total": 0.0, "fmt": lambda x: round(x, 6)}

    def add(self, state: dict[str, Any], delta: Sequence[float]) -> dict[str, Any]:
        return {**state, "total": state["total"] + sum(delta)}

    def remove(self, state: dict[str, Any], delta: Sequence[float]) -> dict[str, Any]:
        return {**state, "total": state["total"] - sum(delta)}

    def compute(self, state: dict[str, Any]) -> float:
        return state["fmt"](state["total"])  # type: ignore[no-any-return]


# -- time_bound ---------------------------------------------------------------------------------


@udm(name="window_counter", version="1.0.0", time_bound=True, input_type="event", output_type="event")
class WindowCounter(TimeSensitiveUDO):
    """Claims time_bound but stamps its count at the window start: a late member changes an output that
    starts long before that member."""

    def compute(self, events: Sequence[Any], window: Any) -> Any:
        return [(window.le, window.re, {"n": len(events)})]


#: class -> the contract checks it must fail (and nothing else)
# -- batch_forms --------------------------------------------------------------------------------


@udm(name="batch_drops_last", version="1.0.0", algebraic=True, input_type="float", output_type="int")
class BatchDropsLast(GoodCount):
    """A correct count whose batch form forgets the last member of every slice."""

    def add_array(self, state: int, values: Any) -> int:
        return state + len(values)

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        off = list(offsets)
        return [s + max(b - a - 1, 0) for s, a, b in zip(states, off[:-1], off[1:], strict=True)]


@udm(name="slices_as_floats", version="1.0.0", algebraic=True, input_type="float", output_type="int")
class SlicesAsFloats(GoodCount):
    """A correct count whose fresh-window form gives its counts as floats (``3.0``: other output text)."""

    def add_array(self, state: int, values: Any) -> int:
        return state + len(values)

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        off = [int(x) for x in offsets]
        return [s + b - a for s, a, b in zip(states, off[:-1], off[1:], strict=True)]

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        import numpy as np

        return np.diff(np.asarray(offsets, dtype=np.int64)).astype(np.float64)


@udm(name="slices_skip_first", version="1.0.0", algebraic=True, input_type="float", output_type="int")
class SlicesSkipFirst(SlicesAsFloats):
    """As `SlicesAsFloats` but with int counts that leave out each slice's first member."""

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        import numpy as np

        return np.maximum(np.diff(np.asarray(offsets, dtype=np.int64)) - 1, 0)


@udm(name="prefixes_skip_state", version="1.0.0", algebraic=True, input_type="float", output_type="int")
class PrefixesSkipState(GoodCount):
    """A correct count whose running form counts each prefix but forgets what the state already held."""

    def add_array(self, state: int, values: Any) -> int:
        return state + len(values)

    def compute_prefixes(self, state: int, values: Any, ends: Any) -> Any:
        import numpy as np

        return np.asarray(ends, dtype=np.int64)


@udm(name="ranges_as_slices", version="1.0.0", algebraic=True, input_type="float", output_type="int")
class RangesAsSlices(GoodCount):
    """A correct count whose sliding form counts each range only from the previous range's end (as if the
    ranges did not overlap)."""

    def add_array(self, state: int, values: Any) -> int:
        return state + len(values)

    def add_batch(self, states: list[int], values: Any, offsets: Any) -> list[int]:
        off = [int(x) for x in offsets]
        return [s + b - a for s, a, b in zip(states, off[:-1], off[1:], strict=True)]

    def compute_ranges(self, values: Any, starts: Any, ends: Any) -> Any:
        import numpy as np

        e = np.asarray(ends, dtype=np.int64)
        return e - np.maximum(np.asarray(starts, dtype=np.int64), np.concatenate(([0], e[:-1])))


@udm(name="batch_sign", version="1.0.0", input_type="float", output_type="bool")
class BatchSign(UDF):
    """``x > 0``, but the batch form says ``x >= 0`` (they differ on zero)."""

    def compute(self, x: float) -> bool:
        return x > 0

    def compute_batch(self, x: Any) -> Any:
        return [v >= 0 for v in x.tolist()]

    @classmethod
    def example_payloads(cls, rng: random.Random) -> list[Any]:
        return [0, 1, -1, 0.0, 2.5]


# -- no remove, error_bound ------------------------------------------------------------------------


class _SetDistinct(IncrementalUDA):
    """An exact distinct count without remove (its state a sorted tuple), algebraic: the host rebuilds."""

    def initial_state(self) -> tuple[Any, ...]:
        return ()

    def add(self, state: tuple[Any, ...], delta: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(sorted(set(state) | set(delta), key=repr))

    def merge(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(sorted(set(a) | set(b), key=repr))

    def compute(self, state: tuple[Any, ...]) -> int:
        return len(state)


@udm(name="exact_distinct", version="1.0.0", algebraic=True, input_type="int | str", output_type="int",
     error_bound=ErrorBound(estimates="distinct_count", bound=0.01))
class ExactDistinct(_SetDistinct):
    """A correct algebraic UDA without remove, declaring an error bound it keeps (it is exact)."""


@udm(name="skewed_distinct", version="1.0.0", algebraic=True, input_type="int | str", output_type="int",
     error_bound=ErrorBound(estimates="distinct_count", bound=0.05, confidence=0.99))
class SkewedDistinct(_SetDistinct):
    """Declares a 5 % error but overcounts by 20 %."""

    def compute(self, state: tuple[Any, ...]) -> int:
        return round(1.2 * len(state))


@udm(name="forgetful_count", version="1.0.0", input_type="any", output_type="int")
class ForgetfulCount(IncrementalUDA):
    """Incremental without remove, but not algebraic: the host could not rebuild it, so it is refused."""

    def initial_state(self) -> int:
        return 0

    def add(self, state: int, delta: Sequence[Any]) -> int:
        return state + len(delta)

    def compute(self, state: int) -> int:
        return state


# -- span UDOs (flat_map) ---------------------------------------------------------------------------


@udm(name="span_outside", version="1.0.0", input_type="event", output_type="event")
class SpanOutside(TimeSensitiveSpanUDO):
    """Yields an output that starts before its event (the oracle refuses it too)."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le - 1, event.le + 1, dict(event.payload)


@udm(name="span_liar", version="1.0.0", time_bound=True, input_type="event", output_type="event")
class SpanLiar(TimeSensitiveSpanUDO):
    """Declares time_bound, but its output at the event's start carries the event's end."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.le + 1, {"re": -1 if event.re >= 2**63 - 1 else event.re}


@udm(name="span_noisy", version="1.0.0", input_type="payload", output_type="payload")
class SpanNoisy(SpanUDO):
    """A random number of outputs per event, each with a random ``noise``."""

    def compute(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        for i in range(random.randint(1, 3)):
            yield {**payload, "i": i, "noise": random.random()}


@udm(name="span_picky", version="1.0.0", input_type="payload", output_type="payload")
class SpanPicky(SpanUDO):
    """Refuses every payload without a ``text``, i.e. every example input of its declared type."""

    def compute(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        if "text" not in payload:
            raise MalformedPayload("no text")
        yield dict(payload)


BROKEN: dict[type[UDM], set[str]] = {
    LyingOutputType: {"manifest"},
    ClaimsAlgebraic: {"manifest", "algebraic_merge"},
    LossyParams_: {"params_roundtrip"},
    NoisySum: {"deterministic", "physical_reordering"},
    SortingMedian: {"deterministic"},
    StatefulSelf: {"physical_reordering"},
    BadRemove: {"incremental"},
    SkewedMerge: {"algebraic_merge"},
    NoIdentityMerge: {"algebraic_merge"},
    MutatingMerge: {"algebraic_merge"},
    LambdaState: {"state_pickle"},
    WindowCounter: {"time_bound"},
    BatchDropsLast: {"batch_forms"},
    BatchSign: {"batch_forms"},
    SlicesAsFloats: {"batch_forms"},
    SlicesSkipFirst: {"batch_forms"},
    PrefixesSkipState: {"batch_forms"},
    RangesAsSlices: {"batch_forms"},
    SkewedDistinct: {"error_bound"},
    ForgetfulCount: {"manifest"},
    SpanOutside: {"manifest", "physical_reordering"},
    SpanLiar: {"time_bound"},
    SpanNoisy: {"deterministic", "physical_reordering"},
    SpanPicky: {"manifest"},
    BlindDistinct: {"value_blind"},
}

ALL: tuple[type[UDM], ...] = (GoodCount, ExactDistinct, *BROKEN)


@hookimpl
def register_udms(register: Callable[[type[UDM]], None]) -> None:
    for cls in ALL:
        register(cls)
