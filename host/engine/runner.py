"""`QueryRunner`: the one in-process driver. It runs a bound query graph over one or more physical streams.

One route: a batch of input ``NAME`` (`udm.host.io.batch.ElementBatch`; a single element is a batch of
one) enters that input's `InputGate`, which validates it; the valid `Batch` then goes through the
operators in topological order, each step's output to the steps that read it, and each operator flushes
what it buffered after its input. The last operator's output is the query's. Every caller — the CLI, the
fluent API, Spark's executors, the conformance kit — drives this loop through `process_batch` (or
`process`, `process_many`, `process_interleaved`, which make batches) and `finish`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from udm.host.errors import BadElement
from udm.host.io.batch import ElementBatch
from udm.host.io.encode import DeferredLines, EncodedLines
from udm.host.model.graph import QueryGraph
from udm.host.model.plan import BoundQuery
from udm.host.run_result import RunResult
from udm.host.temporal.elements import Cti, Element

from .batch import CTI, Batch
from .build import delegated_checks, make_operator
from .context import Context
from .dead_letters import DeadLetters
from .feeding import ElementFeeding
from .gate import InputGate
from .operator import Operator
from .ops.lmerge import LmergeOp
from .output import encode_batch
from .progress import engine_due, graph_due, hold
from .rules import INF, NEG
from .runner_snapshot import restore_state, snapshot_state
from .wiring import wire

__all__ = ["QueryRunner"]


class QueryRunner(ElementFeeding):
    """Runs a bound query graph in process.

    ``process_batch`` / ``process`` / ``process_many`` / ``process_interleaved`` feed input elements (of input
    ``input``, default the only one) and return the output elements they caused (inserts, retractions,
    CTIs; ids chosen by the engine). ``finish`` ends every input (``cti(INF)`` unless one was seen). Refused
    input goes to ``dead_letters`` and ``stats``.
    """

    def __init__(self, bound: BoundQuery, *, on_violation: str | None = None,
                 derived_inputs: Collection[str] = (), clock: Callable[[], int] | None = None) -> None:
        self._query(bound, on_violation, derived_inputs)
        graph = bound.graph
        self.ctx = Context(self._policy(graph.inputs[0]), multi_input=len(graph.inputs) > 1)
        #: the wall clock of ``align``'s ``max_wait`` (microseconds; None: the real one)
        self.ctx.clock = clock
        #: operators in topological order; the last is the output
        self.ops: list[Operator] = [make_operator(bound, node.name, self.ctx) for node in graph.nodes]
        checks = delegated_checks(bound, self.ops)
        self.gates: dict[str, InputGate] = {}
        for name in graph.inputs:
            check, mmt = checks.get(name, (None, INF))
            rep = bound.spec.input_repair(name)
            self.gates[name] = InputGate(name, self.ctx, moves_t=name not in self.derived_inputs, check=check,
                                         max_memory_time=mmt, repair=None if rep is None else rep.horizon,
                                         policy=None)
        self._wire(graph)
        #: inputs that sent cti(INF), and those whose cti(INF) already went down the plan
        self.ended: set[str] = set()
        self.forwarded: set[str] = set()
        self.finished = False

    def _query(self, bound: BoundQuery, on_violation: str | None, derived_inputs: Collection[str]) -> None:
        """What a runner knows besides its state (a new one and a restored one alike)."""
        for policy in (on_violation, bound.spec.on_violation):
            if policy is not None and policy not in ("dead_letter", "adjust", "error"):
                raise ValueError(f"on_violation must be dead_letter, adjust or error, got {policy!r}")
        self.bound = bound
        self._policy_override = on_violation
        #: inputs that are streams derived from the real inputs (a Spark stage reading an earlier stage's
        #: output): validated like any input but they do not move T (semantics-notes 2, 11)
        self.derived_inputs = frozenset(derived_inputs)

    def _policy(self, input_name: str) -> str:
        if self._policy_override is not None:
            return self._policy_override
        return self.bound.spec.input_policy(input_name)

    def _wire(self, graph: QueryGraph) -> None:
        """Derive the edges (transient: rebuilt on restore from the graph)."""
        w = wire(graph, self.ops, self.gates)
        self.consumers, self.readers, self.ends_early = w.consumers, w.readers, w.ends_early

    # -- public state ---------------------------------------------------------------------------------
    @property
    def dead_letters(self) -> DeadLetters:
        return self.ctx.dead_letters

    @property
    def stats(self) -> RunResult:
        return self.ctx.stats

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.bound.graph.inputs

    @property
    def reached(self) -> int:
        """T so far: the largest finite time the valid input reached (semantics-notes 2)."""
        return self.ctx.reached

    def input_cti(self, name: str | None = None) -> int:
        """The latest CTI input ``name`` sent (``NEG`` before its first)."""
        return self.gates[self.input_name(name)].cti

    def live_end(self, id: str, input: str | None = None) -> int | None:
        """The current RE of live event ``id`` of input ``input``, or None when it is not live."""
        rec = self.gates[self.input_name(input)].live.peek(id)
        return None if rec is None else rec.re

    # -- progress (`udm.host.engine.progress`): what a CTI alone would do ----------------------------------
    def due(self, c: int) -> int:
        """The earliest input CTI after ``c`` at which the engine must be fed again (INF: never by a CTI)."""
        return engine_due(self, c)

    def graph_due(self, ctis: Mapping[str, int]) -> tuple[dict[str, int], int] | None:
        """Per input, the CTI at which the engine must be fed again, and its output-CTI hold until then; None
        when only a run can tell (semantics-notes 52)."""
        return graph_due(self, ctis)

    def hold(self, due: int) -> int | None:
        """The output CTI after input CTI ``due - 1``, when the engine's state tells it without a run."""
        return hold(self, due)

    def take_dead_letters(self) -> DeadLetters:
        dl = self.ctx.dead_letters
        self.ctx.dead_letters = DeadLetters()
        return dl

    def input_name(self, name: str | None) -> str:
        """The declared input ``name`` stands for: itself, or (``None``/``"main"``) the only input."""
        if name in self.gates:
            return name
        inputs = self.inputs
        if name in (None, "main") and len(inputs) == 1:
            return inputs[0]
        raise ValueError(f"the query has no input {name!r} (inputs: {', '.join(inputs)})")

    # -- lmerge: membership at run time (seeds/001 §V.B) and chattiness (Theorem 1) -------------------------
    def merge_step(self, step: str) -> Any:
        """The lmerge operator named ``step``."""
        for op in self.ops:
            if op.name == step and isinstance(op, LmergeOp):
                return op
        merges = [op.name for op in self.ops if isinstance(op, LmergeOp)]
        raise ValueError(f"the query has no lmerge step {step!r} (lmerge steps: {', '.join(merges) or 'none'})")

    def detach(self, step: str, source: str) -> None:
        """Input ``source`` of lmerge ``step`` leaves: its elements are ignored from now on."""
        m = self.merge_step(step)
        m.detach_port(m.port_of(source))

    def attach(self, step: str, source: str, at: int | None = None) -> None:
        """Input ``source`` of lmerge ``step`` (re)joins, carrying every event with ``RE >= at`` from now on;
        it counts once the output CTI reaches ``at`` (default: at once)."""
        m = self.merge_step(step)
        m.attach_port(m.port_of(source), NEG if at is None else at)

    def chattiness(self) -> dict[str, dict[str, int]]:
        """Per lmerge step, elements in and out by kind (seeds/001 Theorem 1)."""
        return {op.name: op.chattiness() for op in self.ops if isinstance(op, LmergeOp)}

    # -- the route ------------------------------------------------------------------------------------------
    def _run(self, input_name: str, raw: ElementBatch | list[tuple[int | None, Any]]) -> Batch:
        """One batch of one input (columnar, or decoded ``(line, element)`` pairs) through its gate and the
        plan; the query output it causes."""
        ctx = self.ctx
        n = len(raw)
        ctx.stats.elements_in += n
        if ctx.multi_input:
            ctx.input = input_name
            ctx.on_violation = self._policy(input_name)
            ctx.stats.count_input(input_name, "elements_in", n)
        gate = self.gates[input_name]
        b = gate.process(raw) if isinstance(raw, ElementBatch) else gate.process_elements(raw)
        starts: list[tuple[int, int, Batch]] = []
        ends_now = gate.ended and input_name not in self.ended
        if ends_now:
            self.ended.add(input_name)
            if len(self.ended) == len(self.inputs):
                self.finished = True
        if ends_now and ctx.multi_input:
            # T is over all inputs (semantics-notes 11): an input's end goes down the plan when every input
            # has ended (or at once when it reaches only lmerges: note 23)
            last = len(b) - 1
            if last >= 0 and b.kind[last] == CTI and b.le[last] >= INF:
                b = b.take(_arange(last))
            if input_name in self.ends_early:
                self.forwarded.add(input_name)
                b = Batch.concat([b, Batch.cti(INF)])
        starts += [(k, port, b) for k, port in self.readers[input_name]] if len(b) else []
        if self.finished and ctx.multi_input:
            for name in self.inputs:
                if name not in self.forwarded:
                    self.forwarded.add(name)
                    starts += [(k, port, Batch.cti(INF)) for k, port in self.readers[name]]
        return self._push(starts)

    def _push(self, starts: list[tuple[int, int, Batch]]) -> Batch:
        """Hand batches to operators (position, port) and run the plan in topological order, each operator
        flushing after its input; returns the output operator's batches."""
        ops = self.ops
        pending: list[list[tuple[int, Batch]]] = [[] for _ in ops]
        for k, port, b in starts:
            pending[k].append((port, b))
        last = len(ops) - 1
        result: list[Batch] = []
        consumers = self.consumers
        for j, op in enumerate(ops):
            outs: list[Batch] = []
            for port, b in pending[j]:
                got = op.process(port, b)
                if got is not None and len(got):
                    outs.append(got)
            got = op.flush()
            if got is not None and len(got):
                outs.append(got)
            if not outs:
                continue
            if j == last:
                result.extend(outs)
                continue
            for c, port in consumers[j]:
                pending[c].extend((port, o) for o in outs)
        return Batch.concat(result)

    def _count(self, b: Batch) -> Batch:
        st = self.ctx.stats
        st.elements_out += len(b)
        if len(b):
            st.retractions_out += int(np.count_nonzero(b.kind == 1))
        return b

    # -- entry points ---------------------------------------------------------------------------------------
    def run_batch(self, batch: ElementBatch, input: str | None = None) -> Batch:
        """A columnar batch of one input through the engine; the output as a `Batch`."""
        return self._count(self._run(self.input_name(input), batch))

    def process_batch(self, batch: ElementBatch, input: str | None = None) -> list[Element]:
        """Feed a columnar batch of one input; returns the output elements."""
        return self.run_batch(batch, input).to_elements()

    def process_batch_encoded(self, batch: ElementBatch, *, defer: bool = False
                              ) -> EncodedLines | DeferredLines:
        """`process_batch`'s output as encoded JSON Lines, the bytes `JsonlWriter` writes for the elements
        (``defer``: as `DeferredLines`, encoded by a write-behind writer in its own thread)."""
        out = self.run_batch(batch)
        if defer:
            return DeferredLines(len(out), lambda: encode_batch(out))
        return encode_batch(out)

    def process_items(self, items: list[tuple[int | None, Element | BadElement]], input: str | None = None
                      ) -> list[Element]:
        """Feed decoded ``(line, element)`` pairs of one input as one batch."""
        return self._count(self._run(self.input_name(input), items)).to_elements()

    def tick(self) -> list[Element]:
        """No input, but the wall clock moved: every step flushes (``align``'s ``max_wait`` releases what has
        waited long enough); the output that causes."""
        if self.finished:
            return []
        return self._count(self._push([])).to_elements()

    def finish_batch(self) -> Batch:
        """`finish` as a `Batch`."""
        if self.finished:
            return Batch.empty()
        parts: list[Batch] = []
        for name in self.inputs:
            if name in self.ended:
                continue
            parts.append(self._run(name, [(self.ctx.line, Cti(INF))]))
            self.ctx.stats.elements_in -= 1  # the implicit end is not an input element
            if self.ctx.multi_input:
                self.ctx.stats.count_input(name, "elements_in", -1)
        self.finished = True
        return self._count(Batch.concat(parts))

    def finish(self) -> list[Element]:
        """End of input: ``cti(INF)`` on every input that has not ended; output is then final. Idempotent."""
        return self.finish_batch().to_elements()

    # -- checkpoints ----------------------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole engine state (picklable; UDM instances are re-bound on restore)."""
        return snapshot_state(self)

    @classmethod
    def restore(cls, data: bytes, bound: BoundQuery, *, on_violation: str | None = None,
                derived_inputs: Collection[str] = (), clock: Callable[[], int] | None = None) -> QueryRunner:
        # (context, operators and gates all come from the snapshot: none is built first, which cost as much
        # as the unpickling where a per-key streaming bucket restores an engine per key and micro-batch)
        fresh = cls.__new__(cls)
        fresh._query(bound, on_violation, derived_inputs)
        restore_state(fresh, data, clock)
        fresh._wire(bound.graph)
        return fresh

    @property
    def repairing(self) -> bool:
        """Some input repairs retraction chains (semantics-notes 20): a stage that may hold retractions."""
        return any(g.repair is not None for g in self.gates.values())

    def inputs_without_cti(self) -> list[str]:
        """Inputs that have sent no CTI so far (SEMANTICS §7: without CTIs state is not cleaned up)."""
        return [name for name in self.inputs if self.gates[name].cti == NEG]

    def state_size(self) -> dict[str, int]:
        """What the engine holds (tests of bounded state, the run's warnings): ``events``, the live input
        events its gates know; ``held``, the events its operators keep (window members, join sides);
        ``windows`` and ``groups`` of its window steps."""
        tot = {"events": sum(len(g.live) for g in self.gates.values()), "held": 0, "windows": 0, "groups": 0}
        for op in self.ops:
            for k, v in op.state_size().items():
                k = "held" if k == "events" else k
                tot[k] = tot.get(k, 0) + v
        return tot


def _arange(n: int) -> Any:
    return np.arange(n)
