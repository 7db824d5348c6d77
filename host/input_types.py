"""Declared UDM input types, checked on the values a step hands a UDM (SEMANTICS §1, semantics-notes 17).

A manifest's ``input_type`` is free text (``"float"``, ``"Sequence[float]"``, ``"payload"``, ``"Word"``).
`input_type` reads the part of it that JSON values can be checked against — numbers, integers, strings,
booleans, objects, arrays, null and unions of them — and returns None for anything else (``any``,
``event``, a user's class name): an unknown declaration is never a reason to refuse data. For a UDA/UDO
one outer sequence layer (``Sequence[float]``: the hint of ``compute(payloads)``) names the members'
type. The same reading serves the engine, the Spark plans and the kit's oracle, so they agree on which
elements are malformed.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["InputType", "input_type", "json_type", "step_checks", "type_reason"]

_Test = Callable[[Any], bool]


def _is_number(v: Any) -> bool:
    t = type(v)
    return t is float or t is int


def _is_int(v: Any) -> bool:
    return type(v) is int


#: a JSON kind -> its test (module-level, so an `InputType` pickles with the engine's state)
_TESTS: dict[str, _Test] = {
    "number": _is_number,
    "integer": _is_int,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
#: declared words -> JSON kind
_WORDS: dict[str, str] = {}
for _kind, _names in (
    ("number", ("float", "number", "numeric", "real", "decimal")),
    ("integer", ("int", "integer")),
    ("string", ("str", "string")),
    ("boolean", ("bool", "boolean")),
    ("object", ("dict", "mapping")),
    ("array", ("list", "array", "tuple")),
    ("null", ("none", "null", "nonetype")),
):
    for _n in _names:
        _WORDS[_n] = _kind

_SEQUENCES = ("sequence", "list", "iterable", "collection", "tuple")
_GENERIC = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)\[(.*)\]$")


def json_type(v: Any) -> str:
    """A value's JSON type name, as reasons show it."""
    if v is None:
        return "null"
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "number"
    if t is str:
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return t.__name__


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out]


def _parse(text: str) -> list[str] | None:
    """The JSON kinds a type expression admits, or None when some part is unknown (then: unchecked)."""
    text = text.strip()
    parts = _split_top(text, "|")
    if len(parts) > 1:
        kinds: list[str] = []
        for p in parts:
            sub = _parse(p)
            if sub is None:
                return None
            kinds.extend(sub)
        return kinds
    m = _GENERIC.match(text)
    if m:
        head = m.group(1).rsplit(".", 1)[-1].lower()
        args = _split_top(m.group(2), ",")
        if head == "optional" and len(args) == 1:
            return _parse(f"{args[0]} | None")
        if head == "union":
            return _parse(" | ".join(args))
        word = _WORDS.get(head)
        return [word] if word in ("object", "array") else None
    word = _WORDS.get(text.rsplit(".", 1)[-1].lower())
    return [word] if word is not None else None


@dataclass(frozen=True)
class InputType:
    """A checkable declared input type: ``declared`` as the manifest writes it (for a UDA/UDO, the
    members' type inside an outer sequence)."""

    declared: str
    kinds: tuple[str, ...]

    def accepts(self, v: Any) -> bool:
        kinds = self.kinds
        if len(kinds) == 1:
            return _TESTS[kinds[0]](v)
        return any(_TESTS[k](v) for k in kinds)

    @property
    def test(self) -> _Test:
        """``accepts`` as one plain function for a single kind (the per-event hot path)."""
        return _TESTS[self.kinds[0]] if len(self.kinds) == 1 else self.accepts

    def bad_mask(self, values: Any) -> np.ndarray | None:
        """Rows of a column (numpy array or list) whose value does not match; None when every row does."""
        if isinstance(values, np.ndarray) and values.dtype.kind in "if":
            ok = "number" in self.kinds or (values.dtype.kind == "i" and "integer" in self.kinds)
            return None if ok else np.ones(len(values), dtype=bool)
        bad = np.fromiter((not self.accepts(v) for v in values), dtype=bool, count=len(values))
        return bad if bad.any() else None


def input_type(declared: str, kind: str) -> InputType | None:
    """The check for a manifest's ``input_type`` of a UDM of ``kind`` (udf/uda/udo); None: unchecked."""
    text = declared.strip()
    if kind != "udf":
        m = _GENERIC.match(text)
        if m and m.group(1).rsplit(".", 1)[-1].lower() in _SEQUENCES and len(_split_top(m.group(2), ",")) == 1:
            text = m.group(2)
    kinds = _parse(text)
    if not kinds:
        return None
    return InputType(text, tuple(dict.fromkeys(kinds)))


def type_reason(field: str | None, label: str, tp: InputType, value: Any) -> str:
    """The dead-letter reason of a value of the wrong type: the field, the expected and the actual type."""
    what = "the payload" if field is None else f"field {field!r}"
    return f"wrong type: {what} is {json_type(value)}, {label} expects {tp.declared}"


def step_checks(bs: Any) -> tuple[tuple[str | None, InputType], ...]:
    """The type checks of a bound step: (payload field or None for the whole payload, type).

    A window step checks the value its UDM receives (semantics-notes 4): the field of a field-name
    ``input``, the whole payload when ``input`` is omitted; an ``input`` mapping (an object the host builds)
    is not checked. A UDF checks the field mapped to its first argument
    (what the manifest's ``input_type`` describes)."""
    parts = getattr(bs, "parts", ())
    if parts:  # ``aggregates``: each UDA checks the value it receives
        return tuple(check for part in parts for check in step_checks(part))
    entry = getattr(bs, "entry", None)
    if entry is None:
        return ()
    man = entry.manifest
    tp = input_type(man.input_type, man.kind)
    if tp is None:
        return ()
    step = bs.step
    if man.kind == "udf":
        args = getattr(step, "args", None)
        if args is None:  # a join's `where`: the joined payload, not a mapped field
            return ()
        first = _first_param(entry.cls)
        return ((args[first], tp),) if first is not None and first in args else ()
    spec = getattr(step, "input", None)
    if spec is None:
        return ((None, tp),)
    return ((spec, tp),) if isinstance(spec, str) else ()


def _first_param(cls: Any) -> str | None:
    params: Sequence[str] = [p for p in inspect.signature(cls.compute).parameters if p != "self"]
    return params[0] if params else None
