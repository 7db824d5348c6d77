"""Random conformance cases for the SEMANTICS §9 windows (rows, session, several aggregates): one query
and one generated stream per seed, checked with the kit's `check_engine` (output CHT == the brute-force
oracle on the stream and a physical variant, plus every output property of SEMANTICS §7)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import BoundQuery, bind
from udm.host.model.spec import QuerySpec, parse_query
from udm.host.temporal.elements import Cti, Element
from udm.host.testing.engine_conformance import Engine, check_engine, runner_engine
from udm.host.testing.generator import generate

__all__ = ["BATCHED", "LOCAL", "UDMS", "every_udm_every_disorder", "random_case", "run_random_cases"]

#: the local engine fed element by element
LOCAL = runner_engine(QueryRunner)


class _Traced(list[Element]):
    """An output list with, per input element, what the runner emitted (the kit's liveliness check)."""

    trace: list[list[Element]]


def BATCHED(query: QuerySpec | BoundQuery, elements: Sequence[Element]) -> list[Element]:
    """The local engine fed in batches (``process_many``) of 1 to 7 elements, each cut after a CTI, so the
    output CTI each input CTI allows comes out with its batch; a batch's output is traced to its last
    element."""
    bq = query if isinstance(query, BoundQuery) else bind(query)
    r = QueryRunner(bq)
    out = _Traced()
    out.trace = []
    sizes = itertools.cycle([3, 1, 7, 2, 5, 4])
    chunk: list[Element] = []
    want = next(sizes)
    for el in elements:
        chunk.append(el)
        if isinstance(el, Cti) or len(chunk) >= want:
            emitted = r.process_many(chunk)
            out.trace += [[] for _ in chunk[1:]] + [emitted]
            out.extend(emitted)
            chunk = []
            want = next(sizes)
    if chunk:
        emitted = r.process_many(chunk)
        out.trace += [[] for _ in chunk[1:]] + [emitted]
        out.extend(emitted)
    out.extend(r.finish())
    return out

#: every UDM shape: incremental / holistic UDA, time-insensitive UDO, time-sensitive UDA and UDO, delayed
UDMS: list[dict[str, Any]] = [
    {"udm": "count"},
    {"udm": "sum", "input": "v"},
    {"udm": "median", "input": "v"},
    {"udm": "topk", "params": {"k": 2, "by": "v"}},
    {"udm": "twa", "input": "v", "clip": "full"},
    {"udm": "members", "input": "v", "clip": "left", "output": "unaltered"},
    {"udm": "avg", "input": "v", "max_delay": 3},
    {"udm": "twa", "input": "v", "clip": "left"},
]
_DURATION = ["point", "short", "long", "mixed", "infinite"]
_DISORDER = ["in_order", "slightly", "out_of_order", "highly"]


def every_udm_every_disorder(seed: int, rng: random.Random) -> dict[str, Any]:
    """A `random_case` step: the UDM changes every 4 seeds, so each meets every disorder (by default the
    UDM and the disorder both follow ``seed``, and a UDM always meets the same two)."""
    return dict(UDMS[(seed // len(_DISORDER)) % len(UDMS)])


def random_case(seed: int, window: Callable[[random.Random], dict[str, Any]],
                step: Callable[[int, random.Random], dict[str, Any]] | None = None
                ) -> tuple[BoundQuery, list[Element]]:
    """Seed ``seed``'s query (window drawn by ``window``, UDM part by ``step`` or from `UDMS`) and stream."""
    rng = random.Random(seed)
    win = window(rng)
    body = step(seed, rng) if step is not None else dict(UDMS[seed % len(UDMS)])
    q = bind(parse_query({"steps": [{"op": "window", "window": win, **body,
                                     **({"group_by": ["g"]} if seed % 2 else {})}]}))
    stream = generate(seed=seed, events=rng.randint(1, 14), groups=rng.randint(1, 3),
                      duration=_DURATION[seed % len(_DURATION)], disorder=_DISORDER[seed % len(_DISORDER)],
                      speculation=rng.choice([0, 0.3, 0.6]), chain=rng.randint(1, 3), bad=rng.choice([0, 0.1]),
                      cti=rng.choice(["lazy", "regular", "eager"]), duplicates=rng.choice([0, 0.2]),
                      pattern=rng.choice(["random", "back_to_back", "duplicates", "highly_overlapping"]))
    return q, stream


def run_random_cases(window: Callable[[random.Random], dict[str, Any]], seeds: range, *,
                     engine: Engine = LOCAL, variants: int = 1,
                     step: Callable[[int, random.Random], dict[str, Any]] | None = None) -> int:
    """Check every seed's case; fails with the kit's report (diffs, stream, minimal failing input)."""
    runs = 0
    for seed in seeds:
        q, stream = random_case(seed, window, step)
        rep = check_engine(engine, q, stream, seed=seed, variants=variants, shrink=True)
        assert rep.ok, f"seed {seed}: {q.spec.to_json_dict()}\n{rep.text()}"
        runs += len(rep.runs)
    return runs
