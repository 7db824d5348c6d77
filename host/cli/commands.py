"""The `udm` typer app. Command groups live in their own modules and register themselves here when they are
used; the console entry point is `udm.host.cli.app.main`.

Why lazily: a command's module brings its own imports (``udm list``: the project's local plugins and tomllib;
``udm demo``: the demo's data; ``udm new``: the template tools), and ``udm run`` — the command whose start-up
counts — needs none of them: ~12 ms of CPU (load ~20, median of 7) that a run no longer spends. So the app's
click group (`_LazyGroup`) imports a command's module when that command is looked up, and every module
when all commands are listed (``udm --help``, a mistyped command's suggestions).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import typer
from typer.core import TyperGroup

from . import startup_gc

__all__ = ["COMMAND_MODULES", "app", "debugging"]

#: Each command's module (in the order help lists them); a module adds its commands via ``register(app)``.
COMMAND_MODULES: dict[str, str] = {
    "list": "catalog_cmds", "info": "catalog_cmds", "validate": "catalog_cmds",
    "new": "new_cmd",
    "run": "run_cmd",
    "demo": "demo_cmd",
    "registry": "registry_cmd",
}


def commands_of(module: str) -> dict[str, Any]:
    """The click commands that ``module`` registers (on an app of its own, whose group holds them)."""
    own = typer.Typer()
    importlib.import_module(f"{__package__}.{module}").register(own)
    group = typer.main.get_group(own)
    return dict(group.commands)


class _LazyGroup(TyperGroup):
    """The app's group: a command's module is imported when the command is first looked up."""

    def _load(self, module: str) -> None:
        for name, cmd in commands_of(module).items():
            self.commands.setdefault(name, cmd)

    def _load_all(self) -> None:
        for module in dict.fromkeys(COMMAND_MODULES.values()):
            self._load(module)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            module = COMMAND_MODULES.get(cmd_name)
            if module is not None:
                self._load(module)
            else:
                self._load_all()  # (an unknown name: the suggestions for it come from every command)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        self._load_all()
        return [name for name in COMMAND_MODULES if name in self.commands]


app = typer.Typer(
    name="udm",
    help="User-defined modules over temporal event streams: discover, validate, run, publish.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=_LazyGroup,
)

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


def debugging() -> bool:
    """Whether this run shows tracebacks (``--debug`` or ``UDM_DEBUG``)."""
    return _state["debug"]
