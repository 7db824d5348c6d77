"""Reading a wheel without installing it: metadata, entry points, digests.

``content_digest`` hashes every member's bytes by name (except RECORD and WHEEL, which change with the
build tool, not with the code), so rebuilding the same sources is recognised as the same release even
though the zip bytes differ, while any change to code or metadata is a different release.
"""

from __future__ import annotations

import configparser
import hashlib
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ._errors import RegistryError

__all__ = ["WheelInfo", "file_sha256", "read_wheel"]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    distribution: str
    version: str
    summary: str
    requires_python: str
    requires_dist: tuple[str, ...]
    entry_points: dict[str, str]  # group "udm" only: name -> "module:attr"
    sha256: str
    content_digest: str
    readme: str = ""  # METADATA's long description (the project's README)
    readme_type: str = ""  # its Description-Content-Type, e.g. "text/markdown"


def _dist_info_dir(names: list[str], path: Path) -> str:
    dirs = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(dirs) != 1:
        raise RegistryError(f"{path.name}: expected exactly one .dist-info directory, found {len(dirs)}")
    return dirs.pop()


def _long_description(meta: Message) -> str:
    """The README as the wheel carries it: the METADATA body (metadata 2.1+) or the older header."""
    body = meta.get_payload()
    text = body if isinstance(body, str) and body.strip() else str(meta.get("Description", "") or "")
    return text.strip("\n")


def read_wheel(path: Path) -> WheelInfo:
    try:
        parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise RegistryError(f"{path}: not a wheel file name ({exc})") from None
    try:
        with zipfile.ZipFile(path) as zf:
            names = sorted(zf.namelist())
            info_dir = _dist_info_dir(names, path)
            meta = HeaderParser().parsestr(zf.read(f"{info_dir}/METADATA").decode("utf-8"))
            eps_text = (zf.read(f"{info_dir}/entry_points.txt").decode("utf-8")
                        if f"{info_dir}/entry_points.txt" in names else "")
            digest = hashlib.sha256()
            skip = {f"{info_dir}/RECORD", f"{info_dir}/WHEEL"}
            for name in names:
                if name in skip or name.endswith("/"):
                    continue
                digest.update(name.encode("utf-8") + b"\0" + hashlib.sha256(zf.read(name)).digest())
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise RegistryError(f"{path}: not a readable wheel ({type(exc).__name__}: {exc})") from None
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(eps_text)
    except configparser.Error as exc:
        raise RegistryError(f"{path.name}: entry_points.txt is malformed ({exc})") from None
    eps = dict(parser["udm"]) if parser.has_section("udm") else {}
    name, version = str(meta.get("Name") or ""), str(meta.get("Version") or "")
    if not name or not version:
        raise RegistryError(f"{path.name}: METADATA has no Name/Version")
    return WheelInfo(
        path=path,
        distribution=name,
        version=version,
        summary=meta.get("Summary", "") or "",
        requires_python=meta.get("Requires-Python", "") or "",
        requires_dist=tuple(meta.get_all("Requires-Dist") or ()),
        entry_points={k: v.strip() for k, v in eps.items()},
        sha256=file_sha256(path),
        content_digest=digest.hexdigest(),
        readme=_long_description(meta),
        readme_type=(meta.get("Description-Content-Type", "") or "").split(";")[0].strip().lower(),
    )
