"""`udm list`, `udm info`, `udm validate`: what is installed, what it promises, whether it keeps it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from udm.host.catalog import Catalog, CatalogEntry, default_catalog
from udm.host.errors import UnknownUDM
from udm.host.local_plugins import load_project_catalog

from ._common import err, out, print_json

__all__ = ["register"]

_PROPS = ("incremental", "time_sensitive", "time_bound", "algebraic", "deterministic")


def _props(entry: CatalogEntry) -> list[str]:
    try:
        p = entry.manifest.properties
    except AttributeError:
        return []
    return [name for name in _PROPS if getattr(p, name) and name != "deterministic"] + (
        [] if p.deterministic else ["nondeterministic"])


def _entries_table(cat: Catalog, title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("name", "version", "kind", "properties", "distribution", "status"):
        t.add_column(col)
    for e in sorted(cat.entries, key=lambda e: (e.name, e.version)):
        kind = getattr(getattr(e.cls, "manifest", None), "kind", "?")
        status = "[green]ok[/]" if e.valid else f"[red]refused[/]: {'; '.join(e.problems)}"
        t.add_row(e.name, e.version, kind, ", ".join(_props(e)), e.distribution, status)
    return t


def _print_load_errors(cat: Catalog) -> None:
    for le in cat.load_errors:
        out.print(f"[red]plugin failed[/] {le.plugin} ({le.distribution}) at {le.stage}: {le.error}",
                  highlight=False)


def cmd_list(json_: bool = typer.Option(False, "--json", help="Print one JSON document.")) -> None:
    """Every discovered UDM with its version, kind, properties, distribution and validation status."""
    cat = default_catalog()
    if json_:
        print_json({
            "udms": [e.to_json_dict() for e in sorted(cat.entries, key=lambda e: (e.name, e.version))],
            "load_errors": [{"plugin": e.plugin, "distribution": e.distribution, "stage": e.stage,
                             "error": e.error} for e in cat.load_errors],
        })
        return
    if not cat.entries and not cat.load_errors:
        out.print("No UDMs installed. Install a plugin (pip install ...) or create one with `udm new`.")
        return
    out.print(_entries_table(cat, "Installed UDMs"))
    _print_load_errors(cat)


def cmd_info(
    name: str = typer.Argument(..., help="Registered UDM name."),
    version: str = typer.Option(None, "--version", "-v", help="PEP 440 specifier, e.g. '>=1,<2'."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """One UDM: manifest, parameters, allowed policies, docs."""
    cat = default_catalog()
    if not cat.candidates(name):
        raise UnknownUDM(f"no UDM named {name!r}; available: {', '.join(cat.names()) or '(none installed)'}")
    entry = cat.resolve(name, version)
    man = entry.manifest
    data: dict[str, Any] = man.to_json_dict()
    data.update(distribution=entry.distribution, plugin=entry.plugin, status=entry.status)
    if json_:
        print_json(data)
        return
    out.print(f"[bold]{man.name}[/] {man.version} — {man.summary}", highlight=False)
    t = Table(show_header=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("kind", man.kind)
    t.add_row("properties", ", ".join(_props(entry)) or "-")
    t.add_row("input → output", f"{man.input_type} → {man.output_type}")
    t.add_row("clip policies", ", ".join(man.allowed_clip) or "-")
    t.add_row("output policies", ", ".join(man.allowed_output) or "-")
    t.add_row("host API", man.host_api)
    t.add_row("distribution", f"{entry.distribution} (plugin {entry.plugin})")
    out.print(t)
    fields = man.params.model_json_schema().get("properties", {})
    if fields:
        pt = Table(title="parameters", title_justify="left")
        for col in ("name", "type", "default", "description"):
            pt.add_column(col)
        required = set(man.params.model_json_schema().get("required", []))
        for pname, schema in fields.items():
            default = "(required)" if pname in required else repr(schema.get("default"))
            pt.add_row(pname, str(schema.get("type", "any")), default,
                       schema.get("description", ""))
        out.print(pt)
    else:
        out.print("parameters: none")
    if man.docs and man.docs != man.summary:
        out.print()
        out.print(man.docs, highlight=False, markup=False)


def _validation_results(cat: Catalog) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for e in sorted(cat.entries, key=lambda e: (e.name, e.version)):
        rows.append({"udm": e.name, "version": e.version, "distribution": e.distribution, "check": "manifest",
                     "passed": e.valid, "detail": "; ".join(e.problems)})
    for le in cat.load_errors:
        rows.append({"udm": None, "version": None, "distribution": le.distribution, "check": f"load:{le.stage}",
                     "passed": False, "detail": f"plugin {le.plugin}: {le.error}"})
    return rows


def cmd_validate(
    path: Path = typer.Argument(None, help="A plugin project directory (with pyproject.toml) or a .py file; "
                                "default: every installed plugin."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Check UDMs: manifest against implementation. Exit 1 when anything fails."""
    cat = load_project_catalog(path) if path is not None else default_catalog()
    rows = _validation_results(cat)
    ok = all(r["passed"] for r in rows) and bool(rows)
    if json_:
        print_json({"passed": ok, "results": rows})
    else:
        t = Table(title=f"udm validate {path or '(installed plugins)'}", title_justify="left")
        for col in ("udm", "version", "check", "result", "detail"):
            t.add_column(col)
        for r in rows:
            t.add_row(r["udm"] or "-", r["version"] or "-", r["check"],
                      "[green]pass[/]" if r["passed"] else "[red]FAIL[/]", r["detail"])
        out.print(t)
        if not rows:
            err.print("no UDMs found to validate")
        passed = sum(r["passed"] for r in rows)
        out.print(f"{passed} passed, {len(rows) - passed} failed", highlight=False)
    if not ok:
        sys.exit(1)


def register(app: typer.Typer) -> None:
    app.command("list")(cmd_list)
    app.command("info")(cmd_info)
    app.command("validate")(cmd_validate)


