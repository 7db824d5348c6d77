"""Spark's Python daemon for udmkit's local sessions (``spark.python.daemon.module``, set by `get_spark`):
pyspark's own daemon, with pyspark imported from the installed package instead of ``pyspark.zip``.

Why: Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's path, and Python
caches no bytecode for modules imported from a zip, so every worker the daemon forks compiled pyspark's
modules again (``pyspark.worker``, the Arrow serializers, the state client of ``transformWithStateInPandas``:
~0.7-1 s of CPU each, against ~0.15 s from the compiled package). When the zip is the one inside the
installed pyspark package (a pip-installed pyspark is its own ``SPARK_HOME``), both hold the same
files, so the zips move behind the installed package on the path; a zip of another Spark installation
stays first (its pyspark is the one that matches the JVM).
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder

__all__ = ["installed_first", "main"]


def installed_first(path: list[str]) -> list[str]:
    """``path`` with the zips of the installed pyspark package's ``python/lib`` moved to its end."""
    spec = PathFinder.find_spec("pyspark", [p for p in path if not p.endswith(".zip")])
    if spec is None or spec.origin is None:
        return path
    lib = os.path.join(os.path.dirname(os.path.abspath(spec.origin)), "python", "lib")
    ours = [p for p in path if p.endswith(".zip") and os.path.dirname(os.path.abspath(p)) == lib]
    return [p for p in path if p not in ours] + ours


def main() -> None:
    sys.path[:] = installed_first(sys.path)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
