"""`QueryRunner`: the one in-process driver. It runs a bound query graph over one or more physical streams.

The plan is a list of operators in topological order (`udm.host.query.graph`), each with the list of
``(operator, port)`` that read its output. An element of input ``NAME`` enters the one operator that
reads that input (an `InputGate` when the input is multicast or read by a multi-input operator, else the
step itself, which then validates it: SEMANTICS §1 per input), and its consequences are pushed down the
plan in topological order. The last operator is the query output (every step leads to it).

Operators buffer some output (window steps release in batches); `flush` releases it every few thousand
elements and at the end. A linear query (one input, a chain of steps) takes the same route with a
cheaper inner loop, and `process_batch` hands its columnar batches to the vectorized fast path.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from udm.host.errors import BadElement, ViolationError
from udm.host.io.batch import ElementBatch
from udm.host.io.encode import DeferredLines, EncodedLines
from udm.host.io.interleave import interleave
from udm.host.query.graph import QueryGraph
from udm.host.query.plan import BoundQuery
from udm.host.temporal.elements import Cti, Element, Insert, Retract, element_to_json

from .batch import run_batch
from .common import INF, NEG, DeadLetter, RunStats
from .context import Context
from .operator import Operator
from .ops.alter_lifetime import AlterLifetimeStep
from .ops.join import JoinStep
from .ops.lmerge import LmergeStep
from .ops.span import FilterStep, InputGate, MapStep, ProjectStep
from .ops.union import UnionStep
from .repair import ChainRepair
from .span_columnar import chain_ok, run_columnar
from .window import make_window_step
from .window.grid_columnar import grid_ok, run_grid

__all__ = ["QueryRunner"]

#: 3: window state with progressive output (``early``) and rows/session groups; 2: operators keyed by graph
#: name (query graphs); 1: a list of steps
_SNAPSHOT_VERSION = 3
#: process_many releases output at least this often (elements)
FLUSH_EVERY = 2048


def _make_operator(bound: BoundQuery, name: str, ctx: Context, reads_input: bool) -> Operator:
    bs = bound.step(name)
    op = bs.step.op
    if op == "filter":
        return FilterStep(name, ctx, bs, reads_input)
    if op == "map":
        return MapStep(name, ctx, bs, reads_input)
    if op == "project":
        return ProjectStep(name, ctx, bs, reads_input)
    if op == "alter_lifetime":
        return AlterLifetimeStep(name, ctx, bs, reads_input)
    if op == "union":
        return UnionStep(name, ctx, bs)
    if op == "join":
        return JoinStep(name, ctx, bs)
    if op == "lmerge":
        return LmergeStep(name, ctx, bs)
    if op == "window":
        return make_window_step(name, ctx, bs, reads_input)
    raise ValueError(f"no operator for op {op!r}")  # bind() refuses every other op


class QueryRunner:
    """Runs a bound query graph in process.

    ``process`` / ``process_many`` / ``process_batch`` feed input elements (of input ``input``, default
    ``main``) and return the output elements they caused (inserts, retractions, CTIs; ids chosen by the
    engine). ``finish`` ends every input (``cti(INF)`` unless one was seen). Refused input goes to
    ``dead_letters`` and ``stats``.
    """

    def __init__(self, bound: BoundQuery, *, on_violation: str | None = None,
                 derived_inputs: Collection[str] = ()) -> None:
        for policy in (on_violation, bound.spec.on_violation):
            if policy is not None and policy not in ("dead_letter", "adjust", "error"):
                raise ValueError(f"on_violation must be dead_letter, adjust or error, got {policy!r}")
        self.bound = bound
        graph = bound.graph
        self._policy_override = on_violation
        #: inputs that are streams derived from the real inputs (a Spark stage reading an earlier stage's
        #: output, `udm.host.spark.stages`): they are validated like any input but do not move T, which
        #: is over the query's real inputs (semantics-notes 2 and 11); the caller sets ``ctx.reached``
        self.derived_inputs = frozenset(derived_inputs)
        self.ctx = Context(self._policy(graph.inputs[0]), multi_input=len(graph.inputs) > 1)
        #: operators in topological order: input gates first, then the steps; the last is the output
        self.ops: list[Operator] = []
        for name in graph.inputs:
            if self._needs_gate(graph, name):
                self.ops.append(InputGate(name, self.ctx, name not in self.derived_inputs))
        direct = set(graph.inputs) - {op.name for op in self.ops} - self.derived_inputs
        for node in graph.nodes:
            reads_input = any(src in direct for src in node.sources)
            self.ops.append(_make_operator(bound, node.name, self.ctx, reads_input))
        self._wire(graph)
        self.ended: set[str] = set()
        #: inputs whose cti(INF) already went down the plan (lmerge ends with its first input)
        self.forwarded: set[str] = set()
        self.finished = False
        #: per input with ``repair``: its retraction-chain repair stage (semantics-notes 20)
        self.repair: dict[str, ChainRepair] = {}
        for name in graph.inputs:
            rep = bound.spec.input_repair(name)
            if rep is not None:
                self.repair[name] = ChainRepair(rep.horizon)

    def _policy(self, input_name: str) -> str:
        if self._policy_override is not None:
            return self._policy_override
        return self.bound.spec.input_policy(input_name)

    @staticmethod
    def _needs_gate(graph: QueryGraph, name: str) -> bool:
        """An input read by one single-input step is validated by that step; any other gets a gate."""
        readers = graph.consumers(name)
        return len(readers) != 1 or readers[0][0].op not in ("filter", "map", "window", "project",
                                                              "alter_lifetime")

    def _wire(self, graph: QueryGraph) -> None:
        """Derive the edges (transient: rebuilt on restore from the graph)."""
        position = {op.name: i for i, op in enumerate(self.ops)}
        gates = {op.name for op in self.ops if isinstance(op, InputGate)}
        #: per operator, the (operator position, port) pairs that read its output
        self.consumers: list[list[tuple[int, int]]] = [[] for _ in self.ops]
        #: per input, the operator position that reads it
        self.entry: dict[str, int] = {}
        for node in graph.nodes:
            for port, src in enumerate(node.sources):
                if src in graph.inputs and src not in gates:
                    self.entry[src] = position[node.name]
                else:
                    self.consumers[position[src]].append((position[node.name], port))
        for name in gates:
            self.entry[name] = position[name]
        # per operator port, the query input it derives from (None: several), so that a dead letter a step
        # raises names the input its stream comes from, not the input read last
        upstream: dict[str, set[str]] = {name: {name} for name in graph.inputs}
        for node in graph.nodes:
            upstream[node.name] = set().union(*(upstream[src] for src in node.sources))
        for op in self.ops:
            if isinstance(op, InputGate):
                op.input_names = (op.name,)
                continue
            sources = graph.node(op.name).sources
            op.input_names = tuple(next(iter(upstream[s])) if len(upstream[s]) == 1 else None for s in sources)
        self.linear = graph.is_linear
        self.steps = self.ops  # the pre-graph name, still used by tests and the fast path
        self.ends_early = {name for name in graph.inputs if graph.ends_early(name)}
        for op in self.ops:
            if isinstance(op, LmergeStep):
                op.feeders = [self._feeder(graph, op, port, position) for port in range(op.ports)]

    def _feeder(self, graph: QueryGraph, merge: LmergeStep, port: int, position: dict[str, int]
                ) -> Operator | None:
        """The span step (filter, map, project, input gate) whose output only ``merge``'s ``port`` reads:
        it may take the lmerge's feedback (seeds/001 §V.D). Any other step ignores the signal."""
        src = graph.node(merge.name).sources[port]
        if src not in position:  # an input read by the lmerge itself: nothing before it to fast-forward
            return None
        k = position[src]
        op = self.ops[k]
        if len(self.consumers[k]) != 1 or not isinstance(op, (FilterStep, MapStep, ProjectStep, InputGate)):
            return None
        return op

    # -- public state ---------------------------------------------------------------------------------
    @property
    def dead_letters(self) -> list[DeadLetter]:
        return self.ctx.dead_letters

    @property
    def stats(self) -> RunStats:
        return self.ctx.stats

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.bound.graph.inputs

    # -- lmerge: membership at run time (seeds/001 §V.B) and chattiness (Theorem 1) -------------------------
    def merge_step(self, step: str) -> LmergeStep:
        """The lmerge operator named ``step``."""
        for op in self.ops:
            if op.name == step and isinstance(op, LmergeStep):
                return op
        merges = [op.name for op in self.ops if isinstance(op, LmergeStep)]
        raise ValueError(f"the query has no lmerge step {step!r} (lmerge steps: {', '.join(merges) or 'none'})")

    def detach(self, step: str, source: str) -> None:
        """Input ``source`` of lmerge ``step`` leaves: its elements are ignored from now on. The output goes
        on as long as another attached input carries the stream."""
        m = self.merge_step(step)
        m.detach_port(m.port_of(source))

    def attach(self, step: str, source: str, at: int | None = None) -> None:
        """Input ``source`` of lmerge ``step`` (re)joins, guaranteed to carry every event with ``RE >= at``
        from now on (a detached input was forgotten: it must send those again, e.g. by replaying its source);
        it counts once the output CTI reaches ``at`` (default: at once)."""
        m = self.merge_step(step)
        m.attach_port(m.port_of(source), NEG if at is None else at)

    def chattiness(self) -> dict[str, dict[str, int]]:
        """Per lmerge step, elements in and out by kind (seeds/001 Theorem 1)."""
        return {op.name: op.chattiness() for op in self.ops if isinstance(op, LmergeStep)}

    def take_dead_letters(self) -> list[DeadLetter]:
        dl = self.ctx.dead_letters
        self.ctx.dead_letters = []
        return dl

    # -- driving ------------------------------------------------------------------------------------------
    def push(self, k: int, els: list[Element]) -> list[Element]:
        """Hand ``els`` (output of operator ``k``) down the plan; returns the query output they cause."""
        ops = self.ops
        n = len(ops)
        if k == n - 1:
            return els
        if self.linear:
            i = k + 1
            while i < n and els:
                feed = ops[i].feed
                outs: list[Element] = []
                for el in els:
                    r = feed(el)
                    if r:
                        outs.extend(r)
                els = outs
                i += 1
            return els
        pending: list[list[tuple[int, Element]]] = [[] for _ in ops]
        consumers = self.consumers
        for j, port in consumers[k]:
            pending[j].extend([(port, el) for el in els])
        for j in range(k + 1, n - 1):
            todo = pending[j]
            if not todo:
                continue
            receive = ops[j].feed_port
            outs = []
            for port, el in todo:
                r = receive(port, el)
                if r:
                    outs.extend(r)
            if outs:
                for c, port in consumers[j]:
                    pending[c].extend([(port, el) for el in outs])
        result: list[Element] = []
        last = ops[n - 1]
        for port, el in pending[n - 1]:
            r = last.feed_port(port, el)
            if r:
                result.extend(r)
        return result

    def flush(self) -> list[Element]:
        """Release what operators buffered, in plan order (each release flows through the operators after)."""
        result: list[Element] = []
        ops = self.ops
        for k in range(len(ops)):
            outs = ops[k].flush()
            if outs:
                result.extend(self.push(k, outs))
        return result

    def _count(self, out: list[Element]) -> list[Element]:
        st = self.ctx.stats
        st.elements_out += len(out)
        st.retractions_out += sum(1 for el in out if type(el) is Retract)
        return out

    def enter(self, input_name: str, line: int | None) -> Operator | None:
        """Prepare to process one element of ``input_name``; returns the operator it enters, or None when
        that input has ended (the element is then refused by `after_end`)."""
        ctx = self.ctx
        ctx.line = line
        ctx.stats.elements_in += 1
        if ctx.multi_input:
            ctx.input = input_name
            ctx.on_violation = self._policy(input_name)
            ctx.stats.count_input(input_name, "elements_in")
        if input_name in self.ended:
            return None
        return self.ops[self.entry[input_name]]

    def input_name(self, name: str | None) -> str:
        """The declared input ``name`` stands for: itself, or (``None``/``"main"``) the only input."""
        if name in self.entry:
            return name
        inputs = self.inputs
        if name in (None, "main") and len(inputs) == 1:
            return inputs[0]
        raise ValueError(f"the query has no input {name!r} (inputs: {', '.join(inputs)})")

    def end_input(self, input_name: str) -> None:
        """``input_name`` sent ``cti(INF)``."""
        self.ended.add(self.input_name(input_name))
        if len(self.ended) == len(self.inputs):
            self.finished = True

    def _end_of(self, input_name: str) -> list[Element]:
        """``cti(INF)`` on one input of several. It reaches the operators only once every input has ended:
        T (the truncation time of SEMANTICS §3) is over all inputs, so no step may truncate while another
        input can still move it. Until then the input refuses further elements."""
        self.end_input(input_name)
        if not self.finished:
            if input_name not in self.ends_early:
                return []
            self.forwarded.add(input_name)
            k = self.entry[input_name]
            r = self.ops[k].cti(INF)
            return self.push(k, r) if r else []
        out: list[Element] = []
        for name in self.inputs:
            if name in self.forwarded:
                continue
            k = self.entry[name]
            r = self.ops[k].cti(INF)
            if r:
                out.extend(self.push(k, r))
        return out

    def _one(self, el: Element | BadElement, line: int | None, input_name: str | None = None) -> list[Element]:
        if input_name not in self.entry:
            input_name = self.input_name(input_name)
        first = self.enter(input_name, line)
        if first is None:
            self.after_end(el)
            return []
        rep = self.repair.get(input_name) if self.repair else None
        if rep is None:
            return self._dispatch(first, el, line, input_name)
        out: list[Element] = []
        for ln, e in rep.push(el, line):
            self.ctx.line = ln
            if input_name in self.ended:
                self.after_end(e)
                continue
            r = self._dispatch(first, e, ln, input_name)
            if r:
                out.extend(r)
        for dl, category in rep.take_dead():
            if self.ctx.on_violation == "error":
                raise ViolationError(f"invalid element (line {dl.line}): {dl.reason}: {dl.element}")
            self.ctx.dead(dl, category)
        return out

    def _dispatch(self, first: Operator, el: Element | BadElement, line: int | None, input_name: str
                  ) -> list[Element]:
        t = type(el)
        if t is Insert:
            out = first.ins(el.id, el.le, el.re, el.payload, el)
        elif t is Retract:
            out = first.ret(el.id, el.le, el.re, el.re_new, el)
        elif isinstance(el, Cti) and el.t >= INF and self.ctx.multi_input:
            return self._end_of(input_name)
        elif t is Cti:
            out = first.cti(el.t)
            if el.t >= INF:
                self.end_input(input_name)
        elif isinstance(el, BadElement):
            self.reject_bad(el, line)
            return []
        elif isinstance(el, (Insert, Retract, Cti)):  # subclasses
            out = first.feed(el)
            if isinstance(el, Cti) and el.t >= INF:
                self.end_input(input_name)
        else:
            self.reject_bad(BadElement(f"not an element: {type(el).__name__}"), line)
            return []
        if out:
            return self.push(self.entry[input_name], out)
        return []

    def reject_bad(self, err: BadElement, line: int | None) -> None:
        """A line that is not an element: dead letter (or the error of ``on_violation: error``)."""
        ctx = self.ctx
        ln = err.line if err.line is not None else line
        if ctx.on_violation == "error":
            where = f" (line {ln})" if ln is not None else ""
            src = f" of input {ctx.input!r}" if ctx.multi_input else ""
            raise ViolationError(f"invalid element{where}{src}: {err.reason}")
        raw = err.raw if isinstance(err.raw, dict) else ({"raw": err.raw} if err.raw is not None else None)
        ctx.dead(DeadLetter(ln, err.reason, raw), "malformed")

    def after_end(self, el: Any) -> None:
        """An element of an input that already sent ``cti(INF)``: refused (a CTI is ignored)."""
        if isinstance(el, Cti):
            return
        elj = element_to_json(el) if isinstance(el, (Insert, Retract)) else None
        reason = "CTI violation: input already ended (cti inf)"
        if self.ctx.on_violation == "error":
            raise ViolationError(f"invalid element: {reason}: {elj}")
        self.ctx.dead(DeadLetter(self.ctx.line, reason, elj), "cti_violation")

    def process(self, element: Element, line: int | None = None, input: str | None = None) -> list[Element]:
        """Feed one element of input ``input``; returns the output it caused (released at once)."""
        out = self._one(element, line, input)
        out.extend(self.flush())
        return self._count(out)

    def process_many(self, elements: Iterable[Element], lines: Iterable[int] | None = None,
                     input: str | None = None) -> list[Element]:
        """Feed many elements of one input; output is released every few thousand elements and at the end."""
        out: list[Element] = []
        it_lines = iter(lines) if lines is not None else None
        k = 0
        for el in elements:
            line = next(it_lines, None) if it_lines is not None else None
            r = self._one(el, line, input)
            if r:
                out.extend(r)
            k += 1
            if k >= FLUSH_EVERY:
                k = 0
                out.extend(self.flush())
        out.extend(self.flush())
        return self._count(out)

    def process_interleaved(self, items: Iterable[tuple[str, int | None, Element]]) -> list[Element]:
        """Feed ``(input name, line, element)`` triples of several inputs, in the given order."""
        out: list[Element] = []
        one = self._one
        for name, line, el in items:
            r = one(el, line, name)
            if r:
                out.extend(r)
        out.extend(self.flush())
        return self._count(out)

    def process_batch(self, batch: ElementBatch, input: str | None = None) -> list[Element]:
        """Feed a columnar batch (`udm.host.io.batch.ElementBatch`) of one input. On a linear query,
        in-order insert-only stretches take the vectorized fast path; anything else goes element by
        element."""
        if self.linear and not self.repair:
            return self._count(run_batch(self, batch))
        out: list[Element] = []
        for line, el in batch.to_elements():
            r = self._one(el, line, input)
            if r:
                out.extend(r)
        out.extend(self.flush())
        return self._count(out)

    def process_batch_encoded(self, batch: ElementBatch, *, defer: bool = False
                              ) -> EncodedLines | DeferredLines | None:
        """A columnar batch of the only input through the columnar span path (`span_columnar`) or the
        columnar grid window path (`window.grid_columnar`): its output as encoded JSON Lines, the same
        bytes `JsonlWriter` writes for `process_batch`'s output (``defer``: the span path's possibly as
        `DeferredLines`, encoded by the writer); None when the query or the batch needs the row path
        (then nothing was fed: call `process_batch`)."""
        if not chain_ok(self):
            return run_grid(self, batch) if grid_ok(self) else None
        return run_columnar(self, batch, defer=defer)

    def run_all(self, inputs: Sequence[Element | BadElement] | Mapping[str, Iterable[Element | BadElement]]
                ) -> list[Element]:
        """Feed whole inputs and end them: the elements of the only input (numbered as lines 1, 2, ...), or
        each input's elements by name, read side by side in the documented order (`udm.host.io.interleave`).
        Returns the whole output; refused elements are in `take_dead_letters`."""
        if isinstance(inputs, Mapping):
            unknown = [n for n in inputs if n not in self.entry]
            if unknown:
                raise ValueError(f"the query has no input {unknown[0]!r} (inputs: {', '.join(self.inputs)})")
            out = self.process_interleaved(interleave([(n, enumerate(inputs[n], 1)) for n in self.inputs
                                                       if n in inputs]))
        else:
            els = list(inputs)
            out = self.process_batch(ElementBatch.from_elements(els, list(range(1, len(els) + 1))))
        return out + self.finish()

    def finish(self) -> list[Element]:
        """End of input: ``cti(INF)`` on every input that has not ended; output is then final. Idempotent."""
        if self.finished:
            return []
        out: list[Element] = []
        for name in self.inputs:
            if name in self.ended:
                continue
            out.extend(self._one(Cti(INF), self.ctx.line, name))
            self.ctx.stats.elements_in -= 1  # the implicit end is not an input element
            if self.ctx.multi_input:
                self.ctx.stats.count_input(name, "elements_in", -1)
        out.extend(self.flush())
        self.finished = True
        return self._count(out)

    # -- checkpoints ----------------------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole engine state (picklable; UDM instances are re-bound on restore)."""
        state = {"v": _SNAPSHOT_VERSION, "ctx": self.ctx, "ops": {op.name: op for op in self.ops},
                 "order": [op.name for op in self.ops], "ended": sorted(self.ended), "finished": self.finished,
                 "repair": self.repair,
                 "forwarded": sorted(self.forwarded)}
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, data: bytes, bound: BoundQuery, *, on_violation: str | None = None,
                derived_inputs: Collection[str] = ()) -> QueryRunner:
        state = pickle.loads(data)
        if not isinstance(state, dict) or state.get("v") != _SNAPSHOT_VERSION:
            found = state.get("v") if isinstance(state, dict) else None
            raise ValueError(f"not a udmkit engine snapshot of format {_SNAPSHOT_VERSION} (found format "
                             f"{found!r}); it was written by another version of udmkit — start from a new "
                             f"checkpoint")
        fresh = cls(bound, on_violation=on_violation, derived_inputs=derived_inputs)  # (a snapshot keeps neither)
        if state["order"] != [op.name for op in fresh.ops]:
            raise ValueError(f"snapshot was taken for a query with other steps ({', '.join(state['order'])}; "
                             f"this query: {', '.join(op.name for op in fresh.ops)})")
        fresh.ctx = state["ctx"]
        fresh.ops = [state["ops"][name] for name in state["order"]]
        fresh.ended = set(state["ended"])
        fresh.forwarded = set(state.get("forwarded", ()))
        fresh.finished = state["finished"]
        fresh.repair = state.get("repair", fresh.repair)
        for op in fresh.ops:
            op.attach(fresh.ctx, bound.step(op.name) if not isinstance(op, InputGate) else None)
        fresh._wire(bound.graph)
        return fresh

    def inputs_without_cti(self) -> list[str]:
        """Inputs that have sent no CTI so far (SEMANTICS §7: without CTIs state is not cleaned up)."""
        return [name for name in self.inputs if self.ops[self.entry[name]].input_cti == NEG]

    def state_size(self) -> dict[str, int]:
        """Events, windows and groups held, summed over operators (for tests of bounded state)."""
        tot = {"events": 0, "windows": 0, "groups": 0}
        for op in self.ops:
            sz = op.state_size()
            for k, v in sz.items():
                tot[k] = tot.get(k, 0) + v
        return tot
