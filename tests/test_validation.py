"""Manifest-versus-implementation rules: each lie is refused, naming the rule it breaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from udm.host.validation import check_udm
from udm.sdk import (
    UDA,
    UDF,
    UDO,
    ErrorBound,
    IncrementalUDA,
    Manifest,
    Properties,
    TimeSensitiveUDA,
    TimeSensitiveUDO,
    udm,
)


def _counting(**kw: Any) -> type:
    """An honest incremental count, re-declared with the given decorator arguments."""

    class C(IncrementalUDA):
        def initial_state(self) -> int:
            return 0

        def add(self, s: int, d: Sequence[object]) -> int:
            return s + len(d)

        def remove(self, s: int, d: Sequence[object]) -> int:
            return s - len(d)

        def compute(self, s: int) -> int:
            return s

    return udm(name="c", **kw)(C)


def test_honest_udms_pass() -> None:
    assert check_udm(_counting()) == []

    @udm(name="m")
    class M(UDA):
        def compute(self, payloads: Sequence[float]) -> float:
            return max(payloads)

    assert check_udm(M) == []


def _rules(cls: Any) -> str:
    return " | ".join(check_udm(cls))


def test_algebraic_without_merge_is_refused() -> None:
    assert "algebraic: declared algebraic but does not implement merge" in _rules(_counting(algebraic=True))


def test_incremental_without_remove_is_refused() -> None:
    @udm(name="half")
    class Half(IncrementalUDA):
        def initial_state(self) -> int:
            return 0

        def add(self, s: int, d: Sequence[object]) -> int:
            return s + len(d)

        def compute(self, s: int) -> int:
            return s

    assert "does not implement remove (only an algebraic UDA with merge may leave out remove)" in _rules(Half)
    Half.manifest = Half.manifest.model_copy(update={"properties": Properties(incremental=True, algebraic=True)})
    rules = _rules(Half)  # algebraic but no merge: both pieces are missing
    assert "does not implement merge" in rules and "does not implement remove" in rules


def _sketchy(**kw: Any) -> type:
    """An honest algebraic count without remove (a state that cannot forget), with decorator ``kw``."""

    class S(IncrementalUDA):
        def initial_state(self) -> int:
            return 0

        def add(self, s: int, d: Sequence[object]) -> int:
            return s + len(d)

        def merge(self, a: int, b: int) -> int:
            return a + b

        def compute(self, s: int) -> int:
            return s

    return udm(name="s", **kw)(S)


def test_an_algebraic_uda_may_leave_out_remove() -> None:
    assert check_udm(_sketchy(algebraic=True)) == []
    assert "does not implement remove" in _rules(_sketchy())  # not algebraic: the host could not rebuild it


def test_error_bound_rules() -> None:
    eb = ErrorBound(estimates="distinct_count", bound=0.1, confidence=0.9)
    assert check_udm(_sketchy(algebraic=True, error_bound=eb)) == []

    class Tunable(_sketchy(algebraic=True, error_bound=eb)):  # type: ignore[misc]
        def error_bound(self) -> float:
            return 0.2  # disagrees with the manifest at the default parameters

    Tunable.manifest = Tunable.__mro__[1].manifest
    assert "declares bound 0.1 but error_bound() gives 0.2" in _rules(Tunable)
    quantiles = ErrorBound(estimates="quantile", bound=0.01)
    assert "does not implement quantile_ranks()" in _rules(_sketchy(algebraic=True, error_bound=quantiles))

    @udm(name="op", error_bound=eb)
    class Op(UDO):
        def compute(self, payloads: Sequence[Any]) -> list[Any]:
            return []

    assert "error_bound: only an aggregate (uda) estimates a value" in _rules(Op)
    with pytest.raises(ValueError, match="confidence"):
        ErrorBound(estimates="distinct_count", bound=0.1, confidence=1.5)
    with pytest.raises(ValueError, match="estimates"):
        ErrorBound(estimates="average", bound=0.1)  # type: ignore[arg-type]


def test_incremental_claimed_on_a_non_incremental_base_is_refused() -> None:
    @udm(name="liar", incremental=True)
    class Liar(UDA):
        def compute(self, payloads: Sequence[float]) -> float:
            return 0.0

    rules = _rules(Liar)
    assert "incremental: manifest says True" in rules
    assert "does not implement initial_state, add, remove" in rules


def test_time_sensitive_signature_is_checked() -> None:
    @udm(name="ts")
    class WrongShape(TimeSensitiveUDA):
        def compute(self, events):  # type: ignore[no-untyped-def, override]
            return 0

    assert "signature: a time-sensitive uda needs compute(events, window)" in _rules(WrongShape)

    @udm(name="ti")
    class Extra(UDA):
        def compute(self, payloads, window):  # type: ignore[no-untyped-def, override]
            return 0

    assert "needs compute(payloads)" in _rules(Extra)


def test_time_sensitive_claim_must_match_base() -> None:
    @udm(name="x", time_sensitive=True)
    class X(UDA):
        def compute(self, payloads, window):  # type: ignore[no-untyped-def, override]
            return 0

    assert "time_sensitive: manifest says True but the class derives from UDA" in _rules(X)


def test_time_bound_only_on_time_sensitive_udo() -> None:
    @udm(name="tb", time_bound=True)
    class TB(UDO):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return []

    assert "time_bound: only a time-sensitive UDO" in _rules(TB)

    @udm(name="tb2", time_bound=True, allowed_output=("window", "time_bound"))
    class TB2(UDO):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return []

    rules = _rules(TB2)
    assert "time_bound: only a time-sensitive UDO" in rules
    assert "policies: a time-insensitive UDO can only use 'window' output, not time_bound" in rules


def test_policies_consistent_with_kind() -> None:
    @udm(name="agg", allowed_output=("window", "unaltered"))
    class Agg(UDA):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return 0

    assert "an aggregate can only use 'window' output, not unaltered" in _rules(Agg)

    @udm(name="op", allowed_output=("clip",))
    class Op(TimeSensitiveUDO):
        def compute(self, events, window):  # type: ignore[no-untyped-def, override]
            return []

    assert "'window' output must be allowed" in _rules(Op)

    @udm(name="op2", allowed_output=("window", "time_bound"))
    class Op2(TimeSensitiveUDO):
        def compute(self, events, window):  # type: ignore[no-untyped-def, override]
            return []

    assert "allows 'time_bound' output without declaring" in _rules(Op2)

    @udm(name="f", allowed_clip=("left",))
    class F(UDF):
        def compute(self, x):  # type: ignore[no-untyped-def, override]
            return x

    assert "a UDF is span-based" in _rules(F)


def test_params_must_be_instantiable_with_defaults() -> None:
    class NeedsK(BaseModel):
        k: int

    @udm(name="p", params=NeedsK)
    class P(UDA):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return 0

    assert "params: the parameter model NeedsK needs values without defaults (k)" in _rules(P)


def test_host_api_range_must_include_this_host() -> None:
    @udm(name="future", host_api=">=2")
    class Future(UDA):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return 0

    assert "host_api: supports host API >=2, this host is 1.0" in _rules(Future)
    assert check_udm(Future, api_version="2.3") == []


def test_kind_mismatch_and_missing_pieces() -> None:
    class Hand(UDA):
        manifest = Manifest(name="hand", kind="udo", properties=Properties())

        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return []

    assert "kind: manifest says 'udo'" in _rules(Hand)

    class NoManifest(UDA):
        def compute(self, payloads):  # type: ignore[no-untyped-def, override]
            return 0

    assert "missing manifest" in _rules(NoManifest)
    assert "not a UDM class" in _rules(object)

    @udm(name="empty")
    class Empty(UDA):
        pass

    assert "compute: the class does not implement compute()" in _rules(Empty)


@pytest.mark.parametrize("algebraic_kind", [UDO])
def test_algebraic_only_for_aggregates(algebraic_kind: type) -> None:
    class Op(algebraic_kind):  # type: ignore[misc, valid-type]
        def compute(self, payloads):  # type: ignore[no-untyped-def]
            return []

    Op.manifest = Manifest(name="op", kind="udo", properties=Properties(algebraic=True))
    rules = _rules(Op)
    assert "algebraic: an algebraic UDM must also be incremental" in rules
    assert "only aggregates (uda) can be algebraic" in rules
