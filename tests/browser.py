"""A real headless Chromium for the marketplace tests and screenshots: Debian's ``chromium`` package, driven by
Playwright's Python API (Playwright never downloads a browser here).

`make test` installs the package (the Makefile's ``$(CHROMIUM)`` prerequisite). When it is missing anyway,
`chromium_path` raises, so the browser tests fail and say why instead of being skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["CHROMIUM_FLAGS", "chromium", "chromium_path"]

#: flags that let Chromium run headless as root in a container, with nothing talking to the network
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


def chromium_path() -> str:
    """The Chromium binary: $UDM_CHROMIUM, else /usr/bin/chromium; an error naming the fix when absent."""
    path = os.environ.get("UDM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no Chromium at {path}: the browser tests need Debian's chromium package "
                           "(`make test` installs it: apt-get install -y chromium)")
    return path


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (a Playwright ``Browser``), closed on exit. Playwright makes a new empty
    profile directory for it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()
