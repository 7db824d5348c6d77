"""The query snippet on a UDM's catalog page: a query spec (YAML) that calls the UDM by name.

It must be a spec `udm run` accepts once the placeholders are read (tests/test_registry_site.py parses
every first-party UDM's snippet with the query model), so values are written as JSON, which YAML reads
as is, and only the parameters without a default appear (with a placeholder of their type): the
defaults are what a query gets by leaving them out, and the parameter table lists them.
"""

from __future__ import annotations

import json
from typing import Any

from ._records import UdmRecord

__all__ = ["query_snippet"]

_PLACEHOLDER = {"integer": 1, "number": 1.0, "string": "value", "boolean": True, "array": [], "object": {}}
#: the payload field the snippet feeds the UDM (the README's examples use stock prices)
_FIELD = "price"


_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf"}


def _scalar(name: str) -> str:
    """A UDM name as YAML: bare when YAML reads it back as that string, else quoted (``null``, ``yes``...)."""
    return name if name.lower() not in _YAML_WORDS else json.dumps(name)


def _required_params(params: dict[str, Any]) -> dict[str, Any]:
    props = params.get("properties") or {}
    out: dict[str, Any] = {}
    for name in params.get("required", []):
        prop = props.get(name) if isinstance(props.get(name), dict) else {}
        if "enum" in prop and prop["enum"]:
            out[name] = prop["enum"][0]
        else:
            t = prop.get("type")
            out[name] = _PLACEHOLDER.get(t, None) if isinstance(t, str) else None
    return out


def _udf_step(u: UdmRecord) -> list[str]:
    extra = u.model_extra or {}
    args = [a for a in extra.get("udf_args", []) if isinstance(a, str)] or ["x"]
    is_filter = u.output_type == "bool"
    lines = [f"  - op: {'filter' if is_filter else 'map'}", f"    udf: {_scalar(u.name)}",
             f"    version: {json.dumps('>=' + u.version)}",
             f"    args: {json.dumps({args[0]: _FIELD})}"]
    if not is_filter:
        lines.append(f"    as: {_scalar(u.name)}")
    return lines


def _window_step(u: UdmRecord, kind: str) -> list[str]:
    lines = ["  - op: window", "    window:", "      type: tumbling", "      size: 10",
             f"    udm: {_scalar(u.name)}", f"    version: {json.dumps('>=' + u.version)}"]
    if u.input_type != "payload":
        lines.append(f"    input: {_FIELD}")
    if kind == "uda":
        lines.append(f"    as: {_scalar(u.name)}")
    return lines


def query_snippet(u: UdmRecord, kind: str) -> str:
    """The YAML spec; ``kind`` is the catalog's kind label (udf, uda, udo or span udo)."""
    if kind == "udf":
        lines = _udf_step(u)
    elif kind == "span udo":
        lines = ["  - op: flat_map", f"    udm: {_scalar(u.name)}", f"    version: {json.dumps('>=' + u.version)}"]
    else:
        lines = _window_step(u, kind)
    required = _required_params(u.params)
    if required:
        lines.append(f"    params: {json.dumps(required)}")
    return "\n".join(["steps:", *lines]) + "\n"
