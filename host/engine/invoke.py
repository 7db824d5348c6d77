"""Calling UDM code: input mapping, canonical member order, output timestamping, contract checks.

Everything a UDM can get wrong at run time (raising, returning the wrong type, breaking its declared
output policy) becomes a `ContractViolation` naming the UDM, its version, the window and the value
(SEMANTICS §5, semantics-notes 9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from udm.host.errors import ContractViolation
from udm.host.model.plan import BoundStep
from udm.host.temporal.strict import canonical_json
from udm.sdk import INF, Event, WindowDescriptor

from .common import Ev
from .payload import value_array

#: payload value types whose JSON encoding cannot fail
PLAIN_TYPES = (int, float, str, bool, type(None))

__all__ = ["ARRAY_MIN", "PLAIN_TYPES", "Mapper", "WindowUDM", "contract"]

#: fewer values than this are added by ``add`` alone (`WindowUDM.add_values`): making a column and the
#: UDA's array checks cost more than a short list
ARRAY_MIN = 16


def contract(label: str, window: tuple[int, int] | None, what: str, value: Any) -> ContractViolation:
    where = ""
    if window is not None:
        where = f" in window [{window[0]}, {'inf' if window[1] >= INF else window[1]})"
    text = repr(value)
    if len(text) > 300:
        text = text[:300] + "..."
    return ContractViolation(f"UDM {label}{where}: {what}: {text}")


class Mapper:
    """Turns a payload into what the UDM receives (semantics-notes 4) and finds missing fields (note 3)."""

    __slots__ = ("fields", "kind", "spec")

    def __init__(self, spec: str | dict[str, str] | None, blind: bool = False) -> None:
        self.spec = spec
        self.fields: tuple[str, ...] = ()
        if spec is None:
            self.kind = 0
        elif isinstance(spec, str):
            self.kind = 1
            self.fields = (spec,)
        else:
            self.kind = 2
            self.fields = tuple(spec.values())
        if blind:  # a value-blind UDA (`udm.sdk.Properties.value_blind`): 0 stands for every value, no payload
            self.kind = 4  # is read; its fields are still required of each event (semantics-notes 3)

    def __call__(self, payload: dict[str, Any]) -> Any:
        k = self.kind
        if k == 1:
            return payload[self.spec]  # type: ignore[index]
        if k == 0:
            return payload
        if k == 4:
            return 0
        return {u: payload[f] for u, f in self.spec.items()}  # type: ignore[union-attr]


def _is_time(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class WindowUDM:
    """A bound UDA/UDO of a window step with its policies; turns member sets into output events."""

    def __init__(self, bs: BoundStep) -> None:
        step = bs.step
        man = bs.entry.manifest
        props = man.properties
        self.bs = bs
        self.udm = bs.udm
        self.label = bs.label
        self.is_uda = man.kind == "uda"
        self.time_sensitive = props.time_sensitive
        self.incremental = props.incremental
        self.algebraic = props.algebraic and hasattr(bs.udm, "merge")
        #: an incremental UDA with ``remove`` (one without, a sketch, is merge-only)
        self.invertible = self.incremental and callable(getattr(bs.udm, "remove", None))
        self.clip = step.clip
        self.policy = step.output if self.time_sensitive else "window"
        self.alias = step.alias
        self.clip_left = self.clip in ("left", "full")
        self.clip_right = self.clip in ("right", "full")
        self.add_array = getattr(bs.udm, "add_array", None) if self.incremental and not self.time_sensitive else None
        #: values added to a running state go in as a column (`add_values`)
        self.array_values = self.add_array is not None and self.invertible and not props.value_blind
        #: the batch form over many windows' slices (`udm.sdk.IncrementalUDA`), used with ``add_array``
        self.add_batch = getattr(bs.udm, "add_batch", None) if self.add_array is not None else None
        #: the fresh-window values of many slices at once (`udm.sdk.IncrementalUDA`), used with ``add_batch``
        self.compute_slices = getattr(bs.udm, "compute_slices", None) if self.add_batch is not None else None
        #: the fresh-window values of many overlapping ranges at once (`udm.sdk.IncrementalUDA`), with ``add_batch``
        self.compute_ranges = getattr(bs.udm, "compute_ranges", None) if self.add_batch is not None else None
        #: the running values of a window that grows (`udm.sdk.IncrementalUDA`), used with ``add_array``
        self.compute_prefixes = getattr(bs.udm, "compute_prefixes", None) if self.add_array is not None else None

    # -- member items -------------------------------------------------------------------------
    def item(self, ev: Ev, le: int, re: int, wle: int, wre: int) -> Any:
        """What the UDM sees of member ``ev`` (lifetime ``[le, re)``) in window ``[wle, wre)``."""
        if not self.time_sensitive:
            return ev.val
        if self.clip_left and le < wle:
            le = wle
        if self.clip_right and re > wre:
            re = wre
        return Event(le, re, ev.val)

    def ordered(self, members: Iterable[Ev], wle: int, wre: int) -> list[Any]:
        """Members in canonical order (semantics-notes 5): clipped (LE, RE), then canonical JSON."""
        cl, cr = self.clip_left, self.clip_right
        evs = list(members)
        if cl or cr:
            keys = [((wle if cl and e.le < wle else e.le), (wre if cr and e.re > wre else e.re)) for e in evs]
        else:
            keys = [(e.le, e.re) for e in evs]
        pairs = sorted(zip(keys, range(len(evs)), strict=True))
        if len(set(keys)) < len(keys):
            # ties on (LE, RE): order by canonical JSON text of the value
            out = []
            n = len(pairs)
            i = 0
            while i < n:
                j = i + 1
                k = pairs[i][0]
                while j < n and pairs[j][0] == k:
                    j += 1
                if j - i > 1:
                    out.extend(sorted(pairs[i:j], key=lambda p: evs[p[1]].canon()))
                else:
                    out.append(pairs[i])
                i = j
            pairs = out
        if self.time_sensitive:
            return [Event(k[0], k[1], evs[i].val) for k, i in pairs]
        return [evs[i].val for _, i in pairs]

    # -- invocation ----------------------------------------------------------------------------
    def _call(self, fn: Any, args: tuple, window: tuple[int, int] | None, what: str) -> Any:
        try:
            return fn(*args)
        except ContractViolation:
            raise
        except Exception as exc:  # a UDM raising is a contract violation (SEMANTICS §5)
            raise contract(self.label, window, f"{what} raised {type(exc).__name__}", exc) from exc

    def initial_state(self) -> Any:
        return self._call(self.udm.initial_state, (), None, "initial_state")

    def add(self, state: Any, items: list[Any], window: tuple[int, int] | None) -> Any:
        return self._call(self.udm.add, (state, items), window, "add")

    def add_values(self, state: Any, items: list[Any], window: tuple[int, int] | None) -> Any:
        """``add`` of ``items`` to a running state (an invertible UDA's), through the UDA's ``add_array``
        when it reads values and ``items`` are `ARRAY_MIN` or more numbers of one kind
        (`payload.value_array` makes them an int64 or float64 column; with an int among floats, ``add``
        keeps the int an int). Why: a pane's or a window's few hundred values summed in Python cost ~0.4 µs
        each (a tumbling ``avg`` over disordered input spent a quarter of its run there), a column ~35 ns.
        Not for a value-blind UDA (``count``: the column would be made for nothing) nor for merge partials
        (``min``/``max`` take a list at C speed already: the column cost q7 ~5 %)."""
        if self.array_values and len(items) >= ARRAY_MIN:
            col = value_array(items)
            if col.dtype != object:
                return self._call(self.add_array, (state, col), window, "add_array")
        return self.add(state, items, window)

    def remove(self, state: Any, items: list[Any], window: tuple[int, int]) -> Any:
        return self._call(self.udm.remove, (state, items), window, "remove")

    def merge(self, a: Any, b: Any) -> Any:
        return self._call(self.udm.merge, (a, b), None, "merge")

    def compute_items(self, items: list[Any], wle: int, wre: int) -> Any:
        w = (wle, wre)
        if self.time_sensitive:
            return self._call(self.udm.compute, (items, WindowDescriptor(wle, wre)), w, "compute")
        return self._call(self.udm.compute, (items,), w, "compute")

    def compute_state(self, state: Any, wle: int, wre: int) -> Any:
        w = (wle, wre)
        if self.time_sensitive:
            return self._call(self.udm.compute, (state, WindowDescriptor(wle, wre)), w, "compute")
        return self._call(self.udm.compute, (state,), w, "compute")

    # -- outputs -------------------------------------------------------------------------------
    def outputs(self, result: Any, wle: int, wre: int, gfields: dict[str, Any] | None) -> list[tuple]:
        """Output events ``(le, re, payload, canonical_json)`` of one window invocation (canonical_json None:
        plain values, left for `OutputRecord.payload_json` to make when needed)."""
        w = (wle, wre)
        if self.is_uda:
            if isinstance(result, (Event, Iterable)) and not isinstance(result, (str, bytes, list, dict, tuple)):
                raise contract(self.label, w, "an aggregate must return one value, got", result)
            payload = {**gfields, self.alias: result} if gfields else {self.alias: result}
            # plain JSON values cannot fail to encode: their canonical JSON is left to `OutputRecord`,
            # which makes it only if an output diff compares it
            for v in payload.values():
                if type(v) not in PLAIN_TYPES:
                    return [(wle, wre, payload, self._canon(payload, w))]
            return [(wle, wre, payload, None)]
        if result is None or isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
            raise contract(self.label, w, "an operator must return an iterable of outputs, got", result)
        try:
            rows = list(result)
        except ContractViolation:
            raise
        except Exception as exc:
            raise contract(self.label, w, f"compute raised {type(exc).__name__}", exc) from exc
        out: list[tuple] = []
        if not self.time_sensitive:
            for p in rows:
                payload = self._payload(p, gfields, w)
                out.append((wle, wre, payload, self._canon(payload, w)))
            return out
        policy = self.policy
        for r in rows:
            if isinstance(r, Event):
                le, re, p = r.le, r.re, r.payload
            elif isinstance(r, tuple) and len(r) == 3:
                le, re, p = r
                if not (_is_time(le) and _is_time(re)):
                    raise contract(self.label, w, "output lifetime must be integer ticks, got", r)
                if le >= INF or re <= le:
                    raise contract(self.label, w, "output lifetime needs a finite LE and LE < RE, got", r)
                if re > INF:
                    re = INF
            else:
                raise contract(self.label, w, "a time-sensitive operator must yield Event or (le, re, payload), got",
                               r)
            if policy == "window":
                le, re = wle, wre
            elif policy == "clip":
                if le < wle:
                    le = wle
                if re > wre:
                    re = wre
                if re <= le:
                    continue
            elif le < wle:  # unaltered / time_bound
                raise contract(self.label, w, f"output policy {policy!r} forbids an output starting before the "
                                              f"window (LE < {wle}), got", (le, re, p))
            payload = self._payload(p, gfields, w)
            out.append((le, re, payload, self._canon(payload, w)))
        return out

    def _payload(self, p: Any, gfields: dict[str, Any] | None, w: tuple[int, int]) -> dict[str, Any]:
        if isinstance(p, Mapping):
            d = dict(p)
        elif isinstance(p, (Event, tuple)) and not self.time_sensitive:
            raise contract(self.label, w, "a time-insensitive operator must return payloads, got", p)
        else:
            d = {"value": p}
        if gfields:
            d.update(gfields)
        return d

    def _canon(self, payload: dict[str, Any], w: tuple[int, int]) -> str:
        try:
            return canonical_json(payload)
        except (TypeError, ValueError) as exc:
            raise contract(self.label, w, f"output is not JSON-serializable ({exc})", payload) from None
