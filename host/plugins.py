"""Plugin discovery with pluggy: entry-point group ``udm``, one plugin at a time, failures collected.

A plugin is any object (usually a module) with ``@hookimpl``-marked functions of `UdmHookSpec`. Third
parties and first-party plugins go through the same entry-point path.

Environment (like pytest's and llm's):
- ``UDM_DISABLE_PLUGIN_AUTOLOAD`` (non-empty): load no entry points.
- ``UDM_PLUGINS=a,b``: load only the entry points or distributions named (an empty value loads none).
- ``UDM_STRICT`` (1/true/yes): any load error is raised as `PluginLoadError` instead of being reported.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from udm.sdk import PROJECT, UDM

__all__ = [
    "ENTRY_POINT_GROUP",
    "LoadError",
    "PluginHost",
    "Registration",
    "UdmHookSpec",
    "hookspec",
    "installed_entry_points",
    "select_entry_points",
    "selected_entry_points",
    "strict_from_env",
]

ENTRY_POINT_GROUP = PROJECT
hookspec = pluggy.HookspecMarker(PROJECT)


class UdmHookSpec:
    """The hooks a UDM plugin may implement."""

    @hookspec
    def register_udms(self, register: Callable[[type[UDM]], None]) -> None:
        """Call ``register(cls)`` once for every UDM class the plugin provides."""


@dataclass(frozen=True)
class LoadError:
    """One plugin failure, reported by name; never stops other plugins."""

    plugin: str
    distribution: str
    stage: str  # import | register | hook
    error: str
    detail: str = ""

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} ({self.distribution}) failed at {self.stage}: {self.error}"


@dataclass(frozen=True)
class Registration:
    cls: Any
    plugin: str
    distribution: str


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() in {"1", "true", "yes", "on"}


def strict_from_env() -> bool:
    return _truthy(os.environ.get("UDM_STRICT"))


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "<unknown>"
    meta = dist.metadata  # parsed from METADATA on every access (and `dist.version` is another access)
    return f"{meta['Name']} {meta['Version']}"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


#: seconds a plugin's import may take before it is reported as hung (``UDM_PLUGIN_IMPORT_TIMEOUT``)
DEFAULT_IMPORT_TIMEOUT = 60.0


def import_timeout() -> float:
    raw = os.environ.get("UDM_PLUGIN_IMPORT_TIMEOUT")
    try:
        return float(raw) if raw else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT


def _load_with_timeout(ep: EntryPoint, timeout: float) -> Any:
    """``ep.load()``, or a `LoadError` (its message and traceback) when the import raised or did not
    finish within ``timeout`` seconds. The import runs in a daemon thread so that one plugin hanging at
    import time (a network call, a lock, an endless loop) is reported by name and the others still load;
    the hung thread is left behind (Python cannot stop it) and holds only that module's import lock."""
    result: dict[str, Any] = {}

    def load() -> None:
        try:
            result["obj"] = ep.load()
        except BaseException as exc:  # a plugin's import may raise anything, even SystemExit
            result["error"] = LoadError(ep.name, "", "import", _describe(exc), traceback.format_exc())

    worker = threading.Thread(target=load, name=f"udm-plugin-import-{ep.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return LoadError(ep.name, "", "import", f"import did not finish within {timeout:g}s (hung?); set "
                                                f"UDM_PLUGIN_IMPORT_TIMEOUT to wait longer")
    return result["error"] if "error" in result else result["obj"]


def installed_entry_points() -> list[tuple[EntryPoint, str]]:
    """Every installed ``udm`` entry point with its distribution's ``"name version"``: a scan of every
    distribution's metadata on ``sys.path`` (what `udm.host.plugin_cache` keeps between runs)."""
    return [(ep, _dist_name(ep)) for ep in entry_points(group=ENTRY_POINT_GROUP)]


def select_entry_points(found: Iterable[tuple[EntryPoint, str]]) -> list[tuple[EntryPoint, str]]:
    """Of ``(entry point, "name version")`` pairs, those the environment lets load
    (``UDM_DISABLE_PLUGIN_AUTOLOAD``, ``UDM_PLUGINS``)."""
    if _truthy(os.environ.get("UDM_DISABLE_PLUGIN_AUTOLOAD")):
        return []
    only = os.environ.get("UDM_PLUGINS")
    wanted = None if only is None else {s.strip() for s in only.split(",") if s.strip()}
    return [(ep, dist) for ep, dist in found
            if wanted is None or ep.name in wanted or dist.split(" ")[0] in wanted]


def selected_entry_points(eps: Iterable[EntryPoint] | None = None) -> list[tuple[EntryPoint, str]]:
    """The ``udm`` entry points (``eps``, else every installed one) the environment lets load, each with its
    distribution's ``"name version"``."""
    if _truthy(os.environ.get("UDM_DISABLE_PLUGIN_AUTOLOAD")):
        return []  # (before the scan: nothing of it would be used)
    found = installed_entry_points() if eps is None else [(ep, _dist_name(ep)) for ep in eps]
    return select_entry_points(found)


class PluginHost:
    """Owns the pluggy manager; collects UDM registrations and load errors per plugin."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(UdmHookSpec)
        self.registrations: list[Registration] = []
        self.errors: list[LoadError] = []

    def load_entry_points(self, eps: Iterable[EntryPoint] | None = None) -> None:
        for ep, dist in selected_entry_points(eps):
            self.load_entry_point(ep, dist)

    def load_entry_point(self, ep: EntryPoint, distribution: str) -> None:
        """Import one entry point's plugin and run its hook; a failure is recorded, never raised."""
        outcome = _load_with_timeout(ep, import_timeout())
        if isinstance(outcome, LoadError):
            self.errors.append(LoadError(ep.name, distribution, "import", outcome.error, outcome.detail))
            return
        self.add_plugin(outcome, name=ep.name, distribution=distribution)

    def add_plugin(self, obj: Any, *, name: str | None = None, distribution: str = "<local>") -> None:
        """Register one plugin object and run its hook in isolation."""
        pname = name or getattr(obj, "__name__", None) or repr(obj)
        if self.pm.has_plugin(pname):
            self.errors.append(LoadError(pname, distribution, "register", "a plugin with this name is loaded"))
            return
        try:
            self.pm.register(obj, name=pname)
        except Exception as exc:  # pluggy rejects hookimpls that do not match the spec
            self.errors.append(LoadError(pname, distribution, "register", _describe(exc)))
            return
        for impl in self.pm.hook.register_udms.get_hookimpls():
            if impl.plugin_name != pname:
                continue
            found: list[Registration] = []

            def register(cls: Any, _found: list[Registration] = found) -> None:
                _found.append(Registration(cls, pname, distribution))

            try:
                impl.function(register=register)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self.errors.append(LoadError(pname, distribution, "hook", _describe(exc), traceback.format_exc()))
                continue  # a hook that raised half-way registers nothing: all or nothing per plugin
            self.registrations.extend(found)
