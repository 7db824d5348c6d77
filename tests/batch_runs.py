"""The local engine fed a stream in batches, with a snapshot restored at chosen cuts: the runner the engine's
vector-form tests (rows store, grid closed windows and stale panes, session columns) share, so that "the
output is the oracle's whatever the batch cut and wherever a restore happens" means the same run in each."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from udm.host.engine import QueryRunner
from udm.host.io.batch import ElementBatch
from udm.host.temporal.elements import Element
from udm.host.testing import cht

__all__ = ["BatchRun", "run_in_batches"]

T = TypeVar("T")


@dataclass(frozen=True)
class BatchRun(Generic[T]):
    #: every element the runner wrote, its ``finish`` included
    out: list[Element]
    #: what ``probe`` read off the runner after each batch (after the restore, where there was one)
    probes: list[T] = field(default_factory=list)

    @property
    def table(self) -> Any:
        """The output's canonical history table."""
        return cht(self.out)


def run_in_batches(q: Any, stream: list[Element], chunk: int, *, cuts: Collection[int] = (),
                   probe: Callable[[QueryRunner], T] | None = None) -> BatchRun[T]:
    """Feeds ``stream`` to a `QueryRunner` of ``q``, ``chunk`` elements a batch (an element's line: its
    position), and after each batch that holds a position in ``cuts`` goes on with a new runner restored from
    the old one's snapshot. A probe read after the restore, not before, so a run cut anywhere must match the
    uncut run's probes too."""
    r = QueryRunner(q)
    out: list[Element] = []
    probes: list[T] = []
    for a in range(0, len(stream), chunk):
        part = stream[a:a + chunk]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
        if cuts and any(i in cuts for i in range(a, a + len(part))):
            r = QueryRunner.restore(r.snapshot(), q)
        if probe is not None:
            probes.append(probe(r))
    out += r.finish()
    return BatchRun(out, probes)
