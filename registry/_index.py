"""Generating the static files of a registry from its catalog.

- ``simple/`` — a PEP 503 "simple" index: one page listing projects, one page per project linking its
  files with ``#sha256=`` fragments (pip verifies them) and ``data-requires-python`` (PEP 503/345).
- ``catalog.json`` — the catalog of manifests.
- the catalog site: ``index.html`` (every UDM, filterable by kind, property and text), ``udm/NAME.html``
  (one page per UDM: manifest, parameters, policies, docs, every version with its checks and sha256, the
  install line and a query snippet) and ``static/`` (one stylesheet, one small script).
Everything is derived from the catalog, so the three can never disagree; `_site.SiteWriter` rewrites only
the files whose inputs changed since the last publish.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ._records import RegistryCatalog, Release
from ._site import SiteBuild, SiteWriter, page_renderer, static_files
from ._site_model import index_model, udm_models, udm_page_path
from ._store import CATALOG_FILE

__all__ = ["FILES_DIR", "SIMPLE_DIR", "write_index"]

SIMPLE_DIR = "simple"
FILES_DIR = "files"


def _simple_root(projects: list[str]) -> str:
    links = "\n".join(f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br/>' for p in projects)
    return ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            "<title>Simple index</title></head>\n  <body>\n" + links + "\n  </body>\n</html>\n")


def _simple_project(project: str, releases: list[Release]) -> str:
    rows = []
    for rel in releases:
        rp = f' data-requires-python="{html.escape(rel.requires_python)}"' if rel.requires_python else ""
        href = f"../../{FILES_DIR}/{rel.filename}#sha256={rel.sha256}"
        rows.append(f'    <a href="{html.escape(href)}"{rp}>{html.escape(rel.filename)}</a><br/>')
    return ("<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>Links for {html.escape(project)}</title></head>\n  <body>\n"
            f"    <h1>Links for {html.escape(project)}</h1>\n" + "\n".join(rows) + "\n  </body>\n</html>\n")


def write_index(root: Path, catalog: RegistryCatalog) -> SiteBuild:
    """(Re)write ``simple/``, ``catalog.json`` and the catalog site under ``root``: only what changed."""
    out = SiteWriter(root)
    projects = catalog.projects()
    for project, releases in projects.items():
        out.put_bytes(f"{SIMPLE_DIR}/{project}/index.html", _simple_project(project, releases).encode("utf-8"))
    out.put_bytes(f"{SIMPLE_DIR}/index.html", _simple_root(sorted(projects)).encode("utf-8"))
    out.put_bytes(CATALOG_FILE, (json.dumps(catalog.to_json_dict(), indent=2) + "\n").encode("utf-8"))
    for rel, data in static_files().items():
        out.put_bytes(rel, data)
    udm_page = page_renderer("udm.html.jinja")
    for name, model in udm_models(catalog).items():
        out.put_page(udm_page_path(name), {**model, "root": "../"}, udm_page)
    out.put_page("index.html", {**index_model(catalog), "root": ""}, page_renderer("index.html.jinja"))
    return out.finish()
