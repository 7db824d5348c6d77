"""`ElementFeeding`: `QueryRunner`'s entry points for elements held as Python objects (the fluent API,
tests, the conformance kit): lists of one input, several inputs interleaved, whole inputs at once. Each
makes columnar batches of at most `CHUNK` elements and hands them to the runner's batch entry points."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from udm.host.errors import BadElement
from udm.host.io.batch import ElementBatch
from udm.host.io.interleave import interleave
from udm.host.temporal.elements import Element

__all__ = ["CHUNK", "ElementFeeding"]

#: process_many / process_interleaved hand the engine this many elements at a time
CHUNK = 4096


class ElementFeeding:
    """The element-list entry points; the runner provides the batch ones they call."""

    gates: Mapping[str, Any]

    @property
    def inputs(self) -> tuple[str, ...]:
        raise NotImplementedError

    def process_batch(self, batch: ElementBatch, input: str | None = None) -> list[Element]:
        raise NotImplementedError

    def process_items(self, items: list[tuple[int | None, Element | BadElement]], input: str | None = None
                      ) -> list[Element]:
        raise NotImplementedError

    def finish(self) -> list[Element]:
        raise NotImplementedError

    def process(self, element: Element | BadElement, line: int | None = None, input: str | None = None
                ) -> list[Element]:
        """Feed one element of input ``input``; returns the output it caused."""
        return self.process_items([(line, element)], input)

    def process_many(self, elements: Iterable[Element | BadElement], lines: Iterable[int] | None = None,
                     input: str | None = None) -> list[Element]:
        """Feed many elements of one input."""
        els = list(elements)
        lns: list[int | None] = list(lines) if lines is not None else [None] * len(els)
        out: list[Element] = []
        for a in range(0, len(els), CHUNK):
            out.extend(self.process_batch(ElementBatch.from_elements(els[a:a + CHUNK], lns[a:a + CHUNK]), input))
        return out

    def process_interleaved(self, items: Iterable[tuple[str, int | None, Element | BadElement]]) -> list[Element]:
        """Feed ``(input name, line, element)`` triples of several inputs, in the given order (each run of
        one input's elements as one batch)."""
        out: list[Element] = []
        run: list[tuple[int | None, Element | BadElement]] = []
        name: str | None = None
        for nm, line, el in items:
            if nm != name or len(run) >= CHUNK:
                if run:
                    out.extend(self.process_items(run, name))
                run, name = [], nm
            run.append((line, el))
        if run:
            out.extend(self.process_items(run, name))
        return out

    def run_all(self, inputs: Sequence[Element | BadElement] | Mapping[str, Iterable[Element | BadElement]]
                ) -> list[Element]:
        """Feed whole inputs and end them: the elements of the only input (numbered as lines 1, 2, ...), or
        each input's elements by name, read side by side in the documented order (`udm.host.io.interleave`)."""
        if isinstance(inputs, Mapping):
            unknown = [n for n in inputs if n not in self.gates]
            if unknown:
                raise ValueError(f"the query has no input {unknown[0]!r} (inputs: {', '.join(self.inputs)})")
            out = self.process_interleaved(interleave([(n, enumerate(inputs[n], 1)) for n in self.inputs
                                                       if n in inputs]))
        else:
            els = list(inputs)
            out = self.process_batch(ElementBatch.from_elements(els, list(range(1, len(els) + 1))))
        return out + self.finish()
