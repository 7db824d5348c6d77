"""Physical stream elements (SEMANTICS §1) and their JSON form (INTERFACES §1).

Parsing only checks what a single element can show on its own (shape, types, ``le < re``); whether it
is valid against the stream so far (known id, matching lifetime, CTI) is the consumer's job, since it
depends on state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from udm.host.errors import BadElement
from udm.host.temporal.strict import canonical_json, payload_problem, time_value
from udm.sdk import time_json

__all__ = [
    "Cti",
    "Ecti",
    "Element",
    "Insert",
    "Retract",
    "canonical_json",
    "element_to_json",
    "inserts",
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


def inserts(ids: list[str], les: list[int], res: list[int], payloads: list[dict[str, Any]]) -> list[Insert]:
    """``Insert(id, le, re, payload)`` for each row, made without the frozen ``__init__`` (one
    ``object.__setattr__`` call per field: it dominated an output of many rows)."""
    new = object.__new__
    out = []
    for i, a, b, p in zip(ids, les, res, payloads, strict=True):
        el = new(Insert)
        _set_id(el, i)
        _set_le(el, a)
        _set_re(el, b)
        _set_payload(el, p)
        out.append(el)
    return out


_set_id, _set_le, _set_re, _set_payload = (Insert.__dict__[f].__set__ for f in ("id", "le", "re", "payload"))


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


@dataclass(frozen=True, slots=True)
class Ecti:
    """External CTI (SEMANTICS §11, seeds/003 Finalize): exactly ``count`` data elements of this input have
    sync time in ``[le, re)``; it may arrive before, between or after them."""

    le: int
    re: int
    count: int


Element = Insert | Retract | Cti | Ecti


def sync_time(el: Element) -> int:
    """The earliest time an element modifies (SEMANTICS §1)."""
    if isinstance(el, Insert):
        return el.le
    if isinstance(el, Retract):
        return min(el.re, el.re_new)
    if isinstance(el, Ecti):
        return el.le
    return el.t


def parse_time(value: Any, name: str, *, allow_inf: bool, inf_int: bool = True) -> int:
    """An element time (SEMANTICS §1), or `BadElement`: the one rule is `udm.host.temporal.strict.time_value`."""
    return time_value(value, name, allow_inf=allow_inf, inf_int=inf_int)


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


def parse_element(obj: Any, *, line: int | None = None, json_text: bool = False) -> Element:
    """Turn one decoded value (a JSON object, a Spark row as a dict) into an element, or raise `BadElement`
    naming what is wrong.

    ``json_text``: ``obj`` was read from JSON text by `udm.host.temporal.strict.loads`, so its payload holds no
    non-finite number (not searched for one again) and only ``"inf"`` spells an infinite time; otherwise the
    integer ``2**63-1`` is ``INF`` too (Spark's ``long`` columns store it so) and payloads are searched."""
    ints = not json_text
    try:
        if not isinstance(obj, dict):
            raise BadElement(f"an element must be a JSON object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind == "insert":
            le = parse_time(_need(obj, "le"), "le", allow_inf=False, inf_int=ints)
            re = parse_time(_need(obj, "re"), "re", allow_inf=True, inf_int=ints)
            payload = obj.get("payload", {})
            if not isinstance(payload, dict):
                raise BadElement(f"payload must be a JSON object, got {type(payload).__name__}")
            if re <= le:
                raise BadElement(f"insert needs le < re, got [{le}, {re})")
            if not json_text and (problem := payload_problem(payload)) is not None:
                raise BadElement(problem)
            return Insert(_id(obj), le, re, payload)
        if kind == "retract":
            le = parse_time(_need(obj, "le"), "le", allow_inf=False, inf_int=ints)
            re = parse_time(_need(obj, "re"), "re", allow_inf=True, inf_int=ints)
            re_new = parse_time(_need(obj, "re_new"), "re_new", allow_inf=True, inf_int=ints)
            payload = obj.get("payload")
            if payload is not None and not isinstance(payload, dict):
                raise BadElement(f"payload must be a JSON object, got {type(payload).__name__}")
            if payload is not None and not json_text and (problem := payload_problem(payload)) is not None:
                raise BadElement(problem)
            if re <= le:
                raise BadElement(f"retract needs le < re, got [{le}, {re})")
            if re_new < le:
                raise BadElement(f"retract needs re_new >= le, got le={le}, re_new={re_new}")
            return Retract(_id(obj), le, re, re_new, payload)
        if kind == "cti":
            return Cti(parse_time(_need(obj, "t"), "t", allow_inf=True, inf_int=ints))
        if kind == "ecti":
            le = parse_time(_need(obj, "le"), "le", allow_inf=False, inf_int=ints)
            re = parse_time(_need(obj, "re"), "re", allow_inf=True, inf_int=ints)
            count = _need(obj, "count")
            if type(count) is not int or not 0 <= count < 2**63:
                raise BadElement(f"ecti count must be an integer >= 0, got {count!r}")
            if re <= le:
                raise BadElement(f"ecti needs le < re, got [{le}, {time_to_json(re)})")
            return Ecti(le, re, count)
        raise BadElement(f"unknown element kind {kind!r} (expected insert, retract, cti or ecti)")
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
    if isinstance(el, Ecti):
        return {"kind": "ecti", "le": el.le, "re": time_to_json(el.re), "count": el.count}
    return {"kind": "cti", "t": time_to_json(el.t)}
