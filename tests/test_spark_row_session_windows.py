"""The SEMANTICS §9 windows (rows, session) on the Spark paths: each runs the local engine per key bucket,
held by the kit's `check_engine` to the same brute-force oracle and output properties as the local
engine (random streams with disorder, retraction chains, CTIs and bad lines)."""

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


@pytest.mark.parametrize("engine", ["spark", "spark-streaming"])
@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_spark_paths_agree_with_the_oracle(spark: Any, engine: str, kind: str) -> None:
    run = registered_engine(engine, buckets=2, batch_size=7 if engine == "spark-streaming" else None)
    assert run_random_cases(WINDOWS[kind], range(8), engine=run, variants=0) == 8
