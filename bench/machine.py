"""What a wall-clock figure needs beside it: the bench machine is shared, so its load goes with every
timing a benchmark prints."""

from __future__ import annotations

import os

__all__ = ["load_text", "rss"]


def load_text() -> str:
    """The machine's load average (1 and 5 min) with its core count."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load n/a"
    return f"load avg {one:.1f}/{five:.1f} on {os.cpu_count()} cpus"


def rss() -> int:
    """This process's resident memory in bytes (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
