"""`use_bulk_pool`: run pyarrow's allocations on jemalloc (or the system allocator) instead of mimalloc.

Why: a bulk run allocates a few large buffers per block and frees them a block later (the parsed table, its
columns, the encoded output lines: megabytes each). pyarrow's default pool on Linux wheels is mimalloc,
which hands such large blocks back to the operating system at once, so every block's buffers are
faulted in afresh: measured on the Nexmark pass-through query (q0, 920 k elements), ~20 % of the run's
CPU, 500 k vs 610 k elements per CPU-second, and ~100 MiB more peak RSS. jemalloc keeps freed pages for
reuse (they decay back to the OS after a second); the system allocator's adaptive mmap threshold does
much the same. Values are unchanged: only where the bytes live.

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
