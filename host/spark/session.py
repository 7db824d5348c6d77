"""The one place udmkit creates a SparkSession, so every surface (CLI, tests, DataFrame API) gets the
same settings: local by default, a cluster or Spark Connect by configuration, the RocksDB state store
(engine state for streaming lives there), few shuffle partitions and no UI (small jobs, shared machines),
and executors running this very Python (a mismatched worker interpreter is a confusing failure)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from udm.host.errors import UdmError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "ARROW_NO_BYTE_LIMIT",
    "CHECKPOINT_MANAGER_CONF",
    "CONF_ENV",
    "FS_CHECKPOINT_MANAGER",
    "LOG4J_CONFIG",
    "MASTER_ENV",
    "REMOTE_ENV",
    "ROCKSDB_PROVIDER",
    "STREAMING_JAVA_OPTIONS",
    "SparkExtrasMissing",
    "default_partitions",
    "env_settings",
    "get_spark",
    "local_checkpoint_files",
    "on_this_machine",
    "require_spark",
    "resolved_master",
]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)

#: Environment variable naming the master when neither ``--master`` nor ``master=`` is given.
MASTER_ENV = "UDM_SPARK_MASTER"
#: Environment variable holding a JSON object of Spark settings for a session udmkit starts (the CLI's too):
#: they win over udmkit's defaults, and settings given to `get_spark` win over them.
CONF_ENV = "UDM_SPARK_CONF"
#: Spark's own variable naming a Spark Connect server (``sc://host:15002``).
REMOTE_ENV = "SPARK_REMOTE"
#: ``spark.sql.execution.arrow.maxBytesPerBatch`` of a session udmkit starts: the one value at which Spark cuts
#: the Arrow batches it sends to Python workers by rows alone, without sizing the batch after every row
ARROW_NO_BYTE_LIMIT = str(2**31 - 1)
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: the setting naming the class that writes a streaming checkpoint's files, and the one `local_checkpoint_files`
#: picks
CHECKPOINT_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
FS_CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"

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


@contextmanager
def local_checkpoint_files(spark: Any) -> Iterator[None]:
    """Streaming queries that run inside write their checkpoints (offset and commit logs, the state store's
    files) through Hadoop's FileSystem API instead of its FileContext API: only for checkpoints on this
    machine's disk. There both put a file in place by renaming a temporary one (a POSIX rename, atomic),
    but the local FileContext asks ``readlink`` in a new process for every rename (Hadoop without its
    native library, as pyspark ships it): ~920 processes spawned by the JVM in a 200,000-element run of 21
    micro-batches, none with the FileSystem API. (FileSystem's rename checks for an existing file first:
    atomic as long as one run writes a checkpoint, as ``udm run`` requires anyway.) Spark reads the
    setting when a query starts and when it plans each micro-batch; it is unset again when the block ends.
    A manager the user chose (``--conf spark.sql.streaming.checkpointFileManagerClass=...``) is theirs: it
    stays in force, inside the block too."""
    if spark.conf.get(CHECKPOINT_MANAGER_CONF, None) is not None:
        yield
        return
    spark.conf.set(CHECKPOINT_MANAGER_CONF, FS_CHECKPOINT_MANAGER)
    try:
        yield
    finally:
        spark.conf.unset(CHECKPOINT_MANAGER_CONF)


def on_this_machine(master: str | None) -> bool:
    """Whether every executor of ``master`` runs on this machine (and so sees its files): ``local[N]``, or
    a cluster whose master is at a loopback address."""
    if not master:
        return False
    if master.startswith("local"):
        return True
    return (urlparse(master).hostname or "") in ("127.0.0.1", "localhost", "::1")


def resolved_master(master: str | None = None) -> str | None:
    """The master `get_spark` (``master``) runs on: the active session's, else the one it would start
    with; None for Spark Connect (whose executors are wherever its server's are)."""
    if _find_spec("pyspark") is not None:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            try:
                return str(active.sparkContext.master)
            except Exception:  # a Connect session has no SparkContext
                return None
    found, remote = _resolve(master, {})
    return None if remote is not None else found


#: udmkit's log4j2 configuration for the JVM it starts (errors only); ``$UDM_SPARK_LOG4J`` names another.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


#: the JVM's JIT for a streaming run of a staged file (``udm run --engine spark-streaming --input FILE``,
#: `get_spark`'s ``java_options``): C1 only, no C2. Why: such a run lasts minutes, and its JVM runs Spark's
#: per-micro-batch machinery (planning, the shuffle of one row per bucket, the state store's commit, the
#: state server), not hot loops over data; C2 compiled that machinery for the whole run and never paid it
#: back: per JVM thread (``/proc/<jvm>/task/*/stat``, 100,000 elements of ``bench.bench_streaming_cli``'s
#: data) the C2 compiler threads took 12.5 of the JVM's 34.3 CPU-s, and with C1 only the JVM took 17.6,
#: its other threads no slower (issue 31)
STREAMING_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def _quiet_logging(settings: dict[str, Any], java_options: str = "") -> dict[str, str]:
    """The JVM options that point log4j2 at `LOG4J_CONFIG` (unless the caller sets Java options), so
    Spark's WARN lines never interleave with udmkit's output, plus ``java_options``. They must be given
    before the JVM starts: Spark's ``setLogLevel`` comes too late for the start-up warnings."""
    config = os.environ.get("UDM_SPARK_LOG4J") or str(LOG4J_CONFIG)
    opt = f"-Dlog4j2.configurationFile=file:{config} {java_options}".strip()
    out = {}
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        if key not in settings:
            out[key] = opt
    return out


#: Lines the JVM prints to stderr outside log4j that say nothing a user can act on: a start-up warning,
#: and the trace PySpark's ``transform_with_state_driver_worker`` prints (``print``, not logging) each time
#: a ``transformWithStateInPandas`` query starts (each such line is followed by a blank one, dropped too)
JVM_NOISE = (b"WARNING: Using incubator modules", b"Starting Streaming TransformWithStateInPandas Python worker",
             b"Streaming TransformWithStateInPandas Python worker ")


@contextmanager
def _jvm_stderr_filtered(enabled: bool) -> Iterator[None]:
    """While the JVM starts, fd 2 is a pipe that a daemon thread copies to the real stderr minus
    `JVM_NOISE` (the JVM keeps that pipe as its stderr; its later errors still come through)."""
    try:
        real = os.dup(2) if enabled else -1
    except OSError:
        real = -1
    if real < 0:
        yield
        return
    r, w = os.pipe()
    os.dup2(w, 2)
    os.close(w)

    def copy() -> None:
        dropped = False
        with os.fdopen(r, "rb", buffering=0) as src:
            for line in src:
                if line.startswith(JVM_NOISE) or (dropped and not line.strip()):
                    dropped = True
                    continue
                dropped = False
                os.write(real, line)

    threading.Thread(target=copy, name="udm-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # this process writes to the real stderr again


def _running_session(session_cls: Any) -> Any:
    """The process's running session: the thread's active one, else the default one. PySpark keeps the
    active session per thread, so a run on another thread (a live run's reader, a caller's worker) would
    otherwise go through the builder, whose udmkit defaults then retune the running session for everyone
    (its shuffle partitions: the key buckets of every later run)."""
    try:
        return session_cls.active()
    except Exception:  # no session yet (PySpark's NO_ACTIVE_OR_DEFAULT_SESSION)
        return None


def default_partitions(master: str | None) -> int:
    """udmkit's shuffle partitions (and so key buckets) for a session it starts on ``master``: one per core
    of a local master, 4 elsewhere (the driver does not know a cluster's cores before the session starts).
    Why per core: a key bucket is one Python task per micro-batch (and per stage of a batch run), each with a
    fixed cost, so more buckets than cores only add waves: the 200 k streaming benchmark on ``local[2]`` took
    37.2 s with 2 buckets and 42.7 s with 4."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", (master or "").strip())
    if m is None:
        return 4
    cores = m.group(1)
    if cores is None:
        return 1
    return max(1, os.cpu_count() or 1) if cores == "*" else max(1, int(cores))


def env_settings() -> dict[str, Any]:
    """The Spark settings of ``$UDM_SPARK_CONF`` (a JSON object of setting names and values), or none."""
    text = os.environ.get(CONF_ENV, "").strip()
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise UdmError(f"${CONF_ENV} is not JSON: {exc}") from None
    if not isinstance(found, dict):
        raise UdmError(f'${CONF_ENV} must be a JSON object of Spark settings ({{"spark.name": "value"}})')
    return found


def get_spark(master: str | None = None, *, app_name: str = "udmkit", shuffle_partitions: int | None = None,
              java_options: str = "", **conf: Any) -> SparkSession:
    """A SparkSession configured for udmkit, or the active session reused as it is (plus ``conf``).

    ``master``: ``local[N]``, a cluster URL, or ``sc://...`` for Spark Connect; default from
    ``$UDM_SPARK_MASTER``, then ``$SPARK_REMOTE``, then ``local[*]``. Extra settings go in ``conf`` under
    their Spark names (``get_spark(**{"spark.executor.memory": "2g"})``) and win over those of
    ``$UDM_SPARK_CONF`` (`env_settings`: how a CLI user sets them), which win over udmkit's defaults.
    ``shuffle_partitions``: default `default_partitions` (one per local core). ``java_options``: more options
    for the JVMs of a session started here (`STREAMING_JAVA_OPTIONS`), unless the settings name their own.
    """
    settings: dict[str, Any] = dict(conf)
    master, remote = _resolve(master, settings)
    require_spark(connect=remote is not None)
    from pyspark.sql import SparkSession

    active = _running_session(SparkSession) if remote is None else None
    if active is not None:
        # Reuse it as configured: udmkit's defaults must not silently retune a caller's session;
        # only settings asked for explicitly are applied (runtime ones; static ones need a new session).
        for key, value in settings.items():
            active.conf.set(key, str(value))
        return active
    builder: Any = SparkSession.builder.appName(app_name)
    defaults: dict[str, Any] = {
        "spark.sql.shuffle.partitions": shuffle_partitions or default_partitions(master),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # a micro-batch's commit writes the changed keys' changelog instead of uploading a RocksDB snapshot
        # (snapshots go on in the background): commit 140-280 ms instead of 600-940 ms per micro-batch of
        # bench_streaming --cores; Spark reads checkpoints written either way
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Arrow batches to the Python workers are cut by rows alone (``maxRecordsPerBatch``): with a byte
        # limit, Spark asks the Arrow writer for its size after every row, a walk of every vector that grows
        # with the batch for a list or struct column (the graph plans' ``keys``): 63 % of the JVM's samples
        # in bench_stages, its task CPU 3.3 -> 0.6 s without it. Spark skips the check at exactly Int.MaxValue.
        "spark.sql.execution.arrow.maxBytesPerBatch": ARROW_NO_BYTE_LIMIT,
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
            # and import pyspark compiled, not from pyspark.zip (`worker_daemon`)
            defaults["spark.python.daemon.module"] = "udm.host.spark.worker_daemon"
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master)
        defaults.update({
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        })
        if on_this_machine(master):
            # Bind and advertise the same loopback address: large task results are fetched from the
            # driver's block manager at spark.driver.host, which must be the address it listens on; and
            # executors of a cluster on this machine (spark://127.0.0.1:...) must reach the driver there,
            # not at an interface address they may have no route to.
            local_ip = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
            defaults.update({"spark.driver.bindAddress": local_ip, "spark.driver.host": local_ip})
    # a session udmkit starts: ``$UDM_SPARK_CONF``, then ``conf``, over the defaults (never a running one's)
    settings = {**env_settings(), **settings}
    if remote is None or not remote.startswith("sc://"):
        # the JVM starts here: its logging (and ``java_options``) set before it starts
        defaults.update(_quiet_logging(settings, java_options))
    defaults.update(settings)
    for key, value in defaults.items():
        if value is not None:
            builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
    try:
        with _jvm_stderr_filtered(remote is None or not remote.startswith("sc://")):
            spark: SparkSession = builder.getOrCreate()
    except Exception as exc:  # JVM missing, bad master URL, unreachable Connect server
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UdmError(f"cannot start Spark (master={master or remote}): {first}") from exc
    return spark
