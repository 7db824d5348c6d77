"""What `udm new` is asked for, checked up front so a bad request never leaves half a project behind."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Literal

from udm.host.errors import UdmError

__all__ = ["KINDS", "NewProjectError", "ProjectOptions"]

Kind = Literal["udf", "uda", "udo"]
KINDS: tuple[Kind, ...] = ("udf", "uda", "udo")

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_MAX_NAME = 40


class NewProjectError(UdmError):
    """The name or the flag combination given to `udm new` cannot make a valid project."""


_BASES: dict[tuple[Kind, bool, bool], str] = {
    ("udf", False, False): "UDF",
    ("uda", False, False): "UDA",
    ("uda", True, False): "IncrementalUDA",
    ("uda", False, True): "TimeSensitiveUDA",
    ("uda", True, True): "IncrementalTimeSensitiveUDA",
    ("udo", False, False): "UDO",
    ("udo", True, False): "IncrementalUDO",
    ("udo", False, True): "TimeSensitiveUDO",
    ("udo", True, True): "IncrementalTimeSensitiveUDO",
}
#: span UDOs (``--span``), by time sensitivity: run once per event by a ``flat_map`` step
_SPAN_BASES: dict[bool, str] = {False: "SpanUDO", True: "TimeSensitiveSpanUDO"}


@dataclass(frozen=True)
class ProjectOptions:
    """A validated request; every name the templates need is derived here, in one place."""

    name: str
    kind: Kind
    incremental: bool = False
    time_sensitive: bool = False
    #: a span UDO (``--span``): a ``flat_map`` step runs it once per event
    span: bool = False

    def __post_init__(self) -> None:
        n = self.name
        if not _NAME.match(n):
            raise NewProjectError(
                f"invalid UDM name {n!r}: use lowercase letters, digits and underscores, starting with a "
                f"letter (it is the name queries call, a Python module and part of the package name)")
        if len(n) > _MAX_NAME:
            raise NewProjectError(f"invalid UDM name {n!r}: at most {_MAX_NAME} characters")
        if keyword.iskeyword(n) or keyword.issoftkeyword(n):
            raise NewProjectError(f"invalid UDM name {n!r}: it is a Python keyword")
        if n.endswith("_") or "__" in n:
            raise NewProjectError(f"invalid UDM name {n!r}: no trailing or doubled underscores")
        if self.kind not in KINDS:
            raise NewProjectError(f"invalid kind {self.kind!r}: choose one of {', '.join(KINDS)}")
        if self.kind == "udf" and self.incremental:
            raise NewProjectError("--incremental does not apply to --kind udf: a UDF is called once per event "
                                  "and keeps no window state; use --kind uda or --kind udo")
        if self.kind == "udf" and self.time_sensitive:
            raise NewProjectError("--time-sensitive does not apply to --kind udf: a UDF is span-based and its "
                                  "output keeps the input's lifetime; use --kind uda or --kind udo")
        if self.span and self.kind != "udo":
            raise NewProjectError(f"--span applies to --kind udo only: a span UDO turns each event into zero or "
                                  f"more events (a flat_map step); a {self.kind.upper()} has no span form")
        if self.span and self.incremental:
            raise NewProjectError("--incremental does not apply to --span: a span UDO is called once per event "
                                  "and keeps no window state")

    @property
    def distribution(self) -> str:
        """The pip distribution name, e.g. ``udm-my-avg`` (PEP 503 normalized form)."""
        return "udm-" + self.name.replace("_", "-")

    @property
    def package(self) -> str:
        return "udm_" + self.name

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def base(self) -> str:
        """The udm.sdk base class for this kind × incrementality × time sensitivity (× span)."""
        if self.span:
            return _SPAN_BASES[self.time_sensitive]
        return _BASES[(self.kind, self.incremental, self.time_sensitive)]

    @property
    def variant(self) -> str:
        """A short label such as ``uda-incremental-time_sensitive`` (used in tests and the answers file)."""
        parts = [self.kind] + (["span"] if self.span else []) + (["incremental"] if self.incremental else []) + (
            ["time_sensitive"] if self.time_sensitive else [])
        return "-".join(parts)

    @property
    def example(self) -> str:
        """The example template: the kind's (``udf``, ``uda``, ``udo``), or ``span_udo``."""
        return "span_udo" if self.span else self.kind

    @classmethod
    def all_variants(cls, name: str = "example") -> list[ProjectOptions]:
        """Every valid combination of kind and flags."""
        return [*(cls(name, kind, inc, ts) for (kind, inc, ts) in _BASES),
                *(cls(name, "udo", False, ts, span=True) for ts in _SPAN_BASES)]
