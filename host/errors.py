"""The host's error family. Everything a user can cause is a `UdmError` with a one-line message;
the CLI prints that line and exits non-zero instead of showing a traceback."""

from __future__ import annotations

__all__ = [
    "AmbiguousUDM",
    "BadElement",
    "ContractViolation",
    "InvalidUDM",
    "ParamError",
    "PluginLoadError",
    "PolicyError",
    "QuerySpecError",
    "UdmError",
    "UnknownUDM",
    "ViolationError",
]


class UdmError(Exception):
    """Base of every error the host reports to users."""


class PluginLoadError(UdmError):
    """Strict mode: at least one plugin failed to load."""


class UnknownUDM(UdmError):
    """No installed UDM matches the requested name (and version specifier)."""


class AmbiguousUDM(UdmError):
    """The request matches several UDMs the host cannot choose between."""


class InvalidUDM(UdmError):
    """The UDM exists but was refused at load time (its manifest lies, or its plugin is broken)."""


class ParamError(UdmError):
    """Initialization parameters do not validate against the UDM's parameter model."""


class PolicyError(UdmError):
    """The query asks for a clipping/output policy the UDM does not allow."""


class QuerySpecError(UdmError):
    """The query spec is malformed."""


class BadElement(UdmError):
    """An input element is malformed or invalid; carries the reason that goes to the dead-letter output."""

    def __init__(self, reason: str, *, line: int | None = None, raw: object = None) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{reason}")
        self.reason = reason
        self.line = line
        self.raw = raw


class ViolationError(UdmError):
    """``on_violation: error`` and an element was invalid or violated a CTI."""


class ContractViolation(UdmError):
    """A UDM broke its contract at run time (raised, returned the wrong type, broke its policy)."""
