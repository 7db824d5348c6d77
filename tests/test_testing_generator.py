"""The stream generator by intent (seeds/002 §5): every knob does what it says, reproducibly."""

from __future__ import annotations

import itertools
import random

import pytest

from udm.host.temporal.elements import Cti, Insert, Retract, sync_time
from udm.host.testing import CHT, StreamSpec, apply_stream, cht, generate, logical_events, physical_variants
from udm.sdk import INF


def _data(stream: list) -> list:
    return [e for e in stream if not isinstance(e, Cti)]


def _inversions(stream: list) -> int:
    syncs = [sync_time(e) for e in _data(stream)]
    return sum(1 for a, b in itertools.combinations(syncs, 2) if a > b)


def _valid(stream: list) -> bool:
    return not apply_stream(stream).rejected


def test_same_seed_same_stream_different_seed_different_stream() -> None:
    kw = dict(events=30, disorder="out_of_order", speculation=0.5, chain=3, duplicates=0.2, groups=3)
    assert generate(seed=5, **kw) == generate(seed=5, **kw)
    assert generate(seed=5, **kw) != generate(seed=6, **kw)
    spec = StreamSpec(**kw)
    assert generate(spec, seed=5) == generate(seed=5, **kw)
    assert generate(spec, seed=5, groups=1) == generate(seed=5, **{**kw, "groups": 1})


def test_spec_rejects_unknown_knobs_and_bad_values() -> None:
    with pytest.raises(ValueError):
        StreamSpec(disorder="chaotic")
    with pytest.raises(ValueError):
        StreamSpec(colour="red")


@pytest.mark.parametrize("seed", range(5))
def test_every_generated_stream_is_valid_and_its_cht_is_the_logical_stream(seed: int) -> None:
    spec = StreamSpec(events=25, disorder="highly", speculation=0.8, chain=3, duration="mixed",
                      cti="eager", duplicates=0.3, groups=2)
    stream = generate(spec, seed=seed)
    assert _valid(stream), apply_stream(stream).rejected
    assert cht(stream) == CHT.from_events(logical_events(spec, random.Random(seed)))
    assert isinstance(stream[-1], Cti) and stream[-1].t == INF


def test_durations() -> None:
    def lifetimes(**kw: object) -> list[int]:
        kw.setdefault("events", 40)
        return [re - le for le, re, _ in cht(generate(seed=1, **kw)).events()]

    assert set(lifetimes(duration="point")) == {1}
    assert all(1 <= d <= 5 for d in lifetimes(duration="short"))
    assert all(6 <= d <= 40 for d in lifetimes(duration="long"))
    assert all(le_re[1] == INF for le_re in cht(generate(seed=1, events=10, duration="infinite")).events())
    mixed = lifetimes(duration="mixed", events=200)
    assert 1 in mixed and any(d > 5 for d in mixed)


def _overlapping_pairs(stream: list) -> int:
    evs = cht(stream).events()
    return sum(1 for a, b in itertools.combinations(evs, 2) if a[0] < b[1] and b[0] < a[1])


def test_overlap_levels_order_the_amount_of_overlap() -> None:
    hi, med, lo = (sum(_overlapping_pairs(generate(seed=s, events=30, duration="short", overlap=o))
                       for s in range(5)) for o in ("high", "medium", "low"))
    assert hi > med > lo


def test_boundary_patterns() -> None:
    non = cht(generate(seed=2, events=20, pattern="non_overlapping")).events()
    assert _overlapping_pairs(generate(seed=2, events=20, pattern="non_overlapping")) == 0
    assert all(a[1] < b[0] for a, b in itertools.pairwise(non))
    b2b = cht(generate(seed=2, events=20, pattern="back_to_back")).events()
    assert all(a[1] == b[0] for a, b in itertools.pairwise(b2b))
    dense = cht(generate(seed=2, events=30, pattern="highly_overlapping")).events()
    les = [e[0] for e in dense]
    assert max(b - a for a, b in itertools.pairwise(les)) <= max(1, max(e[1] for e in dense if e[1] < INF))
    ends = {e[1] for e in dense} | {e[0] for e in dense}
    close = sum(1 for e in dense if any(abs(e[0] - x) <= 1 and x != e[0] for x in ends))
    assert close >= len(dense) // 2  # endpoints within one tick of each other
    dup = cht(generate(seed=2, events=10, pattern="duplicates"))
    assert all(n >= 2 for n in dup.values())


def test_duplicates_knob() -> None:
    c = cht(generate(seed=3, events=50, duplicates=1.0))
    assert all(n >= 2 for n in c.values())
    assert all(n == 1 for n in cht(generate(seed=3, events=50, overlap="low")).values())


def test_disorder_levels() -> None:
    inv = {d: sum(_inversions(generate(seed=s, events=40, disorder=d, cti="none")) for s in range(4))
           for d in ("in_order", "slightly", "out_of_order", "highly")}
    assert inv["in_order"] == 0
    assert 0 < inv["slightly"] < inv["out_of_order"] < inv["highly"]


def test_cti_eagerness_and_ctis_stay_valid() -> None:
    counts = {c: sum(isinstance(e, Cti) for e in generate(seed=4, events=60, cti=c, disorder="slightly"))
              for c in ("none", "lazy", "regular", "eager")}
    assert counts["none"] == 1  # only the final cti(inf)
    assert counts["none"] < counts["lazy"] < counts["regular"] < counts["eager"]
    s = generate(seed=4, events=60, cti="eager", disorder="out_of_order", speculation=0.5)
    ctis = [e.t for e in s if isinstance(e, Cti)]
    assert ctis == sorted(ctis) and _valid(s)
    assert all(e.t < INF for e in generate(seed=4, events=5, final_cti=False) if isinstance(e, Cti))


@pytest.mark.parametrize("kind", ["shorten", "extend", "delete", "open_ended"])
def test_speculation_kinds(kind: str) -> None:
    s = generate(seed=6, events=30, speculation=1.0, speculation_kinds=(kind,), chain=3, duration="long")
    assert _valid(s)
    retracts = [e for e in s if isinstance(e, Retract)]
    assert retracts
    if kind == "shorten":
        assert all(r.re_new < r.re for r in retracts)
    elif kind == "extend":
        assert all(r.re_new > r.re for r in retracts)
    elif kind == "delete":
        assert any(r.re_new == r.le for r in retracts)
        deleted = {r.id for r in retracts if r.re_new == r.le}
        assert all(i.id not in deleted for i in s if isinstance(i, Insert) and i.id.startswith("e") and
                   not i.id.startswith("ep"))
    else:
        opened = {i.id for i in s if isinstance(i, Insert) and i.re == INF}
        assert opened and all(r.re == INF and r.re_new < INF for r in retracts if r.id in opened)
    assert cht(s) == cht(generate(seed=6, events=30, duration="long"))  # same logical stream


def test_retraction_chains_are_longer_with_chain() -> None:
    def longest(chain: int) -> int:
        s = generate(seed=7, events=40, speculation=1.0, speculation_kinds=("shorten",), chain=chain,
                     duration="long")
        per_id: dict[str, int] = {}
        for r in s:
            if isinstance(r, Retract):
                per_id[r.id] = per_id.get(r.id, 0) + 1
        return max(per_id.values())

    assert longest(1) == 1 and longest(4) > 1


def test_groups_and_types() -> None:
    s = generate(seed=8, events=60, groups=4, types=("A", "B"), values="float")
    payloads = [p for _, _, p in cht(s).events()]
    assert {p["g"] for p in payloads} == {"k0", "k1", "k2", "k3"}
    assert {p["type"] for p in payloads} == {"A", "B"}
    assert all(isinstance(p["v"], float) for p in payloads)


@pytest.mark.parametrize("kind", ["bad_lifetime", "unknown_retract", "mismatched_retract", "duplicate_id",
                                  "cti_violation", "bad_payload"])
def test_bad_elements_are_all_rejected_and_leave_the_cht_alone(kind: str) -> None:
    clean = generate(seed=9, events=20, cti="regular")
    bad = generate(seed=9, events=20, cti="regular", bad=0.3, bad_kinds=(kind,))
    st = apply_stream(bad)
    assert len(bad) > len(clean)
    assert len(st.rejected) == len(bad) - len(clean)
    assert st.cht() == cht(clean)


def test_physical_variants_same_cht_different_histories() -> None:
    base = generate(seed=10, events=25, duration="mixed", groups=2, bad=0.2)
    variants = physical_variants(base, 8, seed=1)
    assert len(variants) == 8
    for v in variants:
        assert _valid(v)
        assert cht(v) == cht(base)
        assert isinstance(v[-1], Cti) and v[-1].t == INF
    assert len({tuple(map(repr, v)) for v in variants}) == 8
    assert any(isinstance(e, Retract) for v in variants for e in v)
    assert any(_inversions(v) > 0 for v in variants)
    assert physical_variants(base, 3, seed=1) == variants[:3]
