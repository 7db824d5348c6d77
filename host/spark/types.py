"""Manifest type names → Spark SQL types, so a registered SQL function has a typed result column.

Manifests name their input/output types loosely (``float``, ``int``, ``bool``, ``any``, ``payload``);
anything Spark cannot type statically is carried as canonical JSON text, which round-trips exactly.
"""

from __future__ import annotations

from typing import Any

from udm.host.temporal.elements import canonical_json

__all__ = ["JSON_TYPES", "spark_type_for", "to_spark_value"]

_SIMPLE = {
    "float": "double", "double": "double", "number": "double",
    "int": "bigint", "integer": "bigint", "long": "bigint",
    "bool": "boolean", "boolean": "boolean",
    "str": "string", "string": "string",
}
#: Manifest types with no static Spark type: values travel as canonical JSON strings.
JSON_TYPES = frozenset({"any", "payload", "event", "json"})


def spark_type_for(manifest_type: str) -> str:
    """The Spark DDL type of a manifest type name (``string`` holding JSON when it has none)."""
    return _SIMPLE.get(manifest_type.lower(), "string")


def to_spark_value(value: Any, manifest_type: str) -> Any:
    """A UDM result as the Python value Spark expects for ``spark_type_for(manifest_type)``."""
    ddl = spark_type_for(manifest_type)
    if value is None:
        return None
    if ddl == "string" and manifest_type.lower() not in _SIMPLE:
        return canonical_json(value)
    if ddl == "double":
        return float(value)
    if ddl == "bigint":
        return int(value)
    if ddl == "boolean":
        return bool(value)
    return value
