"""The registry's error type: a `UdmError`, so the CLI prints one line instead of a traceback."""

from __future__ import annotations

from udm.host.errors import UdmError

__all__ = ["RegistryError"]


class RegistryError(UdmError):
    """Publishing, reading or installing from a registry failed; the message says what and where."""
