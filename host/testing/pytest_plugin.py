"""pytest plugin of the udmkit conformance kit (entry point ``pytest11: udmkit``; loaded automatically).

Fixtures:

- ``udm_contracts`` — a callable: ``udm_contracts(MyUDM)`` runs every contract check and fails the test
  with the seed and a minimal reproducer for each failed check. Keyword arguments go to
  `run_contract_checks` (``inputs=``, ``params=``, ``examples=``, ``checks=``).
- ``udm_seed`` — the seed (``--udm-seed N``, or ``$UDM_SEED``; default 0).
- ``udm_stream`` — ``udm_stream(**knobs)`` generates a stream (see `StreamSpec`) with that seed.
- ``udm_streams`` — ``udm_streams(inputs=2, **knobs)`` generates related streams by input name for a
  query graph (see `generate_related`: shared and one-sided join keys) with that seed.

One test per check, for a plugin's test module::

    from udm.host.testing.pytest_plugin import contract_tests
    test_my_udm = contract_tests(MyUDM)

Importing this module is cheap: the kit is imported when a fixture is first used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from udm.host.testing.contracts import CHECKS, assert_contracts, format_failures, run_contract_checks
from udm.host.testing.generator import generate, generate_related

__all__ = ["contract_tests"]

_ENV = "UDM_SEED"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("udmkit", "udmkit conformance kit")
    group.addoption("--udm-seed", action="store", type=int, default=None, dest="udm_seed",
                    help=f"seed of the udmkit contract checks and generated streams (default ${_ENV} or 0)")
    group.addoption("--udm-examples", action="store", type=int, default=None, dest="udm_examples",
                    help="random examples per udmkit contract check (default 50)")


def _seed(config: pytest.Config) -> int:
    opt = config.getoption("udm_seed", default=None)
    if opt is not None:
        return int(opt)
    env = os.environ.get(_ENV, "").strip()
    return int(env) if env else 0


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("udm_seed", default=None) is None and not os.environ.get(_ENV):
        return None
    return f"udmkit: --udm-seed={_seed(config)}"


@pytest.fixture
def udm_seed(request: pytest.FixtureRequest) -> int:
    """The conformance-kit seed for this run."""
    return _seed(request.config)


@pytest.fixture
def udm_contracts(request: pytest.FixtureRequest, udm_seed: int) -> Callable[..., Any]:
    """``udm_contracts(MyUDM, **kwargs)``: assert every contract check passes (seed from ``--udm-seed``)."""
    examples = request.config.getoption("udm_examples", default=None)

    def check(udm_cls: type, **kwargs: Any) -> Any:
        kwargs.setdefault("seed", udm_seed)
        if examples is not None:
            kwargs.setdefault("examples", examples)
        __tracebackhide__ = True
        return assert_contracts(udm_cls, **kwargs)

    return check


@pytest.fixture
def udm_stream(udm_seed: int) -> Callable[..., Any]:
    """``udm_stream(**knobs)``: a generated stream (see `udm.host.testing.StreamSpec`) with the run's seed."""
    def make(spec: Any = None, *, seed: int | None = None, **knobs: Any) -> Any:
        return generate(spec, seed=udm_seed if seed is None else seed, **knobs)

    return make


@pytest.fixture
def udm_streams(udm_seed: int) -> Callable[..., Any]:
    """``udm_streams(inputs=2, **knobs)``: related streams by input name (see
    `udm.host.testing.generate_related`) with the run's seed, for multi-input queries."""
    def make(inputs: Any = 2, *, seed: int | None = None, **knobs: Any) -> Any:
        return generate_related(inputs, seed=udm_seed if seed is None else seed, **knobs)

    return make


def contract_tests(udm_cls: type, **kwargs: Any) -> Callable[..., None]:
    """A pytest test function parametrized over every contract check of ``udm_cls``::

        test_my_udm = contract_tests(MyUDM, inputs=[1, 2.5, 3])
    """
    names = list(kwargs.pop("checks", CHECKS))

    @pytest.mark.parametrize("udm_check", names)
    def test_contract(udm_check: str, udm_seed: int, request: pytest.FixtureRequest) -> None:
        __tracebackhide__ = True
        kw = dict(kwargs)
        examples = request.config.getoption("udm_examples", default=None)
        if examples is not None:
            kw.setdefault("examples", examples)
        (result,) = run_contract_checks(udm_cls, seed=udm_seed, checks=[udm_check], **kw)
        if result.skipped:
            pytest.skip(result.detail)
        if not result.passed:
            pytest.fail(format_failures(udm_cls, [result]), pytrace=False)

    test_contract.__name__ = f"test_contracts_{getattr(udm_cls, '__name__', 'udm')}"
    return test_contract
