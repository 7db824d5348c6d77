"""Loading plugins that are not installed: a plugin project directory or a single .py file.

`udm validate PATH` uses this so an author can check a project before `pip install`/publishing, through
the same hook path an installed plugin takes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path
from typing import Any

from udm.host.catalog import Catalog
from udm.host.errors import UdmError
from udm.host.plugins import ENTRY_POINT_GROUP, LoadError, PluginHost

__all__ = ["load_project_catalog", "project_entry_points"]


def project_entry_points(root: Path) -> tuple[str, dict[str, str]]:
    """(distribution label, {entry point name: "module:attr"}) from a project's pyproject.toml."""
    pp = root / "pyproject.toml"
    try:
        data = tomllib.loads(pp.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UdmError(f"{root} is not a plugin project: no pyproject.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise UdmError(f"{pp} is not valid TOML: {exc}") from None
    project = data.get("project", {})
    eps = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    if not eps:
        raise UdmError(f"{pp} declares no entry points in group {ENTRY_POINT_GROUP!r} "
                       f"([project.entry-points.{ENTRY_POINT_GROUP}])")
    label = f"{project.get('name', root.name)} {project.get('version', '?')} (source)"
    return label, dict(eps)


def _import_attr(spec: str) -> Any:
    mod_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(mod_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def load_project_catalog(path: Path) -> Catalog:
    path = path.resolve()
    host = PluginHost()
    if path.is_file() and path.suffix == ".py":
        mod_name = f"_udm_local_{path.stem}"
        try:
            spec = importlib.util.spec_from_file_location(mod_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        except Exception as exc:
            host.errors.append(LoadError(path.name, f"{path} (file)", "import", f"{type(exc).__name__}: {exc}"))
        else:
            host.add_plugin(module, name=path.stem, distribution=f"{path} (file)")
    elif path.is_dir():
        label, eps = project_entry_points(path)
        roots = [str(p) for p in (path / "src", path) if p.is_dir()]
        sys.path[:0] = roots
        try:
            for name, target in eps.items():
                try:
                    obj = _import_attr(target)
                except Exception as exc:
                    host.errors.append(LoadError(name, label, "import", f"{type(exc).__name__}: {exc}"))
                    continue
                host.add_plugin(obj, name=name, distribution=label)
        finally:
            for r in roots:
                if r in sys.path:
                    sys.path.remove(r)
    else:
        raise UdmError(f"{path} is neither a plugin project directory nor a .py file")
    cat = Catalog()
    cat.load_errors = list(host.errors)
    for reg in host.registrations:
        cat.add(reg.cls, plugin=reg.plugin, distribution=reg.distribution)
    return cat
