"""How ``rows`` windows aggregate (SEMANTICS §9, seeds/004 §4): consecutive windows share one sweep, so the
UDA work per in-order event does not grow with the window size ``n`` (each row enters once and leaves once).
This replaced the ``gcd(n, slide)``-row panes of semantics-notes 29; the random streams that checked the
panes (algebraic UDAs, several aggregates, late and retracted rows renumbering later windows) now check the
sweep against the kit's oracle."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from test_engine_support import UDA_CALLS, CountingSum, catalog_with, cht, runner, window_query
from window_cases import run_random_cases

from udm.host.temporal.elements import Cti, Element, Insert

ALGEBRAIC: list[dict[str, Any]] = [
    {"udm": "count"}, {"udm": "sum", "input": "v"}, {"udm": "avg", "input": "v"},
    {"udm": "max", "input": "v", "max_delay": 2},
    {"aggregates": [{"udm": "count", "as": "n"}, {"udm": "min", "input": "v", "as": "lo"}]},
]


def _stream(count: int) -> list[Element]:
    out: list[Element] = []
    for i in range(count):
        out.append(Insert(f"e{i}", i, i + 1, {"v": (i * 7919) % 101}))
        if i % 50 == 49:
            out.append(Cti(i + 1))
    return out


def counted_run(r: Any, stream: list[Element], start: int, mode: str) -> tuple[list[Element], Counter[str]]:
    """Feed ``stream`` to runner ``r``: up to the insert at LE ``start`` as one batch (not counted), the rest
    in ``mode`` (``each``: one element per call); returns the whole output and the UDA calls of the rest."""
    cut = next(i for i, el in enumerate(stream) if isinstance(el, Insert) and el.le == start)
    out = r.process_many(stream[:cut])
    UDA_CALLS.clear()
    if mode == "each":
        out += [o for el in stream[cut:] for o in r.process(el)]
    else:
        out += r.process_many(stream[cut:])
    calls = Counter(UDA_CALLS)
    return out + r.finish(), calls


def _work(n: int, slide: int, mode: str) -> Counter[str]:
    """UDA calls (and values handed) per 1,000 in-order events of ``rows{n, slide}``, fed
    in ``mode``, once the windows are full (the run up to there is fed as one batch and not counted); the
    whole output is checked against the plain definition of each window's sum."""
    r = runner(window_query({"type": "rows", "n": n, "slide": slide}, "counting_sum", input="v"),
               catalog_with(CountingSum))
    count = n + 1100
    out, calls = counted_run(r, _stream(count), n + 100, mode)
    vals = [(i * 7919) % 101 for i in range(count)]
    first = -(-n // slide) * slide
    want = Counter((k - n, k, f'{{"counting_sum":{sum(vals[k - n:k])}}}') for k in range(first, count + 1, slide))
    assert cht(out) == want
    return calls


@pytest.mark.parametrize("mode", ["each", "many"])
@pytest.mark.parametrize("slide", [1, 3])
def test_work_per_event_does_not_grow_with_n(slide: int, mode: str) -> None:
    """rows(10,000) costs the UDA what rows(10) costs: every window is the previous one plus ``slide``
    rows entering and ``slide`` leaving, whatever ``n`` (an algebraic UDA with ``remove`` keeps one
    running state: one add and one remove per row, no merge)."""
    small, big = _work(10, slide, mode), _work(10_000, slide, mode)
    for what in ("add", "remove", "merge", "initial_state", "compute", "values"):
        assert big[what] <= small[what] * 1.1 + 10, (what, small, big)
    assert abs(small["compute"] - 1000 // slide) <= 10, small  # one compute per window
    assert small["values"] <= 2000 + 10, small  # each row handed in once and out once


@pytest.mark.parametrize("part", range(3))
def test_random_streams_agree_with_the_oracle(part: int) -> None:
    def window(rng: random.Random) -> dict[str, Any]:
        p = rng.randint(2, 3)
        return {"type": "rows", "n": p * rng.randint(2, 4), "slide": p * rng.randint(1, 3),
                "partial": rng.random() < 0.3}

    def step(seed: int, rng: random.Random) -> dict[str, Any]:
        return dict(ALGEBRAIC[seed % len(ALGEBRAIC)])

    assert run_random_cases(window, range(part * 250, part * 250 + 250), step=step) == 500
