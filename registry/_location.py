"""Where the registry is: ``--registry``, else ``$UDM_REGISTRY``, else a per-user directory.

A registry is a plain static tree (``simple/`` PEP 503 index, ``files/``, ``catalog.json``,
``index.html``), so a local directory can be served as is by any static web host and read back
through an http(s) URL. Publishing writes, so it needs a directory; everything else reads either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ._errors import RegistryError

__all__ = ["ENV_VAR", "Location", "default_registry_dir", "resolve_location"]

ENV_VAR = "UDM_REGISTRY"


def default_registry_dir() -> Path:
    """``$XDG_DATA_HOME/udm/registry`` (``~/.local/share/udm/registry`` when XDG_DATA_HOME is unset)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "udm" / "registry"


@dataclass(frozen=True)
class Location:
    """A registry root: a local directory (``path``) or a remote base URL (``url``, ending in ``/``)."""

    path: Path | None = None
    url: str | None = None

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else str(self.url)

    def url_of(self, rel: str) -> str:
        """The URL of ``rel`` (e.g. ``simple/``) inside the registry, as pip needs it."""
        if self.path is not None:
            return (self.path / rel).as_uri() + ("/" if rel.endswith("/") else "")
        assert self.url is not None
        return self.url + rel

    def writable_dir(self) -> Path:
        if self.path is None:
            raise RegistryError(f"cannot publish to {self.url}: publishing writes files, so it needs a "
                                "registry directory; publish locally and upload the directory to the web host")
        return self.path


def resolve_location(value: str | None = None) -> Location:
    """Turn the ``--registry`` value (or the environment, or the default) into a `Location`."""
    raw = value if value else os.environ.get(ENV_VAR) or ""
    if not raw.strip():
        return Location(path=default_registry_dir())
    raw = raw.strip()
    parsed = urlparse(raw)
    if parsed.scheme in ("http", "https"):
        if not parsed.netloc:
            raise RegistryError(f"registry URL {raw!r} has no host")
        return Location(url=raw if raw.endswith("/") else raw + "/")
    if parsed.scheme == "file":
        return Location(path=Path(unquote(parsed.path)).resolve())
    if parsed.scheme and len(parsed.scheme) > 1:  # "C:" drive letters are paths, anything longer is a URL
        raise RegistryError(f"registry {raw!r}: only directories and http(s)/file URLs are supported")
    return Location(path=Path(raw).expanduser().resolve())
