"""Event-file I/O (INTERFACES §1): columnar batches, bulk JSONL reading, output and dead-letter writers.

`ElementBatch` is imported on first use: `udm.host.temporal.elements` imports `udm.host.io.strict` (the
SEMANTICS §1 value rules), and an eager import here would run `batch`, which imports the elements back.
"""

from typing import Any

__all__ = ["ElementBatch"]


def __getattr__(name: str) -> Any:
    if name == "ElementBatch":
        from .batch import ElementBatch

        return ElementBatch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
