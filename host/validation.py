"""Manifest-versus-implementation checks (INTERFACES §4): a UDM that lies is refused at load time.

Each check returns problems as ``"rule: detail"`` strings; an empty list means the UDM is what it says.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from udm.sdk import API_VERSION, UDM, Manifest

__all__ = ["check_udm"]

_SDK_MODULE = "udm.sdk._bases"
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _implemented(cls: type, method: str) -> bool:
    """True when ``cls`` (or a user base of it) defines ``method`` — not merely the SDK placeholder."""
    for klass in cls.__mro__:
        if method in vars(klass):
            return klass.__module__ != _SDK_MODULE and callable(vars(klass)[method])
    return False


def _arity(fn: Callable[..., Any]) -> int | None:
    """Positional parameters after ``self``; None when ``*args`` makes it unknowable."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in _POSITIONAL and p.default is inspect.Parameter.empty)


def _sdk_base(cls: type) -> type | None:
    for klass in cls.__mro__:
        if klass.__module__ == _SDK_MODULE and klass is not UDM and issubclass(klass, UDM):
            return klass
    return None


def check_udm(obj: Any, api_version: str = API_VERSION) -> list[str]:
    if not (isinstance(obj, type) and issubclass(obj, UDM)):
        return [f"not a UDM class: {obj!r} does not derive from an udm.sdk base class"]
    cls: type[UDM] = obj
    man = getattr(cls, "manifest", None)
    if not isinstance(man, Manifest):
        return ["missing manifest: decorate the class with @udm(...) or set a `manifest` class attribute"]
    problems: list[str] = []
    props = man.properties
    base = _sdk_base(cls)
    if base is None:
        return ["no SDK base: derive from one of udm.sdk's UDF/UDA/UDO classes"]

    if man.kind != cls._sdk_kind:
        problems.append(f"kind: manifest says {man.kind!r} but the class derives from {base.__name__} "
                        f"({cls._sdk_kind})")
    if props.time_sensitive != cls._sdk_time_sensitive:
        problems.append(f"time_sensitive: manifest says {props.time_sensitive} but the class derives from "
                        f"{base.__name__}")
    if props.incremental != cls._sdk_incremental:
        problems.append(f"incremental: manifest says {props.incremental} but the class derives from "
                        f"{base.__name__}")
    if man.span != cls._sdk_span:
        problems.append(f"span: manifest says {man.span} but the class derives from {base.__name__}")

    if not _implemented(cls, "compute"):
        problems.append("compute: the class does not implement compute()")
    elif man.span:
        got = _arity(cls.compute)
        shape = "compute(event)" if props.time_sensitive else "compute(payload)"
        if got is not None and got != 1:
            problems.append(f"signature: a {'time-sensitive' if props.time_sensitive else 'time-insensitive'} "
                            f"span UDO needs {shape}, but compute takes {got} argument(s)")
    elif man.kind != "udf":
        want = 2 if props.time_sensitive else 1
        got = _arity(cls.compute)
        shape = ("compute(state, window)" if props.incremental else "compute(events, window)") \
            if props.time_sensitive else ("compute(state)" if props.incremental else "compute(payloads)")
        if got is not None and got != want:
            problems.append(f"signature: a {'time-sensitive' if props.time_sensitive else 'time-insensitive'} "
                            f"{'incremental ' if props.incremental else ''}{man.kind} needs {shape}, "
                            f"but compute takes {got} argument(s)")

    if props.incremental:
        # an algebraic UDA may leave out remove: the host rebuilds from the remaining members instead
        needed = ("initial_state", "add") if props.algebraic and _implemented(cls, "merge") else \
            ("initial_state", "add", "remove")
        missing = [m for m in needed if not _implemented(cls, m)]
        if missing:
            why = (" (only an algebraic UDA with merge may leave out remove)"
                   if missing == ["remove"] else "")
            problems.append(f"incremental: declared incremental but does not implement {', '.join(missing)}{why}")
        for m in ("add", "remove"):
            if _implemented(cls, m) and _arity(getattr(cls, m)) not in (None, 2):
                problems.append(f"incremental: {m} must take (state, delta)")
    if props.algebraic:
        if not props.incremental:
            problems.append("algebraic: an algebraic UDM must also be incremental")
        if not _implemented(cls, "merge"):
            problems.append("algebraic: declared algebraic but does not implement merge(a, b)")
        if man.kind != "uda":
            problems.append("algebraic: only aggregates (uda) can be algebraic")
    if man.error_bound is not None:
        problems += _error_bound_problems(cls, man)
    if props.time_bound and not (man.kind == "udo" and props.time_sensitive):
        problems.append("time_bound: only a time-sensitive UDO can promise time-bound output")

    if man.span and props.incremental:
        problems.append("span: a span UDO is called once per event and keeps no window state; it cannot be "
                        "incremental")

    # Policies consistent with the kind (SEMANTICS §5).
    if man.kind == "udf":
        if man.allowed_output or man.allowed_clip:
            problems.append("policies: a UDF is span-based and takes no clipping/output policy")
    elif man.span:
        if man.allowed_output or man.allowed_clip:
            problems.append("policies: a span UDO runs once per event (no window) and takes no clipping/output "
                            "policy")
    else:
        if not man.allowed_clip:
            problems.append("policies: allowed_clip is empty")
        if "window" not in man.allowed_output:
            problems.append("policies: 'window' output must be allowed (it is the query writer's override)")
        if man.kind == "uda" or not props.time_sensitive:
            extra = sorted(set(man.allowed_output) - {"window"})
            if extra:
                what = "an aggregate" if man.kind == "uda" else "a time-insensitive UDO"
                problems.append(f"policies: {what} can only use 'window' output, not {', '.join(extra)}")
        if "time_bound" in man.allowed_output and not props.time_bound:
            problems.append("policies: allows 'time_bound' output without declaring the time_bound property")

    try:
        man.params()
    except ValidationError as exc:
        names = ", ".join(".".join(str(x) for x in e["loc"]) for e in exc.errors())
        problems.append(f"params: the parameter model {man.params.__name__} needs values without defaults "
                        f"({names})")
    except Exception as exc:
        problems.append(f"params: the parameter model {man.params.__name__} fails with defaults: {exc}")
    if not issubclass(man.params, BaseModel):
        problems.append("params: not a pydantic model")

    # lazy: packaging (~5 ms) only when a plugin is loaded, which a run with a cached catalog may not do
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    if Version(api_version) not in SpecifierSet(man.host_api):
        problems.append(f"host_api: supports host API {man.host_api}, this host is {api_version}")
    return problems


def _error_bound_problems(cls: type[UDM], man: Manifest) -> list[str]:
    """An ``error_bound`` belongs to an aggregate, and its hooks agree with it (`udm.sdk.ErrorBound`)."""
    eb = man.error_bound
    assert eb is not None
    problems: list[str] = []
    if man.kind != "uda":
        problems.append("error_bound: only an aggregate (uda) estimates a value")
    if eb.estimates == "quantile" and not _implemented(cls, "quantile_ranks"):
        problems.append("error_bound: estimates quantiles but does not implement quantile_ranks() "
                        "(the ranks its value answers)")
    if _implemented(cls, "error_bound"):
        try:
            at_defaults = float(cls(man.params()).error_bound())
        except Exception as exc:
            return [*problems, f"error_bound: error_bound() fails with the default parameters: "
                               f"{type(exc).__name__}: {exc}"]
        if abs(at_defaults - eb.bound) > 1e-9 * max(1.0, abs(eb.bound)):
            problems.append(f"error_bound: the manifest declares bound {eb.bound} but error_bound() gives "
                            f"{at_defaults} with the default parameters")
    return problems
