"""The ``udm`` console entry point run in process, for the CLI tests (not a test module itself)."""

from __future__ import annotations

import sys

import pytest

from udm.host.cli import app as app_mod


def udm(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the console entry point (which turns UdmErrors into one line + exit 1) in process:
    (exit code, stdout, stderr)."""
    old = sys.argv
    sys.argv = ["udm", *args]
    code = 0
    try:
        app_mod.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    cap = capsys.readouterr()
    return code, cap.out, cap.err
