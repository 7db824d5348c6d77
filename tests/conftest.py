"""Shared fixtures. Spark tests share one session-scoped SparkSession (local[2], 2 shuffle partitions,
UI off): starting Spark costs seconds and the machine is small."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from udm.host.spark.session import get_spark

    session = get_spark("local[2]", app_name="udmkit-tests", shuffle_partitions=2,
                        **{"spark.default.parallelism": 2, "spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()
