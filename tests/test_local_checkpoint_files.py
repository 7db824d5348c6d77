"""`local_checkpoint_files`: queries started inside write their checkpoint files through Hadoop's FileSystem
API unless the user chose a manager themselves, which stays in force; the setting is unset afterwards, also
when the block fails. (The streaming runs that use it, resumed and crashed on purpose, are the Spark tests'.)"""

from __future__ import annotations

from typing import Any

import pytest

from udm.host.spark.session import CHECKPOINT_MANAGER_CONF, FS_CHECKPOINT_MANAGER, local_checkpoint_files


class _Conf:
    def __init__(self, **values: str) -> None:
        self.values = dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self, **values: str) -> None:
        self.conf = _Conf(**values)


def test_set_inside_and_unset_after() -> None:
    spark = _Session()
    with local_checkpoint_files(spark):
        assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == FS_CHECKPOINT_MANAGER
    assert CHECKPOINT_MANAGER_CONF not in spark.conf.values


def test_unset_after_a_failure() -> None:
    spark = _Session()
    with pytest.raises(RuntimeError), local_checkpoint_files(spark):
        assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == FS_CHECKPOINT_MANAGER
        raise RuntimeError("the query failed")
    assert CHECKPOINT_MANAGER_CONF not in spark.conf.values


def test_a_users_own_manager_stays_in_force() -> None:
    spark = _Session(**{CHECKPOINT_MANAGER_CONF: "my.Manager"})
    with pytest.raises(RuntimeError), local_checkpoint_files(spark):
        assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == "my.Manager"
        raise RuntimeError("the query failed")
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == "my.Manager"
