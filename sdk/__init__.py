"""udm.sdk — everything a UDM writer needs, and nothing heavier than pydantic.

A UDM is a class deriving from one base below, declared with the `udm` decorator, and registered by a
plugin's ``register_udms`` hook::

    from udm.sdk import UDA, hookimpl, udm

    @udm(name="my_avg", version="1.0.0")
    class MyAvg(UDA):
        "Arithmetic mean."
        def compute(self, payloads: Sequence[float]) -> float:
            return sum(payloads) / len(payloads)

    @hookimpl
    def register_udms(register):
        register(MyAvg)

Importing this package never imports pyspark or `udm.host`, and imports each part on first use
(`__getattr__`): ``from udm.sdk import INF`` (the host's event reader) loads only the time helpers, not
pydantic and the manifest models, so ``udm run`` can start parsing its input before those are imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._bases import (
        UDA,
        UDF,
        UDM,
        UDO,
        IncrementalTimeSensitiveUDA,
        IncrementalTimeSensitiveUDO,
        IncrementalUDA,
        IncrementalUDO,
        OutputEvent,
        TimeSensitiveUDA,
        TimeSensitiveUDO,
    )
    from ._decorator import udm
    from ._hooks import PROJECT, hookimpl
    from ._manifest import (
        API_VERSION,
        CLIP_POLICIES,
        OUTPUT_POLICIES,
        ClipPolicy,
        Kind,
        Manifest,
        NoParams,
        OutputPolicy,
        Properties,
    )
    from ._time import INF, Event, WindowDescriptor, is_inf, time_json

__all__ = [
    "API_VERSION",
    "CLIP_POLICIES",
    "INF",
    "OUTPUT_POLICIES",
    "PROJECT",
    "UDA",
    "UDF",
    "UDM",
    "UDO",
    "ClipPolicy",
    "Event",
    "IncrementalTimeSensitiveUDA",
    "IncrementalTimeSensitiveUDO",
    "IncrementalUDA",
    "IncrementalUDO",
    "Kind",
    "Manifest",
    "NoParams",
    "OutputEvent",
    "OutputPolicy",
    "Properties",
    "TimeSensitiveUDA",
    "TimeSensitiveUDO",
    "WindowDescriptor",
    "hookimpl",
    "is_inf",
    "time_json",
    "udm",
]

#: public name → the submodule that defines it
_WHERE: dict[str, str] = {
    **dict.fromkeys(("UDA", "UDF", "UDM", "UDO", "IncrementalTimeSensitiveUDA", "IncrementalTimeSensitiveUDO",
                     "IncrementalUDA", "IncrementalUDO", "OutputEvent", "TimeSensitiveUDA", "TimeSensitiveUDO"),
                    "._bases"),
    "udm": "._decorator",
    "PROJECT": "._hooks",
    "hookimpl": "._hooks",
    **dict.fromkeys(("API_VERSION", "CLIP_POLICIES", "OUTPUT_POLICIES", "ClipPolicy", "Kind", "Manifest",
                     "NoParams", "OutputPolicy", "Properties"), "._manifest"),
    **dict.fromkeys(("INF", "Event", "WindowDescriptor", "is_inf", "time_json"), "._time"),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
