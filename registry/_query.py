"""`search` and `info`: answered from the catalog alone, so nothing is downloaded or installed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from udm.sdk import API_VERSION

from ._errors import RegistryError
from ._records import RegistryCatalog, Release, UdmRecord

__all__ = ["UdmHit", "info", "search", "versions_by_name"]


@dataclass(frozen=True)
class UdmHit:
    """A UDM as published in one release."""

    udm: UdmRecord
    release: Release

    def supported(self, api_version: str = API_VERSION) -> bool:
        return self.udm.supports_host(api_version)

    def to_json_dict(self, api_version: str = API_VERSION) -> dict[str, Any]:
        return {
            **self.udm.model_dump(mode="json"),
            "distribution": self.release.distribution,
            "distribution_version": self.release.version,
            "filename": self.release.filename,
            "sha256": self.release.sha256,
            "supports_this_host": self.supported(api_version),
            "install": f"udm registry install '{self.udm.name}=={self.udm.version}'",
        }


def _hits(catalog: RegistryCatalog) -> list[UdmHit]:
    return [UdmHit(u, r) for r in catalog.sorted_releases() for u in r.udms]


def versions_by_name(catalog: RegistryCatalog) -> dict[str, list[UdmHit]]:
    """Every published version of each UDM, oldest first (by distribution version); names sorted."""
    out: dict[str, list[UdmHit]] = {}
    for h in _hits(catalog):
        out.setdefault(h.udm.name, []).append(h)
    return {n: sorted(out[n], key=lambda h: h.release.version_key()) for n in sorted(out)}


def search(catalog: RegistryCatalog, term: str) -> list[UdmHit]:
    """The latest release of every UDM whose name, summary, kind, properties, distribution or docs
    contain every word of ``term`` (case-insensitive); an empty term lists everything."""
    words = term.lower().split()

    def text(h: UdmHit) -> str:
        u = h.udm
        return " ".join([u.name, u.summary, u.kind, " ".join(u.property_names()), h.release.distribution,
                         u.docs]).lower()

    latest = [versions[-1] for versions in versions_by_name(catalog).values()]
    return [h for h in latest if all(w in text(h) for w in words)]


def info(catalog: RegistryCatalog, name: str) -> list[UdmHit]:
    """Every published version of the UDM ``name`` (or of every UDM of distribution ``name``), newest
    last."""
    hits = _hits(catalog)
    found = [h for h in hits if h.udm.name == name]
    if not found:
        found = [h for h in hits if canonicalize_name(h.release.distribution) == canonicalize_name(name)]
    if not found:
        names = sorted({h.udm.name for h in hits})
        close = [n for n in names if name.lower() in n.lower() or n.lower() in name.lower()]
        hint = f"; did you mean {', '.join(close)}?" if close else (
            f"; published: {', '.join(names)}" if names else "; the registry is empty")
        raise RegistryError(f"no UDM or distribution named {name!r} in the registry{hint}")
    return sorted(found, key=lambda h: (h.udm.name, h.release.version_key()))
