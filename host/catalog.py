"""The catalog: registered name (+ PEP 440 version) → validated UDM, with loud, listing errors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from udm.host.errors import AmbiguousUDM, InvalidUDM, ParamError, PluginLoadError, UnknownUDM
from udm.host.plugin_cache import CachedUDM, PluginCache, PluginRecord, host_stamp, plugin_stamp
from udm.host.plugins import LoadError, PluginHost, installed_entry_points, select_entry_points, strict_from_env
from udm.host.validation import check_udm
from udm.sdk import API_VERSION, UDM, Manifest

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

__all__ = ["Catalog", "CatalogEntry", "default_catalog", "reset_default_catalog"]

# lazy imports: packaging — version matching only for a query that names a UDM (~5 ms of a run's start-up)


class CatalogEntry:
    """One registered UDM. ``problems`` non-empty means it was refused (and says why).

    An entry of a cached plugin (`udm.host.plugin_cache`) answers its name, version, kind, validity and
    listing from the cache; its class is imported, with its plugin, the first time `cls` (or `manifest`)
    is asked for — by the query that uses it."""

    def __init__(self, cls: Any, plugin: str, distribution: str, problems: list[str] | None = None, *,
                 cached: CachedUDM | None = None, loader: Callable[[CachedUDM], Any] | None = None) -> None:
        self._cls = cls
        self.plugin = plugin
        self.distribution = distribution
        self.problems: list[str] = list(problems or [])
        self._cached = cached
        self._loader = loader

    def __repr__(self) -> str:
        return f"CatalogEntry({self.describe()}, {self.status}{'' if self.loaded else ', not loaded'})"

    @property
    def loaded(self) -> bool:
        return self._cached is None or self._cls is not None

    @property
    def cls(self) -> Any:
        if self._cls is None and self._cached is not None and self._loader is not None:
            self._cls = self._loader(self._cached)
        return self._cls

    @property
    def manifest(self) -> Manifest:
        return self.cls.manifest

    def _man(self) -> Manifest | None:
        man = getattr(self._cls, "manifest", None)
        return man if isinstance(man, Manifest) else None

    @property
    def name(self) -> str:
        if not self.loaded and self._cached is not None:
            return self._cached.name
        man = self._man()
        return man.name if man is not None else getattr(self._cls, "__name__", repr(self._cls))

    @property
    def version(self) -> str:
        if not self.loaded and self._cached is not None:
            return self._cached.version
        man = self._man()
        return man.version if man is not None else "?"

    @property
    def kind(self) -> str:
        """udf / uda / udo (``?`` for a class without a manifest)."""
        if not self.loaded and self._cached is not None:
            return self._cached.kind
        man = self._man()
        return man.kind if man is not None else "?"

    @property
    def span(self) -> bool:
        if not self.loaded and self._cached is not None:
            return self._cached.span
        man = self._man()
        return bool(man is not None and man.span)

    @property
    def kind_label(self) -> str:
        """udf / uda / udo, or ``span udo`` for an operator a ``flat_map`` step runs once per event."""
        return "span udo" if self.span else self.kind

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
        if not self.loaded and self._cached is not None:
            return dict(self._cached.listing)
        man = self._man()
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "plugin": self.plugin,
            "status": self.status,
            "problems": list(self.problems),
        }
        if man is not None:
            out.update(kind=man.kind, span=man.span, summary=man.summary, properties=man.properties.model_dump())
        return out

    def cached_row(self) -> CachedUDM:
        """This entry as the plugin cache keeps it."""
        return CachedUDM(name=self.name, version=self.version, kind=self.kind, span=self.span,
                         problems=tuple(self.problems), listing=self.to_json_dict())


class Catalog:
    """Name → versions → entries. Build with `Catalog.discover()` or add classes by hand in tests."""

    def __init__(self, api_version: str = API_VERSION) -> None:
        self.api_version = api_version
        self.entries: list[CatalogEntry] = []
        self.load_errors: list[LoadError] = []

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def discover(cls, *, strict: bool | None = None, plugins: Iterable[Any] = ()) -> Catalog:
        """Load entry points (per the UDM_* environment) plus any plugin objects given. A plugin whose
        record in the plugin cache is current is not imported (`udm.host.plugin_cache`)."""
        host = PluginHost()
        cat = cls()
        cache = PluginCache.open()
        base = host_stamp() if cache is not None else ""
        found = cache.entry_points() if cache is not None else None
        if found is None:
            found = installed_entry_points()
            if cache is not None:
                cache.keep_entry_points(found)
        for ep, dist in select_entry_points(found):
            stamp = plugin_stamp(ep, dist, base) if cache is not None else None
            record = cache.get(ep, stamp) if cache is not None and stamp is not None else None
            if record is not None:
                lazy = _LazyPlugin(ep, dist)
                cat.entries += [CatalogEntry(None, ep.name, dist, list(row.problems), cached=row, loader=lazy.cls_for)
                                for row in record.udms]
                continue
            errors, regs = len(host.errors), len(host.registrations)
            host.load_entry_point(ep, dist)
            added = [cat.add(r.cls, plugin=r.plugin, distribution=r.distribution) for r in host.registrations[regs:]]
            if cache is not None and stamp is not None and len(host.errors) == errors:
                cache.put(ep, PluginRecord(stamp=stamp, udms=tuple(e.cached_row() for e in added)))
        if cache is not None:
            cache.save()
        for obj in plugins:
            regs = len(host.registrations)
            host.add_plugin(obj)
            for reg in host.registrations[regs:]:
                cat.add(reg.cls, plugin=reg.plugin, distribution=reg.distribution)
        cat.load_errors = list(host.errors)
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
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import Version

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
        if kind is not None and best.kind != kind:
            raise UnknownUDM(f"{name!r} is a {best.kind}, but this step needs a {kind}; "
                             f"available {kind}s: {', '.join(self.names_of_kind(kind)) or '(none)'}")
        return best

    def names_of_kind(self, kind: str, span: bool | None = None) -> list[str]:
        """Valid UDM names of ``kind`` (``span``: only span UDOs, True, or only the others, False)."""
        return sorted({e.name for e in self.entries if e.valid and e.kind == kind
                       and (span is None or e.span == span)})

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
    from packaging.version import InvalidVersion, Version

    try:
        return Version(v) in spec
    except InvalidVersion:
        return False


def _sort_key(v: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


class _LazyPlugin:
    """A cached plugin, imported (once) when the first of its UDMs is used."""

    def __init__(self, ep: EntryPoint, distribution: str) -> None:
        self.ep = ep
        self.distribution = distribution
        self._classes: dict[tuple[str, str], Any] | None = None

    def cls_for(self, row: CachedUDM) -> Any:
        what = f"UDM {row.name!r} {row.version} of plugin {self.ep.name!r} ({self.distribution})"
        if self._classes is None:
            host = PluginHost()
            host.load_entry_point(self.ep, self.distribution)
            if host.errors:
                raise PluginLoadError(f"{what} could not be loaded: {host.errors[0]}")
            self._classes = {}
            for reg in host.registrations:
                man = getattr(reg.cls, "manifest", None)
                if isinstance(man, Manifest):
                    self._classes[(man.name, man.version)] = reg.cls
        found = self._classes.get((row.name, row.version))
        if found is None:
            cache = PluginCache.open()
            if cache is not None:
                cache.forget(self.ep)
                cache.save()
            raise PluginLoadError(f"{what} is listed in the plugin cache but the plugin no longer registers it "
                                  "(the cache entry is now dropped: run the command again)")
        return found


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


