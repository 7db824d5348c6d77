"""The SEMANTICS §9 windows (rows, session) and ``aggregates`` on the Spark paths: each runs the local
engine per key bucket (or time range), held by the kit's `check_engine` to the same brute-force oracle and
output properties as the local engine (random streams with disorder, retraction chains, CTIs, bad lines)."""

from __future__ import annotations

from typing import Any

import pytest
from window_cases import run_random_cases

from udm.host.testing import registered_engine

pytestmark = pytest.mark.spark

WINDOWS: dict[str, Any] = {
    "rows": lambda rng: {"type": "rows", "n": rng.randint(1, 4), "slide": rng.randint(1, 3),
                         "partial": rng.random() < 0.3},
    "session": lambda rng: {"type": "session", "gap": rng.randint(0, 6)},
}


AGGREGATES = [{"udm": "count", "as": "n"}, {"udm": "avg", "input": "v", "as": "mean"},
              {"udm": "median", "input": "v", "as": "med"}, {"udm": "max", "input": "v", "as": "hi"}]


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
def test_aggregates_on_the_spark_paths(spark: Any, engine: str) -> None:
    """Algebraic-only and mixed ``aggregates`` on tumbling/hopping (the shapes Spark plans specially) run on
    the engine path and agree with the oracle."""
    run = registered_engine(engine, buckets=2, batch_size=7 if engine == "spark-streaming" else None)

    def window(rng: Any) -> dict[str, Any]:
        return rng.choice([{"type": "tumbling", "size": rng.randint(2, 8)},
                           {"type": "hopping", "size": rng.randint(2, 9), "hop": rng.randint(1, 3)}])

    def step(seed: int, rng: Any) -> dict[str, Any]:
        return {"aggregates": rng.sample(AGGREGATES if seed % 2 else AGGREGATES[:2], 2)}

    assert run_random_cases(window, range(8), engine=run, variants=0, step=step) == 8


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_spark_paths_agree_with_the_oracle(spark: Any, engine: str, kind: str) -> None:
    run = registered_engine(engine, buckets=2, batch_size=7 if engine == "spark-streaming" else None)
    assert run_random_cases(WINDOWS[kind], range(8), engine=run, variants=0) == 8
