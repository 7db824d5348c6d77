"""The session factory: configuration and the missing-extras message (no Spark needed for most)."""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.errors import UdmError
from udm.host.spark import session as S


def test_missing_extras_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = {"pyarrow", "grpc"}
    real = S._find_spec
    monkeypatch.setattr(S, "_find_spec", lambda m: None if m in absent else real(m))
    with pytest.raises(S.SparkExtrasMissing) as err:
        S.require_spark(connect=True)
    msg = str(err.value)
    assert "\n" not in msg
    assert "pyarrow" in msg and "grpcio" in msg and "udmkit[spark]" in msg
    absent.discard("pyarrow")
    S.require_spark(connect=False)  # gRPC is only needed for Connect / streaming


def test_get_spark_fails_before_starting_when_pyspark_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "_find_spec", lambda m: None if m == "pyspark" else object())
    with pytest.raises(S.SparkExtrasMissing, match="needs pyspark"):
        S.get_spark("local[1]")


def test_master_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(S.MASTER_ENV, raising=False)
    monkeypatch.delenv(S.REMOTE_ENV, raising=False)
    assert S._resolve(None, {}) == ("local[*]", None)
    monkeypatch.setenv(S.MASTER_ENV, "spark://h:7077")
    assert S._resolve(None, {}) == ("spark://h:7077", None)
    assert S._resolve("local[2]", {}) == ("local[2]", None)  # explicit --master wins
    assert S._resolve("sc://h:15002", {}) == (None, "sc://h:15002")
    monkeypatch.delenv(S.MASTER_ENV)
    monkeypatch.setenv(S.REMOTE_ENV, "sc://c:15002")
    assert S._resolve(None, {}) == (None, "sc://c:15002")
    assert S._resolve(None, {"spark.remote": "sc://x"}) == (None, "sc://x")


def test_default_partitions_are_one_per_local_core() -> None:
    import os

    assert S.default_partitions("local[3]") == 3
    assert S.default_partitions("local[2, 4]") == 2  # (local[N, maxFailures])
    assert S.default_partitions("local") == 1
    assert S.default_partitions("local[*]") == (os.cpu_count() or 1)
    assert S.default_partitions("spark://127.0.0.1:7077") == 4
    assert S.default_partitions(None) == 4


@pytest.mark.spark
def test_session_settings(spark: Any) -> None:
    import sys

    conf = spark.conf
    assert conf.get("spark.sql.streaming.stateStore.providerClass") == S.ROCKSDB_PROVIDER
    assert conf.get("spark.sql.shuffle.partitions") == "2"
    # Arrow batches to Python cut by rows alone: any other value makes Spark size the batch after every row
    assert conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == S.ARROW_NO_BYTE_LIMIT == str(2**31 - 1)
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    import os

    assert os.environ["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.spark
def test_workers_import_the_installed_compiled_pyspark(spark: Any) -> None:
    """A local session's Python workers (`worker_daemon`) import pyspark from the installed package, not
    from ``pyspark.zip`` (which Spark puts first on their path and Python never caches compiled)."""
    import pyspark

    def where(_: Any) -> Any:
        import pyspark as p

        yield p.__file__

    got = set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect())
    assert got == {pyspark.__file__} and ".zip" not in pyspark.__file__


def test_only_the_installed_packages_zips_move_behind_it(tmp_path: Any) -> None:
    """`worker_daemon.installed_first`: the zips inside the installed pyspark's ``python/lib`` go last;
    another Spark installation's zip stays first (its pyspark matches its JVM); no installed pyspark on
    the path: unchanged."""
    import os

    import pyspark

    from udm.host.spark.worker_daemon import installed_first

    site = os.path.dirname(os.path.dirname(pyspark.__file__))
    lib = os.path.join(site, "pyspark", "python", "lib")
    ours = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-src.zip")]
    other = str(tmp_path / "spark" / "python" / "lib" / "pyspark.zip")
    assert installed_first([*ours, "/x", site]) == ["/x", site, *ours]
    assert installed_first([other, site]) == [other, site]
    assert installed_first([*ours, "/x"]) == [*ours, "/x"]


@pytest.mark.spark
def test_another_thread_reuses_the_running_session_as_it_is(spark: Any) -> None:
    """PySpark's active session is per thread: from another thread `get_spark` still returns the running
    session, and udmkit's defaults (4 shuffle partitions) do not retune it."""
    import threading

    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(S.get_spark()))
    t.start()
    t.join()
    assert got == [spark]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_env_settings_are_a_json_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(S.CONF_ENV, raising=False)
    assert S.env_settings() == {}
    monkeypatch.setenv(S.CONF_ENV, '{"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": 8}')
    assert S.env_settings() == {"spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": 8}
    for bad in ("spark.sql.adaptive.enabled=true", '["x"]'):
        monkeypatch.setenv(S.CONF_ENV, bad)
        with pytest.raises(UdmError, match=S.CONF_ENV):
            S.env_settings()


@pytest.mark.spark
def test_env_settings_win_over_the_defaults_of_a_session_udmkit_starts(spark: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A new session (a child process, as the CLI is): ``$UDM_SPARK_CONF`` over udmkit's defaults, ``conf``
    over both. A running session is not retuned by it."""
    import json
    import os
    import subprocess
    import sys

    code = ("from udm.host.spark.session import get_spark\n"
            "s = get_spark('local[1]', **{'spark.sql.session.timeZone': 'UTC'})\n"
            "print([s.conf.get(k) for k in ('spark.sql.shuffle.partitions', 'spark.sql.adaptive.enabled', "
            "'spark.sql.session.timeZone')])\n")
    env = {**os.environ,
           S.CONF_ENV: json.dumps({"spark.sql.shuffle.partitions": "3", "spark.sql.adaptive.enabled": "false",
                                   "spark.sql.session.timeZone": "Europe/Paris"})}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['3', 'false', 'UTC']"
    monkeypatch.setenv(S.CONF_ENV, json.dumps({"spark.sql.shuffle.partitions": "5"}))
    assert S.get_spark() is spark and spark.conf.get("spark.sql.shuffle.partitions") == "2"
