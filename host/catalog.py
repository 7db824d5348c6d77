"""The catalog: registered name (+ PEP 440 version) → validated UDM, with loud, listing errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import ValidationError

from udm.host.errors import AmbiguousUDM, InvalidUDM, ParamError, PluginLoadError, UnknownUDM
from udm.host.plugins import LoadError, PluginHost, strict_from_env
from udm.host.validation import check_udm
from udm.sdk import API_VERSION, UDM, Manifest

__all__ = ["Catalog", "CatalogEntry", "default_catalog", "reset_default_catalog"]


@dataclass
class CatalogEntry:
    """One registered UDM. ``problems`` non-empty means it was refused (and says why)."""

    cls: Any
    plugin: str
    distribution: str
    problems: list[str] = field(default_factory=list)

    @property
    def manifest(self) -> Manifest:
        return self.cls.manifest

    @property
    def name(self) -> str:
        man = getattr(self.cls, "manifest", None)
        return man.name if isinstance(man, Manifest) else getattr(self.cls, "__name__", repr(self.cls))

    @property
    def version(self) -> str:
        man = getattr(self.cls, "manifest", None)
        return man.version if isinstance(man, Manifest) else "?"

    @property
    def kind_label(self) -> str:
        """udf / uda / udo, or ``span udo`` for an operator a ``flat_map`` step runs once per event."""
        man = getattr(self.cls, "manifest", None)
        if not isinstance(man, Manifest):
            return "?"
        return "span udo" if man.span else man.kind

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        return "ok" if self.valid else "refused"

    def describe(self) -> str:
        return f"{self.name} {self.version} from {self.distribution} (plugin {self.plugin})"

    def refusal(self) -> str:
        return f"UDM {self.name!r} {self.version} from {self.distribution} was refused: " + "; ".join(self.problems)

    def to_json_dict(self) -> dict[str, Any]:
        man = getattr(self.cls, "manifest", None)
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "plugin": self.plugin,
            "status": self.status,
            "problems": list(self.problems),
        }
        if isinstance(man, Manifest):
            out.update(kind=man.kind, span=man.span, summary=man.summary, properties=man.properties.model_dump())
        return out


class Catalog:
    """Name → versions → entries. Build with `Catalog.discover()` or add classes by hand in tests."""

    def __init__(self, api_version: str = API_VERSION) -> None:
        self.api_version = api_version
        self.entries: list[CatalogEntry] = []
        self.load_errors: list[LoadError] = []

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def discover(cls, *, strict: bool | None = None, plugins: Iterable[Any] = ()) -> Catalog:
        """Load entry points (per the UDM_* environment) plus any plugin objects given."""
        host = PluginHost()
        host.load_entry_points()
        for obj in plugins:
            host.add_plugin(obj)
        cat = cls()
        cat.load_errors = list(host.errors)
        for reg in host.registrations:
            cat.add(reg.cls, plugin=reg.plugin, distribution=reg.distribution)
        if strict if strict is not None else strict_from_env():
            problems = [str(e) for e in cat.load_errors] + [e.refusal() for e in cat.entries if not e.valid]
            if problems:
                raise PluginLoadError("plugin load failed (strict mode): " + "; ".join(problems))
        return cat

    def add(self, cls: Any, *, plugin: str = "<local>", distribution: str = "<local>") -> CatalogEntry:
        try:
            problems = check_udm(cls, self.api_version)
        except Exception as exc:  # a validator crash on weird input is still a refusal, by name
            problems = [f"validation crashed: {type(exc).__name__}: {exc}"]
        entry = CatalogEntry(cls, plugin, distribution, problems)
        self.entries.append(entry)
        return entry

    # -- lookup -----------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return sorted({e.name for e in self.entries if e.valid})

    def _available(self) -> str:
        names = self.names()
        return ", ".join(names) if names else "(none installed)"

    def candidates(self, name: str) -> list[CatalogEntry]:
        return [e for e in self.entries if e.name == name]

    def resolve(self, name: str, version: str | None = None, *, kind: str | None = None) -> CatalogEntry:
        """The UDM a query means by ``name`` and an optional PEP 440 specifier: the highest matching
        valid version. Errors list what is available, so the query writer can fix the request."""
        found = self.candidates(name)
        if not found:
            raise UnknownUDM(f"no UDM named {name!r}; available: {self._available()}")
        try:
            spec = SpecifierSet(version or "")
        except InvalidSpecifier:
            raise UnknownUDM(f"version {version!r} for UDM {name!r} is not a PEP 440 specifier") from None
        valid = [e for e in found if e.valid]
        matching = [e for e in valid if _version_ok(e.version, spec)]
        if not matching:
            refused = [e for e in found if not e.valid and _version_ok(e.version, spec)]
            if refused:
                raise InvalidUDM(refused[0].refusal())
            versions = ", ".join(sorted({e.version for e in valid}, key=_sort_key)) or "none valid"
            raise UnknownUDM(f"no version of UDM {name!r} matches {version!r}; installed: {versions}")
        best = max(matching, key=lambda e: _sort_key(e.version))
        same = [e for e in matching if Version(e.version) == Version(best.version)]
        if len(same) > 1:
            listed = "; ".join(e.describe() for e in same)
            raise AmbiguousUDM(f"UDM {name!r} {best.version} is provided more than once: {listed}")
        if kind is not None and best.manifest.kind != kind:
            raise UnknownUDM(f"{name!r} is a {best.manifest.kind}, but this step needs a {kind}; "
                             f"available {kind}s: {', '.join(self.names_of_kind(kind)) or '(none)'}")
        return best

    def names_of_kind(self, kind: str, span: bool | None = None) -> list[str]:
        """Valid UDM names of ``kind`` (``span``: only span UDOs, True, or only the others, False)."""
        return sorted({e.name for e in self.entries if e.valid and e.manifest.kind == kind
                       and (span is None or e.manifest.span == span)})

    def instantiate(self, entry: CatalogEntry, params: Mapping[str, Any] | None = None) -> UDM:
        """Validate ``params`` against the UDM's parameter model and create the UDM."""
        model = entry.manifest.params
        try:
            p = model.model_validate(dict(params or {}))
        except ValidationError as exc:
            parts = []
            for err in exc.errors():
                where = ".".join(str(x) for x in err["loc"]) or "<params>"
                msg = "unknown parameter" if err["type"] == "extra_forbidden" else err["msg"]
                parts.append(f"parameter {where!r}: {msg} (got {err.get('input')!r})")
            raise ParamError(f"bad parameters for UDM {entry.name!r} {entry.version}: " + "; ".join(parts)) from None
        return entry.cls(p)


def _version_ok(v: str, spec: SpecifierSet) -> bool:
    try:
        return Version(v) in spec
    except InvalidVersion:
        return False


def _sort_key(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


_DEFAULT: Catalog | None = None


def default_catalog() -> Catalog:
    """The process-wide catalog of installed plugins, discovered once."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Catalog.discover()
    return _DEFAULT


def reset_default_catalog() -> None:
    global _DEFAULT
    _DEFAULT = None


