"""`udm registry publish|search|info|install|serve`: the marketplace commands (logic lives in udm.registry)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._common import check_tally, new_table, out, print_json

if TYPE_CHECKING:
    from udm.registry import Location

__all__ = ["register"]

# lazy imports: udm.registry — the marketplace (jinja2, markdown-it) loads only for `udm registry`

registry_app = typer.Typer(
    name="registry",
    help="Publish UDMs to a registry (a directory or http(s) URL; --registry, $UDM_REGISTRY, or a per-user "
         "default), search it, install from it, and preview its catalog site (serve).",
    no_args_is_help=True,
)

_state: dict[str, str | None] = {"registry": None}

_REGISTRY_HELP = "Registry directory or http(s) URL (default: $UDM_REGISTRY, else ~/.local/share/udm/registry)."


def _location(cmd_value: str | None) -> Location:
    """The command's --registry wins over the group's, which wins over $UDM_REGISTRY and the default."""
    from udm.registry import resolve_location

    return resolve_location(cmd_value or _state["registry"])


@registry_app.callback()
def _group(registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP)) -> None:
    _state["registry"] = registry


def cmd_publish(
    target: Path = typer.Argument(..., help="A plugin project directory (built with `python -m build`) or a wheel."),
    registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP),
    isolation: bool = typer.Option(True, "--isolation/--no-isolation",
                                   help="Build in an isolated environment (needs the package index) or with "
                                        "this environment's build backend (works offline)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the conformance kit's generated inputs."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Build, validate the manifest, run the contract checks, then add the wheel to the index."""
    from udm.registry import kind_label, publish

    loc = _location(registry)
    res = publish(loc, target, isolation=isolation, seed=seed)
    rel = res.release
    if json_:
        print_json({"status": res.status, "registry": str(loc), **rel.model_dump(mode="json")})
        return
    verb = "published" if res.status == "published" else "already published (identical contents)"
    out.print(f"[green]{verb}[/] {rel.distribution} {rel.version} to {loc}", highlight=False)
    for u in rel.udms:
        out.print(f"  {u.name} {u.version} ({kind_label(u)}) — {u.summary}", highlight=False)
    out.print(f"  {rel.filename} sha256={rel.sha256}  (contract checks: {check_tally(rel.checks)})", highlight=False)
    if res.site.written:
        out.print(f"  site: {len(res.site.written)} file(s) rewritten, {res.site.kept} unchanged; "
                  f"open {loc.url_of('index.html')} or run `udm registry serve`", highlight=False)


def cmd_search(
    term: str = typer.Argument("", help="Words to look for in name, summary, kind, properties, distribution."),
    registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Find UDMs in the registry's catalog (latest version of each); nothing is installed."""
    from udm.registry import kind_label, read_catalog, search

    loc = _location(registry)
    hits = search(read_catalog(loc), term)
    if json_:
        print_json({"registry": str(loc), "results": [h.to_json_dict() for h in hits]})
        return
    if not hits:
        out.print(f"no UDM in {loc} matches {term!r}", highlight=False)
        return
    t = new_table(title=f"UDMs in {loc} matching {term!r}", title_justify="left")
    for col in ("name", "version", "kind", "properties", "summary", "distribution", "host API"):
        t.add_column(col)
    for h in hits:
        api = h.udm.host_api + ("" if h.supported() else " [red](not this host)[/]")
        t.add_row(h.udm.name, h.udm.version, kind_label(h.udm), ", ".join(h.udm.property_names()), h.udm.summary,
                  f"{h.release.distribution} {h.release.version}", api)
    out.print(t)


def cmd_info(
    name: str = typer.Argument(..., help="UDM name (or distribution name)."),
    registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """A published UDM's manifest and versions, from the catalog (no install needed)."""
    from udm.registry import info, kind_label, read_catalog

    loc = _location(registry)
    hits = info(read_catalog(loc), name)
    if json_:
        print_json({"registry": str(loc), "versions": [h.to_json_dict() for h in hits]})
        return
    latest = hits[-1]
    u = latest.udm
    out.print(f"[bold]{u.name}[/] {u.version} — {u.summary}", highlight=False)
    t = new_table(show_header=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("kind", kind_label(u))
    t.add_row("properties", ", ".join(u.property_names()) or "-")
    t.add_row("input → output", f"{u.input_type} → {u.output_type}")
    t.add_row("clip policies", ", ".join(u.allowed_clip) or "-")
    t.add_row("output policies", ", ".join(u.allowed_output) or "-")
    t.add_row("parameters", ", ".join(sorted(u.params.get("properties", {}))) or "none")
    t.add_row("host API", u.host_api + ("" if latest.supported() else " (does not support this host)"))
    t.add_row("distribution", f"{latest.release.distribution} {latest.release.version}")
    t.add_row("versions", ", ".join(f"{h.udm.version}" for h in hits))
    t.add_row("install", f"udm registry install '{u.name}=={u.version}'")
    out.print(t)
    if u.docs and u.docs != u.summary:
        out.print()
        out.print(u.docs, highlight=False, markup=False)


def cmd_install(
    requirement: str = typer.Argument(..., help="NAME or NAME<spec>, e.g. median or 'median>=1,<2'."),
    registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP),
    extra_index_url: list[str] = typer.Option([], "--extra-index-url",
                                              help="Also look here for dependencies (repeatable)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the chosen release and pip commands only."),
) -> None:
    """Install a UDM with pip from the registry's index, hash-checked; refuses host API mismatches."""
    from udm.registry import install, plan_install, read_catalog

    loc = _location(registry)
    catalog = read_catalog(loc)
    if dry_run:
        plan = plan_install(loc, catalog, requirement, extra_index_urls=extra_index_url,
                            reqfile=Path("requirements-hashed.txt"))
        out.print(f"would install {plan.pin} (sha256 {plan.release.sha256}) from {plan.index_url}",
                  highlight=False)
        for cmd in plan.commands:
            out.print("  " + " ".join(cmd), highlight=False, markup=False)
        return
    plan = install(loc, catalog, requirement, extra_index_urls=extra_index_url)
    names = ", ".join(u.name for u in plan.release.udms)
    out.print(f"[green]installed[/] {plan.pin} from {plan.index_url} (sha256 verified): {names}",
              highlight=False)


def cmd_serve(
    port: int = typer.Option(8000, "--port", help="Port on 127.0.0.1 (0 picks a free one)."),
    registry: str = typer.Option(None, "--registry", help=_REGISTRY_HELP),
) -> None:
    """Preview a registry directory on 127.0.0.1: its catalog site and its pip index, until Ctrl-C."""
    from udm.registry import make_server, refresh_site

    loc = _location(registry)
    refreshed = refresh_site(loc)
    server = make_server(loc, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    if refreshed is None:
        out.print(f"note: {loc} is read-only here: serving its site as it is", highlight=False)
    elif refreshed:
        out.print(f"brought the site up to date ({refreshed} file(s) rewritten)", highlight=False)
    out.print(f"serving {loc} at {url} (Ctrl-C stops)\n  site:      {url}\n  pip index: {url}simple/\n"
              f"  install:   udm registry install NAME --registry {url}", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    registry_app.command("publish")(cmd_publish)
    registry_app.command("search")(cmd_search)
    registry_app.command("info")(cmd_info)
    registry_app.command("install")(cmd_install)
    registry_app.command("serve")(cmd_serve)
    app.add_typer(registry_app, name="registry")
