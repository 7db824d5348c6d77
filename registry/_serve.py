"""`udm registry serve`: a local preview of a registry directory, its catalog site and its PEP 503 index, on
127.0.0.1.

A registry is static files, so this is the standard library's file server with three changes: it binds the
loopback address only; it answers 404 for hidden files (``.lock``, the site's build state); and it tells
browsers not to cache, so a page republished while the preview runs shows on the next reload. pip accepts
``http://127.0.0.1:PORT/simple/`` as an index (loopback is a trusted origin for pip). Before serving, the
site is brought up to date (`write_index`, which rewrites only what is out of date: after an upgrade of
udmkit, every page once).
"""

from __future__ import annotations

import errno
import functools
import http.server
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ._errors import RegistryError
from ._index import write_index
from ._location import Location
from ._store import CATALOG_FILE, locked, read_catalog

__all__ = ["HOST", "make_server", "refresh_site"]

HOST = "127.0.0.1"


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        "": "application/octet-stream",
        ".html": "text/html; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".json": "application/json",
        ".whl": "application/octet-stream",
    }

    def send_head(self) -> Any:
        parts = unquote(urlsplit(self.path).path).split("/")
        if any(p.startswith(".") for p in parts if p):
            self.send_error(404, "File not found")
            return None
        return super().send_head()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def _directory(loc: Location) -> Path:
    if loc.path is None:
        raise RegistryError(f"{loc} is already served on the web; `udm registry serve` previews a registry "
                            "directory (--registry DIR or $UDM_REGISTRY)")
    root = loc.path
    if not (root / CATALOG_FILE).is_file():
        raise RegistryError(f"nothing to serve: {root} is not a registry yet (no {CATALOG_FILE}); publish to it "
                            f"first: udm registry publish PROJECT_DIR --registry {root}")
    return root


def refresh_site(loc: Location) -> int | None:
    """Bring the registry's site up to date with its catalog: the number of files rewritten, or None for a
    directory this user cannot write (it is then served as it is)."""
    root = _directory(loc)
    if not os.access(root, os.W_OK):
        return None
    with locked(root):
        return len(write_index(root, read_catalog(loc)).written)


def make_server(loc: Location, port: int = 8000) -> http.server.ThreadingHTTPServer:
    """A server for the registry directory on 127.0.0.1:``port`` (0 picks a free port); not yet running."""
    root = _directory(loc)
    handler = functools.partial(_Handler, directory=str(root))
    try:
        return http.server.ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise RegistryError(f"cannot serve on {HOST}:{port}: the port is in use; choose another with "
                                "--port (0 picks a free one)") from None
        raise RegistryError(f"cannot serve on {HOST}:{port}: {exc.strerror or exc}") from None
