"""What a UDM may raise on purpose (anything else it raises is a contract violation, SEMANTICS §5)."""

from __future__ import annotations

__all__ = ["MalformedPayload"]


class MalformedPayload(Exception):
    """The payload a span UDO was handed lacks what it needs (a missing field, a value of the wrong kind).

    The host sends the event to the dead-letter output with this reason (SEMANTICS §1: a malformed payload
    is an invalid element, never a crash), and goes on; the event's later retractions are dead letters
    too (unknown id). The message is the reason, e.g. ``raise MalformedPayload("field 'tags' is missing")``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
