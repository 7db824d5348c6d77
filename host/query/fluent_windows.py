"""The fluent API's grouping and window methods: ``group_by`` and a window method set the grouping and window
of the *next* ``aggregate``/``apply``, which consumes them into one window step (INTERFACES §2).

A mixin of `udm.host.query.fluent.Stream`, apart because a window step's options are a concept of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Self, TypeAlias

from pydantic import TypeAdapter, ValidationError

from udm.host.errors import QuerySpecError
from udm.host.model.spec import (
    CountByEnd,
    CountByStart,
    Cumulate,
    Hopping,
    Rows,
    Session,
    Snapshot,
    Tumbling,
    WindowSpec,
    WindowStep,
    format_validation_error,
)
from udm.sdk import INF

__all__ = ["Window", "WindowMethods", "build_step"]

Window: TypeAlias = Tumbling | Hopping | Cumulate | Snapshot | CountByStart | CountByEnd | Rows | Session


def build_step(model: Any, **data: Any) -> Any:
    """A step model from a builder's keywords (None means "not given"), or a `QuerySpecError` naming the step."""
    data = {k: v for k, v in data.items() if v is not None or k in ("input",)}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise QuerySpecError(format_validation_error(exc, f"invalid {data.get('op', 'step')} step", data)) from None


class WindowMethods:
    """Grouping, windows and the window steps that consume them (mixed into the frozen `Stream` dataclass)."""

    _group_by: tuple[str, ...] | None
    _window: Window | None

    def _append(self, step: Any, method: str) -> Self:  # pragma: no cover - `Stream` defines it
        raise NotImplementedError

    def _with(self, **changes: Any) -> Self:
        return replace(self, **changes)  # type: ignore[type-var]  # (the frozen dataclass it is mixed into)

    # ------------------------------------------------------------------ grouping and windows
    def group_by(self, *keys: str | Sequence[str]) -> Self:
        """Group the next window step by these payload fields."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        return self._with(_group_by=tuple(flat))

    def window(self, window: Window | Mapping[str, Any]) -> Self:
        if isinstance(window, Mapping):
            data = dict(window)
            try:
                window = TypeAdapter(WindowSpec).validate_python(data)
            except ValidationError as exc:
                raise QuerySpecError(format_validation_error(exc, "invalid window", data)) from None
        return self._with(_window=window)

    def tumbling(self, size: int, offset: int = 0) -> Self:
        return self.window({"type": "tumbling", "size": size, "offset": offset})

    def hopping(self, size: int, hop: int, offset: int = 0) -> Self:
        return self.window({"type": "hopping", "size": size, "hop": hop, "offset": offset})

    def cumulate(self, size: int, step: int, offset: int = 0) -> Self:
        """Each period of ``size`` ticks, its running windows one per ``step`` ("so far today, every minute")."""
        return self.window({"type": "cumulate", "size": size, "step": step, "offset": offset})

    def snapshot(self) -> Self:
        return self.window({"type": "snapshot"})

    def count_by_start(self, n: int, hop: int = 1) -> Self:
        return self.window({"type": "count_by_start", "n": n, "hop": hop})

    def count_by_end(self, n: int, hop: int = 1) -> Self:
        return self.window({"type": "count_by_end", "n": n, "hop": hop})

    def rows(self, n: int, slide: int = 1, partial: bool = False) -> Self:
        return self.window({"type": "rows", "n": n, "slide": slide, "partial": partial})

    def session(self, gap: int) -> Self:
        return self.window({"type": "session", "gap": gap})

    # ------------------------------------------------------------------ window steps
    def _window_step(self, method: str, udm: str | None, *, input: str | Mapping[str, str] | None,
                     as_: str | None, params: Mapping[str, Any] | None, version: str | None, clip: str,
                     output: str, max_delay: int | str, max_memory_time: int | str,
                     aggregates: list[dict[str, Any]] | None = None, early: int | None = None) -> Self:
        if self._window is None:
            raise QuerySpecError(f".{method}({udm!r}) needs a window first: .tumbling(size), .hopping(size, hop), "
                                 ".snapshot(), .count_by_start(n, hop), .count_by_end(n, hop), .rows(n, slide) "
                                 "or .session(gap)")
        data: dict[str, Any] = {
            "op": "window",
            "window": self._window.model_dump(),
            "group_by": list(self._group_by or ()),
            "udm": udm,
            "version": version,
            "input": dict(input) if isinstance(input, Mapping) else input,
            "params": dict(params or {}),
            "clip": clip,
            "output": output,
            "max_delay": max_delay,
            "max_memory_time": max_memory_time,
            "early": early,
        }
        if as_ is not None:
            data["as"] = as_
        if aggregates is not None:
            data.update(udm=None, aggregates=aggregates, version=None, input=None, params={})
        step = build_step(WindowStep, **data)
        return self._with(_group_by=None, _window=None)._append(step, method)

    def aggregate(self, udm: str | None = None, *, input: str | Mapping[str, str] | None = None,
                  as_: str | None = None, params: Mapping[str, Any] | None = None, version: str | None = None,
                  clip: str = "none", output: str = "window", max_delay: int | str = 0,
                  max_memory_time: int | str = INF, early: int | None = None,
                  **aggregates: str | Mapping[str, Any]) -> Self:
        """Apply UDA ``udm`` to each window (per group): one output event per window, payload
        ``{**group_key, as_: value}`` (``as_`` defaults to the UDM name).

        Several UDAs over one membership (SEMANTICS §9 ``aggregates``): name each output field as a
        keyword, its value a UDM name or ``{"udm", "input"?, "params"?, "version"?}``, e.g.
        ``.aggregate(n="count", mean={"udm": "avg", "input": "price"})``: one output per window with
        every field. ``early``: progressive output (the window step's ``early``)."""
        if aggregates:
            if udm is not None or input is not None or as_ is not None or params or version is not None:
                raise QuerySpecError(".aggregate(name=..., ...) takes the UDM, input, params and version "
                                     "of each aggregate inside its own value, not as udm/input/as_/params/version")
            parts = [{"udm": v, "as": k} if isinstance(v, str) else {**dict(v), "as": k}
                     for k, v in aggregates.items()]
            return self._window_step("aggregate", None, input=None, as_=None, params=None, version=None,
                                     clip=clip, output=output, max_delay=max_delay,
                                     max_memory_time=max_memory_time, aggregates=parts, early=early)
        if udm is None:
            raise QuerySpecError(".aggregate() needs a UDM name, or output fields as keywords "
                                 "(.aggregate(n='count', mean={'udm': 'avg', 'input': 'v'}))")
        return self._window_step("aggregate", udm, input=input, as_=as_, params=params, version=version,
                                 clip=clip, output=output, max_delay=max_delay, max_memory_time=max_memory_time,
                                 early=early)

    def apply(self, udm: str, *, params: Mapping[str, Any] | None = None, input: str | Mapping[str, str] | None = None,
              version: str | None = None, clip: str = "none", output: str = "window", max_delay: int | str = 0,
              max_memory_time: int | str = INF, early: int | None = None) -> Self:
        """Apply UDO ``udm`` to each window (per group): zero or more output events per window."""
        return self._window_step("apply", udm, input=input, as_=None, params=params, version=version, clip=clip,
                                 output=output, max_delay=max_delay, max_memory_time=max_memory_time, early=early)
