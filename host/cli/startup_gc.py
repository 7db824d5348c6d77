"""No cyclic garbage collection while ``udm`` starts up.

Start-up allocates hundreds of thousands of objects that live as long as the process — modules, classes,
typing and pydantic schemas, the catalog — and the collector, triggered every 700 allocations, scans them
over and over without finding garbage: measured ~120 collections and ~30-60 ms of a ``udm run``'s
start-up (``gc.callbacks``). So `pause` turns collection off when ``main`` starts, and `resume` turns it
back on once a command is about to do its work: for ``udm run`` after the query is bound (the catalog and
plugins loaded), for any other command when typer calls it. `resume` first moves everything alive into
the permanent generation (`gc.freeze`), so that the run's collections skip the start-up's objects too
(otherwise the first collections after start-up would scan all of them, twice); the few cycles that
start-up leaves as garbage (~1 000 objects, measured with ``gc.collect()`` at that point, which would
cost ~10-20 ms) are frozen with them and wait for `release`. `release` (when ``main``
returns or raises) unfreezes them, so that the interpreter's shutdown finalizes objects in its usual
order (frozen objects are finalized later, after module globals are gone, which a ``__del__`` can notice).

Only for the program's own ``main`` (`pause(caller)` with ``caller == "__main__"``): a test harness or an
embedding program keeps its collector as it was.
"""

from __future__ import annotations

import gc

__all__ = ["pause", "release", "resume"]

_paused = False
_frozen = False


def pause(caller_module: object) -> None:
    """Turn collection off for the start-up of the program's own ``udm`` command."""
    global _paused
    if caller_module == "__main__" and gc.isenabled() and not _paused:
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what start-up made and turn collection back on (no-op unless `pause` turned it off)."""
    global _paused, _frozen
    if _paused:
        _paused = False
        gc.freeze()
        _frozen = True
        gc.enable()


def release() -> None:
    """`resume` if still paused, and give the frozen objects back to the collector."""
    global _frozen
    resume()
    if _frozen:
        _frozen = False
        gc.unfreeze()
