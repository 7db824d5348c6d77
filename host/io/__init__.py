"""Event-file I/O (INTERFACES §1): columnar batches, bulk JSONL reading, output and dead-letter writers."""

from .batch import ElementBatch

__all__ = ["ElementBatch"]
