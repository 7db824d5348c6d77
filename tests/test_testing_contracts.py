"""UDM contract checks: every check fails on a UDM broken in its way (and only that check), every
first-party UDM passes them all, failures carry the seed and a minimal reproducer."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kit_fixtures.broken_udms import BROKEN, ExactDistinct, GoodCount, NoisySum
from typer.testing import CliRunner

from udm.host.cli.app import app
from udm.host.testing import CHECKS, CheckResult, assert_contracts, run_contract_checks
from udm.sdk import UDA, UDF, udm
from udm_patterns import ALL as PATTERNS
from udm_sketches import ALL as SKETCHES
from udm_stats import ALL as STATS

FIRST_PARTY = (*STATS, *PATTERNS, *SKETCHES)


def _failed(results: list[CheckResult]) -> set[str]:
    return {r.name for r in results if not r.passed}


@pytest.mark.parametrize("cls", FIRST_PARTY, ids=lambda c: c.manifest.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_first_party_udm_passes_every_check(cls: type, seed: int) -> None:
    results = run_contract_checks(cls, seed=seed)
    assert [r.name for r in results] == list(CHECKS)
    assert _failed(results) == set(), "\n".join(f"{r}\n{r.reproducer}" for r in results if not r.passed)


@pytest.mark.parametrize("cls", list(BROKEN), ids=lambda c: c.manifest.name)
def test_each_check_fails_on_a_udm_broken_its_way(cls: type) -> None:
    for seed in (0, 1):
        results = run_contract_checks(cls, seed=seed)
        assert _failed(results) == BROKEN[cls], [str(r) for r in results]
        for r in results:
            if not r.passed:
                assert r.seed == seed and r.detail


def test_every_check_is_shown_failing_somewhere() -> None:
    assert set().union(*BROKEN.values()) == set(CHECKS)


def test_the_correct_twin_passes() -> None:
    assert _failed(run_contract_checks(GoodCount, seed=0)) == set()


def test_an_algebraic_uda_without_remove_is_checked_with_adds_only() -> None:
    res = {r.name: r for r in run_contract_checks(ExactDistinct, seed=0)}
    assert _failed(list(res.values())) == set(), [str(r) for r in res.values()]
    assert "2 orders of adds" in res["incremental"].detail and not res["state_pickle"].skipped
    assert not res["error_bound"].skipped and "0 outside" in res["error_bound"].detail
    assert res["error_bound"].detail.startswith("25 distinct_count estimates")


def test_exact_udms_skip_the_error_bound_check() -> None:
    (r,) = run_contract_checks(GoodCount, checks=["error_bound"])
    assert r.skipped and "exact" in r.detail


@pytest.mark.parametrize(("cls_name", "needle"), [
    ("bad_remove", "incremental result"),
    ("skewed_merge", "merge is not"),
    ("no_identity_merge", "not an identity"),
    ("mutating_merge", "mutated its arguments"),
    ("lambda_state", "does not survive pickling"),
    ("window_counter", "declared time_bound"),
    ("lossy_params", "does not round-trip"),
    ("lying_output_type", "declares output_type 'int'"),
    ("sorting_median", "mutated the members"),
    ("stateful_self", "physical history"),
    ("slices_as_floats", "compute_slices gave"),
    ("slices_skip_first", "compute_slices gave"),
    ("prefixes_skip_state", "compute_prefixes gave"),
    ("ranges_as_slices", "compute_ranges gave"),
    ("skewed_distinct", "outside the declared bound 0.05 (confidence 0.99 allows"),
    ("forgetful_count", "only an algebraic UDA with merge may leave out remove"),
])
def test_failure_details_say_what_broke(cls_name: str, needle: str) -> None:
    (cls,) = [c for c in BROKEN if c.manifest.name == cls_name]
    details = " | ".join(r.detail for r in run_contract_checks(cls, seed=0) if not r.passed)
    assert needle in details


def test_reproducers_are_minimal() -> None:
    (inc,) = [r for r in run_contract_checks(BROKEN_BY_NAME["bad_remove"]) if r.name == "incremental"]
    members = inc.reproducer.split("members (canonical order):\n")[1].split("\ndeltas:")[0].splitlines()
    assert len(members) == 1, inc.reproducer
    assert "remove [" in inc.reproducer
    (det,) = [r for r in run_contract_checks(NoisySum) if r.name == "deterministic"]
    assert len(det.reproducer.split("members (canonical order):\n")[1].splitlines()) == 1
    (reo,) = [r for r in run_contract_checks(BROKEN_BY_NAME["stateful_self"]) if r.name == "physical_reordering"]
    assert '"kind": "insert"' in reo.reproducer and "logical stream (CHT)" in reo.reproducer
    cht_lines = reo.reproducer.split("logical stream (CHT):\n")[1].split("\nphysical")[0].splitlines()
    assert len(cht_lines) <= 3
    (tb,) = [r for r in run_contract_checks(BROKEN_BY_NAME["window_counter"]) if r.name == "time_bound"]
    assert "element x:" in tb.reproducer and "sync time" in tb.reproducer


BROKEN_BY_NAME = {c.manifest.name: c for c in BROKEN}


def test_same_seed_same_result_different_seed_may_differ() -> None:
    a = run_contract_checks(BROKEN_BY_NAME["bad_remove"], seed=7)
    b = run_contract_checks(BROKEN_BY_NAME["bad_remove"], seed=7)
    assert [(r.name, r.passed, r.detail, r.reproducer) for r in a] == [
        (r.name, r.passed, r.detail, r.reproducer) for r in b]


def test_assert_contracts_lists_failures_with_seed_and_reproducer() -> None:
    with pytest.raises(AssertionError) as ei:
        assert_contracts(BROKEN_BY_NAME["bad_remove"], seed=3)
    text = str(ei.value)
    assert "failed 1 contract check(s) (seed 3" in text and "--udm-seed=3" in text
    assert "[incremental]" in text and "reproducer:" in text and "deltas:" in text
    assert len(assert_contracts(GoodCount)) == len(CHECKS)


def test_checks_can_be_selected_and_unknown_ones_are_rejected() -> None:
    res = run_contract_checks(GoodCount, checks=["incremental", "state_pickle"])
    assert [r.name for r in res] == ["incremental", "state_pickle"]
    with pytest.raises(ValueError, match="unknown contract check"):
        run_contract_checks(GoodCount, checks=["nope"])


def test_not_applicable_checks_are_skipped_as_passed() -> None:
    res = {r.name: r for r in run_contract_checks(STATS[6])}  # median: not incremental, not algebraic
    assert res["incremental"].skipped and res["incremental"].passed
    assert res["algebraic_merge"].skipped and res["time_bound"].skipped and res["state_pickle"].skipped
    assert not res["deterministic"].skipped


def test_a_class_without_manifest_fails_every_check() -> None:
    class Bare(UDA):
        def compute(self, payloads: Sequence[Any]) -> Any:
            return 0

    res = run_contract_checks(Bare)
    assert all(not r.passed and "no manifest" in r.detail for r in res)


# -- custom example inputs -------------------------------------------------------------------------


@udm(name="word_len", version="1.0.0", input_type="Word", output_type="int")
class WordLength(UDA):
    """Total length of words; only works on strings."""

    def compute(self, payloads: Sequence[str]) -> int:
        return sum(len(w.strip()) for w in payloads)


@udm(name="word_len2", version="1.0.0", input_type="Word", output_type="int")
class WordLengthWithExamples(WordLength):
    """Same, with example inputs on the class."""

    @classmethod
    def example_payloads(cls, rng: random.Random) -> list[str]:
        return [rng.choice(["stream", "insight", " udm "]) for _ in range(5)]


def test_custom_inputs_argument_and_example_payloads_classmethod() -> None:
    # the default pool for an unknown input_type is numbers: compute raises -> the manifest check says so
    res = {r.name: r for r in run_contract_checks(WordLength)}
    assert not res["manifest"].passed and "supply example inputs" in res["manifest"].detail
    assert _failed(run_contract_checks(WordLength, inputs=["a", "bb", " ccc"])) == set()
    assert _failed(run_contract_checks(WordLength, inputs=lambda rng: ["x" * rng.randint(0, 3)])) == set()
    assert _failed(run_contract_checks(WordLengthWithExamples)) == set()


def test_custom_params() -> None:
    from udm_patterns import TopK

    assert _failed(run_contract_checks(TopK, params={"k": 1, "by": "value"})) == set()
    res = run_contract_checks(TopK, params={"k": 0})
    assert all(not r.passed for r in res if not r.skipped)


@udm(name="clamp", version="1.0.0", input_type="float", output_type="float")
class Clamp(UDF):
    """A two-argument UDF."""

    def compute(self, x: float, hi: float) -> float:
        return min(x, hi)


def test_udfs_are_checked_too() -> None:
    res = {r.name: r for r in run_contract_checks(Clamp)}
    assert all(r.passed for r in res.values()), [str(r) for r in res.values()]
    assert not res["physical_reordering"].skipped and res["incremental"].skipped


# -- `udm validate` --------------------------------------------------------------------------------

FIXTURE = Path(__file__).parent / "kit_fixtures" / "broken_udms.py"
runner = CliRunner()


def test_udm_validate_runs_the_contract_checks() -> None:
    res = runner.invoke(app, ["validate", str(FIXTURE), "--json", "--seed", "1"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    rows = data["results"]
    assert {"udm", "version", "check", "passed", "detail"} <= set(rows[0])
    failed = {(r["udm"], r["check"]) for r in rows if not r["passed"]}
    for cls, checks in BROKEN.items():
        name = cls.manifest.name
        if name in ("claims_algebraic", "forgetful_count"):  # refused at load: only a manifest row, no contracts
            assert (name, "manifest") in failed
            assert not any(r["udm"] == name and r["check"].startswith("contract:") for r in rows)
            continue
        for c in checks:
            assert (name, f"contract:{c}") in failed
    assert not any(u in ("good_count", "exact_distinct") for u, _ in failed)
    assert all(r["seed"] == 1 for r in rows if r["check"].startswith("contract:"))
    assert any(r["reproducer"] for r in rows if not r["passed"] and r["check"].startswith("contract:"))
    # human output: a summary table, failures with their seed, reproducers below
    res = runner.invoke(app, ["validate", str(FIXTURE), "--seed", "1"], terminal_width=200)
    assert res.exit_code == 1
    assert "contract:incremental" in res.output and "(seed 1)" in res.output and "reproducer" in res.output
    res = runner.invoke(app, ["validate", str(FIXTURE), "--json", "--no-contracts"])
    assert not any(r["check"].startswith("contract:") for r in json.loads(res.stdout)["results"])
