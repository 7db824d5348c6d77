"""``explode``: a span UDO (run by a ``flat_map`` step) giving one event per element of a list field."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from udm.sdk import MalformedPayload, SpanUDO, udm

__all__ = ["Explode"]

_JSON_TYPES = {dict: "an object", str: "a string", bool: "a boolean", int: "a number", float: "a number",
               type(None): "null"}


class ExplodeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    field: str = Field("items", min_length=1, description="payload field holding the list")
    as_: str | None = Field(None, alias="as", min_length=1,
                            description="output field for one element (default: `field` itself)")


@udm(name="explode", version="1.0.0", input_type="payload", output_type="payload")
class Explode(SpanUDO):
    """One output per element of the list in ``field``: the input payload with ``as`` set to the element.

    ``as`` defaults to ``field`` (the list is replaced by one element); when it differs, ``field`` is
    removed from the output. Each output keeps the event's lifetime; an empty list gives none. A payload
    without ``field``, or whose ``field`` is not a list, is malformed (a dead letter of the step).
    """

    Params = ExplodeParams

    @classmethod
    def example_payloads(cls, rng: random.Random) -> list[dict[str, Any]]:
        """Example inputs for the conformance kit (default parameters): lists of up to 4 elements of mixed
        kinds, empty lists, and a few payloads it refuses (no list, or not a list)."""
        pool: list[dict[str, Any]] = []
        for i in range(12):
            kinds = [rng.randint(0, 9), "a", "b", None, [1, 2], {"x": 1}]
            items = [rng.choice(kinds) for _ in range(rng.randint(0, 4))]
            pool.append({"id": i, "items": items})
        return [*pool, {"id": 99}, {"id": 98, "items": "abc"}]

    def compute(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        field = self.params.field
        target = self.params.as_ or field
        if field not in payload:
            raise MalformedPayload(f"missing field {field!r}")
        items = payload[field]
        if not isinstance(items, list):
            kind = _JSON_TYPES.get(type(items), type(items).__name__)
            raise MalformedPayload(f"field {field!r} must be a list, got {kind}")
        base = dict(payload) if target == field else {k: v for k, v in payload.items() if k != field}
        for item in items:
            yield {**base, target: item}
