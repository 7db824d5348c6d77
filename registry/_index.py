"""Generating the static files of a registry from its catalog.

- ``simple/`` — a PEP 503 "simple" index: one page listing projects, one page per project linking its
  files with ``#sha256=`` fragments (pip verifies them) and ``data-requires-python`` (PEP 503/345).
- ``catalog.json`` — the catalog of manifests.
- ``index.html`` — a human catalog page: browse, filter, properties, the install command.
Everything is regenerated from the catalog on every publish, so the three can never disagree.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import jinja2

from udm.sdk import API_VERSION

from ._records import RegistryCatalog
from ._store import CATALOG_FILE, atomic_write

__all__ = ["FILES_DIR", "SIMPLE_DIR", "write_index"]

SIMPLE_DIR = "simple"
FILES_DIR = "files"



def _templates_dir() -> Path:
    """The registry page templates, shipped in ``udm.templates`` (also when installed from a wheel)."""
    import udm.templates

    return Path(udm.templates.__file__).resolve().parent / "registry"


def _simple_root(projects: list[str]) -> str:
    links = "\n".join(f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br/>' for p in projects)
    return ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            "<title>Simple index</title></head>\n  <body>\n" + links + "\n  </body>\n</html>\n")


def _simple_project(catalog: RegistryCatalog, project: str) -> str:
    rows = []
    for rel in catalog.projects()[project]:
        rp = f' data-requires-python="{html.escape(rel.requires_python)}"' if rel.requires_python else ""
        href = f"../../{FILES_DIR}/{rel.filename}#sha256={rel.sha256}"
        rows.append(f'    <a href="{html.escape(href)}"{rp}>{html.escape(rel.filename)}</a><br/>')
    return ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>Links for {html.escape(project)}</title></head>\n  <body>\n"
            f"    <h1>Links for {html.escape(project)}</h1>\n" + "\n".join(rows) + "\n  </body>\n</html>\n")


def render_catalog_page(catalog: RegistryCatalog) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_templates_dir())),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    rows = catalog.udm_rows()
    for r in rows:
        r["property_names"] = [k for k, on in r["properties"].items() if on and k != "deterministic"]
        r["param_names"] = sorted(r.get("params", {}).get("properties", {}))
    return env.get_template("index.html.jinja").render(rows=rows, api_version=API_VERSION,
                                                      releases=len(catalog.releases))


def write_index(root: Path, catalog: RegistryCatalog) -> None:
    """(Re)write ``simple/``, ``catalog.json`` and ``index.html`` under ``root``."""
    projects = catalog.projects()
    for project in projects:
        atomic_write(root / SIMPLE_DIR / project / "index.html",
                     _simple_project(catalog, project).encode("utf-8"))
    atomic_write(root / SIMPLE_DIR / "index.html", _simple_root(sorted(projects)).encode("utf-8"))
    atomic_write(root / CATALOG_FILE,
                 (json.dumps(catalog.to_json_dict(), indent=2, sort_keys=False) + "\n").encode("utf-8"))
    atomic_write(root / "index.html", render_catalog_page(catalog).encode("utf-8"))
