"""Event-file I/O (INTERFACES §1): columnar batches, bulk JSONL reading, output and dead-letter writers.

What a valid value is (SEMANTICS §1) is not here but in `udm.host.temporal.strict`, below both the
elements and these readers and writers.
"""
