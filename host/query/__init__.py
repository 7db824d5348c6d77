"""Query model: spec (file/fluent API) and binding to catalog UDMs.

``from udm.host.query import Stream`` gives the fluent API (`udm.host.query.fluent`), imported lazily so
that importing the spec model stays light.
"""

from typing import Any

__all__ = ["Stream"]


def __getattr__(name: str) -> Any:
    if name in ("Stream", "run_elements"):
        from . import fluent  # lazy: the fluent API loads the readers (pyarrow); the spec model stays light

        return getattr(fluent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
