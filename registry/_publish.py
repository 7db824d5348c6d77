"""`publish`: build, validate, check contracts, then add the wheel to the index — or refuse, saying why.

Nothing is written to the registry until every check passed, and a version, once published, is
immutable: republishing it with different contents is refused (PyPI's rule; a cached or pinned install
must never silently change), while republishing identical contents is a harmless no-op.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._build import build_wheel
from ._errors import RegistryError
from ._index import FILES_DIR, write_index
from ._inspect import inspect_wheel
from ._location import Location
from ._records import Release, UdmRecord
from ._site import SiteBuild
from ._store import locked, read_catalog
from ._wheel import WheelInfo, read_wheel

__all__ = ["PublishResult", "publish"]


@dataclass(frozen=True)
class PublishResult:
    release: Release
    status: str  # "published" | "unchanged"
    registry: Location
    site: SiteBuild = field(default_factory=SiteBuild)  # the derived files this publish rewrote


def _first_failure(checks: list[dict[str, Any]]) -> str:
    failed = [c for c in checks if not c.get("passed")]
    parts = [f"{c['name']}: {c.get('detail') or 'failed'}" for c in failed[:3]]
    more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
    repro = next((c.get("reproducer") for c in failed if c.get("reproducer")), "")
    return "; ".join(parts) + more + (f" — reproduce with: {repro}" if repro else "")


def _validated_udms(info: WheelInfo, seed: int) -> tuple[list[UdmRecord], list[dict[str, Any]]]:
    """Manifests and contract-check results of the wheel's UDMs; raises on the first reason to refuse."""
    who = f"{info.distribution} {info.version}"
    if not info.entry_points:
        raise RegistryError(f"{who} declares no entry points in group 'udm' "
                            "([project.entry-points.udm] in pyproject.toml): the host would never find it")
    data = inspect_wheel(info.path, info.entry_points, seed=seed)
    if data["load_errors"]:
        raise RegistryError(f"{who}: a plugin failed to load: {data['load_errors'][0]}")
    rows = data["udms"]
    if not rows:
        raise RegistryError(f"{who}: its plugins registered no UDM (does register_udms call register(...)?)")
    for row in rows:
        if row["problems"]:
            raise RegistryError(f"{who}: UDM {row['name']!r} is refused by the host: {'; '.join(row['problems'])}")
    if data["kit_error"]:
        raise RegistryError(f"{who}: cannot run the contract checks: {data['kit_error']}")
    checks: list[dict[str, Any]] = []
    for row in rows:
        if not row["checks"]:
            raise RegistryError(f"{who}: the conformance kit ran no check on UDM {row['name']!r}")
        if not all(c["passed"] for c in row["checks"]):
            raise RegistryError(f"{who}: UDM {row['name']!r} fails the contract checks: "
                                f"{_first_failure(row['checks'])}")
        checks += [{"udm": row["name"], "name": c["name"], "passed": True, "skipped": bool(c.get("skipped")),
                    "seed": c.get("seed"), **({"detail": c.get("detail", "")} if c.get("skipped") else {})}
                   for c in row["checks"]]
    names = [r["name"] for r in rows]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RegistryError(f"{who}: registers UDM name(s) {', '.join(dupes)} more than once")
    return [UdmRecord.model_validate(r["manifest"]) for r in rows], checks


def _wheel_for(target: Path, workdir: Path, isolation: bool) -> Path:
    if target.is_dir():
        return build_wheel(target, workdir, isolation=isolation)
    if target.is_file() and target.suffix == ".whl":
        return target
    if not target.exists():
        raise RegistryError(f"{target} does not exist")
    raise RegistryError(f"{target} is neither a project directory nor a .whl file")


def _conflicts(release: Release, existing: list[Release]) -> Release | None:
    """The already-published release this one duplicates (same contents), or raise if it contradicts one."""
    same_version = [r for r in existing if r.project == release.project and r.version == release.version]
    for old in same_version:
        if old.content_digest != release.content_digest:
            raise RegistryError(
                f"{release.distribution} {release.version} is already published ({old.filename}, "
                f"sha256 {old.sha256[:12]}…) with different contents; published versions are immutable — "
                f"bump the version")
    owners = {u.name: r.distribution for r in existing if r.project != release.project for u in r.udms}
    for u in release.udms:
        if u.name in owners:
            raise RegistryError(f"UDM name {u.name!r} is already published by distribution {owners[u.name]!r}; "
                                "a UDM name belongs to one distribution in a registry — choose another name")
    return same_version[0] if same_version else None


def publish(loc: Location, target: Path, *, isolation: bool = True, seed: int = 0) -> PublishResult:
    """Publish a project directory (built first) or a wheel to the registry at ``loc``."""
    root = loc.writable_dir()
    with tempfile.TemporaryDirectory(prefix="udm-publish-") as tmp:
        wheel = _wheel_for(target.resolve(), Path(tmp), isolation)
        info = read_wheel(wheel)
        udms, checks = _validated_udms(info, seed)
        release = Release(
            distribution=info.distribution, version=info.version, filename=wheel.name, sha256=info.sha256,
            content_digest=info.content_digest, requires_python=info.requires_python,
            requires_dist=list(info.requires_dist), summary=info.summary,
            published=_dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            udms=udms, checks=checks, readme=info.readme, readme_type=info.readme_type,
        )
        # as catalog.json will hold it (JSON mode turns an infinite default into null), so this publish's
        # pages are built from the same data as the next publish's, which reads them back from the file
        release = Release.model_validate(release.model_dump(mode="json"))
        with locked(root):
            catalog = read_catalog(loc)
            same = _conflicts(release, catalog.releases)
            if same is not None:  # still refresh the site: a newer udmkit may lay it out differently
                return PublishResult(same, "unchanged", loc, write_index(root, catalog))
            dest = root / FILES_DIR / wheel.name
            if dest.exists() and dest.read_bytes() != wheel.read_bytes():
                raise RegistryError(f"{dest} exists but is not in the catalog; remove it or repair the registry")
            tmp_copy = dest.with_name(f".{dest.name}.part")
            tmp_copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wheel, tmp_copy)
            tmp_copy.replace(dest)
            catalog.releases.append(release)
            site = write_index(root, catalog)
    return PublishResult(release, "published", loc, site)
