"""What the Spark batch tests read back from a run: its output elements and its dead letters, the run's cached
frames released either way, and the same dead-letter fields from a local engine to compare them with."""

from __future__ import annotations

from typing import Any

__all__ = ["collected", "local_dead"]


Dead = list[tuple[Any, ...]]
FIELDS = ("input", "line", "reason")


def collected(run: Any, split: str, fields: tuple[str, ...] = FIELDS) -> tuple[list[Any], Dead]:
    """The run's output elements and its sorted dead letters (``fields`` of each), after checking the plan
    split the test is about (``staged``, ``keys``, ...)."""
    from udm.host.spark.convert import collect_elements

    try:
        assert run.split == split
        out = collect_elements(run.output)
        dead = sorted(tuple(r[f] for f in fields) for r in run.dead_letters.collect())
    finally:
        run.unpersist()
    return out, dead


def local_dead(local: Any, fields: tuple[str, ...] = FIELDS) -> Dead:
    """The local engine's dead letters as `collected` gives Spark's."""
    return sorted(tuple(getattr(d, f) for f in fields) for d in local.take_dead_letters())
