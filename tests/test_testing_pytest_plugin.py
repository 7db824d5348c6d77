"""The pytest plugin (entry point ``pytest11: udmkit``) as a plugin author uses it."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

UDMS = '''
from collections.abc import Sequence
from udm.sdk import IncrementalUDA, udm

@udm(name="my_count", version="1.0.0", input_type="any", output_type="int")
class MyCount(IncrementalUDA):
    """Counts members."""
    def initial_state(self):
        return 0
    def add(self, state, delta):
        return state + len(delta)
    def remove(self, state, delta):
        return state - len(delta)
    def compute(self, state):
        return state

@udm(name="broken_count", version="1.0.0", input_type="any", output_type="int")
class BrokenCount(MyCount):
    """remove() does nothing."""
    def remove(self, state, delta):
        return state
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(my_udms=UDMS)
    return pytester


def test_one_line_contract_test_passes_for_a_good_udm(project: pytest.Pytester) -> None:
    project.makepyfile(test_mine='''
from my_udms import MyCount

def test_contracts(udm_contracts):
    udm_contracts(MyCount)
''')
    res = project.runpytest_subprocess("-q")
    res.assert_outcomes(passed=1)


def test_failures_print_seed_and_reproducer(project: pytest.Pytester) -> None:
    project.makepyfile(test_mine='''
from my_udms import BrokenCount

def test_contracts(udm_contracts):
    udm_contracts(BrokenCount)
''')
    res = project.runpytest_subprocess("--udm-seed", "5")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "broken_count 1.0.0 failed 1 contract check(s) (seed 5" in out
    assert "[incremental]" in out and "reproducer:" in out and "deltas:" in out
    assert "udmkit: --udm-seed=5" in out  # report header


def test_seed_from_environment(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_seed='''
def test_seed(udm_seed):
    assert udm_seed == 11
''')
    monkeypatch.setenv("UDM_SEED", "11")
    project.runpytest_subprocess("-q").assert_outcomes(passed=1)
    monkeypatch.delenv("UDM_SEED")
    project.runpytest_subprocess("-q", "--udm-seed=11").assert_outcomes(passed=1)


def test_contract_tests_make_one_test_per_check(project: pytest.Pytester) -> None:
    project.makepyfile(test_mine='''
from udm.host.testing.pytest_plugin import contract_tests
from my_udms import BrokenCount, MyCount

test_good = contract_tests(MyCount)
test_bad = contract_tests(BrokenCount, checks=["incremental", "algebraic_merge"])
''')
    res = project.runpytest_subprocess("-q", "-rs", "--udm-examples", "10")
    # good: 11 checks, algebraic_merge, batch_forms, time_bound, error_bound and value_blind not applicable;
    # bad: incremental fails, merge skipped
    res.assert_outcomes(passed=6, skipped=6, failed=1)
    out = res.stdout.str()
    assert "test_bad[incremental]" in out and "not applicable" in out
    assert "incremental result" in out and "seed 0" in out


def test_udm_stream_fixture(project: pytest.Pytester) -> None:
    project.makepyfile(test_stream='''
from udm.host.testing import cht, generate

def test_stream(udm_stream, udm_seed):
    s = udm_stream(events=7, disorder="highly", speculation=0.5)
    assert cht(s) == cht(generate(seed=udm_seed, events=7, disorder="highly", speculation=0.5))
''')
    project.runpytest_subprocess("-q", "--udm-seed=3").assert_outcomes(passed=1)
