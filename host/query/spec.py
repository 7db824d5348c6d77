"""The query spec (INTERFACES §2): one pydantic model behind the JSON/YAML file and the fluent API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PositiveInt, ValidationError

from udm.host.errors import QuerySpecError
from udm.sdk import INF, ClipPolicy, OutputPolicy

__all__ = [
    "CountByEnd",
    "CountByStart",
    "FilterStep",
    "Hopping",
    "MapStep",
    "OnViolation",
    "QuerySpec",
    "Snapshot",
    "Step",
    "Time",
    "Tumbling",
    "WindowSpec",
    "WindowStep",
    "format_validation_error",
    "load_query",
    "parse_query",
]


def _time(v: Any) -> Any:
    if isinstance(v, str) and v.lower() == "inf":
        return INF
    return v


#: A tick in a query spec: an integer or the string "inf".
Time = Annotated[int, BeforeValidator(_time), Field(ge=0)]

OnViolation = Literal["dead_letter", "adjust", "error"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Tumbling(_Strict):
    type: Literal["tumbling"] = "tumbling"
    size: PositiveInt
    offset: int = 0


class Hopping(_Strict):
    type: Literal["hopping"] = "hopping"
    size: PositiveInt
    hop: PositiveInt
    offset: int = 0


class Snapshot(_Strict):
    type: Literal["snapshot"] = "snapshot"


class CountByStart(_Strict):
    type: Literal["count_by_start"] = "count_by_start"
    n: PositiveInt
    hop: PositiveInt = 1


class CountByEnd(_Strict):
    type: Literal["count_by_end"] = "count_by_end"
    n: PositiveInt
    hop: PositiveInt = 1


WindowSpec = Annotated[Tumbling | Hopping | Snapshot | CountByStart | CountByEnd, Field(discriminator="type")]


class FilterStep(_Strict):
    """Keep the events for which a UDF returns true (span-based; lifetimes unchanged)."""

    op: Literal["filter"] = "filter"
    udf: str
    version: str | None = None
    args: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)


class MapStep(_Strict):
    """Add (or overwrite) payload field ``as`` with a UDF's result (span-based; lifetimes unchanged)."""

    op: Literal["map"] = "map"
    udf: str
    version: str | None = None
    args: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    as_: str = Field(alias="as")


class WindowStep(_Strict):
    """Group & apply a UDA or UDO over windows (SEMANTICS §3–7)."""

    op: Literal["window"] = "window"
    window: WindowSpec
    group_by: list[str] = Field(default_factory=list)
    udm: str
    version: str | None = None
    input: str | dict[str, str] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    as_: str | None = Field(default=None, alias="as")
    clip: ClipPolicy = "none"
    output: OutputPolicy = "window"
    max_delay: Time = 0
    max_memory_time: Time = INF

    @property
    def alias(self) -> str:
        """Output field of a UDA result (default: the UDM name)."""
        return self.as_ or self.udm


Step = Annotated[FilterStep | MapStep | WindowStep, Field(discriminator="op")]


class QuerySpec(_Strict):
    steps: list[Step] = Field(min_length=1)
    on_violation: OnViolation = "dead_letter"


    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(by_alias=True, mode="json")
        for step in data["steps"]:
            for key in ("max_delay", "max_memory_time"):
                if step.get(key) is not None and step[key] >= INF:
                    step[key] = "inf"
        return data


_TAG_FIELDS = ("op", "type")


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """Render a pydantic error location as the user wrote it, dropping the union tags pydantic inserts.

    Pydantic puts a discriminated union's tag right after the location of the object it picked a variant
    for (``steps.0.window.window.tumbling.size``); walking the input alongside the location, the first item
    on entering an object that equals its ``op``/``type`` value is that tag (→ ``steps[0].window.size``).
    """
    out = ""
    entered = True
    for item in loc:
        if entered and isinstance(data, dict) and any(data.get(t) == item for t in _TAG_FIELDS):
            entered = False
            continue
        if isinstance(item, int):
            out += f"[{item}]"
            data = data[item] if isinstance(data, list) and item < len(data) else None
        else:
            out += f".{item}" if out else str(item)
            data = data.get(item) if isinstance(data, dict) else None
        entered = True
    return out


def format_validation_error(exc: ValidationError, what: str, data: Any = None) -> str:
    """One line per problem, each naming where it is (``steps[0].window.size``)."""
    parts = []
    for err in exc.errors():
        loc = _where(tuple(err["loc"]), data)
        msg = err["msg"]
        if err["type"] == "union_tag_invalid":
            ctx = err.get("ctx", {})
            disc = str(ctx.get("discriminator", "tag")).strip("'")
            msg = f"unknown {disc} {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc or '<root>'}: {msg}")
    return f"{what}: " + "; ".join(parts)


def parse_query(data: Any, *, source: str = "query") -> QuerySpec:
    try:
        return QuerySpec.model_validate(data)
    except ValidationError as exc:
        raise QuerySpecError(format_validation_error(exc, f"invalid {source}", data)) from None


def load_query(path: str | Path) -> QuerySpec:
    """Read a JSON or YAML query spec file (by suffix; ``.json`` else YAML, which also reads JSON)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuerySpecError(f"cannot read query spec {p}: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # json.JSONDecodeError / yaml.YAMLError: both say where
        raise QuerySpecError(f"query spec {p} is not valid JSON/YAML: {exc}") from None
    return parse_query(data, source=f"query spec {p}")
