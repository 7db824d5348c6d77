"""Ending a finished ``udm run`` process without the interpreter's teardown.

Once a local run has written its output and summary, the interpreter's shutdown still deallocates every
module and object — numpy, pyarrow, pydantic, the engine's state — which measured ~55 ms after a 1 M-element
run (~5 % of it end to end) and changes nothing anyone sees. So when the process exists only for this
command, `exit_now` does what shutdown does that matters — joins nothing (it is only used when no
non-daemon thread is left), runs the `atexit` handlers (logging's flush, a plugin's own), flushes stdout and
stderr — and then ``os._exit``. It is used only when all of these hold (`allowed`); otherwise the process
exits the normal way:

- the command asked for it (`request`: ``udm run --engine local``, whose work is all in this process; a
  Spark run's JVM and its shutdown hooks are left to the normal exit);
- ``main`` was called from the program's ``__main__`` (the console script, ``python -m udm.host.cli.app``,
  a ``-c`` child), not from a test harness, an embedding program or an interactive session;
- the command succeeded (exit code 0);
- no thread but the main one and daemon threads is alive (a non-daemon thread would have been waited for);
- ``UDM_FAST_EXIT`` is not ``0``.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

__all__ = ["ENV", "allowed", "exit_now", "request"]

#: ``UDM_FAST_EXIT=0`` keeps the interpreter's normal shutdown.
ENV = "UDM_FAST_EXIT"

_requested = False


def request() -> None:
    """The command that ran may end the process without teardown (see the module docstring)."""
    global _requested
    _requested = True


def allowed(caller_module: object) -> bool:
    """Whether the process may end now; ``caller_module`` is the ``__name__`` of whoever called ``main``."""
    if not _requested or os.environ.get(ENV, "1").strip().lower() in {"0", "false", "no", "off"}:
        return False
    if caller_module != "__main__" or sys.flags.interactive or hasattr(sys, "ps1") or "ipykernel" in sys.modules:
        return False
    main = threading.main_thread()
    if threading.current_thread() is not main:
        return False
    return all(t is main or t.daemon or not t.is_alive() for t in threading.enumerate())


def _flush_stdio() -> bool:
    """Flush stdout and stderr (each tried); False if either failed."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            ok = False
    return ok


def exit_now(code: int = 0) -> None:
    """Run the atexit handlers, flush stdout/stderr and end the process with ``code``. Returns (the caller
    then exits normally) if a flush fails — a closed pipe is reported by the normal path."""
    if not _flush_stdio():
        return
    atexit._run_exitfuncs()
    _flush_stdio()  # (a failure ignored, as at a normal exit's shutdown but for a message)
    os._exit(code)
