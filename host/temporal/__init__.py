"""Temporal model shared by every engine path: elements, sync time, JSON form."""

from .elements import (
    Cti,
    Element,
    Insert,
    Retract,
    canonical_json,
    element_to_json,
    parse_element,
    parse_time,
    sync_time,
    time_to_json,
)

__all__ = [
    "Cti",
    "Element",
    "Insert",
    "Retract",
    "canonical_json",
    "element_to_json",
    "parse_element",
    "parse_time",
    "sync_time",
    "time_to_json",
]
