"""Calling a UDM outside the window engine (SQL functions, aggregates, UDTFs), with the engine's rules:
members in canonical order, incremental UDMs driven through initial_state/add/compute, and every UDM
failure reported as a `ContractViolation` naming the UDM and its version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from udm.host.errors import ContractViolation
from udm.host.temporal.elements import canonical_json
from udm.sdk import UDM

__all__ = ["call_set_udm", "canonical_order", "label_of"]


def label_of(udm_obj: UDM) -> str:
    man = type(udm_obj).manifest
    return f"{man.name} {man.version}"


def canonical_order(values: Sequence[Any]) -> list[Any]:
    """SEMANTICS §5 with every member sharing one lifetime: ties are broken by canonical JSON text.
    Spark hands a group's rows in no particular order; this makes the UDM's input deterministic."""
    return sorted(values, key=canonical_json)


def call_set_udm(udm_obj: UDM, payloads: Sequence[Any], where: str) -> Any:
    """``compute`` of a time-insensitive UDA/UDO over a set of payloads (incremental or not)."""
    members = canonical_order(payloads)
    try:
        if type(udm_obj).manifest.properties.incremental:
            state = udm_obj.initial_state()
            state = udm_obj.add(state, members)
            return udm_obj.compute(state)
        return udm_obj.compute(members)
    except Exception as exc:
        raise ContractViolation(f"UDM {label_of(udm_obj)} failed on {where}: {type(exc).__name__}: {exc}") from exc
