"""The `udm` decorator: declare a manifest next to the code, with defaults read off the class."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from ._bases import UDM
from ._manifest import CLIP_POLICIES, ClipPolicy, ErrorBound, Kind, Manifest, NoParams, OutputPolicy, Properties

__all__ = ["udm"]

T = TypeVar("T", bound=type[UDM])


def _type_name(tp: Any) -> str:
    if tp is inspect.Parameter.empty:
        return "any"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "").replace("collections.abc.", "")


def _param_hint(fn: Any, index: int) -> tuple[Any, dict[str, Any]]:
    """The type hint of ``fn``'s parameter ``index`` (after ``self``) and all its hints."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: the manifest just says "any"
        hints = {}
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    return (hints.get(params[index], inspect.Parameter.empty) if len(params) > index
            else inspect.Parameter.empty), hints


def _hint_names(cls: type, incremental: bool) -> tuple[str, str]:
    compute = getattr(cls, "compute", None)
    if compute is None:
        return "any", "any"
    first, hints = _param_hint(compute, 0)
    add = getattr(cls, "add", None)
    if incremental and callable(add):
        # an incremental UDM's compute takes its state: the members' type is add's delta
        first, _ = _param_hint(add, 1)
    return _type_name(first), _type_name(hints.get("return", inspect.Parameter.empty))


def _default_output(kind: Kind, time_sensitive: bool, time_bound: bool, span: bool) -> tuple[OutputPolicy, ...]:
    if kind == "udf" or span:
        return ()
    if kind == "udo" and time_sensitive:
        return ("window", "unaltered", "clip", "time_bound") if time_bound else ("window", "unaltered", "clip")
    return ("window",)


def udm(
    name: str | None = None,
    *,
    version: str = "0.1.0",
    summary: str | None = None,
    kind: Kind | None = None,
    incremental: bool | None = None,
    time_sensitive: bool | None = None,
    time_bound: bool = False,
    algebraic: bool = False,
    deterministic: bool = True,
    value_blind: bool = False,
    params: type[BaseModel] | None = None,
    input_type: str | None = None,
    output_type: str | None = None,
    allowed_clip: Sequence[ClipPolicy] | None = None,
    allowed_output: Sequence[OutputPolicy] | None = None,
    host_api: str = ">=1.0,<2",
    docs: str | None = None,
    error_bound: ErrorBound | None = None,
) -> Callable[[T], T]:
    """Attach a `Manifest` to a UDM class.

    Anything not given is read off the class: the kind, time sensitivity and incrementality from its SDK
    base, the parameter model from a nested ``Params`` class, input/output types from ``compute``'s type
    hints, summary and docs from the docstring. Explicit arguments win, and the host still checks the
    result against the implementation, so a wrong declaration is caught at load time, not at run time.
    A span UDO (`udm.sdk.SpanUDO`) takes no clipping or output policy.
    ``error_bound`` (an `ErrorBound`) is for an approximate aggregate: how far its value may be from the
    exact one, which the conformance kit checks. ``value_blind`` declares a UDA that reads no member value
    (a count): the host hands it placeholders (`udm.sdk.Properties`), and the kit checks the promise.
    """

    def wrap(cls: T) -> T:
        doc = inspect.getdoc(cls) or ""
        the_kind = kind or cls._sdk_kind
        if the_kind is None:
            raise TypeError(f"{cls.__qualname__}: cannot tell the UDM kind; derive from an udm.sdk base class")
        ts = cls._sdk_time_sensitive if time_sensitive is None else time_sensitive
        inc = cls._sdk_incremental if incremental is None else incremental
        span = cls._sdk_span and the_kind == "udo"
        # a UDF and a span UDO run once per event: no window, so no clipping or output policy
        per_event = the_kind == "udf" or span
        hin, hout = _hint_names(cls, inc)
        cls.manifest = Manifest(
            name=name or cls.__name__.lower(),
            version=version,
            kind=the_kind,
            span=span,
            summary=summary if summary is not None else (doc.splitlines()[0] if doc else ""),
            properties=Properties(
                incremental=inc,
                time_sensitive=ts,
                time_bound=time_bound,
                algebraic=algebraic,
                deterministic=deterministic,
                value_blind=value_blind,
            ),
            params=params or getattr(cls, "Params", NoParams),
            input_type=input_type or hin,
            output_type=output_type or hout,
            allowed_clip=tuple(allowed_clip) if allowed_clip is not None else
            (() if per_event else CLIP_POLICIES),
            allowed_output=tuple(allowed_output) if allowed_output is not None else
            _default_output(the_kind, ts, time_bound, span),
            host_api=host_api,
            docs=docs if docs is not None else doc,
            error_bound=error_bound,
        )
        return cls

    return wrap
