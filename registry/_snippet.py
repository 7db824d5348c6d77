"""The query snippet on a UDM's catalog page: a query spec (YAML) that calls the UDM by name.

It must be a spec `udm run` accepts as it stands (tests/test_registry_site.py binds every first-party
UDM's snippet against the installed catalog), so it names no parameter: the host requires a default for
every one, and the page's parameter table lists them. Strings that YAML could read as something else are
written as JSON, which YAML reads as is.
"""

from __future__ import annotations

import json

from ._records import UdmRecord

__all__ = ["query_snippet"]

#: the payload field the snippet feeds the UDM (the README's examples use stock prices)
_FIELD = "price"


_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf"}


def _scalar(name: str) -> str:
    """A UDM name as YAML: bare when YAML reads it back as that string, else quoted (``null``, ``yes``...)."""
    return name if name.lower() not in _YAML_WORDS else json.dumps(name)


def _udf_step(u: UdmRecord) -> list[str]:
    extra = u.model_extra or {}
    names = [a for a in extra.get("udf_args", []) if isinstance(a, str)] or ["x"]
    # one argument reads the price; several read fields named like them (rename them to yours)
    args = {names[0]: _FIELD} if len(names) == 1 else {a: a for a in names}
    is_filter = u.output_type == "bool"
    lines = [f"  - op: {'filter' if is_filter else 'map'}", f"    udf: {_scalar(u.name)}",
             f"    version: {json.dumps('>=' + u.version)}",
             f"    args: {json.dumps(args)}"]
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
    # a step's defaults are clip "none" and output "window": name an allowed policy when those are not
    if u.allowed_clip and "none" not in u.allowed_clip:
        lines.append(f"    clip: {u.allowed_clip[0]}")
    if u.allowed_output and "window" not in u.allowed_output:
        lines.append(f"    output: {u.allowed_output[0]}")
    return lines


def query_snippet(u: UdmRecord, kind: str) -> str:
    """The YAML spec; ``kind`` is the catalog's kind label (udf, uda, udo or span udo)."""
    if kind == "udf":
        lines = _udf_step(u)
    elif kind == "span udo":
        lines = ["  - op: flat_map", f"    udm: {_scalar(u.name)}", f"    version: {json.dumps('>=' + u.version)}"]
    else:
        lines = _window_step(u, kind)
    return "\n".join(["steps:", *lines]) + "\n"
