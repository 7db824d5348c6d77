"""The manifest: what a UDM promises the host (INTERFACES §4), as one pydantic model."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "API_VERSION",
    "CLIP_POLICIES",
    "OUTPUT_POLICIES",
    "ClipPolicy",
    "ErrorBound",
    "Estimate",
    "Kind",
    "Manifest",
    "NoParams",
    "OutputPolicy",
    "Properties",
]

#: The host API version this SDK and host implement. A UDM declares the range it supports.
API_VERSION = "1.0"

Kind = Literal["udf", "uda", "udo"]
ClipPolicy = Literal["none", "left", "right", "full"]
OutputPolicy = Literal["window", "unaltered", "clip", "time_bound"]
CLIP_POLICIES: tuple[ClipPolicy, ...] = ("none", "left", "right", "full")
OUTPUT_POLICIES: tuple[OutputPolicy, ...] = ("window", "unaltered", "clip", "time_bound")
#: What an approximate aggregate estimates; each fixes the exact reference and the error measure.
Estimate = Literal["distinct_count", "quantile", "frequencies"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# lazy imports: packaging — checked when a manifest is made (a plugin loaded), not when udm.sdk is imported:
# a run whose query names no UDM never makes one (~5 ms of its start-up)

#: The models below are built (their validators compiled) on first use, not when udm.sdk is imported: a
#: ``udm run`` whose query names no UDM makes no manifest (issue #26: ~2 ms of its start-up).
_DEFERRED = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NoParams(BaseModel):
    """The parameter model of a UDM that takes no initialization parameters."""

    model_config = _DEFERRED


class Properties(BaseModel):
    """Declared properties the host checks and the planner relies on (seeds/000 §I.A.5)."""

    model_config = _DEFERRED

    incremental: bool = False
    time_sensitive: bool = False
    time_bound: bool = False
    algebraic: bool = False
    deterministic: bool = True
    #: a UDA whose value depends only on how many members a window has (and, time-sensitive, on their
    #: lifetimes), never on their values: the host hands it a placeholder for each member's value, so it
    #: never builds payloads for it (an extension of INTERFACES §4; the kit's ``value_blind`` check)
    value_blind: bool = False


class ErrorBound(BaseModel):
    """How far an approximate aggregate's value may be from the exact one; the conformance kit checks it
    on random data against the exact value.

    ``estimates`` says what the value estimates, which fixes the measure ``bound`` is in (``n``: the
    window's members):

    - ``distinct_count``: a number ``v``; with ``D`` the number of distinct members,
      ``|v - D| <= bound * D``.
    - ``quantile``: a number, or a list in the order of the UDA's ``quantile_ranks()``; each value ``x``
      answers a normalized rank ``q``, and ``x``'s exact rank interval ``[#(< x) / n, #(<= x) / n]`` among
      the members lies within ``bound`` of ``q``.
    - ``frequencies``: a list of ``{"item", "estimate", "lower_bound", "upper_bound"}``; for each entry, with
      ``f`` the item's number of occurrences, ``lower_bound <= f <= upper_bound`` and
      ``|estimate - f| <= bound * n``.

    ``bound`` is the bound at the default parameters; a UDA whose bound depends on its parameters
    implements ``error_bound() -> float`` for an instance (the host checks the two agree at the defaults).
    ``confidence`` is the probability that one value is within the bound (1.0: always).
    """

    model_config = _DEFERRED

    estimates: Estimate
    bound: float = Field(gt=0)
    confidence: float = Field(default=1.0, gt=0, le=1)


class Manifest(BaseModel):
    """What a UDM declares about itself. Checked against the implementation when it is loaded."""

    model_config = ConfigDict(**_DEFERRED, arbitrary_types_allowed=True)

    name: str
    version: str = "0.1.0"
    kind: Kind
    #: a span-based UDO: a ``flat_map`` step runs it once per event (no window, no clipping or output
    #: policy); False for every UDM a window step runs
    span: bool = False
    summary: str = ""
    properties: Properties = Field(default_factory=Properties)
    params: type[BaseModel] = NoParams
    input_type: str = "any"
    output_type: str = "any"
    allowed_clip: tuple[ClipPolicy, ...] = CLIP_POLICIES
    allowed_output: tuple[OutputPolicy, ...] = ("window",)
    host_api: str = ">=1.0,<2"
    docs: str = ""
    #: declared by an approximate aggregate (None: the value is exact)
    error_bound: ErrorBound | None = None

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"UDM name {v!r} must be an identifier (letters, digits, underscore)")
        return v

    @field_validator("version")
    @classmethod
    def _version_is_pep440(cls, v: str) -> str:
        from packaging.version import InvalidVersion, Version

        try:
            return str(Version(v))
        except InvalidVersion as exc:
            raise ValueError(f"version {v!r} is not a PEP 440 version") from exc

    @field_validator("host_api")
    @classmethod
    def _host_api_is_specifier(cls, v: str) -> str:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(v)
        except InvalidSpecifier as exc:
            raise ValueError(f"host_api {v!r} is not a PEP 440 version specifier") from exc
        return v

    @model_validator(mode="after")
    def _span_is_an_operator(self) -> Manifest:
        if self.span and self.kind != "udo":
            raise ValueError(f"span: only an operator (udo) can be span-based, not a {self.kind}")
        return self

    @model_validator(mode="after")
    def _value_blind_is_an_aggregate(self) -> Manifest:
        if self.properties.value_blind and (self.kind != "uda" or self.span):
            raise ValueError(f"value_blind: only an aggregate (uda) can be value-blind, not a {self.kind}")
        return self

    @field_validator("params")
    @classmethod
    def _params_is_model(cls, v: Any) -> type[BaseModel]:
        if not (isinstance(v, type) and issubclass(v, BaseModel)):
            raise ValueError(f"params must be a pydantic model class, got {v!r}")
        return v

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-safe view: the parameter model becomes its JSON schema."""
        data = self.model_dump(exclude={"params"})
        data["allowed_clip"] = list(self.allowed_clip)
        data["allowed_output"] = list(self.allowed_output)
        data["params"] = self.params.model_json_schema()
        return data
