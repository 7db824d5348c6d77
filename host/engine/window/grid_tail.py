"""A grid group's newest short events as columns: the panes a cumulate run reads, with no pane made for them.

On a sparse stream a cumulate step of one minute makes a pane for every minute holding an event, and a
pane costs more fixed Python work (its object, its sorted-dict entry, its cleanup) than its few events do.
When the windows are valued a run at a time (`grid_prefix`), a pane is only ever read as a slice of the
values entering the run, so a bulk insert whose short events all fall at or after a group's last pane
appends them here as columns instead: the pane of each value (non-decreasing) and the values, one chunk
per insert, in the order the panes would have taken them. `PaneTail` answers what the hot path asks (the
first pane in a range, the values of panes ``[a, b)``, dropping the panes before a cleanup's first kept
pane); anything else makes the tail's panes (`GroupPanes.settle`), so every other path sees panes as
before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["PaneTail"]


class PaneTail:
    """Chunks ``(panes, values)``: an int64 column of each value's pane and an int64 or float64 column of the
    values; panes are non-decreasing within and across chunks."""

    __slots__ = ("chunks",)

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []

    def __getstate__(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.chunks

    def __setstate__(self, s: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.chunks = s

    def __bool__(self) -> bool:
        return bool(self.chunks)

    def first(self) -> int:
        return int(self.chunks[0][0][0])

    def last(self) -> int:
        return int(self.chunks[-1][0][-1])

    def count(self) -> int:
        return sum(len(p) for p, _v in self.chunks)

    def append(self, panes: np.ndarray, values: np.ndarray) -> None:
        """Values join at panes ``panes`` (each at or after the last pane held)."""
        self.chunks.append((panes, values))

    def first_in(self, a: int, b: int) -> int | None:
        """The first pane ``s`` with ``a <= s < b`` (None: none)."""
        for p, _v in self.chunks:
            if p[-1] < a:
                continue
            s = int(p[np.searchsorted(p, a)])
            return s if s < b else None
        return None

    def between(self, a: int, b: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (panes, values) slices of panes ``[a, b)``, in order."""
        out = []
        for p, v in self.chunks:
            if p[-1] < a:
                continue
            if p[0] >= b:
                break
            i, j = np.searchsorted(p, (a, b))
            if j > i:
                out.append((p[i:j], v[i:j]))
        return out

    def drop_before(self, a: int) -> None:
        """The panes before ``a`` go."""
        chunks = self.chunks
        n = 0
        while n < len(chunks) and chunks[n][0][-1] < a:
            n += 1
        if n:
            del chunks[:n]
        if chunks and chunks[0][0][0] < a:
            p, v = chunks[0]
            i = int(np.searchsorted(p, a))
            chunks[0] = (p[i:], v[i:])

    def panes(self) -> np.ndarray:
        """The distinct panes held."""
        return np.unique(np.concatenate([p for p, _v in self.chunks])) if self.chunks else np.zeros(0, np.int64)

    def pop_all(self) -> Iterator[tuple[int, list[Any]]]:
        """Every pane held with its values (a list, in order), emptying the tail."""
        chunks, self.chunks = self.chunks, []
        if not chunks:
            return
        p = np.concatenate([c[0] for c in chunks])
        vals: list[Any] = []
        for _p, v in chunks:
            vals += v.tolist()  # (values of each chunk's kind, as a pane's list holds them)
        cuts = np.flatnonzero(p[1:] != p[:-1]) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(p)]
        for s, a, b in zip(p[starts].tolist(), starts, ends, strict=True):
            yield s, vals[a:b]
