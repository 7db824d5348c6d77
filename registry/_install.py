"""`install NAME[SPEC]`: pick a release from the catalog, refuse it if it cannot work on this host, then
let pip install it from the registry's PEP 503 index with its hash pinned.

Two pip calls: the artifact itself in hash-checking mode (``--require-hashes --no-deps``, the sha256
from the catalog), so pip accepts only the exact published bytes whichever index or cache it finds them
in; then the same pinned requirement again without ``--no-deps``, which only resolves and installs the
dependencies still missing (hash-checking mode would demand pinned hashes for every dependency too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from udm.sdk import API_VERSION

from ._errors import RegistryError
from ._index import FILES_DIR, SIMPLE_DIR
from ._location import Location
from ._records import RegistryCatalog, Release
from ._wheel import file_sha256

__all__ = ["InstallPlan", "install", "plan_install"]

_TIMEOUT_S = 900


@dataclass(frozen=True)
class InstallPlan:
    """What `install` will do: which release, from which index, with which pip commands."""

    requirement: str
    release: Release
    index_url: str
    commands: list[list[str]] = field(default_factory=list)

    @property
    def pin(self) -> str:
        return f"{self.release.distribution}=={self.release.version}"


def _parse(requirement: str) -> Requirement:
    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        raise RegistryError(f"{requirement!r} is not NAME or NAME<version spec> (e.g. 'median>=1,<2'): "
                            f"{exc}") from None
    if req.url or req.marker or req.extras:
        raise RegistryError(f"{requirement!r}: only a name and a version specifier are supported")
    return req


def _candidates(catalog: RegistryCatalog, req: Requirement) -> list[tuple[str, Release]]:
    """(version the specifier applies to, release). A UDM name matches the UDM's own version; a
    distribution name matches the distribution version."""
    by_udm = [(u.version, r) for r in catalog.releases for u in r.udms if u.name == req.name]
    if by_udm:
        return by_udm
    want = canonicalize_name(req.name)
    return [(r.version, r) for r in catalog.releases if r.project == want]


def _incompatibility(rel: Release, api_version: str) -> str | None:
    bad = [u for u in rel.udms if not u.supports_host(api_version)]
    if not bad:
        return None
    return "; ".join(f"UDM {u.name!r} supports host API {u.host_api}" for u in bad)


def _choose(catalog: RegistryCatalog, req: Requirement, api_version: str) -> Release:
    cands = _candidates(catalog, req)
    if not cands:
        names = sorted({u.name for r in catalog.releases for u in r.udms})
        raise RegistryError(f"no UDM or distribution named {req.name!r} in the registry; "
                            f"published: {', '.join(names) or '(none)'}")
    matching = [(v, r) for v, r in cands if req.specifier.contains(v, prereleases=True)]
    if not matching:
        versions = ", ".join(sorted({v for v, _ in cands}))
        raise RegistryError(f"no published version of {req.name!r} matches {str(req.specifier)!r}; "
                            f"published: {versions}")
    matching.sort(key=lambda vr: vr[1].version_key(), reverse=True)
    for _, rel in matching:
        if _incompatibility(rel, api_version) is None:
            return rel
    reasons = "; ".join(f"{r.distribution} {r.version}: {_incompatibility(r, api_version)}"
                        for _, r in matching)
    raise RegistryError(f"refusing to install {req}: no matching release works with this host "
                        f"(host API {api_version}): {reasons}")


def plan_install(loc: Location, catalog: RegistryCatalog, requirement: str, *,
                 api_version: str = API_VERSION, python: str | None = None,
                 extra_index_urls: Sequence[str] = (), reqfile: Path | None = None) -> InstallPlan:
    """Choose the release and build the pip commands (nothing runs yet)."""
    rel = _choose(catalog, _parse(requirement), api_version)
    index_url = loc.url_of(f"{SIMPLE_DIR}/")
    py = python or sys.executable
    extra = [a for u in extra_index_urls for a in ("--extra-index-url", u)]
    pin = f"{rel.distribution}=={rel.version}"
    hashed = ["--no-deps", "--require-hashes", "-r", str(reqfile)] if reqfile else [pin]
    base = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--index-url", index_url]
    return InstallPlan(requirement, rel, index_url, [base + extra + hashed, base + extra + [pin]])


def _verify_local_file(loc: Location, rel: Release) -> None:
    """For a directory registry, check the file on disk before pip sees it: a clearer message."""
    if loc.path is None:
        return
    f = loc.path / FILES_DIR / rel.filename
    if not f.is_file():
        raise RegistryError(f"registry {loc} lists {rel.filename} but {f} is missing")
    if file_sha256(f) != rel.sha256:
        raise RegistryError(f"{f} does not match its published sha256 ({rel.sha256[:12]}…): "
                            "the registry was modified after publishing; refusing to install it")


def _run(cmd: list[str], what: str) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{what}: pip took more than {_TIMEOUT_S}s") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
        reason = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1] if lines else "no output")
        raise RegistryError(f"{what}: pip failed: {reason}")


def install(loc: Location, catalog: RegistryCatalog, requirement: str, *, api_version: str = API_VERSION,
            python: str | None = None, extra_index_urls: Sequence[str] = ()) -> InstallPlan:
    """Install the best release matching ``requirement`` that supports this host."""
    with tempfile.TemporaryDirectory(prefix="udm-install-") as tmp:
        reqfile = Path(tmp) / "requirements.txt"
        plan = plan_install(loc, catalog, requirement, api_version=api_version, python=python,
                            extra_index_urls=extra_index_urls, reqfile=reqfile)
        _verify_local_file(loc, plan.release)
        reqfile.write_text(f"{plan.pin} --hash=sha256:{plan.release.sha256}\n", encoding="utf-8")
        _run(plan.commands[0], f"installing {plan.pin} (hash-checked)")
        _run(plan.commands[1], f"installing the dependencies of {plan.pin}")
    return plan
