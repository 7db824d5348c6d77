"""Base classes, one per UDM kind of seeds/000 §IV (kind × time sensitivity × incrementality).

A UDM writer subclasses one and implements the methods its docstring names. The bases deliberately do
not define ``add``/``remove``/``merge``: the host checks that a UDM declaring a property really
implements what the property needs, and a placeholder inherited from here would hide a lie.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from ._manifest import Kind, Manifest, NoParams
from ._time import Event, WindowDescriptor

__all__ = [
    "UDA",
    "UDF",
    "UDM",
    "UDO",
    "IncrementalTimeSensitiveUDA",
    "IncrementalTimeSensitiveUDO",
    "IncrementalUDA",
    "IncrementalUDO",
    "OutputEvent",
    "SpanUDO",
    "TimeSensitiveSpanUDO",
    "TimeSensitiveUDA",
    "TimeSensitiveUDO",
]

#: What a time-sensitive UDO may yield: an `Event`, or a ``(le, re, payload)`` tuple.
OutputEvent = Event | tuple[int, int, Mapping[str, Any]]


class UDM:
    """Common root. ``manifest`` is set by the `udm` decorator (or written by hand as a class attribute).

    The host creates one instance per query step with the validated parameter model; keep per-window
    data out of ``self`` (the host holds window state, so it can checkpoint and move it between workers).
    """

    manifest: ClassVar[Manifest]
    Params: ClassVar[type[BaseModel]] = NoParams

    _sdk_kind: ClassVar[Kind | None] = None
    _sdk_time_sensitive: ClassVar[bool] = False
    _sdk_incremental: ClassVar[bool] = False
    #: a span-based UDO (`SpanUDO`, `TimeSensitiveSpanUDO`): run once per event by a ``flat_map`` step
    _sdk_span: ClassVar[bool] = False

    def __init__(self, params: BaseModel | None = None) -> None:
        model = type(self).manifest.params if hasattr(type(self), "manifest") else type(self).Params
        self.params: Any = params if params is not None else model()


class UDF(UDM):
    """Span-based function, called once per event: ``compute(**fields) -> value``.

    The query maps argument names to payload fields (``"args": {"x": "price"}``); the output event keeps
    the input event's lifetime.

    Optional batch form: ``compute_batch(**columns) -> column``. Each argument is a 1-d numpy array (one
    entry per event of a columnar batch: int64, float64, or object for other values); return a sequence
    of the same length whose entry ``i`` equals ``compute(**{arg: col[i]})``. The local engine uses it for
    ``filter``/``map`` over its columnar batches when every argument column is numeric; the conformance
    kit's ``batch_forms`` check holds both forms to the same answers. Never required.
    """

    _sdk_kind = "udf"

    def compute(self, **fields: Any) -> Any:
        raise NotImplementedError


class UDA(UDM):
    """Time-insensitive aggregate: ``compute(payloads) -> value`` over a window's members."""

    _sdk_kind = "uda"

    def compute(self, payloads: Sequence[Any]) -> Any:
        raise NotImplementedError


class TimeSensitiveUDA(UDM):
    """Time-sensitive aggregate: ``compute(events, window) -> value``; events carry clipped lifetimes."""

    _sdk_kind = "uda"
    _sdk_time_sensitive = True

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> Any:
        raise NotImplementedError


class UDO(UDM):
    """Time-insensitive operator: ``compute(payloads) -> iterable of payloads``, each stamped with W."""

    _sdk_kind = "udo"

    def compute(self, payloads: Sequence[Any]) -> Iterable[Mapping[str, Any]]:
        raise NotImplementedError


class TimeSensitiveUDO(UDM):
    """Time-sensitive operator: ``compute(events, window) -> iterable of Event or (le, re, payload)``."""

    _sdk_kind = "udo"
    _sdk_time_sensitive = True

    def compute(self, events: Sequence[Event], window: WindowDescriptor) -> Iterable[OutputEvent]:
        raise NotImplementedError


class IncrementalUDA(UDM):
    """Incremental time-insensitive aggregate.

    Implement ``initial_state() -> S``, ``add(state, delta) -> S``, ``remove(state, delta) -> S`` and
    ``compute(state) -> value``, where ``delta`` is a sequence of payloads; for an algebraic UDA also
    ``merge(a, b) -> S``. Return the new state (mutating and returning the old one is fine).

    ``remove`` is optional for an algebraic UDA (one declaring ``algebraic`` and implementing ``merge``):
    a state that cannot forget a value (a sketch) simply leaves it out. The host then never calls
    ``remove``: when members leave a window (a retraction, a shortened lifetime) it rebuilds that window's
    state from the remaining members with ``initial_state``/``add``/``merge``, so it keeps a window's
    members while the window can still change, as for a non-incremental UDA.

    Optional estimator hooks, for a UDA whose manifest declares an ``error_bound`` (`ErrorBound`):
    ``error_bound() -> float``, the bound for this instance's parameters (without it the manifest's bound
    holds for every parameter value), and, when it estimates quantiles, ``quantile_ranks() -> list[float]``,
    the normalized ranks its value answers, in the order of its output.

    Optional vectorized hook: ``add_array(state, values: numpy.ndarray) -> S``. When a UDA defines it, the
    local engine's fast path (in-order insert batches with a numeric input field) may hand it a whole
    slice of one window's new members at once as a 1-d int64 or float64 array instead of calling
    ``add`` with a list. It must have the same effect as ``add(state, values.tolist())`` (up to float
    rounding). Never required: without it the engine calls ``add``.

    Optional batch form over many windows at once: ``add_batch(states, values, offsets) -> list[S]``,
    where ``offsets`` (int64, ``len(states) + 1`` entries, non-decreasing) cuts ``values`` into one slice
    per state: entry ``i`` of the result must equal ``add_array(states[i], values[offsets[i]:offsets[i+1]])``
    (up to float rounding). The engine's vectorized window insert hands it every (group, window) of a
    batch in one call. The conformance kit's ``batch_forms`` check compares it with ``add``.

    Optional fresh-window form, with ``add_batch``: ``compute_slices(values, offsets) -> column``, entry
    ``i`` the value ``compute(add(initial_state(), values[offsets[i]:offsets[i+1]].tolist()))`` of a window
    that holds exactly that slice (up to float rounding, and of the same JSON kind: an int where
    ``compute`` gives an int). Return a 1-d int64/float64 numpy array or a sequence of ``len(offsets) - 1``
    values. The engine's columnar grid path uses it for the windows made, closed and emitted inside one
    batch, and for the windows a CTI closes, of every group at once (no state object per window); raising
    makes it call the scalar forms instead. ``values`` is an int64 or float64 column when the UDA reads one
    numeric field, else (whole payloads, text, a mix) an object column of what ``add`` would receive: a form
    that handles numbers only should raise on another dtype. Checked by ``batch_forms`` too. A UDA declaring
    ``value_blind`` (`Properties`) gets placeholders instead of values, in every form: int64 zeros.

    Optional sliding form, with ``add_batch``: ``compute_ranges(values, starts, ends) -> column``, entry ``i``
    the value of a fresh window holding exactly ``values[starts[i]:ends[i]]`` (``starts``, ``ends``: int64,
    each range non-empty, both non-decreasing; unlike slices, ranges overlap), with ``compute_slices``'s kinds
    and rounding allowance. The engine's row windows (``rows``) use it for the windows a flush values of every
    group at once: a form whose cost per range does not grow with the range (a running sum's differences, a
    sliding extreme) keeps a row's cost flat in the window's length. Raising makes it use ``compute_slices``
    instead. Checked by ``batch_forms``.

    Optional running form, with ``add_array``: ``compute_prefixes(state, values, ends) -> column``, entry
    ``i`` the value ``compute(add(state, values[:ends[i]].tolist()))`` (``ends``: int64, non-decreasing,
    each at most ``len(values)``), without changing ``state``; the same kinds and rounding allowance as
    ``compute_slices``. The engine uses it for windows that grow (cumulate): the windows a flush closes in
    one period are valued in one call from the period's state so far, then the values enter that state with
    one ``add_array``. Raising makes it call the scalar forms instead. Checked by ``batch_forms``.
    """

    _sdk_kind = "uda"
    _sdk_incremental = True


class IncrementalTimeSensitiveUDA(UDM):
    """Incremental time-sensitive aggregate: as `IncrementalUDA` with delta events (clipped lifetimes)
    and ``compute(state, window) -> value``."""

    _sdk_kind = "uda"
    _sdk_time_sensitive = True
    _sdk_incremental = True


class IncrementalUDO(UDM):
    """Incremental time-insensitive operator: as `IncrementalUDA` with ``compute(state) -> payloads``."""

    _sdk_kind = "udo"
    _sdk_incremental = True


class IncrementalTimeSensitiveUDO(UDM):
    """Incremental time-sensitive operator: delta events, ``compute(state, window) -> events``."""

    _sdk_kind = "udo"
    _sdk_time_sensitive = True
    _sdk_incremental = True


class SpanUDO(UDM):
    """Span-based operator, run by a ``flat_map`` step once per event: ``compute(payload) -> iterable of
    payloads``. Each output keeps the event's lifetime; zero outputs drop the event.

    ``payload`` is the event's whole payload (a dict; treat it as read-only). When it lacks what the UDO
    needs (a missing field, a value of the wrong kind), raise `MalformedPayload` with the reason: the host
    sends the event to the dead-letter output instead of failing the run. Any other exception is a contract
    violation that stops the run, naming the UDM. A retraction of the event retracts (or shortens) exactly
    its outputs, so ``compute`` must be deterministic: the host may call it again for the same payload.
    """

    _sdk_kind = "udo"
    _sdk_span = True

    def compute(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        raise NotImplementedError


class TimeSensitiveSpanUDO(UDM):
    """Time-sensitive span-based operator, run by a ``flat_map`` step once per event:
    ``compute(event) -> iterable of Event or (le, re, payload)``, each output inside the event's lifetime
    (``event.le <= le < re <= event.re``; anything else is a contract violation naming the UDM).

    When a retraction changes the event's lifetime, the host calls ``compute`` again for the new lifetime
    and emits only the difference. Raise `MalformedPayload` for an event whose payload lacks what the UDO
    needs (it is dead-lettered). Declaring ``time_bound`` promises that the outputs a lifetime change
    alters all start at or after the change's sync time (``min(RE, RE_new)``), which lets the step pass the
    input's CTIs on at once; without it, the step holds its output CTI at the start of the earliest event
    that can still change.
    """

    _sdk_kind = "udo"
    _sdk_span = True
    _sdk_time_sensitive = True

    def compute(self, event: Event) -> Iterable[OutputEvent]:
        raise NotImplementedError
