"""Physical stream elements (SEMANTICS §1) and their JSON form (INTERFACES §1).

Parsing only checks what a single element can show on its own (shape, types, ``le < re``); whether it
is valid against the stream so far (known id, matching lifetime, CTI) is the consumer's job, since it
depends on state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from udm.host.errors import BadElement
from udm.sdk import INF, time_json

__all__ = [
    "Cti",
    "Element",
    "Insert",
    "Retract",
    "canonical_json",
    "element_to_json",
    "parse_element",
    "parse_time",
    "sync_time",
    "time_to_json",
]


@dataclass(frozen=True, slots=True)
class Insert:
    id: str
    le: int
    re: int
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Retract:
    """Changes live event ``id`` (current lifetime ``[le, re)``) to ``[le, re_new)``; ``re_new == le`` deletes."""

    id: str
    le: int
    re: int
    re_new: int
    payload: dict[str, Any] | None = None

    @property
    def is_full(self) -> bool:
        return self.re_new == self.le


@dataclass(frozen=True, slots=True)
class Cti:
    t: int


Element = Insert | Retract | Cti


def sync_time(el: Element) -> int:
    """The earliest time an element modifies (SEMANTICS §1)."""
    if isinstance(el, Insert):
        return el.le
    if isinstance(el, Retract):
        return min(el.re, el.re_new)
    return el.t


def canonical_json(payload: Any) -> str:
    """The canonical payload text used for ordering ties (SEMANTICS §5)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def parse_time(value: Any, name: str, *, allow_inf: bool) -> int:
    if isinstance(value, bool):
        raise BadElement(f"{name} must be an integer tick, got {value!r}")
    if isinstance(value, int):
        if value >= INF and not allow_inf:
            raise BadElement(f"{name} must be finite")
        if value < -INF:
            raise BadElement(f"{name} is out of the int64 range")
        return min(value, INF)
    if isinstance(value, str) and value.lower() == "inf":
        if not allow_inf:
            raise BadElement(f'{name} cannot be "inf"')
        return INF
    if isinstance(value, float) and value.is_integer():
        raise BadElement(f"{name} must be an integer tick, got the float {value!r}")
    raise BadElement(f'{name} must be an integer tick or "inf", got {value!r}')


def _id(obj: dict[str, Any]) -> str:
    if "id" not in obj:
        raise BadElement("missing field 'id'")
    v = obj["id"]
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise BadElement(f"id must be a string, got {v!r}")
    return str(v)


def _need(obj: dict[str, Any], name: str) -> Any:
    if name not in obj:
        raise BadElement(f"missing field {name!r}")
    return obj[name]


def parse_element(obj: Any, *, line: int | None = None) -> Element:
    """Turn one decoded JSON value into an element, or raise `BadElement` naming what is wrong."""
    try:
        if not isinstance(obj, dict):
            raise BadElement(f"an element must be a JSON object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind == "insert":
            le = parse_time(_need(obj, "le"), "le", allow_inf=False)
            re = parse_time(_need(obj, "re"), "re", allow_inf=True)
            payload = obj.get("payload", {})
            if not isinstance(payload, dict):
                raise BadElement(f"payload must be a JSON object, got {type(payload).__name__}")
            if re <= le:
                raise BadElement(f"insert needs le < re, got [{le}, {re})")
            return Insert(_id(obj), le, re, payload)
        if kind == "retract":
            le = parse_time(_need(obj, "le"), "le", allow_inf=False)
            re = parse_time(_need(obj, "re"), "re", allow_inf=True)
            re_new = parse_time(_need(obj, "re_new"), "re_new", allow_inf=True)
            payload = obj.get("payload")
            if payload is not None and not isinstance(payload, dict):
                raise BadElement(f"payload must be a JSON object, got {type(payload).__name__}")
            if re <= le:
                raise BadElement(f"retract needs le < re, got [{le}, {re})")
            if re_new < le:
                raise BadElement(f"retract needs re_new >= le, got le={le}, re_new={re_new}")
            return Retract(_id(obj), le, re, re_new, payload)
        if kind == "cti":
            return Cti(parse_time(_need(obj, "t"), "t", allow_inf=True))
        raise BadElement(f"unknown element kind {kind!r} (expected insert, retract or cti)")
    except BadElement as exc:
        raise BadElement(exc.reason, line=line, raw=obj) from None


time_to_json = time_json  # one encoding for element and payload times (SEMANTICS §1)


def element_to_json(el: Element) -> dict[str, Any]:
    if isinstance(el, Insert):
        return {"kind": "insert", "id": el.id, "le": el.le, "re": time_to_json(el.re), "payload": el.payload}
    if isinstance(el, Retract):
        out: dict[str, Any] = {
            "kind": "retract",
            "id": el.id,
            "le": el.le,
            "re": time_to_json(el.re),
            "re_new": time_to_json(el.re_new),
        }
        if el.payload is not None:
            out["payload"] = el.payload
        return out
    return {"kind": "cti", "t": time_to_json(el.t)}
