"""How count windows aggregate (SEMANTICS §3, seeds/004 §4): consecutive ``count_by_start`` /
``count_by_end`` windows share one sweep, so the UDA work per in-order event does not grow with ``n``.

A distinct value appended after the windows evaluated so far leaves what the sweep holds as it was; the sweep
used to be thrown away for it and rebuilt from every bucket of the next window (``n`` values per flush: the
bench's count_by_start(10,000) at 20 ms an event). Counted as UDA calls, never time."""

from __future__ import annotations

from collections import Counter

import pytest
from test_engine_row_panes import _stream, counted_run
from test_engine_support import CountingSum, catalog_with, cht, runner, window_query


def _work(kind: str, n: int, hop: int, mode: str) -> Counter[str]:
    """UDA calls (and values handed) over 1,000 in-order events of ``kind{n, hop}`` once the windows are full
    (the run up to there is one batch, not counted); the whole output is checked against the plain
    definition of each window's sum (one event per distinct value: window ``j`` holds events ``j .. j+n-1``)."""
    r = runner(window_query({"type": kind, "n": n, "hop": hop}, "counting_sum", input="v"), catalog_with(CountingSum))
    count = n + 1100
    out, calls = counted_run(r, _stream(count), n + 100, mode)
    vals = [(i * 7919) % 101 for i in range(count)]
    # window j holds events j .. j+n-1: [j, j + n) both by start (LE j .. LE j+n-1, + 1) and by end (RE j+1 - 1
    # .. RE j+n)
    want = Counter((j, j + n, f'{{"counting_sum":{sum(vals[j:j + n])}}}') for j in range(0, count - n + 1, hop))
    assert cht(out) == want
    return calls


@pytest.mark.parametrize("mode", ["each", "many"])
@pytest.mark.parametrize(("kind", "hop"), [("count_by_start", 1), ("count_by_start", 3), ("count_by_end", 1)])
def test_work_per_event_does_not_grow_with_n(kind: str, hop: int, mode: str) -> None:
    """count_by_start(1,000) costs the UDA what count_by_start(10) costs: each value enters the sweep once
    and leaves once (an algebraic UDA with ``remove`` keeps one running state)."""
    small, big = _work(kind, 10, hop, mode), _work(kind, 1000, hop, mode)
    for what in ("add", "remove", "merge", "initial_state", "values"):
        assert big[what] <= small[what] * 1.1 + 10, (what, small, big)
    assert small["values"] <= 2000 + 10, small  # each value handed in once and out once
