"""The ``udm`` console entry point (`main`) and the typer `app` (built in `udm.host.cli.commands`).

This module stays light on purpose: `main` asks for one BLAS thread (`blas_threads`) and pauses the cyclic
collector (`startup_gc`) before typer, numpy, the catalog and the query code are imported, and ends a
successful local ``udm run`` without the interpreter's teardown (`fast_exit`). ``app`` is imported on first
use (``from udm.host.cli.app import app`` still works).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from udm.host.errors import UdmError

from . import blas_threads, fast_exit, startup_gc
from ._common import err

if TYPE_CHECKING:
    import typer

    app: typer.Typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from .commands import app  # lazy: typer and every command's imports come with first use

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry: every failure is one line on stderr and a non-zero exit code."""
    caller = sys._getframe(1).f_globals.get("__name__")
    blas_threads.limit(caller)  # before anything imports numpy
    startup_gc.pause(caller)  # until the command starts its work (`startup_gc.resume`)
    try:
        _run()
    except SystemExit as exc:
        if exc.code in (0, None) and fast_exit.allowed(caller):
            startup_gc.release()
            fast_exit.exit_now(0)  # skip the interpreter's teardown (~55 ms after a 1 M run)
        raise
    finally:
        startup_gc.release()


def _run() -> None:
    # lazy: typer, pydantic and the query code load after `main` has paused the collector (`startup_gc`)
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
