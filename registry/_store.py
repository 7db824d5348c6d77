"""Reading the catalog from a directory or URL, and writing a registry directory safely.

Writes go to a temporary file and are renamed into place, under an exclusive lock on ``.lock``, so a
reader (pip, a browser, another `udm`) never sees a half-written page and two publishers never
interleave.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ._errors import RegistryError
from ._location import Location
from ._records import RegistryCatalog

__all__ = ["CATALOG_FILE", "atomic_write", "locked", "read_catalog"]

CATALOG_FILE = "catalog.json"
_TIMEOUT_S = 30


def _parse(text: str, where: str) -> RegistryCatalog:
    try:
        return RegistryCatalog.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise RegistryError(f"{where} is not a valid udm registry catalog: {first}") from None


def read_catalog(loc: Location) -> RegistryCatalog:
    """The registry's catalog; an empty one for a local directory nobody has published to yet."""
    if loc.path is not None:
        f = loc.path / CATALOG_FILE
        if not f.exists():
            if loc.path.exists() and not loc.path.is_dir():
                raise RegistryError(f"registry {loc.path} is not a directory")
            return RegistryCatalog()
        return _parse(f.read_text(encoding="utf-8"), str(f))
    url = loc.url_of(CATALOG_FILE)
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
            text = resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        raise RegistryError(f"cannot read {url}: HTTP {exc.code} (is {loc} a udm registry?)") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RegistryError(f"cannot reach {url}: {reason}") from None
    return _parse(text, url)


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Exclusive lock on the registry directory for the duration of a publish."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fh = (root / ".lock").open("a")
    except OSError as exc:
        raise RegistryError(f"cannot write to registry {root}: {exc.strerror or exc}") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
