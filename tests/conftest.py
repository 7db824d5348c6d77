"""Shared fixtures. Spark tests share one session-scoped SparkSession (local[2], 2 shuffle partitions,
UI off): starting Spark costs seconds and the machine is small."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """The plugin cache (`udm.host.plugin_cache`) of this test run, not the user's: hermetic, and it
    starts cold, so the runs of a session exercise both the first discovery and the cached ones."""
    os.environ.setdefault("UDM_CATALOG_CACHE", tempfile.mkdtemp(prefix="udm-catalog-cache-"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from udm.host.spark.session import get_spark

    session = get_spark("local[2]", app_name="udmkit-tests", shuffle_partitions=2,
                        **{"spark.default.parallelism": 2, "spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()
