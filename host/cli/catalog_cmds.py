"""`udm list`, `udm info`, `udm validate`: what is installed, what it promises, whether it keeps it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from udm.host.catalog import Catalog, CatalogEntry, default_catalog
from udm.host.errors import UnknownUDM
from udm.host.local_plugins import load_project_catalog
from udm.sdk import ErrorBound

from ._common import check_tally, err, new_table, out, print_json

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["register"]

_PROPS = ("incremental", "time_sensitive", "time_bound", "algebraic", "value_blind", "deterministic")


def _props(entry: CatalogEntry) -> list[str]:
    """From the entry's listing, which a cached plugin answers without being imported."""
    p = entry.to_json_dict().get("properties")
    if not isinstance(p, dict):
        return []
    return [name for name in _PROPS if p.get(name) and name != "deterministic"] + (
        [] if p.get("deterministic", True) else ["nondeterministic"])


def _entries_table(cat: Catalog, title: str) -> Table:
    t = new_table(title=title, title_justify="left")
    for col in ("name", "version", "kind", "properties", "distribution", "status"):
        t.add_column(col)
    for e in sorted(cat.entries, key=lambda e: (e.name, e.version)):
        kind = e.kind_label
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
    from rich.markup import escape  # lazy: rich comes with the first line drawn (`_common`)

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
    t = new_table(show_header=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("kind", entry.kind_label)
    t.add_row("properties", ", ".join(_props(entry)) or "-")
    t.add_row("input → output", escape(f"{man.input_type} → {man.output_type}"))  # (``list[float]`` is no markup)
    if man.error_bound is not None:
        t.add_row("error bound", _error_text(man.error_bound))
    t.add_row("clip policies", ", ".join(man.allowed_clip) or "-")
    t.add_row("output policies", ", ".join(man.allowed_output) or "-")
    t.add_row("host API", man.host_api)
    t.add_row("distribution", f"{entry.distribution} (plugin {entry.plugin})")
    out.print(t)
    fields = man.params.model_json_schema().get("properties", {})
    if fields:
        pt = new_table(title="parameters", title_justify="left")
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


_MEASURES = {"distinct_count": "relative error of the distinct count",
             "quantile": "rank error of each quantile",
             "frequencies": "count error per member of each listed item"}


def _error_text(eb: ErrorBound) -> str:
    """An approximate aggregate's declared bound in words (the measure is `udm.sdk.ErrorBound`'s)."""
    conf = "always" if eb.confidence >= 1 else f"at {eb.confidence:.4g} confidence"
    return f"{_MEASURES[eb.estimates]} <= {eb.bound:.4g} {conf} (default parameters)"


def _validation_results(cat: Catalog) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for e in sorted(cat.entries, key=lambda e: (e.name, e.version)):
        rows.append({"udm": e.name, "version": e.version, "distribution": e.distribution, "check": "manifest",
                     "passed": e.valid, "detail": "; ".join(e.problems)})
    for le in cat.load_errors:
        rows.append({"udm": None, "version": None, "distribution": le.distribution, "check": f"load:{le.stage}",
                     "passed": False, "detail": f"plugin {le.plugin}: {le.error}"})
    return rows


def _contract_results(cat: Catalog, seed: int, examples: int) -> list[dict[str, Any]]:
    """One row per conformance-kit contract check (udm.host.testing) of every UDM the catalog accepted
    (a refused UDM cannot run; its manifest row already says why)."""
    from udm.host.testing import run_contract_checks  # lazy: the kit (numpy) only for `udm check`

    rows: list[dict[str, Any]] = []
    for e in sorted(cat.entries, key=lambda e: (e.name, e.version)):
        if not e.valid:
            continue
        for r in run_contract_checks(e.cls, seed=seed, examples=examples):
            rows.append({"udm": e.name, "version": e.version, "distribution": e.distribution,
                         "check": f"contract:{r.name}", "passed": r.passed, "detail": r.detail,
                         "skipped": r.skipped, "seed": r.seed, "reproducer": r.reproducer})
    return rows


def _summarized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For the table: a UDM's passing contract checks become one ``contracts`` row; failures stay."""
    out: list[dict[str, Any]] = []
    pending: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in rows:
        if not r["check"].startswith("contract:"):
            out.append(r)
            continue
        key = (r["udm"], r["version"])
        if key not in pending:
            pending[key] = {**r, "check": "contracts", "passed": True, "ok": []}
            out.append(pending[key])
        if not r["passed"]:
            out.append(r)
        else:
            pending[key]["ok"].append(r)
    for s in pending.values():
        s["detail"] = check_tally(s["ok"])
    return [r for r in out if r["check"] != "contracts" or r["ok"]]


def _footer(rows: list[dict[str, Any]]) -> str:
    """The last line of ``udm validate``: manifests accepted and refused, plugins that failed to load, and the
    contract checks counted as `check_tally` counts them (the ``contracts`` rows above use the same words)."""
    manifests = [r for r in rows if r["check"] == "manifest"]
    refused = sum(not r["passed"] for r in manifests)
    parts = [f"{len(manifests) - refused} manifest{'' if len(manifests) - refused == 1 else 's'} accepted"]
    if refused:
        parts[0] += f", {refused} refused"
    broken = sum(r["check"].startswith("load:") for r in rows)
    if broken:
        parts.append(f"{broken} plugin{'s' if broken > 1 else ''} failed to load")
    contracts = [r for r in rows if r["check"].startswith("contract:")]
    if contracts:
        parts.append(f"contract checks: {check_tally(contracts)}")
    return "; ".join(parts)


def cmd_validate(
    path: Path = typer.Argument(None, help="A plugin project directory (with pyproject.toml) or a .py file; "
                                "default: every installed plugin."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
    seed: int = typer.Option(0, "--seed", help="Seed of the conformance-kit contract checks (reproduces a failure)."),
    examples: int = typer.Option(50, "--examples", help="Random examples per contract check."),
    contracts: bool = typer.Option(True, "--contracts/--no-contracts",
                                   help="Run the conformance-kit contract checks (udm.host.testing)."),
) -> None:
    """Check UDMs: manifest against implementation, then the conformance-kit contract checks.
    Exit 1 when anything fails."""
    cat = load_project_catalog(path) if path is not None else default_catalog()
    rows = _validation_results(cat)
    if contracts:
        rows += _contract_results(cat, seed, examples)
        rows.sort(key=lambda r: (r["udm"] is None, r["udm"] or "", r["version"] or ""))  # stable: per UDM
    ok = all(r["passed"] for r in rows) and bool(rows)
    if json_:
        print_json({"passed": ok, "results": rows})
    else:
        t = new_table(title=f"udm validate {path or '(installed plugins)'}", title_justify="left")
        for col in ("udm", "version", "check", "result", "detail"):
            t.add_column(col)
        for r in _summarized(rows):
            result = "[green]pass[/]" if r["passed"] else "[red]FAIL[/]"
            detail = r["detail"] if r["passed"] or "seed" not in r else f"{r['detail']} (seed {r['seed']})"
            t.add_row(r["udm"] or "-", r["version"] or "-", r["check"], result, detail)
        out.print(t)
        for r in rows:
            if not r["passed"] and r.get("reproducer"):
                out.print(f"[bold]{r['udm']} {r['check']}[/] reproducer (seed {r['seed']}):", highlight=False)
                out.print(r["reproducer"], highlight=False, markup=False)
        if not rows:
            err.print("no UDMs found to validate")
        out.print(_footer(rows), highlight=False)
    if not ok:
        sys.exit(1)


def register(app: typer.Typer) -> None:
    app.command("list")(cmd_list)
    app.command("info")(cmd_info)
    app.command("validate")(cmd_validate)


