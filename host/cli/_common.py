"""Shared CLI plumbing: the rich consoles and JSON printing."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

__all__ = ["err", "out", "print_json"]

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_json(data: Any) -> None:
    """One JSON document on stdout, no colour, no wrapping (so scripts can parse it)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()
