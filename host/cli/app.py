"""The `udm` typer app. Command groups live in their own modules and register themselves here."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from udm.host.errors import UdmError

from ._common import err

__all__ = ["app", "main"]

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
    debug: bool = typer.Option(False, "--debug", help="Show a traceback when a command fails."),
    strict: bool = typer.Option(False, "--strict", help="Fail when any plugin fails to load (UDM_STRICT)."),
) -> None:
    _state["debug"] = debug or bool(os.environ.get("UDM_DEBUG"))
    if strict:
        os.environ["UDM_STRICT"] = "1"


for _mod in _COMMAND_MODULES:
    importlib.import_module(f"{__package__}.{_mod}").register(app)


def main() -> None:
    """Console-script entry: every failure is one line on stderr and a non-zero exit code."""
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except UdmError as exc:
        if _state["debug"]:
            raise
        err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        sys.exit(1)
    except Exception as exc:
        if _state["debug"]:
            raise
        err.print(f"[bold red]internal error:[/] {type(exc).__name__}: {exc} (run with --debug for a traceback)",
                  highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
