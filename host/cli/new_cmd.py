"""`udm new`: scaffold a pip-installable UDM plugin project from the packaged template."""

from __future__ import annotations

from pathlib import Path

import typer
from packaging.version import InvalidVersion, Version

from udm.host.catalog import default_catalog

from ._common import err, out

__all__ = ["register"]


def cmd_new(
    name: str = typer.Argument(..., help="UDM name: lowercase letters, digits, underscores (e.g. my_avg)."),
    kind: str = typer.Option(..., "--kind", help="udf (per event), uda (aggregate), udo (operator)."),
    incremental: bool = typer.Option(False, "--incremental", help="add/remove state instead of recomputing."),
    time_sensitive: bool = typer.Option(False, "--time-sensitive",
                                        help="the UDM sees event lifetimes and the window."),
    span: bool = typer.Option(False, "--span", help="with --kind udo: a span UDO, run once per event by a "
                              "flat_map step (each event becomes zero or more events)."),
    directory: Path = typer.Option(None, "--dir", help="Project directory to create (default: ./udm-NAME)."),
    version: str = typer.Option("0.1.0", "--version", help="Initial version of the UDM and distribution."),
) -> None:
    """Create a plugin project: pyproject (udm entry point), example UDM, tests, README, CI workflow."""
    from udm.templates import NewProjectError, ProjectOptions, render_project  # lazy: jinja2 only for `udm new`

    opts = ProjectOptions(name=name, kind=kind.lower(), incremental=incremental,
                          time_sensitive=time_sensitive, span=span)
    try:
        version = str(Version(version))
    except InvalidVersion:
        raise NewProjectError(f"--version {version!r} is not a PEP 440 version") from None
    dest = directory if directory is not None else Path.cwd() / opts.distribution
    files = render_project(opts, dest, version=version)
    _warn_if_name_taken(opts.name)
    out.print(f"Created [bold]{opts.distribution}[/] ({opts.variant}, base class {opts.base}) in {dest}",
              highlight=False)
    for f in files:
        out.print(f"  {f.relative_to(dest.resolve())}", highlight=False)
    out.print(f"Next: cd {dest} && python -m pytest && udm validate . && pip install -e .", highlight=False)


def _warn_if_name_taken(name: str) -> None:
    """Installed UDMs with the same name are not an error (versions disambiguate), but worth knowing."""
    try:
        taken = [e.describe() for e in default_catalog().candidates(name)]
    except Exception:  # discovery problems are `udm list`'s business, not a reason to fail `udm new`
        return
    if taken:
        err.print(f"note: an installed UDM already uses the name {name!r}: {'; '.join(taken)}; queries will "
                  "need a version specifier to tell them apart", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("new")(cmd_new)
