"""Engine conformance: run any engine over a query and check it against the oracle and the properties.

An engine is a callable ``run(query, elements) -> output elements`` (a finished run: the input ends as if
``cti(INF)`` arrived). `check_engine` runs it on the given stream and on physical variants of it (same
CHT, different order, retractions and CTIs), and verifies for each run that the output CHT equals the
oracle's and that every output property holds. `runner_engine` adapts an engine with the streaming
``QueryRunner`` shape (``process(el)``, ``finish()``) and records which outputs each input produced, so
liveliness is checked too; `registered_engine` runs any engine of the ``udm run`` registry (local, Spark
batch, Spark streaming) over a JSONL file. `check_composition` feeds one query's engine output into
another (seeds/002 §7).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import QuerySpec
from udm.host.query.runners import RunRequest, get_engine
from udm.host.temporal.elements import Cti, Element, element_to_json, parse_element
from udm.sdk import INF

from .cht import CHT, stream_text
from .generator import interleave, physical_variants
from .oracle import oracle
from .properties import check_properties
from .verifier import verify

__all__ = ["INTERLEAVINGS", "EngineReport", "EngineRun", "Interleaved", "assert_engine", "check_composition",
           "check_engine", "registered_engine", "runner_engine", "shrink_failure", "write_stream"]

#: the arrival orders `check_engine` feeds the inputs of a multi-input query in (see `interleave`)
INTERLEAVINGS = ("sync", "random", "sequential")


class Interleaved(list[tuple[str, Element]]):
    """The input of a multi-input query as one arrival order: ``(input name, element)`` pairs."""

    def streams(self) -> dict[str, list[Element]]:
        out: dict[str, list[Element]] = {}
        for name, el in self:
            out.setdefault(name, []).append(el)
        return out

Engine = Callable[[QuerySpec, list[Element]], Any]


@dataclass
class EngineRun:
    """One engine run over one physical stream and what was wrong with it."""

    label: str
    elements: list[Element]
    output: list[Element]
    problems: list[str] = field(default_factory=list)


@dataclass
class EngineReport:
    ok: bool
    expected: CHT
    runs: list[EngineRun]
    seed: int
    minimal: list[Element] | None = None  # with shrink=True: a smallest failing input found
    minimal_problems: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [f"{r.label}: {p}" for r in self.runs for p in r.problems]

    def __bool__(self) -> bool:
        return self.ok

    def text(self, max_stream: int = 60) -> str:
        if self.ok:
            return f"engine conforms on {len(self.runs)} physical stream(s) (seed {self.seed})"
        lines = [f"engine does not conform (seed {self.seed}):"]
        for r in self.runs:
            if not r.problems:
                continue
            lines.append(f"--- {r.label}")
            lines += [f"  {p}" for p in r.problems]
            els = r.elements if len(r.elements) <= max_stream else r.elements[:max_stream]
            lines.append("  input stream:")
            lines += ["    " + line for line in stream_text(els).splitlines()]
            if len(r.elements) > max_stream:
                lines.append(f"    ... {len(r.elements) - max_stream} more")
        if self.minimal is not None:
            lines.append(f"--- minimal failing input ({len(self.minimal)} elements):")
            lines += ["    " + line for line in stream_text(self.minimal).splitlines()]
            lines += [f"  {p}" for p in self.minimal_problems]
        return "\n".join(lines)

    __str__ = text


class _Traced(list[Element]):
    """An output list that also carries a per-input trace (for liveliness)."""

    trace: list[list[Element]]


def runner_engine(factory: Callable[[BoundQuery], Any], catalog: Any = None) -> Engine:
    """Adapt a streaming runner class (``QueryRunner(bound)`` with ``process(el)`` and ``finish()``) to an
    engine callable whose output also records, per input element, what the runner emitted."""

    def run(query: QuerySpec, elements: Any) -> list[Element]:
        bq = build_plan(query, catalog)
        runner = factory(bq)
        out = _Traced()
        out.trace = []
        if isinstance(elements, Mapping):  # several inputs: the documented (sync-time) order
            elements = Interleaved(interleave(elements, bq.graph.inputs, how="sync"))
        if isinstance(elements, Interleaved):
            for name, el in elements:
                emitted = list(runner.process(el, input=name))
                out.trace.append(emitted)
                out.extend(emitted)
        else:
            for el in elements:
                emitted = list(runner.process(el))
                out.trace.append(emitted)
                out.extend(emitted)
        out.extend(runner.finish())
        return out

    return run


def write_stream(path: str | Path, elements: Sequence[Any]) -> None:
    """A generated stream as an event file (INTERFACES §1), one line per element; a deliberately bad
    element (`generate(bad=...)`) stays a bad line, so an engine reading the file dead-letters it."""
    with Path(path).open("w", encoding="utf-8") as f:
        for el in elements:
            try:
                f.write(json.dumps(element_to_json(el)) + "\n")
            except (TypeError, ValueError, AttributeError):
                f.write(json.dumps(repr(el)) + "\n")


def registered_engine(name: str, *, catalog: Any = None, batch_size: int | None = None,
                      **options: Any) -> Engine:
    """Adapt an engine of the ``udm run`` registry (``local``, ``spark``, ``spark-streaming``) to an engine
    callable: the input is written to a JSONL file, the engine runs over it, its output file is read back.
    This is how the Spark paths are held to the same oracle and properties as the local engine."""
    def run(query: QuerySpec, elements: Any) -> list[Element]:
        bq = build_plan(query, catalog)
        engine = get_engine(name)
        with tempfile.TemporaryDirectory(prefix="udm-conformance-") as d:
            dst, dl = Path(d) / "out.jsonl", Path(d) / "dl.jsonl"
            source: Any
            if isinstance(elements, Interleaved):  # the files keep each input's order; the engine interleaves
                per_input: dict[str, list[Element]] = {n: [] for n in bq.graph.inputs}
                for input_name, el in elements:
                    per_input[input_name].append(el)
                elements = per_input
            if isinstance(elements, Mapping):  # one file per input of a query graph
                source = {}
                for input_name, els in elements.items():
                    source[input_name] = Path(d) / f"in-{input_name}.jsonl"
                    write_stream(source[input_name], list(els))
            else:
                source = Path(d) / "in.jsonl"
                write_stream(source, elements)
            engine(RunRequest(bound=bq, input=source, output=dst, dead_letter=dl, batch_size=batch_size,
                              options=dict(options)))
            return [parse_element(json.loads(line)) for line in dst.read_text(encoding="utf-8").splitlines()
                    if line.strip()]

    return run


def _verified(run: Engine, query: Any, feed: Any, r: EngineRun, expected: CHT, rel_tol: float,
              abs_tol: float) -> Any:
    """Run the engine over ``feed`` into ``r`` and check its output's CHT against ``expected``: the raw
    output (None when the engine raised, which is ``r``'s problem then)."""
    try:
        out = run(query, feed)
    except Exception as exc:
        r.problems.append(f"engine raised {type(exc).__name__}: {exc}")
        return None
    r.output = list(out)
    v = verify(r.output, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if not v.ok:
        r.problems.append(v.diff)
    return out


def _one(run: Engine, query: Any, elements: list[Element], expected: CHT, label: str, catalog: Any,
         rel_tol: float, abs_tol: float) -> EngineRun:
    r = EngineRun(label, elements, [])
    out = _verified(run, query, list(elements), r, expected, rel_tol, abs_tol)
    if out is not None:
        trace = getattr(out, "trace", None)
        r.problems += check_properties(elements, r.output, query, trace=trace, finished=True, catalog=catalog)
    return r


def _one_multi(run: Engine, query: Any, feed: Interleaved, expected: CHT, label: str, catalog: Any,
               rel_tol: float, abs_tol: float) -> EngineRun:
    """One run of a multi-input query over one interleaving of its inputs."""
    r = EngineRun(label, list(feed), [])  # (input, element) pairs
    out = _verified(run, query, feed, r, expected, rel_tol, abs_tol)
    if out is None:
        return r
    # physical validity, own CTIs, CTI order, prefix finality, final CTI (liveliness: single input only)
    r.problems += check_properties([el for _, el in feed], r.output, query, trace=None, finished=True,
                                   catalog=catalog)
    trace = getattr(out, "trace", None)
    if trace is not None and len(trace) == len(feed):
        # SEMANTICS §10: cti(INF) comes out only when every input has ended; §8: an lmerge's output ends with
        # its first input (semantics-notes 22: an input that reaches an lmerge and no window step)
        names = {name for name, _ in feed}
        graph = query.graph if isinstance(query, BoundQuery) else None
        early = {n for n in names if graph is not None and graph.ends_early(n)}
        ended: set[str] = set()
        for (name, el), emitted in zip(feed, trace, strict=True):
            if isinstance(el, Cti) and el.t >= INF:
                ended.add(name)
            if ended & early:
                continue
            if ended != names and any(isinstance(o, Cti) and o.t >= INF for o in emitted):
                r.problems.append(f"cti(inf) came out after input {name!r} element {el!r} while input(s) "
                                  f"{', '.join(sorted(names - ended))} had not ended")
                break
    return r


def _check_multi(run: Engine, query: QuerySpec | BoundQuery, streams: Mapping[str, Sequence[Element]], *,
                 seed: int, variants: int, catalog: Any, rel_tol: float, abs_tol: float,
                 interleavings: Sequence[str]) -> EngineReport:
    bq = build_plan(query, catalog)
    names = list(bq.graph.inputs)
    given = {n: list(streams.get(n, ())) for n in names}
    expected = oracle(bq, given)
    runs = [_one_multi(run, bq, Interleaved(interleave(given, names, how=how, seed=seed)), expected,
                       f"given streams, {how} interleaving", catalog, rel_tol, abs_tol) for how in interleavings]
    for i in range(variants):
        var = {n: physical_variants(given[n], 1, seed=seed * 1000 + i * 31 + j)[0] for j, n in enumerate(names)}
        how = interleavings[i % len(interleavings)] if interleavings else "sync"
        runs.append(_one_multi(run, bq, Interleaved(interleave(var, names, how=how, seed=seed + i)),
                               oracle(bq, var), f"physical variant {i} (seed {seed}), {how} interleaving",
                               catalog, rel_tol, abs_tol))
    return EngineReport(all(not r.problems for r in runs), expected, runs, seed)


def check_engine(run: Engine, query: QuerySpec | BoundQuery,
                 elements: Sequence[Element] | Mapping[str, Sequence[Element]], *, seed: int = 0,
                 variants: int = 3, catalog: Any = None, rel_tol: float = 1e-9, abs_tol: float = 1e-9,
                 shrink: bool = False, shrink_budget: int = 300,
                 interleavings: Sequence[str] = INTERLEAVINGS) -> EngineReport:
    """Run ``run(query, stream)`` on ``elements`` and on ``variants`` physical variants of it; verify the
    output CHT against the oracle and every output property. The report's ``text()`` shows the diffs and
    the input streams that failed; with ``shrink=True`` also a minimal failing input (greedy removal of
    elements, at most ``shrink_budget`` more engine runs).

    For a multi-input query pass ``elements`` as a dict of streams by input name: the engine then gets an
    `Interleaved` arrival order, once per ``interleavings`` entry (see `interleave`: ``sync`` is the
    documented order), and each of the ``variants`` physical variants of every input in one of them; the
    CHT must not depend on the order. (No shrinking for the dict form.)"""
    if isinstance(elements, Mapping):
        return _check_multi(run, query, elements, seed=seed, variants=variants, catalog=catalog,
                            rel_tol=rel_tol, abs_tol=abs_tol, interleavings=interleavings)
    elements = list(elements)
    expected = oracle(query, elements, catalog)
    runs = [_one(run, query, elements, expected, "given stream", catalog, rel_tol, abs_tol)]
    for i, var in enumerate(physical_variants(elements, variants, seed=seed) if variants else []):
        # same CHT, but T (semantics-notes 2) and max_memory_time can depend on the physical history
        runs.append(_one(run, query, var, oracle(query, var, catalog), f"physical variant {i} (seed {seed})",
                         catalog, rel_tol, abs_tol))
    report = EngineReport(all(not r.problems for r in runs), expected, runs, seed)
    if shrink and not report.ok:
        failing = next(r for r in runs if r.problems)
        report.minimal, report.minimal_problems = shrink_failure(
            run, query, failing.elements, catalog=catalog, rel_tol=rel_tol, abs_tol=abs_tol, budget=shrink_budget)
    return report


def shrink_failure(run: Engine, query: QuerySpec | BoundQuery, elements: Sequence[Element], *,
                   catalog: Any = None, rel_tol: float = 1e-9, abs_tol: float = 1e-9, budget: int = 300
                   ) -> tuple[list[Element], list[str]]:
    """A small input on which the engine still fails (any problem): removes chunks, then single elements,
    while the failure persists. Removing an insert leaves its retractions unknown, which is still a valid
    test input (they are dead-lettered)."""

    def problems(els: list[Element]) -> list[str]:
        try:
            exp = oracle(query, els, catalog)
        except Exception:
            return []  # e.g. the oracle says a contract violation: not the engine's failure to shrink
        return _one(run, query, els, exp, "minimal", catalog, rel_tol, abs_tol).problems

    cur = list(elements)
    cur_problems = problems(cur)
    if not cur_problems:
        return cur, []
    size = max(1, len(cur) // 2)
    while size >= 1 and budget > 0:
        i = 0
        progressed = False
        while i < len(cur) and budget > 0:
            cand = cur[:i] + cur[i + size:]
            budget -= 1
            p = problems(cand) if cand else []
            if p:
                cur, cur_problems, progressed = cand, p, True
            else:
                i += size
        if not progressed:
            size //= 2
    return cur, cur_problems


def assert_engine(run: Engine, query: QuerySpec | BoundQuery,
                  elements: Sequence[Element] | Mapping[str, Sequence[Element]], *, seed: int = 0,
                  **kwargs: Any) -> EngineReport:
    report = check_engine(run, query, elements, seed=seed, **kwargs)
    if not report.ok:
        raise AssertionError(report.text())
    return report


def check_composition(run: Engine, first: QuerySpec | BoundQuery, second: QuerySpec | BoundQuery,
                      elements: Sequence[Element], *, catalog: Any = None, rel_tol: float = 1e-9,
                      abs_tol: float = 1e-9) -> EngineReport:
    """seeds/002 §7: the engine's output of ``first`` feeds ``second``; both stages are verified."""
    elements = list(elements)
    exp1 = oracle(first, elements, catalog)
    r1 = _one(run, first, elements, exp1, "first query", catalog, rel_tol, abs_tol)
    runs = [r1]
    if not any(p.startswith("engine raised") for p in r1.problems):
        mid = list(r1.output)
        exp2 = oracle(second, mid, catalog)
        runs.append(_one(run, second, mid, exp2, "second query over the first's output", catalog, rel_tol,
                         abs_tol))
    return EngineReport(all(not r.problems for r in runs), exp1, runs, 0)
