"""Shared CLI plumbing: the rich consoles and JSON printing.

The consoles are made on first use (`_LazyConsole`): importing rich costs ~30 ms of CPU, which a
``udm run --quiet`` that prints nothing (or only ``--json``) would spend for no line drawn."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["check_tally", "err", "new_table", "out", "print_json"]


class _LazyConsole:
    """A `rich.console.Console` created (and rich imported) the first time any attribute is used."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def _get(self) -> Console:
        if self._console is None:
            from rich.console import Console  # lazy: rich (~30 ms) only when a line is drawn

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    @property
    def is_terminal(self) -> bool:
        """rich's answer, without importing rich when it is plainly no: the stream is not a TTY and neither
        ``TTY_COMPATIBLE`` nor ``FORCE_COLOR`` (which rich honours) is set — a piped or redirected run."""
        if self._console is None and "TTY_COMPATIBLE" not in os.environ and "FORCE_COLOR" not in os.environ:
            stream = sys.stderr if self._options.get("stderr") else sys.stdout
            try:
                if not stream.isatty():
                    return False
            except (AttributeError, ValueError):  # no isatty, or a closed stream: rich says no too
                return False
        return bool(self._get().is_terminal)


out: Console = _LazyConsole(soft_wrap=True)  # type: ignore[assignment]
err: Console = _LazyConsole(stderr=True, soft_wrap=True)  # type: ignore[assignment]


def new_table(*args: Any, **options: Any) -> Table:
    """A `rich.table.Table` (rich imported on first use, as for the consoles)."""
    from rich.table import Table  # lazy: rich (~30 ms) only when a line is drawn

    return Table(*args, **options)


def print_json(data: Any) -> None:
    """One JSON document on stdout, no colour, no wrapping (so scripts can parse it): strict JSON (RFC 8259),
    a non-finite number (a parameter default of infinity, say) spelled as the string ``"Infinity"``."""
    # lazy: pydantic (through udm.sdk) loads after `main` has paused the collector (`startup_gc`)
    from udm.host.temporal.strict import echo_dumps

    sys.stdout.write(echo_dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def check_tally(checks: Any) -> str:
    """How contract checks came out, in the one form every command prints: ``7 passed, 2 not applicable``
    (``, 1 failed`` when one did). A check that does not apply to a UDM (``skipped``) is not counted as
    passed; ``udm validate`` and ``udm registry publish`` count the same checks the same way."""
    rows = list(checks)
    failed = sum(not r["passed"] for r in rows)
    skipped = sum(bool(r["passed"] and r.get("skipped")) for r in rows)
    text = f"{len(rows) - failed - skipped} passed"
    if skipped:
        text += f", {skipped} not applicable"
    if failed:
        text += f", {failed} failed"
    return text
