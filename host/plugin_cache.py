"""What discovery learned from each installed plugin, kept on disk, so that a run imports only the plugins
whose UDMs its query names.

Why: every ``udm`` command starts by building the catalog, and building it used to import every installed
plugin and its dependencies (a sketches plugin brings Apache DataSketches; a marketplace user may have
dozens). Start-up then grew with each plugin installed, whatever the query used. With this cache, discovery
still lists every ``udm`` entry point, but a plugin whose files are unchanged since it was last loaded
contributes its cached catalog rows — name, version, kind, validation problems, what ``udm catalog`` shows —
and is imported only when one of its UDMs is resolved and used.

Which plugins are installed is kept too: finding the ``udm`` entry points means reading every installed
distribution's metadata (~4 ms with 70 distributions, and more with each one installed), so the list —
each entry point with its distribution's name, version and ``.dist-info`` directory — is reused while the
directories on ``sys.path`` are unchanged (`path_stamp`: installing, upgrading or removing a distribution
adds or deletes a ``.dist-info`` directory in one of them, which changes that directory's modification
time) and each listed distribution's ``entry_points.txt`` is too. A directory or file changed within the
last `SETTLED` seconds is not trusted (a file system keeps times in clock ticks: an install in the same tick
as the scan would leave the time as it was), so its listing is scanned again until it has settled. (The
``udm`` command's ``sys.path`` holds its environment's directories; ``python -m`` adds the current directory,
so there a run scans again, once, after a file was created in it.)

A plugin's record is valid while its *stamp* is: its entry point and distribution (name, version), the
size and modification time of every file of its top-level module or package, the modification time of the
directory its distribution is installed in (installing or upgrading anything there, e.g. a dependency,
changes it), and the Python, udmkit and UDM API versions. A plugin that failed to load, or whose files
cannot be found without importing it, is never cached: it is imported on every run, so its failure is
reported every time.

Environment: ``UDM_CATALOG_CACHE=0`` turns the cache off; any other non-empty value is the directory to
keep it in (default: ``$XDG_CACHE_HOME/udmkit``, else ``~/.cache/udmkit``), one file per Python
environment (`cache_file`). A cache directory that cannot
be written is skipped (the catalog is built the slow way); a damaged cache file is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import EntryPoint, PathDistribution
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import udm
import udm.sdk as sdk
from udm.host import validation
from udm.sdk import API_VERSION

__all__ = ["CACHE_ENV", "SETTLED", "CachedUDM", "PluginCache", "PluginRecord", "cache_dir", "cache_file",
           "host_stamp", "path_stamp", "plugin_stamp"]

CACHE_ENV = "UDM_CATALOG_CACHE"

#: seconds after which a directory's modification time is trusted to tell a later install (module docstring)
SETTLED = 2.0


@dataclass(frozen=True)
class CachedUDM:
    """One catalog row of a cached plugin: enough to list, resolve and refuse it without importing it."""

    name: str
    version: str
    kind: str
    span: bool
    problems: tuple[str, ...]
    listing: dict[str, Any]  # `CatalogEntry.to_json_dict` as it was when the plugin was loaded


@dataclass(frozen=True)
class PluginRecord:
    stamp: str
    udms: tuple[CachedUDM, ...]


def _record(raw: Any) -> PluginRecord:
    """A record read back from JSON; ValueError if it is not one (the file is then treated as damaged).
    (Plain dataclasses, not pydantic: this file is read on every start-up, and the models cost ~2 ms.)"""
    if not isinstance(raw, dict) or not isinstance(raw.get("stamp"), str) or not isinstance(raw.get("udms"), list):
        raise ValueError("not a plugin record")
    rows = []
    for u in raw["udms"]:
        if not (isinstance(u, dict) and all(isinstance(u.get(k), str) for k in ("name", "version", "kind"))
                and isinstance(u.get("span"), bool) and isinstance(u.get("listing"), dict)
                and isinstance(u.get("problems"), list) and all(isinstance(p, str) for p in u["problems"])):
            raise ValueError("not a cached UDM row")
        rows.append(CachedUDM(u["name"], u["version"], u["kind"], u["span"], tuple(u["problems"]), u["listing"]))
    return PluginRecord(raw["stamp"], tuple(rows))


def cache_dir() -> Path | None:
    """Where the cache lives, or None when ``UDM_CATALOG_CACHE=0`` turns it off."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    if raw.lower() in {"0", "false", "no", "off"}:
        return None
    if raw:
        return Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "udmkit"


def cache_file() -> Path | None:
    """This environment's cache file (None: off). One file per environment (``sys.prefix``): two virtualenvs
    with the same plugins installed would otherwise take each other's records for stale and rewrite them on
    every run, each importing every plugin again."""
    where = cache_dir()
    if where is None:
        return None
    env = hashlib.sha256(os.path.realpath(sys.prefix).encode()).hexdigest()[:16]
    return where / f"catalog-v1-{env}.json"


def _key(ep: EntryPoint) -> str:
    return f"{ep.group}:{ep.name}={ep.value}"


def _module_files(top: str) -> list[Path] | None:
    """The files of top-level module or package ``top`` (found without importing it), or None."""
    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        files: list[Path] = []
        for loc in spec.submodule_search_locations:
            files += [p for p in Path(loc).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        return files
    if spec.origin and spec.has_location:
        return [Path(spec.origin)]
    return None


def _stat(h: Any, p: Path) -> None:
    st = p.stat()
    h.update(f"|{p}:{st.st_size}:{st.st_mtime_ns}".encode())


def host_stamp() -> str:
    """What every record depends on besides its plugin: Python, udmkit and the UDM API, and the files
    that make a catalog row (the SDK's manifests and the host's validation rules: a development install
    changes them without a new version)."""
    h = hashlib.sha256(f"{sys.version}|{udm.__version__}|{API_VERSION}".encode())
    try:
        for p in sorted(Path(sdk.__file__).parent.glob("*.py")):
            _stat(h, p)
        _stat(h, Path(validation.__file__))
        _stat(h, Path(__file__))
    except OSError:
        pass
    return h.hexdigest()


def plugin_stamp(ep: EntryPoint, distribution: str, host: str) -> str | None:
    """What a plugin's cached record is valid for (see the module docstring), given `host_stamp`; None:
    not cacheable."""
    installed = _installed(ep)
    files = _module_files(ep.module.partition(".")[0])
    if installed is None or not files:
        return None
    h = hashlib.sha256(f"{host}|{_key(ep)}|{distribution}".encode())
    try:
        h.update(f"|{installed.parent}:{installed.parent.stat().st_mtime_ns}".encode())
        for p in sorted(files):
            _stat(h, p)
    except OSError:
        return None
    return h.hexdigest()


def path_stamp() -> str | None:
    """``sys.path`` and each of its directories' modification time; None while one of them changed within
    `SETTLED` seconds (its listing is then scanned again)."""
    h = hashlib.sha256()
    recent = time.time_ns() - int(SETTLED * 1e9)
    for entry in sys.path:
        try:
            mtime = os.stat(entry or ".").st_mtime_ns
        except OSError:  # a zip that is not there, a path hook's name: nothing to install into
            mtime = -1
        if mtime > recent:
            return None
        h.update(f"|{entry}:{mtime}".encode())
    return h.hexdigest()


def _installed(ep: EntryPoint) -> Path | None:
    installed = getattr(getattr(ep, "dist", None), "_path", None)  # a PathDistribution's .dist-info directory
    return installed if isinstance(installed, Path) else None


def _entry_points_mtime(installed: Path) -> int:
    return (installed / "entry_points.txt").stat().st_mtime_ns


def _found_row(ep: EntryPoint, distribution: str) -> dict[str, Any] | None:
    installed = _installed(ep)
    if installed is None:
        return None
    try:
        mtime = _entry_points_mtime(installed)
    except OSError:
        return None
    if mtime > time.time_ns() - int(SETTLED * 1e9):
        return None  # (just written: a rewrite within the same clock tick would not change its time)
    return {"name": ep.name, "value": ep.value, "group": ep.group, "distribution": distribution,
            "path": str(installed), "mtime": mtime}


def _found(rows: Any) -> list[tuple[EntryPoint, str]] | None:
    """The cached entry points, each with its distribution again; None if a row is damaged or its
    distribution's ``entry_points.txt`` changed."""
    if not isinstance(rows, list):
        return None
    out = []
    for r in rows:
        if not (isinstance(r, dict) and all(isinstance(r.get(k), str)
                                            for k in ("name", "value", "group", "distribution", "path"))
                and isinstance(r.get("mtime"), int)):
            return None
        installed = Path(r["path"])
        try:
            if _entry_points_mtime(installed) != r["mtime"]:
                return None
        except OSError:
            return None
        ep = EntryPoint(r["name"], r["value"], r["group"])
        vars(ep).update(dist=PathDistribution(installed))  # (what a scan's entry point carries: `EntryPoint._for`)
        out.append((ep, r["distribution"]))
    return out


@dataclass
class PluginCache:
    """The cache file's records, read once per discovery and written back if discovery added any."""

    path: Path
    records: dict[str, PluginRecord] = field(default_factory=dict)
    changed: bool = False
    #: the installed entry points as last scanned (rows of `_found_row`) and the `path_stamp` they are for
    listing: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls) -> PluginCache | None:
        path = cache_file()
        if path is None:
            return None
        try:
            raw = json.loads(path.read_bytes())
            if not isinstance(raw, dict) or not isinstance(raw.get("plugins"), dict):
                raise ValueError("not a plugin cache")
            records = {str(k): _record(v) for k, v in raw["plugins"].items()}
        except (OSError, ValueError):
            return cls(path)  # missing or damaged: start afresh (rewritten at `save`)
        listing = raw.get("entry_points")
        return cls(path, records, listing=listing if isinstance(listing, dict) else {})

    def entry_points(self) -> list[tuple[EntryPoint, str]] | None:
        """The installed ``udm`` entry points with their distributions' ``"name version"``, as last scanned;
        None unless ``sys.path`` is as it was then (`path_stamp`)."""
        stamp = path_stamp()
        if stamp is None or self.listing.get("stamp") != stamp:
            return None
        return _found(self.listing.get("found"))

    def keep_entry_points(self, found: list[tuple[EntryPoint, str]]) -> None:
        """Keep a scan's result for the next runs (not while ``sys.path`` has a directory that just changed,
        nor when an entry point's distribution is not a directory of metadata)."""
        stamp = path_stamp()
        rows = [_found_row(ep, dist) for ep, dist in found]
        if stamp is None or any(r is None for r in rows):
            return
        listing = {"stamp": stamp, "found": rows}
        if listing != self.listing:
            self.listing = listing
            self.changed = True

    def get(self, ep: EntryPoint, stamp: str) -> PluginRecord | None:
        rec = self.records.get(_key(ep))
        return rec if rec is not None and rec.stamp == stamp else None

    def put(self, ep: EntryPoint, record: PluginRecord) -> None:
        self.records[_key(ep)] = record
        self.changed = True

    def forget(self, ep: EntryPoint) -> None:
        if self.records.pop(_key(ep), None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write the records atomically (a concurrent run reads the old file or the new, never half)."""
        if not self.changed:
            return
        body = json.dumps({"plugins": {k: asdict(r) for k, r in self.records.items()}, "entry_points": self.listing},
                          sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".catalog-", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(tmp, self.path)
        except OSError:
            return  # an unwritable cache only costs speed
        self.changed = False
