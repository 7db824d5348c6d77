"""An int among floats stays an int (SEMANTICS: a window's value is its UDA's over the members; the JSON text
of a sum of ints is ``25``, not ``25.0``): whatever the other groups of the same batch hold, whatever the batch
size, for every window family, against the oracle's canonical text (no numeric tolerance)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Insert
from udm.host.testing import oracle
from udm.host.testing.cht import cht

WINDOWS = [{"type": "tumbling", "size": 10}, {"type": "hopping", "size": 10, "hop": 5}, {"type": "rows", "n": 3},
           {"type": "session", "gap": 5}, {"type": "count_by_start", "n": 3}, {"type": "snapshot"}]


def _stream(shape: str) -> list[Any]:
    """Group A and B; ``per_group``: A's values ints, B's floats; ``within``: ints and floats (5 and 5.0
    among them) in one group."""
    rng = random.Random(3)
    out: list[Any] = []
    for i in range(60):
        k = "A" if i % 2 else "B"
        v = (i if k == "A" else i + 0.5) if shape == "per_group" else rng.choice([i, i + 0.5, 5, 5.0, 1.5])
        out.append(Insert(f"e{i}", i, i + 1 + rng.randrange(3), {"k": k, "v": v}))
        if i % 10 == 9:
            out.append(Cti(i - 2))
    return [*out, Cti(1000)]


@pytest.mark.parametrize("window", WINDOWS, ids=[w["type"] for w in WINDOWS])
@pytest.mark.parametrize("udm", ["sum", "max", "min"])
@pytest.mark.parametrize("shape", ["per_group", "within"])
def test_an_int_among_floats_stays_an_int(window: dict[str, Any], udm: str, shape: str) -> None:
    spec = parse_query({"steps": [{"op": "window", "window": window, "group_by": ["k"], "udm": udm, "input": "v",
                                   "as": "s"}]})
    stream = _stream(shape)
    expected = list(oracle(spec, stream).rows())
    for size in (1, 7, len(stream)):
        runner = QueryRunner(bind(spec))
        out: list[Any] = []
        for at in range(0, len(stream), size):
            out += runner.process_many(stream[at:at + size])
        out += runner.finish()
        assert list(cht(out).rows()) == expected, size
