"""The `udm` typer app. Command groups live in their own modules and register themselves here; the console
entry point is `udm.host.cli.app.main`."""

from __future__ import annotations

import importlib
import os

import typer

from . import startup_gc

__all__ = ["app", "debugging"]

app = typer.Typer(
    name="udm",
    help="User-defined modules over temporal event streams: discover, validate, run, publish.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

#: Modules that add commands via ``register(app)``; each owns one concern.
_COMMAND_MODULES = ("catalog_cmds", "new_cmd", "registry_cmd", "run_cmd", "demo_cmd")

_state = {"debug": False}


@app.callback()
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show a traceback when a command fails."),
    strict: bool = typer.Option(False, "--strict", help="Fail when any plugin fails to load (UDM_STRICT)."),
) -> None:
    _state["debug"] = debug or bool(os.environ.get("UDM_DEBUG"))
    if strict:
        os.environ["UDM_STRICT"] = "1"
    if ctx.invoked_subcommand != "run":  # `udm run` resumes once its query is bound
        startup_gc.resume()


for _mod in _COMMAND_MODULES:
    importlib.import_module(f"{__package__}.{_mod}").register(app)


def debugging() -> bool:
    """Whether this run shows tracebacks (``--debug`` or ``UDM_DEBUG``)."""
    return _state["debug"]
