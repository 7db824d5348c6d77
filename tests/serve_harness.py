"""Running `udm registry serve` as a user does, in a child process, for the serve and browser tests."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["UDM", "serving"]

UDM = [sys.executable, "-m", "udm.host.cli.app"]


@contextmanager
def serving(registry: Path, *extra: str, timeout: float = 60.0) -> Iterator[str]:
    """`udm registry serve --port 0 --registry DIR` until the block ends; yields its base URL (ends in /).
    Its request log goes to a file next to the registry, so a full pipe can never stall it."""
    log = (registry.parent / f"{registry.name}-serve.log").open("w")
    proc = subprocess.Popen([*UDM, "registry", "serve", "--port", "0", "--registry", str(registry), *extra],
                            stdout=subprocess.PIPE, stderr=log, bufsize=0, env={**os.environ, "COLUMNS": "200"})
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline, seen = time.monotonic() + timeout, ""
        while not (m := re.search(r"at (http://127\.0\.0\.1:\d+/)", seen)):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(f"udm registry serve did not start: {seen!r} "
                                   f"{Path(log.name).read_text()[-2000:]!r}")
            if sel.select(timeout=0.5):
                # the raw pipe, not readline(): a buffered reader may take both of serve's lines in one read
                # and return only the first, leaving the URL in its buffer where the selector cannot see it
                chunk = os.read(proc.stdout.fileno(), 65536)
                seen += chunk.decode(errors="replace")
                if not chunk:
                    sel.unregister(proc.stdout)
        yield m.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
