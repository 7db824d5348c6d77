"""The ``udm`` console entry point (`main`) and the typer `app` (built in `udm.host.cli.commands`).

This module stays light on purpose: `main` runs before typer, the catalog and the query code are
imported (~0.2 s of one core), and for a ``udm run`` over one input file it first starts reading and
parsing that file in the background (`udm.host.io.early_read`), so that the parse overlaps the imports
on a second core. ``app`` is imported on first use (``from udm.host.cli.app import app`` still works).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from .commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry: every failure is one line on stderr and a non-zero exit code."""
    from . import startup_gc
    from .run_argv import run_input

    caller = sys._getframe(1).f_globals.get("__name__")
    startup_gc.pause(caller)  # until the command starts its work (`startup_gc.resume`)
    found = run_input(sys.argv[1:])
    if found is None:
        try:
            _run()
        finally:
            startup_gc.release()
        return
    from udm.host.io import early_read

    early_read.start(*found)  # None when UDM_EARLY_READ=0 or the file cannot be read (the run says why)
    try:
        _run()
    except SystemExit as exc:
        if exc.code in (0, None):
            from . import fast_exit

            early_read.discard()
            if fast_exit.allowed(caller):
                fast_exit.exit_now(0)  # skip the interpreter's teardown (~55 ms after a 1 M run)
        raise
    finally:
        startup_gc.release()
        early_read.discard()  # not claimed by the run (an error, another read): stop it, join its threads


def _run() -> None:
    from udm.host.errors import UdmError

    from ._common import err
    from .commands import app, debugging

    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except UdmError as exc:
        if debugging():
            raise
        err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        sys.exit(1)
    except Exception as exc:
        if debugging():
            raise
        err.print(f"[bold red]internal error:[/] {type(exc).__name__}: {exc} (run with --debug for a traceback)",
                  highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
