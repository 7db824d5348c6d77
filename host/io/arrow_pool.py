"""`use_bulk_pool`: run pyarrow's allocations on jemalloc (or the system allocator) instead of mimalloc.

Why: a bulk run allocates a few large buffers per block (the parsed table and its columns, the encoded
output lines: megabytes each) in one thread and frees them in another: the reader's workers parse, the
engine's thread and the write-behind thread drop the columns a block later. With mimalloc, pyarrow's
default pool on Linux wheels, that costs 5-20 % of a span query's CPU, depending on the machine's state:
measured on the Nexmark pass-through query (q0, 920 k elements, alternating runs), 523 k elements per
CPU-second with mimalloc against 595 k with jemalloc and 594 k with the system allocator in one session,
637 k against 666 k in another; and ~60-100 MiB less peak RSS. In one thread the
pools cost the same (`bench.nexmark.stages`), so the cost is in the hand-over between threads (mimalloc
returns memory freed by another thread lazily, and refaults large blocks). The row path gains too
(`bench.bench_before_after`: 3-11 % more elements per CPU-second). Values are unchanged: only where the
bytes live.

A user's own choice wins: with ``ARROW_DEFAULT_MEMORY_POOL`` set, pyarrow's pool is left as it is (which
is also how the benchmarks compare pools).
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["ENV", "use_bulk_pool"]

#: pyarrow's own variable naming its default pool (``jemalloc``, ``mimalloc``, ``system``)
ENV = "ARROW_DEFAULT_MEMORY_POOL"

_done = False


def use_bulk_pool() -> str:
    """Make jemalloc (else the system allocator) pyarrow's default pool, once per process, unless
    `ENV` is set; returns the backend then in use. Buffers allocated earlier stay in their pool."""
    global _done
    if not _done and not os.environ.get(ENV):
        try:
            pool = pa.jemalloc_memory_pool()
        except NotImplementedError:  # a pyarrow built without jemalloc
            pool = pa.system_memory_pool()
        pa.set_memory_pool(pool)
    _done = True
    return str(pa.default_memory_pool().backend_name)
