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

A span UDO (`SpanUDO`, `TimeSensitiveSpanUDO`) is run by a query's ``flat_map`` step once per event and
gives zero or more events for it (``explode``); it raises `MalformedPayload` for an event it cannot read.

Importing this package never imports pyspark or `udm.host`.
"""

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
    SpanUDO,
    TimeSensitiveSpanUDO,
    TimeSensitiveUDA,
    TimeSensitiveUDO,
)
from ._decorator import udm
from ._errors import MalformedPayload
from ._hooks import PROJECT, hookimpl
from ._manifest import (
    API_VERSION,
    CLIP_POLICIES,
    OUTPUT_POLICIES,
    ClipPolicy,
    ErrorBound,
    Estimate,
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
    "ErrorBound",
    "Estimate",
    "Event",
    "IncrementalTimeSensitiveUDA",
    "IncrementalTimeSensitiveUDO",
    "IncrementalUDA",
    "IncrementalUDO",
    "Kind",
    "MalformedPayload",
    "Manifest",
    "NoParams",
    "OutputEvent",
    "OutputPolicy",
    "Properties",
    "SpanUDO",
    "TimeSensitiveSpanUDO",
    "TimeSensitiveUDA",
    "TimeSensitiveUDO",
    "WindowDescriptor",
    "hookimpl",
    "is_inf",
    "time_json",
    "udm",
]
