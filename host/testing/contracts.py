"""UDM contract checks (like river's ``checks``): run against any UDM class, first- or third-party.

`run_contract_checks(MyUDM)` returns one `CheckResult` per check; `assert_contracts(MyUDM)` raises an
AssertionError listing every failed check with the seed and a minimal reproducer. The checks:

``manifest``
    The manifest matches the implementation (the host's load-time rules) and is truthful at run time:
    ``compute`` works on inputs of the declared ``input_type`` and returns the declared ``output_type``,
    JSON-serializable, with valid lifetimes for time-sensitive operators.
``params_roundtrip``
    The parameter model round-trips through ``model_dump``/JSON and back to an equal model (and an
    equally behaving UDM), and has a JSON schema.
``deterministic``
    The same members give the same output (fresh instances, deep-copied members), and ``compute`` does
    not mutate its input. Skipped for UDMs declaring ``deterministic=False``.
``physical_reordering``
    A query using the UDM has the same output CHT over many physical streams of one logical stream
    (different order, retractions, CTIs), evaluated through the reference oracle.
``incremental``
    For incremental UDMs: any sequence of ``add``/``remove`` deltas, in any order and chunking, that
    leaves the members of a window gives what ``initial_state`` + one ``add`` of all members gives (only
    ``add`` deltas for an algebraic UDA without ``remove``, whose states the host rebuilds instead).
``algebraic_merge``
    For algebraic UDMs: ``merge`` is commutative and associative, has the initial state as identity,
    ``compute(merge(a, b)) == compute(state of the union)``, and does not mutate its arguments.
``state_pickle``
    For incremental UDMs: a state survives ``pickle`` (the engine's snapshot/restore) and the restored
    state goes on to give the same results.
``batch_forms``
    For UDMs declaring a vectorized form (`udm.sdk.UDF` ``compute_batch``; `udm.sdk.IncrementalUDA`
    ``add_array`` / ``add_batch`` / ``compute_slices`` / ``compute_prefixes`` / ``compute_ranges``): over
    numeric columns (int64 or float64, what the engine hands them), the batch form gives what the scalar form
    gives, row by row / slice by slice, from fresh and from non-empty states; ``compute_slices`` gives each
    slice's value from a fresh state, of the same JSON kind (int / float) as ``compute``'s for a column of one
    kind (or raises where ``compute`` does); ``compute_prefixes`` gives each prefix's value from a state
    already holding values, and leaves that state as it was; ``compute_ranges`` gives each of overlapping
    sliding ranges' values from a fresh state. Skipped for UDMs without one, or whose example inputs are not numbers.
``time_bound``
    For UDMs declaring ``time_bound``: when one element ``x`` (an insert, a shortening or extending
    retraction, a full retraction) changes the members, every output that changes has ``LE >= sync(x)``.
``error_bound``
    For approximate aggregates (a manifest ``error_bound``, `udm.sdk.ErrorBound`): on random data of up to
    ~30,000 members (numbers or strings, as the input type allows; few and many repeats), folded by one
    ``add``, by chunks, or as merged chunk states, the value is within the declared bound of the exact
    distinct count / quantile rank / frequencies — in all but the misses its declared confidence allows
    (`estimates.allowed_misses`, a one-in-a-million chance of failing a correct estimator).
``value_blind``
    For UDAs declaring ``value_blind`` (`udm.sdk.Properties`: the engine hands them a placeholder for each
    member's value, never a payload): the value over random members equals the value over the same members
    with each value replaced by ``0`` (the engine's placeholder) and by ``None``; its column forms give over
    a zero int64 column what they give over random numbers. A UDA that reads its values fails it.

Span UDOs (`udm.sdk.SpanUDO`, `udm.sdk.TimeSensitiveSpanUDO`: a ``flat_map`` step runs them once per
event) are checked the same way on one event at a time: ``manifest`` (outputs are payload objects; a
time-sensitive one's lifetimes lie inside the event's; a `udm.sdk.MalformedPayload` refusal is allowed, but
not of every example), ``params_roundtrip``, ``deterministic``, ``physical_reordering`` (a ``flat_map``
query through the oracle) and ``time_bound`` (a retraction that shortens, extends or deletes the event
changes no output starting before its sync time); the others do not apply.

Example inputs: each check draws members from a pool that fits the manifest's ``input_type`` — numbers
for ``float``/``int``/``any``, payload dicts ``{"type": "A"|"B"|"C", "value": number}`` for
``payload``/``event``/``dict``, strings for ``str``. A UDM needing other inputs supplies them, first match
wins:

1. ``run_contract_checks(MyUDM, inputs=[...])`` (or ``udm_contracts(MyUDM, inputs=[...])`` in pytest):
   a list of example input values (what the UDM receives after the query's input mapping), or a
   callable ``inputs(rng) -> list``;
2. a classmethod on the UDM: ``example_payloads(cls, rng: random.Random) -> list``.

Parameters: ``params={...}`` instantiates the UDM with those parameters (default: the model's defaults).
"""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from udm.host.catalog import CatalogEntry
from udm.host.errors import ContractViolation
from udm.host.input_types import input_type
from udm.host.model.graph import resolve
from udm.host.model.plan import BoundQuery, BoundStep
from udm.host.model.spec import (
    CountByEnd,
    CountByStart,
    FlatMapStep,
    Hopping,
    MapStep,
    QuerySpec,
    Rows,
    Session,
    Snapshot,
    Tumbling,
    WindowStep,
)
from udm.host.temporal.elements import Element, canonical_json
from udm.host.validation import check_udm
from udm.sdk import INF, UDM, Event, MalformedPayload, Manifest, WindowDescriptor

from .cht import CHT, format_row, stream_text
from .estimates import allowed_misses, estimate_errors, random_members
from .generator import StreamSpec, logical_events, physical_variants, physicalize
from .oracle import oracle
from .verifier import payloads_close, verify

__all__ = ["CHECKS", "CheckResult", "assert_contracts", "format_failures", "run_contract_checks"]

CHECKS: tuple[str, ...] = ("manifest", "params_roundtrip", "deterministic", "physical_reordering", "incremental",
                           "algebraic_merge", "state_pickle", "batch_forms", "time_bound", "error_bound", "value_blind")


@dataclass
class CheckResult:
    """One contract check on one UDM. ``skipped`` checks (not applicable) count as passed."""

    name: str
    passed: bool
    detail: str = ""
    seed: int = 0
    reproducer: str = ""
    skipped: bool = False

    def __str__(self) -> str:
        status = "skip" if self.skipped else ("pass" if self.passed else "FAIL")
        return f"{self.name}: {status}{' — ' + self.detail if self.detail else ''}"


class _Fail(Exception):
    def __init__(self, detail: str, reproducer: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.reproducer = reproducer


class _Skip(Exception):
    pass


# ---------------------------------------------------------------------------------------------------
# example inputs

_NUMERIC = ("float", "int", "number", "numeric", "decimal", "real", "any")
_DICTISH = ("dict", "mapping", "payload", "event", "object", "json")


def _input_family(input_type: str) -> str:
    t = input_type.lower()
    if any(w in t for w in _DICTISH):
        return "dict"
    if "str" in t:
        return "str"
    if "bool" in t:
        return "bool"
    if "int" in t and "float" not in t:
        return "int"
    return "number"


def _default_value(family: str, rng: random.Random) -> Any:
    if family == "dict":
        value: Any = rng.randint(0, 20) if rng.random() < 0.5 else round(rng.uniform(0, 20), 3)
        return {"type": rng.choice(("A", "B", "C")), "value": value}
    if family == "str":
        return rng.choice(("a", "b", "c", "abc", ""))
    if family == "bool":
        return rng.random() < 0.5
    if family == "int":
        return rng.randint(-5, 20)
    return rng.randint(-5, 20) if rng.random() < 0.5 else round(rng.uniform(-10, 10), 3)


def _ts(x: int) -> str:
    return "inf" if x >= INF else str(x)


def _show(v: Any) -> str:
    try:
        return canonical_json(v)
    except (TypeError, ValueError):
        return repr(v)


def _member_text(m: Any) -> str:
    if isinstance(m, Event):
        return f"[{_ts(m.le)}, {_ts(m.re)}) {_show(m.payload)}"
    return _show(m)


def _normal(x: Any) -> Any:
    """A comparable form of a value: JSON round trip where possible."""
    try:
        return json.loads(canonical_json(x))
    except (TypeError, ValueError):
        return x


class _Harness:
    """What every check needs to know about one UDM: how to build it, feed it and read its output."""

    def __init__(self, cls: type, params: Mapping[str, Any] | None, inputs: Any,
                 rel_tol: float, abs_tol: float) -> None:
        self.cls = cls
        man = getattr(cls, "manifest", None)
        if not isinstance(man, Manifest):
            raise _Fail("no manifest: decorate the class with @udm(...)")
        self.man: Manifest = man
        self.props = man.properties
        self.kind = man.kind
        #: a span UDO: called on one event (its payload, or the `Event` when time-sensitive), no window
        self.span = man.span
        self.params = dict(params or {})
        self.inputs = inputs
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol
        self.label = f"{man.name} {man.version}"
        self.family = _input_family(man.input_type)
        #: an algebraic UDA may leave out remove (`udm.sdk.IncrementalUDA`): the checks then only add
        self.can_remove = callable(getattr(cls, "remove", None))
        if inputs is None and callable(getattr(cls, "example_payloads", None)):
            self.inputs = cls.example_payloads  # type: ignore[attr-defined]
        self._pool_cache: dict[int, list[Any]] = {}

    # -- building --------------------------------------------------------------------------------
    def params_model(self) -> Any:
        return self.man.params.model_validate(self.params)

    def new(self) -> Any:
        try:
            return self.cls(self.params_model())
        except Exception as exc:
            raise _Fail(f"cannot instantiate with parameters {self.params!r}: {type(exc).__name__}: {exc}") from exc

    # -- inputs ----------------------------------------------------------------------------------
    def values(self, rng: random.Random, k: int) -> list[Any]:
        src = self.inputs
        if src is None:
            return [_default_value(self.family, rng) for _ in range(k)]
        pool = list(src(rng)) if callable(src) else list(src)
        if not pool:
            raise _Fail("the example inputs are empty")
        return [copy.deepcopy(rng.choice(pool)) for _ in range(k)]

    def span_arg(self, rng: random.Random) -> Any:
        """What a span UDO is called with: a payload object (a non-object example ``v`` as ``{"value": v}``),
        in an `Event` with a random lifetime when time-sensitive."""
        v = self.values(rng, 1)[0]
        payload = dict(v) if isinstance(v, Mapping) else {"value": v}
        if not self.props.time_sensitive:
            return payload
        le = rng.randint(0, 20)
        return Event(le, INF if rng.random() < 0.08 else le + rng.randint(1, 15), payload)

    def case(self, rng: random.Random, most: int) -> tuple[WindowDescriptor | None, str | None, list[Any]]:
        """One random call: (window, clip, members) — a UDF's arguments or a span UDO's one event
        (no window), else up to ``most`` members of a random window."""
        if self.kind == "udf":
            return None, None, self.values(rng, len(self.udf_args()))
        if self.span:
            return None, None, [self.span_arg(rng)]
        w = self.window(rng)
        clip = self.clip(rng)
        return w, clip, self.members(rng, rng.randint(1, most), w, clip)

    def dict_inputs(self) -> bool:
        if self.inputs is None:
            return self.family == "dict"
        probe = self.values(random.Random(0), 3)
        return all(isinstance(v, Mapping) for v in probe)

    def window(self, rng: random.Random) -> WindowDescriptor:
        le = rng.randint(0, 20)
        if self.props.time_sensitive and rng.random() < 0.1:
            return WindowDescriptor(le, INF)
        return WindowDescriptor(le, le + rng.randint(1, 12))

    def clip(self, rng: random.Random) -> str:
        return rng.choice(list(self.man.allowed_clip) or ["none"])

    def event(self, rng: random.Random, w: WindowDescriptor, value: Any) -> tuple[int, int, Any]:
        """An unclipped lifetime overlapping ``w``."""
        hi = w.re - 1 if w.re < INF else w.le + 25
        le = rng.randint(w.le - 6, hi)
        lo_re = max(le + 1, w.le + 1)
        if rng.random() < 0.08:
            return le, INF, value
        return le, rng.randint(lo_re, lo_re + 10), value

    @staticmethod
    def clipped(ev: tuple[int, int, Any], w: WindowDescriptor, clip: str) -> Event:
        le, re, v = ev
        if clip in ("left", "full"):
            le = max(le, w.le)
        if clip in ("right", "full"):
            re = min(re, w.re)
        return Event(le, re, v)

    def members(self, rng: random.Random, k: int, w: WindowDescriptor, clip: str) -> list[Any]:
        """``k`` members in canonical order: Events (time-sensitive) or input values."""
        vals = self.values(rng, k)
        if self.props.time_sensitive:
            evs = [self.clipped(self.event(rng, w, v), w, clip) for v in vals]
            return self.canonical(evs)
        # time-insensitive UDMs see values; their canonical order comes from lifetimes we do not model
        return vals

    @staticmethod
    def canonical(evs: list[Event]) -> list[Event]:
        return sorted(evs, key=lambda e: (e.le, e.re, _show(e.payload)))

    # -- running ---------------------------------------------------------------------------------
    def udf_args(self) -> list[str]:
        sig = inspect.signature(self.cls.compute)  # type: ignore[attr-defined]
        names = [p.name for p in list(sig.parameters.values())[1:]
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty]
        return names or ["x"]

    def compute(self, udm: Any, members: list[Any], w: WindowDescriptor | None) -> Any:
        """The non-incremental definition: one call (or one add of everything), raw result (on a copy)."""
        return self.call(udm, copy.deepcopy(members), w)

    def call(self, udm: Any, members: list[Any], w: WindowDescriptor | None) -> Any:
        """`compute` on ``members`` themselves (a UDM mutating its input is caught by comparing them)."""
        if self.span:
            return udm.compute(members[0])
        if self.kind == "udf":
            names = self.udf_args()
            return udm.compute(**dict(zip(names, members, strict=False)))
        if self.props.incremental:
            st = udm.add(udm.initial_state(), members)
            return self.finish(udm, st, w)
        return udm.compute(members, w) if self.props.time_sensitive else udm.compute(members)

    def finish(self, udm: Any, state: Any, w: WindowDescriptor | None) -> Any:
        return udm.compute(state, w) if self.props.time_sensitive else udm.compute(state)

    def normal(self, result: Any) -> Any:
        """Comparable output: UDA/UDF value; UDO outputs as a sorted multiset."""
        if self.kind != "udo":
            return _normal(result)
        rows = []
        for item in list(result):
            if isinstance(item, Event):
                rows.append([item.le, item.re, _normal(item.payload)])
            elif isinstance(item, (tuple, list)) and len(item) == 3 and self.props.time_sensitive:
                rows.append([item[0], item[1], _normal(item[2])])
            else:
                rows.append(_normal(item))
        return sorted(rows, key=_show)

    def same(self, a: Any, b: Any) -> bool:
        return payloads_close(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    def case_text(self, members: list[Any], w: WindowDescriptor | None, clip: str | None = None) -> str:
        head = f"window [{_ts(w.le)}, {_ts(w.re)})" if w is not None else "call"
        if clip:
            head += f" clip={clip}"
        if self.params:
            head += f" params={_show(self.params)}"
        what = "arguments:" if self.kind == "udf" else "event:" if self.span else "members (canonical order):"
        lines = [f"{self.label}: {head}", what]
        lines += [f"  {_member_text(m)}" for m in members]
        return "\n".join(lines)


def _shrink(items: list[Any], still_fails: Callable[[list[Any]], bool], budget: int = 60) -> list[Any]:
    """Greedy one-at-a-time removal while the failure persists (a small delta debugging)."""
    cur = list(items)
    changed = True
    while changed and budget > 0:
        changed = False
        for i in range(len(cur)):
            if budget <= 0 or len(cur) <= 1:
                break
            cand = cur[:i] + cur[i + 1:]
            budget -= 1
            try:
                bad = still_fails(cand)
            except Exception:
                bad = False
            if bad:
                cur = cand
                changed = True
                break
    return cur


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------------
# the checks


def _check_manifest(h: _Harness, rng: random.Random, examples: int) -> str:
    problems = check_udm(h.cls)
    if problems:
        raise _Fail("manifest does not match the implementation: " + "; ".join(problems))
    udm = h.new()
    out_t = h.man.output_type.lower()
    tries = max(3, examples // 3)
    refused = 0
    for _ in range(tries):
        w, clip, members = h.case(rng, 6)

        def problem(ms: list[Any], w: WindowDescriptor | None = w) -> str | None:
            try:
                res = h.compute(udm, ms, w)
                if h.kind == "udo":
                    res = list(res)
            except MalformedPayload:
                if h.span:
                    return None  # a refusal (a dead letter of the step), counted below
                raise
            except Exception as exc:
                return (f"compute raised {_err(exc)} on inputs of its declared input_type "
                        f"{h.man.input_type!r} (supply example inputs if it needs others)")
            return _span_output_problem(h, res, ms[0]) if h.span else _output_problem(h, res, out_t, w)

        try:
            p = problem(members)
        except MalformedPayload as exc:
            p = (f"compute raised {_err(exc)}, which only a span UDO may raise (its event is then "
                 f"dead-lettered); a {h.kind.upper()} reports bad input through its declared input_type")
        if p:
            small = members if h.kind == "udf" or h.span else _shrink(members, lambda ms: problem(ms) is not None)
            raise _Fail(p, h.case_text(small, w, clip))
        if h.span and _refuses(h, udm, members[0]):
            refused += 1
    if refused == tries:
        raise _Fail(f"compute refused every example input (MalformedPayload) of its declared input_type "
                    f"{h.man.input_type!r}: supply example inputs it accepts (example_payloads or inputs=...)")
    return "manifest consistent; outputs match output_type " + repr(h.man.output_type)


def _refuses(h: _Harness, udm: Any, arg: Any) -> bool:
    try:
        list(h.compute(udm, [arg], None))
    except MalformedPayload:
        return True
    except Exception:
        return False
    return False


def _timed(item: Any) -> tuple[Any, Any, Any] | None:
    """A time-sensitive operator's output as ``(le, re, payload)`` (an `Event` or a triple), else None."""
    if isinstance(item, Event):
        return item.le, item.re, item.payload
    if isinstance(item, (tuple, list)) and len(item) == 3:
        return item[0], item[1], item[2]
    return None


def _lifetime_ok(le: Any, re: Any) -> bool:
    return (isinstance(le, int) and isinstance(re, int) and not isinstance(le, bool) and not isinstance(re, bool)
            and le < re and le < INF)


def _json_problem(payload: Any) -> str | None:
    try:
        canonical_json(payload)
    except (TypeError, ValueError):
        return f"yielded {payload!r}, which is not JSON-serializable"
    return None


def _span_output_problem(h: _Harness, res: Any, arg: Any) -> str | None:
    """A span UDO's outputs for one event: payload objects, JSON; a time-sensitive one's lifetimes inside
    the event's (SEMANTICS §10)."""
    for item in res:
        payload = item
        if h.props.time_sensitive:
            t = _timed(item)
            if t is None:
                return f"a time-sensitive span UDO yields Event or (le, re, payload), got {item!r}"
            le, re, payload = t
            if not _lifetime_ok(le, re) or not arg.le <= le < re <= arg.re:
                return (f"an output lifetime must lie inside the event's [{_ts(arg.le)}, {_ts(arg.re)}) with "
                        f"le < re, got {item!r}")
        if not isinstance(payload, Mapping):
            return f"an output payload must be an object, got {payload!r}"
        if (bad := _json_problem(payload)) is not None:
            return bad
    return None


def _type_ok(value: Any, t: str) -> bool:
    if t in ("int", "integer"):
        return isinstance(value, int) and not isinstance(value, bool)
    if t in ("float", "number", "numeric", "real"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "bool":
        return isinstance(value, bool)
    if t in ("str", "string"):
        return isinstance(value, str)
    if t in ("payload", "dict", "mapping", "object", "event"):
        return isinstance(value, Mapping)
    return True  # "any" and types the kit does not know


def _output_problem(h: _Harness, res: Any, out_t: str, w: WindowDescriptor | None) -> str | None:
    if h.kind in ("uda", "udf"):
        try:
            canonical_json(res)
        except (TypeError, ValueError):
            return f"returned {res!r}, which is not JSON-serializable"
        if not _type_ok(res, out_t):
            return f"declares output_type {h.man.output_type!r} but returned {res!r} ({type(res).__name__})"
        return None
    for item in res:
        if h.props.time_sensitive:
            t = _timed(item)
            if t is None:
                return f"a time-sensitive UDO yields Event or (le, re, payload), got {item!r}"
            le, re, payload = t
            if not _lifetime_ok(le, re):
                return f"output lifetime must be integer ticks with le < re, got {item!r}"
            if out_t in ("event", "payload") and not isinstance(payload, Mapping):
                return f"declares output_type {h.man.output_type!r} but yielded payload {payload!r}"
        else:
            payload = item
            if not _type_ok(payload, out_t):
                return f"declares output_type {h.man.output_type!r} but yielded {payload!r}"
        if (bad := _json_problem(payload)) is not None:
            return bad
    return None


def _check_params(h: _Harness, rng: random.Random, examples: int) -> str:
    model = h.man.params
    try:
        p = h.params_model()
    except Exception as exc:
        raise _Fail(f"parameters {h.params!r} do not validate: {_err(exc)}") from exc
    try:
        dumped = p.model_dump(mode="json")
        text = json.dumps(dumped)
    except Exception as exc:
        raise _Fail(f"{model.__name__} does not serialize to JSON: {_err(exc)}") from exc
    try:
        back = model.model_validate(json.loads(text))
        back_json = model.model_validate_json(p.model_dump_json())
    except Exception as exc:
        raise _Fail(f"{model.__name__} does not validate its own dump {text}: {_err(exc)}",
                    f"{model.__name__}({text})") from exc
    for label, other in (("model_dump", back), ("model_dump_json", back_json)):
        if other != p:
            raise _Fail(f"{model.__name__} does not round-trip through {label}: {p!r} became {other!r}",
                        f"{model.__name__}.model_validate({text}) != {p!r}")
    try:
        model.model_json_schema()
    except Exception as exc:
        raise _Fail(f"{model.__name__} has no JSON schema (udm info needs one): {_err(exc)}") from exc
    # the round-tripped parameters make an equally behaving UDM
    try:
        u1, u2 = h.cls(p), h.cls(back)
    except Exception as exc:
        raise _Fail(f"cannot instantiate from round-tripped parameters: {_err(exc)}") from exc
    for _ in range(max(2, examples // 10)):
        w, clip, ms = h.case(rng, 6)
        try:
            a, b = h.normal(h.compute(u1, ms, w)), h.normal(h.compute(u2, ms, w))
            if not h.same(a, h.normal(h.compute(u1, ms, w))):
                continue  # nondeterministic: the deterministic check reports it
        except Exception:
            continue  # the manifest check reports compute errors
        if not h.same(a, b):
            raise _Fail(f"a UDM built from the round-tripped parameters {text} behaves differently: "
                        f"{_show(a)} != {_show(b)}", h.case_text(ms, w, clip))
    return f"{model.__name__} round-trips ({text})"


def _check_deterministic(h: _Harness, rng: random.Random, examples: int) -> str:
    if not h.props.deterministic:
        raise _Skip("declared nondeterministic")
    for _ in range(examples):
        w, clip, ms = h.case(rng, 8)

        def verdict(ms: list[Any], w: WindowDescriptor | None = w) -> str | None:
            before = copy.deepcopy(ms)
            udm = h.new()
            try:
                r1 = h.normal(h.call(udm, ms, w))
            except Exception:
                return None  # reported by the manifest check
            if _normal(ms) != _normal(before) or ms != before:
                return "compute/add mutated the members it was given"
            results = [r1]
            for _ in range(2):
                try:
                    results.append(h.normal(h.compute(h.new(), ms, w)))
                except Exception as exc:
                    return f"a second call on the same members raised {_err(exc)}"
            for r in results[1:]:
                if not h.same(results[0], r):
                    return f"the same members gave different outputs: {_show(results[0])} then {_show(r)}"
            return None

        p = verdict(ms)
        if p:
            small = ms if h.kind == "udf" or h.span else _shrink(ms, lambda xs: verdict(xs) is not None, budget=20)
            raise _Fail(p, h.case_text(small, w, clip))
    return f"{examples} examples, same output every time, members untouched"


def _query_for(h: _Harness, rng: random.Random, dict_in: bool) -> tuple[QuerySpec, BoundQuery]:
    if h.kind == "udf":
        names = h.udf_args()
        step: Any = MapStep(udf=h.man.name, args={n: f"v{i}" for i, n in enumerate(names)}, **{"as": "out"})
    elif h.span:
        step = FlatMapStep(udm=h.man.name, params=h.params)
    else:
        window = rng.choice([
            Tumbling(size=rng.randint(2, 8), offset=rng.randint(0, 3)),
            Hopping(size=rng.randint(3, 8), hop=rng.randint(1, 5), offset=rng.randint(0, 2)),
            Hopping(size=3, hop=7, offset=1),
            Snapshot(),
            CountByStart(n=rng.randint(1, 3), hop=rng.randint(1, 2)),
            CountByEnd(n=rng.randint(1, 3), hop=rng.randint(1, 2)),
            Rows(n=rng.randint(1, 4), slide=rng.randint(1, 3), partial=rng.random() < 0.3),
            Session(gap=rng.randint(0, 4)),
        ])
        clip = h.clip(rng)
        outputs = list(h.man.allowed_output) or ["window"]
        output = rng.choice(outputs)
        if output in ("unaltered", "time_bound"):
            lefts = [c for c in h.man.allowed_clip if c in ("left", "full")]
            if lefts:
                clip = rng.choice(lefts)
            else:
                output = "window"
        kw: dict[str, Any] = {"window": window, "udm": h.man.name, "clip": clip, "output": output,
                              "params": h.params}
        if not dict_in:
            kw["input"] = "v"
            kw["group_by"] = ["g"] if rng.random() < 0.5 else []
        step = WindowStep(**kw)
    spec = QuerySpec(steps=[step])
    entry = CatalogEntry(h.cls, plugin="<contract-check>", distribution="<contract-check>")
    return spec, BoundQuery(spec, (BoundStep(step, entry, h.new(), "s0"),), resolve(spec))


def _check_reordering(h: _Harness, rng: random.Random, examples: int, seed: int) -> str:
    if not h.props.deterministic:
        raise _Skip("declared nondeterministic")
    dict_in = h.kind != "udf" and not h.span and h.dict_inputs()
    streams = max(2, examples // 10)
    for s in range(streams):
        spec, bq = _query_for(h, rng, dict_in)
        sspec = StreamSpec(events=rng.randint(4, 12), duration=rng.choice(["point", "short", "long", "mixed"]),
                           overlap=rng.choice(["high", "medium", "low"]), groups=2)
        base = logical_events(sspec, rng)
        window = getattr(spec.steps[0], "window", None)
        if isinstance(window, (Tumbling, Hopping)):
            # endless events on tumbling/hopping windows are cut at the largest time the *physical*
            # stream reached (semantics-notes 2), which legitimately differs between histories
            base = [(le, re if re < INF else le + 50, p) for le, re, p in base]
        events: list[tuple[int, int, dict[str, Any]]] = []
        for le, re, p in base:
            if h.kind == "udf":
                vals = h.values(rng, len(h.udf_args()))
                payload = {"g": p["g"], **{f"v{i}": v for i, v in enumerate(vals)}}
            elif h.span:
                arg = h.span_arg(rng)
                payload = arg.payload if isinstance(arg, Event) else arg
            elif dict_in:
                payload = dict(h.values(rng, 1)[0])
            else:
                payload = {"g": p["g"], "v": h.values(rng, 1)[0]}
            events.append((le, re, payload))

        def failing(evs: list[tuple[int, int, dict[str, Any]]], tag: int = s, bq: BoundQuery = bq
                    ) -> tuple[str, list[Element], str] | None:
            stream = physicalize(evs, random.Random(f"{seed}:{tag}"), disorder="in_order", cti="regular")
            try:
                want = oracle(bq, stream)
            except ContractViolation as exc:
                return f"the UDM broke its contract on an in-order stream: {exc}", stream, ""
            for variant in physical_variants(stream, 3, seed=seed * 1000 + tag):
                try:
                    got = oracle(bq, variant)
                except ContractViolation as exc:
                    return f"the UDM broke its contract on a reordered stream: {exc}", variant, ""
                v = verify(got, want, rel_tol=0.0, abs_tol=0.0)
                if not v.ok:
                    first = (v.missing or v.unexpected)[0]
                    return (f"the output CHT depends on the physical history of one logical stream "
                            f"({len(v.missing)} row(s) differ, e.g. {format_row(first)})", variant, v.diff)
            return None

        bad = failing(events)
        if bad:
            small = _shrink(events, lambda evs: failing(evs) is not None, budget=25)
            again = failing(small) or bad
            repro = (f"{h.label}: query {json.dumps(spec.to_json_dict(), separators=(',', ':'))}\n"
                     f"logical stream (CHT):\n{_indent(CHT.from_events(small).to_text())}\n"
                     f"physical stream that differs:\n{_indent(stream_text(again[1]))}"
                     + (f"\noutput of that stream vs the first history's:\n{_indent(again[2])}" if again[2] else ""))
            raise _Fail(again[0], repro)
    return f"{streams} logical streams x 4 physical histories, same output CHT"


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def _add_chunks(rng: random.Random, items: list[Any]) -> list[tuple[str, list[Any]]]:
    """``items`` shuffled and added in chunks of 1 to 3."""
    shuffled = rng.sample(items, len(items))
    ops: list[tuple[str, list[Any]]] = []
    i = 0
    while i < len(shuffled):
        n = rng.randint(1, 3)
        ops.append(("add", shuffled[i:i + n]))
        i += n
    return ops


def _inc_paths(h: _Harness, rng: random.Random, members: list[Any], extras: list[Any]
               ) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
    """Delta sequences that all end with exactly ``members`` in the state (adds only for a UDA without
    ``remove``: the host rebuilds such a state from the remaining members instead)."""
    paths = []
    one = [("add", [m]) for m in rng.sample(members, len(members))]
    paths.append(("one at a time, arrival order", one))
    if not h.can_remove:
        paths.append(("chunks, another order", _add_chunks(rng, members)))
        return paths
    ops = _add_chunks(rng, members + extras)
    if extras:
        ops.append(("remove", rng.sample(extras, len(extras))))
    paths.append(("chunks, extras added then removed", ops))
    if members:
        churn = [("add", list(members)), ("remove", rng.sample(members, len(members))), ("add", list(members))]
        paths.append(("all added, all removed, added again", churn))
    return paths


def _run_path(h: _Harness, udm: Any, ops: list[tuple[str, list[Any]]], w: WindowDescriptor | None) -> Any:
    st = udm.initial_state()
    for op, delta in ops:
        delta = copy.deepcopy(delta)
        st = udm.add(st, delta) if op == "add" else udm.remove(st, delta)
    return h.normal(h.finish(udm, st, w))


def _ops_text(ops: list[tuple[str, list[Any]]]) -> str:
    return "\n".join(f"  {op} [{', '.join(_member_text(m) for m in delta)}]" for op, delta in ops)


def _check_incremental(h: _Harness, rng: random.Random, examples: int) -> str:
    if not h.props.incremental:
        raise _Skip("not incremental")
    for _ in range(examples):
        w = h.window(rng)
        clip = h.clip(rng)
        members = h.members(rng, rng.randint(1, 8), w, clip)
        extras = h.members(rng, rng.randint(0, 4), w, clip)

        def verdict(ms: list[Any], xs: list[Any] = extras, w: WindowDescriptor = w) -> tuple[str, str] | None:
            try:
                ref = h.normal(h.compute(h.new(), ms, w))
            except Exception:
                return None  # the manifest check reports it
            prng = random.Random(len(ms) * 7919 + len(xs))
            for label, ops in _inc_paths(h, prng, ms, xs):
                try:
                    got = _run_path(h, h.new(), ops, w)
                except Exception as exc:
                    return f"incremental path '{label}' raised {_err(exc)}", _ops_text(ops)
                if not h.same(ref, got):
                    return (f"incremental result {_show(got)} != non-incremental {_show(ref)} "
                            f"(path: {label})", _ops_text(ops))
            return None

        bad = verdict(members)
        if bad:
            small = _shrink(members, lambda ms: verdict(ms) is not None)
            small_x = (_shrink(extras, lambda xs, ms=small: verdict(ms, xs) is not None)  # type: ignore[misc]
                       if extras else extras)
            again = verdict(small, small_x) or bad
            raise _Fail(again[0], h.case_text(small, w, clip) + "\ndeltas:\n" + again[1])
    return f"{examples} random windows, {'3 delta orders' if h.can_remove else '2 orders of adds'} each"


def _check_merge(h: _Harness, rng: random.Random, examples: int) -> str:
    if not h.props.algebraic:
        raise _Skip("not algebraic")
    if not callable(getattr(h.cls, "merge", None)):
        raise _Fail("declared algebraic but has no merge(a, b)")
    for _ in range(examples):
        w = h.window(rng)
        clip = h.clip(rng)
        a, b, c = (h.members(rng, rng.randint(1, 5), w, clip) for _ in range(3))

        def verdict(a: list[Any], b: list[Any], c: list[Any], w: WindowDescriptor = w) -> str | None:
            udm = h.new()

            def st(ms: list[Any]) -> Any:
                return udm.add(udm.initial_state(), copy.deepcopy(ms))

            def out(state: Any) -> Any:
                return h.normal(h.finish(udm, state, w))

            try:
                ref_ab = h.normal(h.compute(h.new(), a + b, w))
                ab, ba = out(udm.merge(st(a), st(b))), out(udm.merge(st(b), st(a)))
                if not h.same(ab, ba):
                    return f"merge is not commutative: compute(merge(a, b)) = {_show(ab)}, merge(b, a) = {_show(ba)}"
                left = out(udm.merge(udm.merge(st(a), st(b)), st(c)))
                right = out(udm.merge(st(a), udm.merge(st(b), st(c))))
                if not h.same(left, right):
                    return (f"merge is not associative: merge(merge(a, b), c) = {_show(left)}, "
                            f"merge(a, merge(b, c)) = {_show(right)}")
                alone = out(st(a))
                for label, m in (("merge(initial, a)", udm.merge(udm.initial_state(), st(a))),
                                 ("merge(a, initial)", udm.merge(st(a), udm.initial_state()))):
                    if not h.same(out(m), alone):
                        return f"the initial state is not an identity: {label} = {_show(out(m))}, a = {_show(alone)}"
                if not h.same(ab, ref_ab):
                    return f"compute(merge(a, b)) = {_show(ab)} but compute(state of a+b) = {_show(ref_ab)}"
                sa, sb = st(a), st(b)
                before = (out(copy.deepcopy(sa)), out(copy.deepcopy(sb)))
                udm.merge(sa, sb)
                after = (out(sa), out(sb))
                if not (h.same(before[0], after[0]) and h.same(before[1], after[1])):
                    return "merge mutated its arguments (the engine reuses pane states across windows)"
            except Exception as exc:
                return f"merge/compute raised {_err(exc)}"
            return None

        bad = verdict(a, b, c)
        if bad:
            a2 = _shrink(a, lambda x, b=b, c=c: verdict(x, b, c) is not None, budget=20)  # type: ignore[misc]
            b2 = _shrink(b, lambda x, a=a2, c=c: verdict(a, x, c) is not None, budget=20)  # type: ignore[misc]
            c2 = _shrink(c, lambda x, a=a2, b=b2: verdict(a, b, x) is not None, budget=20)  # type: ignore[misc]
            msg = verdict(a2, b2, c2) or bad
            repro = (f"{h.label}: window [{_ts(w.le)}, {_ts(w.re)}) clip={clip}\n"
                     + "\n".join(f"{n} = [{', '.join(_member_text(m) for m in xs)}]"
                                 for n, xs in (("a", a2), ("b", b2), ("c", c2))))
            raise _Fail(msg, repro)
    return f"{examples} random triples: commutative, associative, identity, union"


def _check_pickle(h: _Harness, rng: random.Random, examples: int) -> str:
    if not h.props.incremental:
        raise _Skip("not incremental (the host holds the members, not the UDM)")
    init: Any = "(initial_state() raised)"
    try:
        init = h.new().initial_state()
        pickle.loads(pickle.dumps(init, protocol=pickle.HIGHEST_PROTOCOL))
    except _Fail:
        raise
    except Exception as exc:
        raise _Fail(f"the initial state does not survive pickling (engine snapshot/restore): {_err(exc)}",
                    f"{h.label}: pickle.dumps(initial_state()) with initial_state() = {init!r}") from exc
    for _ in range(max(3, examples // 2)):
        w = h.window(rng)
        clip = h.clip(rng)
        first = h.members(rng, rng.randint(0, 5), w, clip)
        second = h.members(rng, rng.randint(1, 5), w, clip)
        gone = first[: rng.randint(0, len(first))]
        udm = h.new()
        try:
            st = udm.add(udm.initial_state(), copy.deepcopy(first))
        except Exception:
            continue
        try:
            blob = pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)
            restored = pickle.loads(blob)
        except Exception as exc:
            raise _Fail(f"the state does not survive pickling (engine snapshot/restore): {_err(exc)}",
                        h.case_text(first, w, clip) + f"\nstate after add: {st!r}") from exc
        if not h.can_remove:
            gone = []  # (the host rebuilds instead of removing)
        try:
            plain, again = udm.add(st, copy.deepcopy(second)), udm.add(restored, copy.deepcopy(second))
            if gone:
                plain, again = udm.remove(plain, copy.deepcopy(gone)), udm.remove(again, copy.deepcopy(gone))
            r1, r2 = h.normal(h.finish(udm, plain, w)), h.normal(h.finish(h.new(), again, w))
        except Exception as exc:
            raise _Fail(f"a restored state fails to continue: {_err(exc)}", h.case_text(first, w, clip)) from exc
        if not h.same(r1, r2):
            raise _Fail(f"a restored state gives {_show(r2)}, the original {_show(r1)}",
                        h.case_text(first, w, clip) + "\nthen add: "
                        + ", ".join(_member_text(m) for m in second))
    return "states pickle and restore to equal behaviour"


def _rows(h: _Harness, res: Any, w: Any) -> Counter[tuple[int, int, str]]:
    out: Counter[tuple[int, int, str]] = Counter()
    for item in list(res):
        if isinstance(item, Event):
            le, re, p = item.le, item.re, item.payload
        else:
            le, re, p = item
        out[(le, re, _show(p))] += 1
    return out


def _time_bound_problem(h: _Harness, w: WindowDescriptor, clip: str, others: list[tuple[int, int, Any]],
                        x: tuple[int, int, Any], change: str, new_re: int | None) -> tuple[str, int] | None:
    le, re, v = x
    if change == "insert":
        before_raw, after_raw, sync = list(others), [*others, x], le
    else:
        before_raw = [*others, x]
        after_raw = list(others) + ([] if change == "delete" or new_re is None else [(le, new_re, v)])
        sync = le if change == "delete" or new_re is None else min(re, new_re)

    def members(rs: list[tuple[int, int, Any]]) -> list[Event]:
        return h.canonical([h.clipped(r, w, clip) for r in rs if r[0] < w.re and r[1] > w.le])

    try:
        udm = h.new()
        before = _rows(h, udm.compute(members(before_raw), w), w)
        after = _rows(h, udm.compute(members(after_raw), w), w)
    except Exception:
        return None  # reported by the manifest check
    return _changed_before(before, after, sync)


def _span_time_bound_problem(h: _Harness, x: Event, change: str, new_re: int | None) -> tuple[str, int] | None:
    """A time-sensitive span UDO's outputs for event ``x`` before and after ``change`` to its lifetime."""
    sync = x.le if change == "delete" or new_re is None else min(x.re, new_re)
    try:
        udm = h.new()
        before = _rows(h, udm.compute(x), x)
        after = Counter() if change == "delete" or new_re is None else \
            _rows(h, udm.compute(Event(x.le, new_re, x.payload)), x)
    except Exception:
        return None  # reported by the manifest check
    return _changed_before(before, after, sync)


def _changed_before(before: Counter[tuple[int, int, str]], after: Counter[tuple[int, int, str]], sync: int
                    ) -> tuple[str, int] | None:
    """The output changes from ``before`` to ``after`` (an output whose end moved is one change) that start
    before ``sync``, described; None when there are none."""
    removed, added = before - after, after - before
    bad: list[str] = []
    for row in list(removed.elements()):
        twin = next((a for a in added if a[0] == row[0] and a[2] == row[2] and added[a] > 0), None)
        if twin is not None:
            added[twin] -= 1
            if min(row[1], twin[1]) < sync:
                bad.append(f"[{row[0]}, {_ts(row[1])}) {row[2]} changed its end to {_ts(twin[1])}")
        elif row[0] < sync:
            bad.append(f"[{row[0]}, {_ts(row[1])}) {row[2]} disappeared")
    for row in (+added).elements():
        if row[0] < sync:
            bad.append(f"[{row[0]}, {_ts(row[1])}) {row[2]} appeared")
    return ("; ".join(bad[:3]), sync) if bad else None


def _check_time_bound(h: _Harness, rng: random.Random, examples: int) -> str:
    if not h.props.time_bound:
        raise _Skip("no time_bound promise")
    if not (h.kind == "udo" and h.props.time_sensitive):
        raise _Fail("time_bound is declared, but only a time-sensitive UDO can promise it")
    if h.span:
        return _check_span_time_bound(h, rng, examples)
    for _ in range(examples):
        w = h.window(rng)
        clip = h.clip(rng)
        vals = h.values(rng, rng.randint(1, 7))
        raw = [h.event(rng, w, v) for v in vals]
        x = raw.pop(rng.randrange(len(raw)))
        le, re, v = x
        change = rng.choice(["insert", "delete", "shorten", "extend"])
        new_re: int | None = None
        if change == "shorten":
            if re - le < 2:
                change = "delete"
            else:
                new_re = rng.randint(le + 1, min(re - 1, le + 30))
        elif change == "extend":
            if re >= INF:
                change = "insert"
            else:
                new_re = re + rng.randint(1, 10) if rng.random() < 0.9 else INF
        bad = _time_bound_problem(h, w, clip, raw, x, change, new_re)
        if bad:
            args = (w, clip, x, change, new_re)
            raw = _shrink(raw, lambda rs, a=args: _time_bound_problem(  # type: ignore[misc]
                h, a[0], a[1], rs, a[2], a[3], a[4]) is not None)
            bad = _time_bound_problem(h, w, clip, raw, x, change, new_re) or bad
            what = {"insert": f"insert [{le}, {_ts(re)})", "delete": f"full retraction of [{le}, {_ts(re)})",
                    "shorten": f"retraction of [{le}, {_ts(re)}) to re_new {_ts(new_re or 0)}",
                    "extend": f"retraction of [{le}, {_ts(re)}) extending it to {_ts(new_re or 0)}"}[change]
            others = "\n".join(f"  [{a}, {_ts(b)}) {_show(p)}" for a, b, p in raw) or "  (none)"
            repro = (f"{h.label}: window [{_ts(w.le)}, {_ts(w.re)}) clip={clip}\n"
                     f"other members (unclipped):\n{others}\n"
                     f"element x: {what} {_show(v)} (sync time {bad[1]})")
            raise _Fail(f"declared time_bound, but {what} (sync time {bad[1]}) changed outputs starting "
                        f"before it: {bad[0]}", repro)
    return f"{examples} single-element changes, outputs never start before the change"


def _check_span_time_bound(h: _Harness, rng: random.Random, examples: int) -> str:
    for _ in range(examples):
        x = h.span_arg(rng)
        change = rng.choice(["delete", "shorten", "extend"])
        new_re: int | None = None
        if change == "shorten":
            if x.re - x.le < 2:
                change = "delete"
            else:
                new_re = rng.randint(x.le + 1, min(x.re - 1, x.le + 30))
        elif change == "extend":
            if x.re >= INF:
                change, new_re = "shorten", x.le + rng.randint(1, 30)
            else:
                new_re = x.re + rng.randint(1, 10) if rng.random() < 0.9 else INF
        bad = _span_time_bound_problem(h, x, change, new_re)
        if bad:
            what = (f"full retraction of [{x.le}, {_ts(x.re)})" if change == "delete" else
                    f"retraction of [{x.le}, {_ts(x.re)}) to re_new {_ts(new_re or 0)}")
            raise _Fail(f"declared time_bound, but the {what} (sync time {bad[1]}) changed outputs starting "
                        f"before it: {bad[0]}", f"{h.label}: event [{x.le}, {_ts(x.re)}) {_show(x.payload)}; {what}")
    return f"{examples} lifetime changes of one event, outputs never change before the change"


def _numeric_column(values: list[Any]) -> Any:
    """The int64 / float64 column the engine would build from ``values``, or None (not all numbers)."""
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        return None
    if all(isinstance(v, int) for v in values):
        if any(abs(v) >= 2**63 for v in values):
            return None
        return np.array(values, dtype=np.int64)
    return np.array([float(v) for v in values], dtype=np.float64)


def _check_batch_forms(h: _Harness, rng: random.Random, examples: int) -> str:
    probe = h.new()
    if h.kind == "udf":
        if not callable(getattr(probe, "compute_batch", None)):
            raise _Skip("no compute_batch")
        return _check_udf_batch(h, rng, examples)
    if not h.props.incremental or h.props.time_sensitive:
        raise _Skip("batch forms are for UDFs and time-insensitive incremental UDAs")
    has_array = callable(getattr(probe, "add_array", None))
    has_batch = callable(getattr(probe, "add_batch", None))
    has_slices = callable(getattr(probe, "compute_slices", None))
    has_prefixes = callable(getattr(probe, "compute_prefixes", None))
    has_ranges = callable(getattr(probe, "compute_ranges", None))
    if not (has_array or has_batch or has_slices or has_prefixes or has_ranges):
        raise _Skip("no add_array / add_batch / compute_slices / compute_prefixes / compute_ranges")
    done = 0
    for _ in range(examples):
        nseg = rng.randint(1, 5)
        segs = [h.values(rng, rng.randint(0, 6)) for _ in range(nseg)]
        pre = [h.values(rng, rng.randint(0, 3)) for _ in range(nseg)]  # what each state already holds
        flat = [v for sg in segs for v in sg]
        col = _numeric_column(flat) if flat else _numeric_column(h.values(rng, 1))
        if col is None:
            continue
        col = col[:len(flat)]
        udm = h.new()

        def start(i: int, udm: Any = udm, pre: list[list[Any]] = pre) -> Any:
            return udm.add(udm.initial_state(), copy.deepcopy(pre[i])) if pre[i] else udm.initial_state()

        def result(state: Any, udm: Any = udm) -> Any:
            try:
                return h.normal(h.finish(udm, state, None))
            except Exception as exc:
                return f"raised {_err(exc)}"

        want = [result(udm.add(start(i), copy.deepcopy(sg))) for i, sg in enumerate(segs)]
        offsets = [0]
        for sg in segs:
            offsets.append(offsets[-1] + len(sg))
        what = "members " + ", ".join(f"{pre[i]!r} then {segs[i]!r}" for i in range(nseg))
        if has_array:
            for i in range(nseg):
                try:
                    got = result(udm.add_array(start(i), col[offsets[i]:offsets[i + 1]]))
                except Exception as exc:
                    raise _Fail(f"add_array raised {_err(exc)}", what) from None
                if not h.same(want[i], got):
                    raise _Fail(f"add_array gave {_show(got)} where add gives {_show(want[i])}",
                                f"state holding {pre[i]!r}, then add {segs[i]!r}")
        if has_batch:
            try:
                states = udm.add_batch([start(i) for i in range(nseg)], col, np.array(offsets, dtype=np.int64))
                got_all = [result(st) for st in states]
            except Exception as exc:
                raise _Fail(f"add_batch raised {_err(exc)}", what) from None
            if len(got_all) != nseg:
                raise _Fail(f"add_batch returned {len(got_all)} states for {nseg} slices", what)
            for i in range(nseg):
                if not h.same(want[i], got_all[i]):
                    raise _Fail(f"add_batch gave {_show(got_all[i])} for slice {i} where add gives "
                                f"{_show(want[i])}", what)
        if has_slices:
            _check_slices(h, udm, segs, col, offsets, result)
        if has_prefixes:
            _check_prefixes(h, udm, pre[0], segs, col, offsets, result)
        if has_ranges and flat:
            _check_ranges(h, udm, rng, flat, col, result)
        done += 1
    if not done:
        raise _Skip("the example inputs are not numbers")
    return f"{done} examples, batch forms agree with add"


def _json_kind(v: Any) -> str:
    """int / float / the type's name: ``5`` and ``5.0`` are different output text."""
    if isinstance(v, bool):
        return "bool"
    return "int" if isinstance(v, int) else "float" if isinstance(v, float) else type(v).__name__


def _check_slices(h: _Harness, udm: Any, segs: list[list[Any]], col: Any, offsets: list[int],
                  result: Callable[[Any], Any]) -> None:
    """``compute_slices`` against ``compute`` of a fresh state fed each slice by ``add``."""
    want = [result(udm.add(udm.initial_state(), copy.deepcopy(sg))) for sg in segs]
    # (the engine's column is float64 only when every value is a float: mixed ints and floats reach the
    # UDA as Python values, so the kinds are compared only for a column of one kind)
    one_kind = len({type(v) for sg in segs for v in sg}) <= 1
    what = "fresh windows holding " + ", ".join(repr(sg) for sg in segs)
    _compare_batch_form(h, "compute_slices", "slice",
                        lambda: udm.compute_slices(col, np.array(offsets, dtype=np.int64)), want, one_kind, what)


def _check_ranges(h: _Harness, udm: Any, rng: random.Random, flat: list[Any], col: Any,
                  result: Callable[[Any], Any]) -> None:
    """``compute_ranges`` against ``compute`` of a fresh state fed each range by ``add``: sliding ranges
    (non-empty, starts and ends non-decreasing, overlapping), as a group's row windows are."""
    m = len(flat)
    ends = sorted(rng.randint(1, m) for _ in range(rng.randint(1, 6)))
    width = rng.randint(1, m)
    starts = [max(0, e - width) for e in ends]
    want = [result(udm.add(udm.initial_state(), copy.deepcopy(flat[a:b]))) for a, b in zip(starts, ends, strict=True)]
    one_kind = len({type(v) for v in flat}) <= 1
    what = "fresh windows holding " + ", ".join(repr(flat[a:b]) for a, b in zip(starts, ends, strict=True))
    _compare_batch_form(h, "compute_ranges", "range", lambda: udm.compute_ranges(
        col, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)), want, one_kind, what)


def _compare_batch_form(h: _Harness, form: str, unit: str, call: Callable[[], Any], want: list[Any],
                        one_kind: bool, what: str) -> None:
    """One batch form's values against ``compute``'s, entry by entry (value and, for a column of one kind,
    int vs float). An entry whose ``compute`` raised is not compared: the engine calls the scalar forms there,
    and a raise of the batch form itself is then allowed."""
    raised = [isinstance(w, str) and w.startswith("raised ") for w in want]
    try:
        out = call()
        got = out.tolist() if isinstance(out, np.ndarray) else list(out)
    except Exception as exc:
        if any(raised):
            return
        raise _Fail(f"{form} raised {_err(exc)}", what) from None
    if len(got) != len(want):
        raise _Fail(f"{form} returned {len(got)} values for {len(want)} {unit}s", what)
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        if raised[i]:
            continue
        g = h.normal(g)
        if not h.same(w, g) or (one_kind and _json_kind(w) != _json_kind(g)):
            raise _Fail(f"{form} gave {_show(g)} for {unit} {i} where compute gives {_show(w)}", what)


def _check_prefixes(h: _Harness, udm: Any, pre: list[Any], segs: list[list[Any]], col: Any, offsets: list[int],
                    result: Callable[[Any], Any]) -> None:
    """``compute_prefixes`` against ``compute`` of a state holding ``pre`` fed each prefix of the column by
    ``add`` (a cut at every slice end), and the state left as it was."""
    def start() -> Any:
        return udm.add(udm.initial_state(), copy.deepcopy(pre)) if pre else udm.initial_state()

    flat = [v for sg in segs for v in sg]
    ends = offsets[1:]
    want = [result(udm.add(start(), copy.deepcopy(flat[:e]))) for e in ends]
    one_kind = len({type(v) for v in [*pre, *flat]}) <= 1
    what = f"a state holding {pre!r}, then the prefixes ending at {ends} of {flat!r}"
    state = start()
    before = result(state) if pre else None
    _compare_batch_form(h, "compute_prefixes", "prefix",
                        lambda: udm.compute_prefixes(state, col, np.array(ends, dtype=np.int64)), want, one_kind, what)
    if pre and not h.same(before, result(state)):
        raise _Fail(f"compute_prefixes changed the state it was given ({_show(before)} -> {_show(result(state))})",
                    what)


def _check_udf_batch(h: _Harness, rng: random.Random, examples: int) -> str:
    names = h.udf_args()
    done = 0
    for _ in range(examples):
        k = rng.randint(1, 12)
        rows = [h.values(rng, len(names)) for _ in range(k)]
        cols = {n: _numeric_column([r[j] for r in rows]) for j, n in enumerate(names)}
        if any(c is None for c in cols.values()):
            continue
        udm = h.new()
        try:
            got = list(udm.compute_batch(**cols))
        except Exception as exc:
            raise _Fail(f"compute_batch raised {_err(exc)}", f"columns {rows!r}") from None
        if len(got) != k:
            raise _Fail(f"compute_batch returned {len(got)} values for {k} rows", f"columns {rows!r}")
        for row, g in zip(rows, got, strict=True):
            args = dict(zip(names, row, strict=True))
            want = h.normal(udm.compute(**args))
            g = h.normal(g.item() if hasattr(g, "item") else g)
            if not h.same(want, g):
                raise _Fail(f"compute_batch gave {_show(g)} where compute gives {_show(want)}", f"call {args!r}")
        done += 1
    if not done:
        raise _Skip("the example inputs are not numbers")
    return f"{done} batches, compute_batch agrees with compute row by row"


def _fold(h: _Harness, udm: Any, members: list[Any], rng: random.Random) -> tuple[str, Any]:
    """``members`` folded into one state along a random path the engines take: one ``add``, ``add`` by
    chunks, or (algebraic) chunk states merged; returns the path's name and the state."""
    paths = ["one add", "chunked adds"] + (["merged chunks"] if h.props.algebraic else [])
    path = rng.choice(paths) if len(members) > 1 else "one add"
    if path == "one add":
        return path, udm.add(udm.initial_state(), members)
    cuts = sorted(rng.sample(range(1, len(members)), min(len(members) - 1, rng.randint(1, 12))))
    chunks = [members[a:b] for a, b in zip([0, *cuts], [*cuts, len(members)], strict=True)]
    if path == "chunked adds":
        st = udm.initial_state()
        for c in chunks:
            st = udm.add(st, c)
        return path, st
    states = [udm.add(udm.initial_state(), c) for c in chunks]
    while len(states) > 1:  # a random merge tree
        i = rng.randrange(len(states) - 1)
        states[i:i + 2] = [udm.merge(states[i], states[i + 1])]
    return path, states[0]


def _check_error_bound(h: _Harness, rng: random.Random, examples: int) -> str:
    eb = h.man.error_bound
    if eb is None:
        raise _Skip("exact (no error_bound declared)")
    if h.kind != "uda" or h.props.time_sensitive or not h.props.incremental:
        raise _Fail("error_bound is checked on time-insensitive incremental aggregates; this UDM is not one")
    udm = h.new()
    bound = float(udm.error_bound()) if callable(getattr(udm, "error_bound", None)) else eb.bound
    ranks = list(udm.quantile_ranks()) if eb.estimates == "quantile" else []
    tp = input_type(h.man.input_type, h.kind)
    kinds = tp.kinds if tp is not None else ("number",)
    trials = max(10, examples // 2)
    misses: list[str] = []
    worst = 0.0
    count = 0
    for t in range(trials):
        n = int(10 ** rng.uniform(0, 4.5))
        try:
            members = random_members(eb.estimates, kinds, rng, n)
        except ValueError as exc:
            raise _Skip(str(exc)) from None
        try:
            path, st = _fold(h, udm, members, rng)
            value = h.normal(h.finish(udm, st, None))
        except Exception as exc:
            raise _Fail(f"{eb.estimates} of {n} members raised {_err(exc)}",
                        f"{h.label}: trial {t} (the seed reproduces it), {n} members, e.g. {members[:5]!r}"
                        ) from None
        errs, problem = estimate_errors(eb.estimates, value, members, ranks)
        where = f"trial {t}: {n} members ({len(set(members))} distinct), {path}"
        if problem:
            raise _Fail(problem, f"{h.label}: {where}")
        for e in errs:
            count += 1
            worst = max(worst, e)
            if e > bound:
                misses.append(f"{where}: error {e:.4g}")
    allowed = allowed_misses(count, eb.confidence)
    if len(misses) > allowed:
        raise _Fail(f"{len(misses)} of {count} {eb.estimates} estimates are outside the declared bound {bound} "
                    f"(confidence {eb.confidence} allows {allowed})", f"{h.label}:\n" + "\n".join(misses[:5]))
    return (f"{count} {eb.estimates} estimates on random data, worst error {worst:.3g} (bound {bound:.3g}), "
            f"{len(misses)} outside (confidence {eb.confidence} allows {allowed})")


#: what a value-blind UDA's members are replaced by: the engine's placeholder (0) and one no arithmetic takes
_PLACEHOLDERS: tuple[Any, ...] = (0, None)


def _check_value_blind(h: _Harness, rng: random.Random, examples: int) -> str:
    """A UDA declaring ``value_blind`` gets a placeholder for each member's value (`udm.sdk.Properties`): its
    value must be what the real members give, whatever stands in for them, in every form it implements."""
    if not h.props.value_blind:
        raise _Skip("not value-blind")
    for _ in range(examples):
        w, clip, members = h.case(rng, 8)
        udm = h.new()
        try:
            want = h.normal(h.compute(udm, members, w))
        except Exception:
            continue  # (members the UDA refuses: the manifest check's business)
        for ph in _PLACEHOLDERS:
            blind = [Event(m.le, m.re, ph) if isinstance(m, Event) else ph for m in members]
            try:
                got = h.normal(h.compute(h.new(), blind, w))
            except Exception as exc:
                raise _Fail(f"declared value_blind, but compute raised {_err(exc)} on placeholder values "
                            f"({ph!r}): it reads them", h.case_text(members, w, clip)) from None
            if not h.same(want, got):
                raise _Fail(f"declared value_blind, but gives {_show(got)} with placeholder values ({ph!r}) "
                            f"where the members give {_show(want)}: it reads them", h.case_text(members, w, clip))
    forms = _blind_forms(h, rng, examples)
    return f"{examples} windows{forms}: the value is the same with placeholders for the members' values"


def _blind_forms(h: _Harness, rng: random.Random, examples: int) -> str:
    """The column forms (`_check_batch_forms`) over the engine's placeholders, a zero int64 column, give what
    they give over random numbers."""
    probe = h.new()
    forms = [f for f in ("add_array", "add_batch", "compute_slices", "compute_prefixes")
             if callable(getattr(probe, f, None))] if h.props.incremental and not h.props.time_sensitive else []
    for _ in range(examples if forms else 0):
        lens = [rng.randint(0, 6) for _ in range(rng.randint(1, 4))]
        offsets = np.cumsum([0, *lens]).astype(np.int64)
        n = int(offsets[-1])
        real = (np.array([rng.randint(-9, 9) for _ in range(n)], dtype=np.int64) if rng.random() < 0.5 else
                np.array([rng.uniform(-9, 9) for _ in range(n)], dtype=np.float64))
        for f in forms:
            want, got = _blind_form(h, f, real, offsets), _blind_form(h, f, np.zeros(n, dtype=np.int64), offsets)
            if not h.same(want, got):
                raise _Fail(f"declared value_blind, but {f} gives {_show(got)} over a zero column where it gives "
                            f"{_show(want)} over {real.tolist()!r} (slices at {offsets.tolist()}): it reads them")
    return f" and {', '.join(forms)}" if forms else ""


def _blind_form(h: _Harness, form: str, col: np.ndarray, offsets: np.ndarray) -> Any:
    udm = h.new()
    try:
        if form == "compute_slices":
            return [h.normal(v) for v in list(udm.compute_slices(col, offsets))]
        if form == "compute_prefixes":
            return [h.normal(v) for v in list(udm.compute_prefixes(udm.initial_state(), col, offsets[1:]))]
        if form == "add_batch":
            states = udm.add_batch([udm.initial_state() for _ in offsets[1:]], col, offsets)
            return [h.normal(h.finish(udm, st, None)) for st in states]
        return h.normal(h.finish(udm, udm.add_array(udm.initial_state(), col), None))
    except Exception as exc:
        return f"raised {_err(exc)}"


_RUNNERS: dict[str, Callable[..., str]] = {
    "error_bound": _check_error_bound,
    "value_blind": _check_value_blind,

    "batch_forms": _check_batch_forms,
    "manifest": _check_manifest,
    "params_roundtrip": _check_params,
    "deterministic": _check_deterministic,
    "incremental": _check_incremental,
    "algebraic_merge": _check_merge,
    "state_pickle": _check_pickle,
    "time_bound": _check_time_bound,
}


def run_contract_checks(udm_cls: type[UDM], *, seed: int = 0, examples: int = 50,
                        inputs: Sequence[Any] | Callable[[random.Random], Sequence[Any]] | None = None,
                        params: Mapping[str, Any] | None = None, checks: Sequence[str] | None = None,
                        rel_tol: float = 1e-7, abs_tol: float = 1e-9) -> list[CheckResult]:
    """Run every contract check (or those named in ``checks``) on ``udm_cls``; see the module docs.

    Each check draws its examples from ``random.Random(f"{seed}:{check}")``: the same seed reproduces
    the same failure. ``inputs``/``params``: custom example inputs and parameters.
    """
    names = list(checks) if checks is not None else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown contract check(s) {unknown}; available: {', '.join(CHECKS)}")
    results: list[CheckResult] = []
    try:
        h = _Harness(udm_cls, params, inputs, rel_tol, abs_tol)
    except _Fail as f:
        return [CheckResult(n, False, f.detail, seed) for n in names]
    for name in names:
        rng = random.Random(f"{seed}:{name}")
        try:
            if name == "physical_reordering":
                detail = _check_reordering(h, rng, examples, seed)
            else:
                detail = _RUNNERS[name](h, rng, examples)
            results.append(CheckResult(name, True, detail, seed))
        except _Skip as s:
            results.append(CheckResult(name, True, f"not applicable: {s}", seed, skipped=True))
        except _Fail as f:
            results.append(CheckResult(name, False, f.detail, seed, f.reproducer))
        except Exception as exc:  # a crash inside a check is a failure of the UDM under test, by name
            results.append(CheckResult(name, False, f"check crashed: {_err(exc)}", seed))
    return results


def format_failures(udm_cls: Any, failed: Sequence[CheckResult]) -> str:
    man = getattr(udm_cls, "manifest", None)
    label = f"{man.name} {man.version}" if isinstance(man, Manifest) else getattr(udm_cls, "__name__", "?")
    seed = failed[0].seed if failed else 0
    lines = [f"UDM {label} failed {len(failed)} contract check(s) (seed {seed}; reproduce with "
             f"run_contract_checks(..., seed={seed}) or pytest --udm-seed={seed}):"]
    for r in failed:
        lines.append(f"[{r.name}] {r.detail}")
        if r.reproducer:
            lines.append("  reproducer:")
            lines.append(_indent(r.reproducer, "    "))
    return "\n".join(lines)


def assert_contracts(udm_cls: type[UDM], seed: int = 0, **kwargs: Any) -> list[CheckResult]:
    """Run every contract check; raise AssertionError listing the failures with seed and reproducer."""
    __tracebackhide__ = True
    results = run_contract_checks(udm_cls, seed=seed, **kwargs)
    failed = [r for r in results if not r.passed]
    if failed:
        raise AssertionError(format_failures(udm_cls, failed))
    return results
