"""Queries built and run from Python, over the query model (`udm.host.model`): the fluent API (`Stream`,
`udm.host.query.fluent`), `make_runner` and the engines behind ``udm run`` (`udm.host.query.runners`), and
replicas merged by ``lmerge`` (`udm.host.query.replicas`).

``from udm.host.query import Stream`` imports the fluent API on first use, so that importing the engine
registry (as ``udm --help`` does) loads no reader.
"""

from typing import Any

__all__ = ["Stream"]


def __getattr__(name: str) -> Any:
    if name in ("Stream", "run_elements"):
        from . import fluent  # lazy: the fluent API loads the readers (pyarrow)

        return getattr(fluent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
