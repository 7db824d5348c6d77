"""A run's dead letters as the engine collects them: records one by one (`DeadLetter`, from the gate's row
path and the operators) and the refused rows of a column-wise batch as one block (`RefusedRows`), in the
order they were refused.

Why: a block keeps the rows where they are (the input batch, its row numbers, the reasons), so the
dead-letter file's lines are built from its columns (`udm.host.io.dead_letters.element_texts`) with no
Python record per row; `DeadLetter` objects are made only for a caller that iterates (the fluent API,
Spark, tests), from the same elements the row path would have quoted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.io.batch import KIND_BAD, ElementBatch
from udm.host.io.dead_letters import DeadLetterColumns, DeadLetterSource, element_parts, record_columns
from udm.host.temporal.elements import element_to_json
from udm.host.temporal.strict import echo_dumps

from .common import DeadLetter

__all__ = ["DeadLetters", "RefusedRows", "bad_row_element"]

_STR = pa.string()


def bad_row_element(raw: ElementBatch, i: int) -> dict[str, Any] | None:
    """What a bad row's dead letter quotes: the object read, ``{"raw": value}`` for any other value read,
    or None when nothing could be read."""
    text = raw.table.column("raw")[i].as_py()
    if text is None:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text
    return value if isinstance(value, dict) else {"raw": value}


class RefusedRows:
    """The refused rows of one batch (``rows``, ascending), each with its reason and counter (category)."""

    __slots__ = ("categories", "input", "raw", "reasons", "rows")

    def __init__(self, raw: ElementBatch, rows: np.ndarray, reasons: np.ndarray, categories: np.ndarray,
                 input: str | None) -> None:
        self.raw = raw
        self.rows = rows
        self.reasons = reasons
        self.categories = categories
        #: the query input named in each record (None: a single-input query's, which names none)
        self.input = input

    def __len__(self) -> int:
        return len(self.rows)

    def records(self) -> list[DeadLetter]:
        raw = self.raw
        els = raw.to_elements()
        lines = raw.lines
        bad = raw.kind_codes()
        out = []
        for r, reason, cat in zip(self.rows.tolist(), self.reasons.tolist(), self.categories.tolist(), strict=True):
            el = bad_row_element(raw, r) if bad[r] == KIND_BAD else element_to_json(els[r][1])
            ln = int(lines[r])
            out.append(DeadLetter(ln if ln >= 0 else None, reason, el, cat, self.input))
        return out

    def columns(self) -> DeadLetterColumns:
        raw, rows = self.raw, self.rows
        bad = raw.kind_codes()[rows] == KIND_BAD
        if bad.any():  # (rows the reader could not read: each quoted by itself, the rest column-wise)
            texts = pc.binary_join_element_wise(*element_parts(raw, rows[~bad]), "")
            quoted = [None if (e := bad_row_element(raw, r)) is None else echo_dumps(e) for r in rows[bad].tolist()]
            where = np.empty(len(rows), dtype=np.int64)
            where[~bad] = np.arange(len(texts))
            where[bad] = len(texts) + np.arange(len(quoted))
            elements = [pa.concat_arrays([texts, pa.array(quoted, _STR)]).take(pa.array(where))]
        else:
            elements = element_parts(raw, rows)
        return DeadLetterColumns(raw.lines[rows], self.reasons, elements,
                                 None if self.input is None else [self.input] * len(rows))


class DeadLetters(DeadLetterSource, Sequence[DeadLetter]):
    """A run's dead letters in the order they were refused: iterated, `DeadLetter` records; written,
    columns (`columns`)."""

    def __init__(self, records: Sequence[DeadLetter] = ()) -> None:
        self._parts: list[DeadLetter | RefusedRows] = list(records)
        self._n = len(self._parts)

    def append(self, dl: DeadLetter) -> None:
        self._parts.append(dl)
        self._n += 1

    def add_rows(self, block: RefusedRows) -> None:
        self._parts.append(block)
        self._n += len(block)

    def __len__(self) -> int:
        return self._n

    def _records(self) -> list[DeadLetter]:
        out: list[DeadLetter] = []
        for p in self._parts:
            if isinstance(p, RefusedRows):
                out.extend(p.records())
            else:
                out.append(p)
        self._parts = list(out)  # (made once: a caller that reads them by index reads the same records)
        return out

    def __iter__(self) -> Iterator[DeadLetter]:
        return iter(self._records())

    @overload
    def __getitem__(self, i: int) -> DeadLetter: ...

    @overload
    def __getitem__(self, i: slice) -> list[DeadLetter]: ...

    def __getitem__(self, i: int | slice) -> DeadLetter | list[DeadLetter]:
        return self._records()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeadLetters):
            return self._records() == other._records()
        return isinstance(other, list) and self._records() == other

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[DeadLetter]) -> list[DeadLetter]:
        return self._records() + list(other)

    def __repr__(self) -> str:
        return f"DeadLetters({self._records()!r})"

    def __getstate__(self) -> dict[str, Any]:
        # (a snapshot holds records, not the batches they came from; a dict, so that even none is restored)
        return {"records": self._records()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._parts = list(state["records"])
        self._n = len(self._parts)

    def columns(self) -> list[DeadLetterColumns]:
        """A block's columns, and those of each run of records between blocks, in order."""
        cols: list[DeadLetterColumns] = []
        run: list[DeadLetter] = []
        for p in self._parts:
            if isinstance(p, RefusedRows):
                if run:
                    cols.append(record_columns(run))
                    run = []
                cols.append(p.columns())
            else:
                run.append(p)
        if run:
            cols.append(record_columns(run))
        return cols
