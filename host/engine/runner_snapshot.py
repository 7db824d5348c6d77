"""`QueryRunner`'s snapshot: the whole engine state as bytes, and a runner made again from them.

Versioned: a snapshot of another format is refused with a message naming both (a checkpoint written by
another udmkit version cannot be resumed). Within a format, a class that moved between modules is found where
it is now (`_MOVED`), and a state attribute that changed shape is converted by its class's ``__setstate__``
(tests/test_session_old_snapshots.py restores snapshots an earlier version wrote); a snapshot naming what this
version lacks is refused in words. UDM instances are not pickled; operators bind them again.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

__all__ = ["SNAPSHOT_VERSION", "restore_state", "snapshot_state"]

#: 4: the columnar core (gates, engine ids, batches); 3: window state with progressive output; 2: operators
#: keyed by graph name; 1: a list of steps
SNAPSHOT_VERSION = 4

#: classes a snapshot of this format may name where they were defined before they moved:
#: (old module, name) -> new module (the name stays)
_MOVED = {
    ("udm.host.engine.window.rows_bulk", "_Tie"): "udm.host.engine.window.session_order",
}


class _Unpickler(pickle.Unpickler):
    """Reads a snapshot whose classes may have moved between modules since it was written."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(_MOVED.get((module, name), module), name)


def _load(data: bytes) -> Any:
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except (AttributeError, ModuleNotFoundError, ImportError) as e:
        raise ValueError(f"the snapshot names a part of the engine this udmkit lacks ({e}); it was written "
                         f"by another version of udmkit — start from a new checkpoint") from None


def snapshot_state(runner: Any) -> bytes:
    """``runner`` (a `QueryRunner`, which imports this module) as bytes."""
    state = {"v": SNAPSHOT_VERSION, "ctx": runner.ctx, "ops": {op.name: op for op in runner.ops},
             "gates": runner.gates, "order": [op.name for op in runner.ops], "ended": sorted(runner.ended),
             "finished": runner.finished, "forwarded": sorted(runner.forwarded)}
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def restore_state(fresh: Any, data: bytes, clock: Any) -> None:
    """Put the state of snapshot ``data`` into ``fresh``, a runner of the same query that holds nothing yet
    (`QueryRunner.restore`: it knows its query, not even a context)."""
    state = _load(data)
    if not isinstance(state, dict) or state.get("v") != SNAPSHOT_VERSION:
        found = state.get("v") if isinstance(state, dict) else None
        raise ValueError(f"not a udmkit engine snapshot of format {SNAPSHOT_VERSION} (found format "
                         f"{found!r}); it was written by another version of udmkit — start from a new "
                         f"checkpoint")
    steps = [node.name for node in fresh.bound.graph.nodes]  # (the runner's operators, in its order)
    if state["order"] != steps:
        raise ValueError(f"snapshot was taken for a query with other steps ({', '.join(state['order'])}; "
                         f"this query: {', '.join(steps)})")
    fresh.ctx = state["ctx"]
    fresh.ctx.clock = clock
    fresh.ops = [state["ops"][name] for name in state["order"]]
    fresh.gates = state["gates"]
    fresh.ended = set(state["ended"])
    fresh.forwarded = set(state["forwarded"])
    fresh.finished = state["finished"]
    for op in fresh.ops:
        op.attach(fresh.ctx, fresh.bound.step(op.name))
    for g in fresh.gates.values():
        g.attach(fresh.ctx)
