"""The registry catalog (``catalog.json``): every published release and the manifests of its UDMs.

It is what `search` and `info` read without installing anything, so it carries each manifest in its
JSON form (parameters as a JSON schema). One model validates both what we write and what we read back
from a remote registry, so a corrupt catalog is a clear error instead of a KeyError deep inside.
"""

from __future__ import annotations

from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CATALOG_FORMAT", "RegistryCatalog", "Release", "UdmRecord"]

CATALOG_FORMAT = 1


class UdmRecord(BaseModel):
    """One UDM's manifest as published (INTERFACES §4), JSON-safe."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    version: str
    kind: str
    summary: str = ""
    properties: dict[str, bool] = Field(default_factory=dict)
    host_api: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    input_type: str = "any"
    output_type: str = "any"
    allowed_clip: list[str] = Field(default_factory=list)
    allowed_output: list[str] = Field(default_factory=list)
    docs: str = ""

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        # the catalog site names a page after it: a name that is not an identifier could be a path
        if not (v.isascii() and v.isidentifier()):
            raise ValueError(f"UDM name {v!r} is not an identifier")
        return v

    def supports_host(self, api_version: str) -> bool:
        try:
            return Version(api_version) in SpecifierSet(self.host_api)
        except (InvalidSpecifier, InvalidVersion):
            return False

    def property_names(self) -> list[str]:
        shown = [k for k, on in self.properties.items() if on and k != "deterministic"]
        return shown + ([] if self.properties.get("deterministic", True) else ["nondeterministic"])


class Release(BaseModel):
    """One published artifact (a wheel) of one distribution version."""

    model_config = ConfigDict(extra="allow")

    distribution: str
    version: str
    filename: str
    sha256: str
    content_digest: str
    requires_python: str = ""
    requires_dist: list[str] = Field(default_factory=list)
    summary: str = ""
    published: str = ""
    udms: list[UdmRecord] = Field(default_factory=list)
    checks: list[dict[str, Any]] = Field(default_factory=list)
    readme: str = ""
    readme_type: str = ""

    @property
    def project(self) -> str:
        """The PEP 503 normalized project name (the index directory)."""
        return canonicalize_name(self.distribution)

    def version_key(self) -> Version:
        try:
            return Version(self.version)
        except InvalidVersion:
            return Version("0")


class RegistryCatalog(BaseModel):
    """All releases. ``udms`` in the written JSON is a flat, derived view for static consumers."""

    model_config = ConfigDict(extra="ignore")

    format: int = CATALOG_FORMAT
    releases: list[Release] = Field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "udms": self.udm_rows(),
            "releases": [r.model_dump(mode="json") for r in self.sorted_releases()],
        }

    def sorted_releases(self) -> list[Release]:
        return sorted(self.releases, key=lambda r: (r.project, r.version_key(), r.filename))

    def udm_rows(self) -> list[dict[str, Any]]:
        """One row per (UDM, release): the manifest plus where it comes from and how to install it."""
        rows = []
        for rel in self.sorted_releases():
            for u in rel.udms:
                rows.append({
                    **u.model_dump(mode="json"),
                    "distribution": rel.distribution,
                    "distribution_version": rel.version,
                    "filename": rel.filename,
                    "sha256": rel.sha256,
                    "install": f"udm registry install '{u.name}=={u.version}'",
                })
        return rows

    def projects(self) -> dict[str, list[Release]]:
        out: dict[str, list[Release]] = {}
        for rel in self.sorted_releases():
            out.setdefault(rel.project, []).append(rel)
        return out
