"""The one place udmkit creates a SparkSession, so every surface (CLI, tests, DataFrame API) gets the
same settings: local by default, a cluster or Spark Connect by configuration, the RocksDB state store
(engine state for streaming lives there), few shuffle partitions and no UI (small jobs, shared machines),
and executors running this very Python (a mismatched worker interpreter is a confusing failure)."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any

from udm.host.errors import UdmError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "MASTER_ENV",
    "REMOTE_ENV",
    "ROCKSDB_PROVIDER",
    "SparkExtrasMissing",
    "get_spark",
    "require_spark",
]

#: Environment variable naming the master when neither ``--master`` nor ``master=`` is given.
MASTER_ENV = "UDM_SPARK_MASTER"
#: Spark's own variable naming a Spark Connect server (``sc://host:15002``).
REMOTE_ENV = "SPARK_REMOTE"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# What each surface needs besides pyspark itself: Arrow-based Python UDFs need pandas + pyarrow;
# Spark Connect and transformWithStateInPandas also need the gRPC stack.
_BASE = ("pyspark", "pandas", "pyarrow")
_CONNECT = ("grpc", "google.protobuf")
_PIP_NAMES = {"grpc": "grpcio", "google.protobuf": "protobuf"}


class SparkExtrasMissing(UdmError):
    """pyspark or one of the packages its Python UDFs / Connect need is not installed."""


def _find_spec(module: str) -> Any:
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def require_spark(*, connect: bool = False) -> None:
    """Fail with one line naming every missing package and the install command, before Spark starts."""
    wanted = _BASE + (_CONNECT if connect else ())
    missing = [_PIP_NAMES.get(m, m) for m in wanted if _find_spec(m) is None]
    if missing:
        what = "Spark Connect / streaming" if connect else "the Spark engine"
        raise SparkExtrasMissing(f"{what} needs {', '.join(missing)} (not installed); "
                                 "install the extras with: pip install 'udmkit[spark]'")


def _resolve(master: str | None, conf: dict[str, Any]) -> tuple[str | None, str | None]:
    """(master, remote): an explicit argument wins over the environment; ``sc://`` means Connect."""
    remote = conf.pop("spark.remote", None)
    if master and master.startswith("sc://"):
        return None, master
    if remote:
        return None, str(remote)
    if master:
        return master, None
    env_master = os.environ.get(MASTER_ENV)
    if env_master:
        return (None, env_master) if env_master.startswith("sc://") else (env_master, None)
    env_remote = os.environ.get(REMOTE_ENV)
    if env_remote:
        return None, env_remote
    return "local[*]", None


def get_spark(master: str | None = None, *, app_name: str = "udmkit", shuffle_partitions: int = 4,
              **conf: Any) -> SparkSession:
    """A SparkSession configured for udmkit, or the active session reused as it is (plus ``conf``).

    ``master``: ``local[N]``, a cluster URL, or ``sc://...`` for Spark Connect; default from
    ``$UDM_SPARK_MASTER``, then ``$SPARK_REMOTE``, then ``local[*]``. Extra settings go in ``conf`` under
    their Spark names (``get_spark(**{"spark.executor.memory": "2g"})``) and win over udmkit's defaults.
    """
    settings: dict[str, Any] = dict(conf)
    master, remote = _resolve(master, settings)
    require_spark(connect=remote is not None)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession() if remote is None else None
    if active is not None:
        # Reuse it as configured: udmkit's defaults must not silently retune a caller's session;
        # only settings asked for explicitly are applied (runtime ones; static ones need a new session).
        for key, value in settings.items():
            active.conf.set(key, str(value))
        return active
    builder: Any = SparkSession.builder.appName(app_name)
    defaults: dict[str, Any] = {
        "spark.sql.shuffle.partitions": shuffle_partitions,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",  # TimestampType <-> µs ticks must not depend on the host
    }
    if remote is not None:
        if not remote.startswith("sc://"):
            # ``remote="local[N]"``: PySpark starts the Connect server here, and its workers are ours
            os.environ["PYSPARK_PYTHON"] = sys.executable
            defaults.update({"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        builder = builder.remote(remote)
    else:
        if master.startswith("local"):  # type: ignore[union-attr]
            # Workers must run this interpreter (the venv with udmkit and the plugins installed).
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master)
        defaults.update({
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        })
        if master.startswith("local"):  # type: ignore[union-attr]
            # Bind and advertise the same loopback address: large task results are fetched from the
            # driver's block manager at spark.driver.host, which must be the address it listens on.
            local_ip = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
            defaults.update({"spark.driver.bindAddress": local_ip, "spark.driver.host": local_ip})
    defaults.update(settings)
    for key, value in defaults.items():
        if value is not None:
            builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
    try:
        spark: SparkSession = builder.getOrCreate()
    except Exception as exc:  # JVM missing, bad master URL, unreachable Connect server
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UdmError(f"cannot start Spark (master={master or remote}): {first}") from exc
    return spark
