"""`udm.host.cli.blas_threads`: the program's own ``udm`` runs with one OpenBLAS thread unless the user chose
a number; a harness or an embedding program keeps its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from udm.host.cli import blas_threads

_CHILD = """
import json, os, sys, threading
sys.argv = ["udm", "--help"]
try:
    exec("from udm.host.cli.app import main\\nmain()", {"__name__": os.environ["CALLER"]})
except SystemExit:
    pass
import numpy  # (after main: what numpy's OpenBLAS does under the environment main left)
def comm(task):
    with open(f"/proc/self/task/{task}/comm") as f:
        return f.read()
# OpenBLAS's workers keep the process's name (jemalloc's background thread names itself); Python's own
# threads are counted by threading
native = sum(comm(t) == comm(os.getpid()) for t in os.listdir("/proc/self/task")) - threading.active_count()
print(json.dumps({"env": os.environ.get("OPENBLAS_NUM_THREADS"), "native_threads": native}))
"""


def _child(caller: str, **env: str) -> dict[str, object]:
    base = {k: v for k, v in os.environ.items() if k not in blas_threads.CHOICES}
    res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120,
                         env={**base, "CALLER": caller, "UDM_FAST_EXIT": "0", **env})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_sets_one_thread_for_the_program_own_command() -> None:
    env: dict[str, str] = {}
    assert blas_threads.limit("__main__", env) is True
    assert env == {"OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.parametrize("caller", ["tests.harness", None, "udm.host.cli.app"])
def test_leaves_a_harness_or_embedding_program_alone(caller: object) -> None:
    env: dict[str, str] = {}
    assert blas_threads.limit(caller, env) is False
    assert env == {}


@pytest.mark.parametrize("name", blas_threads.CHOICES)
def test_a_users_thread_count_wins(name: str) -> None:
    env = {name: "3"}
    assert blas_threads.limit("__main__", env) is False
    assert env == {name: "3"}


def test_empty_variables_are_no_choice() -> None:
    env = dict.fromkeys(blas_threads.CHOICES, "")
    assert blas_threads.limit("__main__", env) is True
    assert env["OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_numpy_starts_no_blas_workers_under_udm() -> None:
    own = _child("__main__")
    embedded = _child("some_program")
    assert own == {"env": "1", "native_threads": 0}
    assert embedded["env"] is None
    # OpenBLAS starts a worker per further core it may use: the difference the setting makes
    assert embedded["native_threads"] == len(os.sched_getaffinity(0)) - 1


def test_the_users_choice_reaches_numpy() -> None:
    assert _child("__main__", OMP_NUM_THREADS="1")["env"] is None
