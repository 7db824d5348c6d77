"""Strict JSON at the edges (SEMANTICS §1): what an input value may be, and what an output line may hold.

The rules, in one place for every reader (the local engine's JSON Lines and table readers, the Spark
paths) and every writer:

- A time is an integer in ``(-2**63, 2**63-1)`` — both ends excluded: ``2**63-1`` is how the host stores
  ``INF`` and may only be written ``"inf"`` — or the string ``"inf"`` where an infinite time is allowed
  (``re``, ``re_new``, ``t``). A float, a boolean or a number beyond int64 makes the element invalid.
- A payload number is finite: ``NaN``, ``Infinity``, ``-Infinity`` and a literal that overflows a double
  (``1e999``) are malformed values, so the element is a dead letter with the reason.
- Output is RFC 8259 JSON: `dumps` refuses a non-finite number instead of writing ``NaN``.
- A value's canonical text (SEMANTICS §5: ordering ties, group and join keys, CHT rows) is `canonical_json`,
  the one function every engine path, the oracle and the CHT use, so they agree on it to the byte.

Python's `json` accepts ``NaN``/``Infinity`` and turns ``1e999`` into ``inf`` silently; `loads` is `json`
with both closed (about as fast as ``json.loads``: a prebuilt decoder, a check per float literal only).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from udm.host.errors import BadElement, UdmError
from udm.sdk import INF

__all__ = [
    "TIME_MAX",
    "TIME_MIN",
    "TOO_DEEP",
    "NotStrictJSON",
    "canonical_json",
    "dumps",
    "echo",
    "echo_dumps",
    "encode",
    "loads",
    "nonfinite_in",
    "payload_problem",
    "time_value",
]

#: The open interval a finite time lies in: ``TIME_MIN < t < TIME_MAX`` (``TIME_MAX`` is ``INF``'s value).
TIME_MIN = -(2**63)
TIME_MAX = INF


class NotStrictJSON(ValueError):
    """The text is JSON only to a lenient parser (``NaN``, ``Infinity``, a number overflowing a double)."""


def _constant(name: str) -> Any:
    raise NotStrictJSON(f"{name} is not a JSON number")


def _float(text: str) -> float:
    v = float(text)
    if v - v != 0:  # inf (overflow) only: a literal cannot spell NaN
        raise NotStrictJSON(f"the number {_short(text)} overflows a double")
    return v


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-10:]}"


def _int(text: str) -> int:
    v = int(text)
    if not -_BIG < v < _BIG:
        raise NotStrictJSON(f"the number {_short(text)} overflows a double")
    return v


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)
#: an integer literal overflows a double only with 309 digits or more: only a text that long can hold one
_LONG = 309
_LONG_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)


def loads(text: str | bytes) -> Any:
    """``json.loads`` that also refuses non-finite numbers (`NotStrictJSON`, a ``ValueError``): ``NaN``,
    ``Infinity``, and literals beyond a double (``1e999``, a 400-digit integer). Bytes must be UTF-8 (a
    leading byte-order mark is allowed, as ``json.loads`` allows it): a ``UnicodeDecodeError`` otherwise."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8-sig" if text[:3] == b"\xef\xbb\xbf" else "utf-8")
    return (_LONG_DECODER if len(text) >= _LONG else _DECODER).decode(text)


def time_value(value: Any, name: str, *, allow_inf: bool, inf_int: bool = False) -> int:
    """An element time as the host's int64 tick, or `BadElement` naming what is wrong with it.

    ``inf_int``: the value comes from a typed column (a Spark ``long``, a Python element built in code),
    where the integer ``2**63-1`` is how ``INF`` is stored (SEMANTICS §1), not from JSON text, where only
    ``"inf"`` spells it."""
    if type(value) is int:  # (the common case first; bool is not int here)
        if TIME_MIN < value < TIME_MAX:
            return value
        if value == TIME_MAX and inf_int and allow_inf:
            return INF
        raise BadElement(f"{name} {_short(str(value))} is out of range: a time is an integer between -2**63 and "
                         f"2**63-1, both excluded" + (' (write "inf" for an infinite time)' if value >= TIME_MAX
                                                      and allow_inf else ""))
    if isinstance(value, str) and value.lower() == "inf":
        if not allow_inf:
            raise BadElement(f'{name} cannot be "inf"')
        return INF
    if isinstance(value, bool):
        raise BadElement(f"{name} must be an integer tick, got {value!r}")
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            raise BadElement(f"{name} must be an integer tick, got the float {value!r}")
        raise BadElement(f"{name} must be an integer tick, got {value!r}")
    if isinstance(value, int):  # an int subclass
        return time_value(int(value), name, allow_inf=allow_inf, inf_int=inf_int)
    raise BadElement(f'{name} must be an integer tick or "inf", got {value!r}')


def nonfinite_in(value: Any, path: str = "") -> str | None:
    """Where ``value`` holds a number JSON cannot carry (``"price"``, ``"legs[2].x"``), else None: a float
    NaN or infinity, or an integer too large for a double."""
    t = type(value)
    if t is float:
        return None if value - value == 0 else (path or _WHOLE)
    if t is int:
        return None if -_BIG < value < _BIG else (path or _WHOLE)
    if t is str or t is bool or value is None:
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            where = nonfinite_in(v, f"{path}.{k}" if path else str(k))
            if where is not None:
                return where
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            where = nonfinite_in(v, f"{path}[{i}]")
            if where is not None:
                return where
        return None
    if isinstance(value, float):
        return nonfinite_in(float(value), path)
    if isinstance(value, int) and not isinstance(value, bool):
        return nonfinite_in(int(value), path)
    return None


_WHOLE = "the value"

#: integers of this magnitude or more overflow a double (``float(10**309)`` raises OverflowError)
_BIG = int(sys.float_info.max) + 1


def payload_problem(payload: Any) -> str | None:
    """The dead-letter reason for a payload holding a non-finite number (SEMANTICS §1), else None."""
    where = nonfinite_in(payload)
    if where is None:
        return None
    return f"malformed value: payload field {where!r} is not a finite number (NaN, an infinity, or beyond a double)"


def dumps(value: Any, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity``: a non-finite number is a `UdmError` naming
    where it is (an output is strict JSON, SEMANTICS §1)."""
    try:
        return json.dumps(value, allow_nan=False, **kw)
    except ValueError:
        raise _not_finite(value) from None


_ENCODER = json.JSONEncoder(allow_nan=False)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """The canonical text of a value (SEMANTICS §5): keys sorted, no spaces. (Lenient about non-finite
    numbers: it orders and compares values, it does not write output; the encoder is built once, as
    ``json.dumps`` with arguments builds one per call.)"""
    return _CANONICAL.encode(value)


def encode(value: Any) -> str:
    """``json.dumps(value)`` with its default separators, byte for byte, but strict like `dumps` (the
    encoder is built once: output writers call this once per payload)."""
    try:
        return _ENCODER.encode(value)
    except ValueError:
        raise _not_finite(value) from None


def _not_finite(value: Any) -> Exception:
    where = nonfinite_in(value)
    if where is None:  # (a ValueError of another cause: a circular reference)
        return UdmError(f"output value cannot be written as JSON: {value!r:.200}")
    what = "an output value" if where == _WHOLE else f"output field {where!r}"
    return UdmError(f"{what} is not a finite number, which JSON cannot carry (SEMANTICS §1: a UDM or a UDF "
                    f"returned NaN or an infinity)")


def echo(value: Any) -> Any:
    """A bad input value as a dead letter can quote it in strict JSON: non-finite floats become the strings
    ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (the rest is unchanged)."""
    if isinstance(value, float):
        if value - value == 0:
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {k: echo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [echo(v) for v in value]
    return value


#: what a dead letter quotes for a value nested too deeply for the JSON encoder
TOO_DEEP = "(a value nested too deeply to quote)"


def echo_dumps(value: Any, **kw: Any) -> str:
    """`echo`'s form of ``value`` as JSON text (for dead letters and diagnostics, never for results)."""
    try:
        try:
            # (the prebuilt encoder when no option is given: ``json.dumps`` with arguments builds one per
            # call, a third of the cost of a small record; dead letters are encoded one by one)
            return _ENCODER.encode(value) if not kw else json.dumps(value, allow_nan=False, **kw)
        except ValueError:
            return json.dumps(echo(value), allow_nan=False, **kw)
    except RecursionError:  # (a line nested deeper than Python's recursion limit: a note instead of a crash)
        return json.dumps(TOO_DEEP)
