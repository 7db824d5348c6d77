"""One BLAS thread in a ``udm`` process, unless the user chose a number.

numpy's wheels bundle OpenBLAS, which starts a worker thread per core when numpy is imported; each worker
busy-waits for work for a while before it sleeps. udmkit imports numpy at start-up and its engine calls no
BLAS routine (its numpy work is element-wise: masks, sorts, searches, cumulative sums), so on a 2-core
machine that spinning only takes a core from the start-up and from the reader's parse threads: measured with
``OPENBLAS_NUM_THREADS=1`` against unset, 5 alternating runs each, a 1-line ``udm run`` took 0.32-0.38 s
against 0.38-0.40 s of wall time (0.33 against 0.50 CPU-s), and the 1 M-element tumbling run 0.97-1.01 s against
1.04-1.06 s. A UDM's own BLAS call runs on one batch or one window's members, where one thread is the right
size anyway; PySpark makes the same choice for its Python workers (``OMP_NUM_THREADS`` = the task's cores).

`limit` sets ``OPENBLAS_NUM_THREADS=1`` before numpy is imported, only for the program's own ``udm``
command (``main`` called from ``__main__``; a test harness or an embedding program keeps its environment),
and only when none of the variables OpenBLAS reads for its thread count is set: a user's
``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS`` wins. A Spark run's JVM and Python
workers inherit the setting from the driver's environment.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["CHOICES", "limit"]

#: the variables OpenBLAS takes its thread count from (first set wins); any of them set is a user's choice
CHOICES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def limit(caller_module: object, environ: MutableMapping[str, str] | None = None) -> bool:
    """One OpenBLAS thread for the program's own ``udm`` command (see the module docstring); True when this
    call set it."""
    env = os.environ if environ is None else environ
    if caller_module != "__main__" or any(env.get(name) for name in CHOICES):
        return False
    env["OPENBLAS_NUM_THREADS"] = "1"
    return True
