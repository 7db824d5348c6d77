"""Stream generation by intent (seeds/002 §5): declarative, seeded, reproducible physical streams.

A `StreamSpec` states *what* a test needs (event durations, overlap, typical and boundary temporal
patterns, disorder, CTI eagerness, duplicates, speculation, group keys, bad elements); `generate` turns
it into a concrete physical stream with the same seed always giving the same stream. The generator
first draws the *logical* stream (the CHT), then a physical history for it: which events are
speculated (inserted with another lifetime, then corrected by a retraction chain: shorten, extend, full
deletion of a phantom, open-ended then closed), in which order the elements arrive, and where CTIs go.
CTIs are always valid: each is the smallest sync time of everything after it. Bad elements (added on
demand) are all invalid, so they never change the CHT. `physical_variants` draws more physical
histories of the same logical stream.

    >>> from udm.host.testing import generate, cht
    >>> s = generate(seed=7, events=10, disorder="out_of_order", speculation=0.5)
    >>> cht(s) == cht(generate(seed=7, events=10, disorder="out_of_order", speculation=0.5))
    True
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from udm.host.temporal.elements import Cti, Element, Insert, Retract, canonical_json, sync_time
from udm.sdk import INF

from .cht import apply_stream

__all__ = [
    "BAD_KINDS",
    "SPECULATION_KINDS",
    "StreamSpec",
    "generate",
    "generate_related",
    "interleave",
    "lmerge_inputs",
    "logical_events",
    "physical_variants",
    "physicalize",
]

Duration = Literal["point", "short", "long", "infinite", "mixed"]
Overlap = Literal["high", "medium", "low"]
Pattern = Literal["random", "non_overlapping", "highly_overlapping", "back_to_back", "duplicates"]
Disorder = Literal["in_order", "slightly", "out_of_order", "highly"]
CtiEagerness = Literal["none", "lazy", "regular", "eager"]
SpeculationKind = Literal["shorten", "extend", "delete", "open_ended"]
BadKind = Literal["bad_lifetime", "unknown_retract", "mismatched_retract", "duplicate_id", "cti_violation",
                  "bad_payload"]

SPECULATION_KINDS: tuple[SpeculationKind, ...] = ("shorten", "extend", "delete", "open_ended")
BAD_KINDS: tuple[BadKind, ...] = ("bad_lifetime", "unknown_retract", "mismatched_retract", "duplicate_id",
                                  "cti_violation", "bad_payload")

_CTI_RATE = {"none": 0.0, "lazy": 0.08, "regular": 0.3, "eager": 1.0}


class StreamSpec(BaseModel):
    """The intent knobs of a generated stream (seeds/002 §5). Every knob has a sensible default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    events: int = Field(20, ge=0, description="number of logical events (before duplicates)")
    duration: Duration = Field("short", description="point: RE=LE+1; short: 1..short_max; long: "
                               "short_max+1..long_max; infinite: RE=INF; mixed: any of them")
    short_max: int = Field(5, ge=1)
    long_max: int = Field(40, ge=2)
    overlap: Overlap = Field("medium", description="spacing of start times against durations")
    pattern: Pattern = Field("random", description="typical and boundary temporal cases of seeds/002 §5.1")
    disorder: Disorder = Field("in_order", description="how far elements arrive out of sync-time order")
    cti: CtiEagerness = Field("regular", description="how eagerly CTIs are issued")
    final_cti: bool = Field(True, description="end the stream with cti(INF)")
    duplicates: float = Field(0.0, ge=0, le=1, description="fraction of events that get an identical twin")
    speculation: float = Field(0.0, ge=0, le=1, description="fraction of events with a retraction history")
    speculation_kinds: tuple[SpeculationKind, ...] = SPECULATION_KINDS
    chain: int = Field(1, ge=1, description="longest retraction chain of one speculated event")
    groups: int = Field(1, ge=1, description="number of distinct group keys")
    group_field: str = "g"
    value_field: str = "v"
    values: Literal["int", "float"] = "int"
    value_range: tuple[float, float] = (0, 100)
    types: tuple[str, ...] = Field((), description="when set, payloads get `type_field` drawn from these")
    type_field: str = "type"
    bad: float = Field(0.0, ge=0, le=1, description="bad elements added, as a fraction of the events")
    bad_kinds: tuple[BadKind, ...] = BAD_KINDS
    start: int = 0


# ---------------------------------------------------------------------------------------------------
# logical stream


def _mean_duration(spec: StreamSpec) -> int:
    return {"point": 1, "short": (1 + spec.short_max) // 2 + 1, "long": (spec.short_max + spec.long_max) // 2,
            "infinite": spec.short_max, "mixed": spec.short_max}[spec.duration]


def _duration(spec: StreamSpec, rng: random.Random, finite: bool) -> int:
    kind = spec.duration
    if kind == "mixed":
        kinds: list[Duration] = ["point", "short", "short", "long"]
        kind = rng.choice(kinds + ([] if finite else ["infinite"]))
    if kind == "infinite" and finite:
        kind = "short"
    if kind == "point":
        return 1
    if kind == "short":
        return rng.randint(1, spec.short_max)
    if kind == "long":
        return rng.randint(spec.short_max + 1, max(spec.short_max + 1, spec.long_max))
    return INF


def _gap(spec: StreamSpec, rng: random.Random) -> int:
    d = _mean_duration(spec)
    if spec.overlap == "high":
        return rng.randint(0, max(1, d // 4))
    if spec.overlap == "medium":
        return rng.randint(max(1, d // 4), max(1, d))
    return rng.randint(max(1, d), max(2, 2 * d))


def _payload(spec: StreamSpec, rng: random.Random) -> dict[str, Any]:
    lo, hi = spec.value_range
    value: Any = rng.randint(int(lo), int(hi)) if spec.values == "int" else rng.uniform(lo, hi)
    p: dict[str, Any] = {spec.group_field: f"k{rng.randrange(spec.groups)}", spec.value_field: value}
    if spec.types:
        p[spec.type_field] = rng.choice(spec.types)
    return p


def _end(le: int, dur: int) -> int:
    return INF if dur >= INF else le + dur


def logical_events(spec: StreamSpec, rng: random.Random) -> list[tuple[int, int, dict[str, Any]]]:
    """The logical stream (the CHT, as ``(le, re, payload)``) a spec asks for."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    le = spec.start
    prev_re = spec.start
    for i in range(spec.events):
        if spec.pattern in ("non_overlapping", "back_to_back"):
            dur = _duration(spec, rng, finite=True)
            if i:
                le = prev_re + (rng.randint(1, 3) if spec.pattern == "non_overlapping" else 0)
            re = le + dur
        elif spec.pattern == "highly_overlapping":
            if i:
                r = rng.random()
                if r < 0.3 and prev_re < INF and prev_re - 1 > le:
                    le = prev_re - 1  # ei.LE = ej.RE - 1
                elif r < 0.6:
                    le = le + 1
                # else: same LE as the previous event
            if prev_re < INF and prev_re > le and rng.random() < 0.5:
                re = prev_re + rng.choice((-1, 0, 1))
                re = max(re, le + 1)
            else:
                re = _end(le, _duration(spec, rng, finite=False))
        else:
            if i:
                le += _gap(spec, rng)
            re = _end(le, _duration(spec, rng, finite=False))
        payload = _payload(spec, rng)
        copies = 1
        if spec.pattern == "duplicates":
            copies += rng.randint(1, 2)
        if spec.duplicates and rng.random() < spec.duplicates:
            copies += 1
        out.extend((le, re, dict(payload)) for _ in range(copies))
        prev_re = re
    return out


# ---------------------------------------------------------------------------------------------------
# physical history


@dataclass
class _Piece:
    el: Element
    key: float
    group: int  # elements of one group keep their relative order (insert, then its retraction chain)
    pos: int


def _chain_ends(kind: SpeculationKind, le: int, re: int, rng: random.Random, chain: int, spec_long: int
                ) -> list[int] | None:
    """The successive right ends (first = inserted, last = final RE) of a speculated event."""
    steps = rng.randint(1, chain)
    if kind == "shorten":
        if re >= INF:
            return None
        top = INF if rng.random() < 0.2 else re + rng.randint(1, spec_long)
        mids = sorted({rng.randint(re + 1, max(re + 1, (top if top < INF else re + spec_long)))
                       for _ in range(steps - 1)}, reverse=True)
        ends = [top, *[m for m in mids if m < top]]
    elif kind == "extend":
        if re - le < 2 and re < INF:
            return None
        cap = re if re < INF else le + spec_long + 2
        ends = sorted({rng.randint(le + 1, cap - 1) for _ in range(steps)})
    elif kind == "open_ended":
        if re >= INF:
            return None
        ends = [INF]
    else:
        return None
    ends = [e for i, e in enumerate(ends) if i == 0 or e != ends[i - 1]]
    if ends[-1] == re:
        ends.pop()
    return [*ends, re] if ends else None


def physicalize(events: Sequence[tuple[int, int, dict[str, Any]]], rng: random.Random, *,
                disorder: Disorder = "in_order", speculation: float = 0.0,
                speculation_kinds: Sequence[SpeculationKind] = SPECULATION_KINDS, chain: int = 1,
                cti: CtiEagerness = "regular", final_cti: bool = True, id_prefix: str = "e",
                spec_long: int = 10, phantom_payload: Any = None) -> list[Element]:
    """One physical stream whose CHT is exactly ``events`` (a multiset of ``(le, re, payload)``)."""
    groups: list[list[Element]] = []
    n_phantom = 0
    for i, (le, re, payload) in enumerate(events):
        eid = f"{id_prefix}{i}"
        kinds = list(speculation_kinds)
        ends = None
        if kinds and speculation and rng.random() < speculation:
            rng.shuffle(kinds)
            for kind in kinds:
                if kind == "delete":
                    # a phantom that is inserted, then fully retracted (possibly after being changed)
                    ple = le + rng.randint(0, 3)
                    pre = ple + rng.randint(1, spec_long)
                    pp = dict(phantom_payload if phantom_payload is not None else payload)
                    pid = f"{id_prefix}p{n_phantom}"
                    n_phantom += 1
                    ph: list[Element] = [Insert(pid, ple, pre, pp)]
                    if chain > 1 and rng.random() < 0.5:
                        new = pre + rng.randint(1, 3)
                        ph.append(Retract(pid, ple, pre, new))
                        pre = new
                    ph.append(Retract(pid, ple, pre, ple))
                    groups.append(ph)
                    break
                ends = _chain_ends(kind, le, re, rng, chain, spec_long)
                if ends:
                    break
        if ends:
            g: list[Element] = [Insert(eid, le, ends[0], dict(payload))]
            for a, b in itertools.pairwise(ends):
                g.append(Retract(eid, le, a, b))
            groups.append(g)
        else:
            groups.append([Insert(eid, le, re, dict(payload))])

    finite = [sync_time(el) for g in groups for el in g]
    span = (max(finite) - min(finite) + 1) if finite else 1
    mean_gap = max(1.0, span / max(1, len(events)))
    spread = {"in_order": 0.0, "slightly": 2 * mean_gap, "out_of_order": 8 * mean_gap, "highly": float(span)}
    pieces: list[_Piece] = []
    for gi, g in enumerate(groups):
        key = -float("inf")
        for pos, el in enumerate(g):
            base = float(sync_time(el))
            if disorder == "highly":
                k = float(min(finite)) + rng.random() * span
            else:
                k = base + rng.random() * spread[disorder]
            key = max(key, k)  # keep the chain's own order
            pieces.append(_Piece(el, key, gi, pos))
    if disorder == "in_order":
        pieces.sort(key=lambda p: (p.key, p.group, p.pos))
    else:
        tie = [rng.random() for _ in groups]
        pieces.sort(key=lambda p: (p.key, tie[p.group], p.pos))
    data = [p.el for p in pieces]

    out: list[Element] = []
    rate = _CTI_RATE[cti]
    suffix_min = [INF] * (len(data) + 1)
    for i in range(len(data) - 1, -1, -1):
        suffix_min[i] = min(suffix_min[i + 1], sync_time(data[i]))
    last_cti: int | None = None
    for i, el in enumerate(data):
        out.append(el)
        if rate and rng.random() < rate:
            t = suffix_min[i + 1]
            if t >= INF:
                continue  # the final CTI, if any, comes last
            if last_cti is None or t > last_cti:
                out.append(Cti(t))
                last_cti = t
    if final_cti:
        out.append(Cti(INF))
    return out


def _add_bad(stream: list[Element], count: int, kinds: Sequence[BadKind], rng: random.Random,
             spec: StreamSpec) -> list[Element]:
    out = list(stream)
    for j in range(count):
        kind = rng.choice(list(kinds))
        xid = f"x{j}"
        inserts = [i for i, el in enumerate(out) if isinstance(el, Insert) and not el.id.startswith("x")]
        ctis = [i for i, el in enumerate(out) if isinstance(el, Cti) and 0 < el.t < INF]
        if kind in ("mismatched_retract", "duplicate_id") and not inserts:
            kind = "bad_lifetime"
        if kind == "cti_violation" and not ctis:
            kind = "unknown_retract"
        pos = rng.randint(0, len(out))
        if kind == "bad_lifetime":
            le = spec.start + rng.randint(0, 20)
            out.insert(pos, Insert(xid, le, le - rng.randint(0, 2), _payload(spec, rng)))
        elif kind == "unknown_retract":
            le = spec.start + rng.randint(0, 20)
            out.insert(pos, Retract(f"{xid}-unknown", le, le + 3, le + 1))
        elif kind == "bad_payload":
            le = spec.start + rng.randint(0, 20)
            bad_payload: Any = ["not", "an", "object"]
            out.insert(pos, Insert(xid, le, le + 1, bad_payload))
        elif kind == "mismatched_retract":
            i = rng.choice(inserts)
            ins = out[i]
            assert isinstance(ins, Insert)
            wrong_re = ins.re + 7 if ins.re < INF else ins.le + 7
            out.insert(i + 1, Retract(ins.id, ins.le, wrong_re, ins.le))
        elif kind == "duplicate_id":
            i = rng.choice(inserts)
            ins = out[i]
            assert isinstance(ins, Insert)
            out.insert(i + 1, Insert(ins.id, ins.le, ins.le + 1, dict(ins.payload)))
        else:  # cti_violation: an insert starting before a CTI that precedes it
            i = rng.choice(ctis)
            c = out[i]
            assert isinstance(c, Cti)
            le = c.t - rng.randint(1, 3)
            out.insert(i + 1, Insert(xid, le, c.t + rng.randint(1, 5), _payload(spec, rng)))
    return out


def _spec(spec: StreamSpec | None, knobs: dict[str, Any]) -> StreamSpec:
    if spec is None:
        return StreamSpec(**knobs)
    if knobs:
        return StreamSpec.model_validate({**spec.model_dump(), **knobs})
    return spec


def generate(spec: StreamSpec | None = None, *, seed: int, **knobs: Any) -> list[Element]:
    """A physical stream per ``spec`` (or keyword knobs, see `StreamSpec`); same seed, same stream."""
    s = _spec(spec, knobs)
    rng = random.Random(seed)
    events = logical_events(s, rng)
    stream = physicalize(events, rng, disorder=s.disorder, speculation=s.speculation,
                         speculation_kinds=s.speculation_kinds, chain=s.chain, cti=s.cti,
                         final_cti=s.final_cti, spec_long=max(s.short_max, 3),
                         phantom_payload=None)
    if s.bad and s.bad_kinds:
        stream = _add_bad(stream, max(1, round(s.bad * max(1, s.events))), s.bad_kinds, rng, s)
    return stream


def physical_variants(elements: Sequence[Element], n: int, *, seed: int,
                      disorders: Sequence[Disorder] = ("in_order", "slightly", "out_of_order", "highly"),
                      speculation: Sequence[float] = (0.0, 0.3, 0.7),
                      speculation_kinds: Sequence[SpeculationKind] = SPECULATION_KINDS,
                      ctis: Sequence[CtiEagerness] = ("none", "lazy", "regular", "eager")) -> list[list[Element]]:
    """``n`` physical streams with the same CHT as ``elements`` (its valid part) but different arrival
    orders, retraction histories and CTIs (all valid). A final ``cti(INF)`` is kept when the input had one.
    """
    events = list(apply_stream(elements).events())
    has_final = any(isinstance(el, Cti) and el.t >= INF for el in elements)
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:variant:{i}")
        out.append(physicalize(events, rng, disorder=rng.choice(list(disorders)),
                               speculation=rng.choice(list(speculation)), speculation_kinds=speculation_kinds,
                               chain=rng.randint(1, 3), cti=rng.choice(list(ctis)), final_cti=has_final,
                               id_prefix=f"v{i}e"))
    return out


#: what the physical variants `lmerge_inputs` makes promise, per LMerge algorithm (seeds/001 §III.C)
LmergeCase = Literal["R0", "R1", "R2", "R3", "R4"]


def lmerge_inputs(elements: Sequence[Element], n: int, *, seed: int, case: LmergeCase = "R4"
                  ) -> dict[str, list[Element]]:
    """``n`` physical variants of ``elements`` as the inputs ``i0 .. i{n-1}`` of an ``lmerge``, shaped to
    meet the assumptions of algorithm ``case`` (R4: anything; R3: ``(LE, payload)`` a key, so the rows are
    made unique and no phantom reuses a live row's ``(LE, payload)``; R2: insert-only, in LE order, ties in
    a different order per variant; R1: ties in one order; R0: strictly increasing LEs). The elements'
    CHT is reshaped accordingly (unique payloads, distinct LEs for R0): compare against `cht` of any input.
    """
    events = list(apply_stream(elements).events())
    has_final = any(isinstance(el, Cti) and el.t >= INF for el in elements)
    if case != "R4":
        events = [(le, re, {**p, "_row": i}) for i, (le, re, p) in enumerate(sorted(
            events, key=lambda e: (e[0], e[1], canonical_json(e[2]))))]
    if case == "R0":
        events = [(le + i, (re + i) if re < INF else INF, p) for i, (le, re, p) in enumerate(events)]
    base = [*(Insert(f"b{i}", le, re, p) for i, (le, re, p) in enumerate(events)), Cti(INF)]
    if not has_final:
        base.pop()
    if case == "R4":
        variants = physical_variants(base, n, seed=seed)
    elif case == "R3":
        variants = physical_variants(base, n, seed=seed, speculation_kinds=("shorten", "extend", "open_ended"))
    else:
        variants = physical_variants(base, n, seed=seed, disorders=("in_order",), speculation=(0.0,))
        if case == "R2":
            variants = [_shuffle_ties(v, random.Random(f"{seed}:ties:{i}")) for i, v in enumerate(variants)]
    return {f"i{i}": v for i, v in enumerate(variants)}


def _shuffle_ties(stream: list[Element], rng: random.Random) -> list[Element]:
    """Reorder each run of inserts with equal LE (CTIs stay where they are: they never split a run of
    equal LEs, being at most the next LE)."""
    out: list[Element] = []
    run: list[Element] = []
    for el in [*stream, None]:
        if isinstance(el, Insert) and run and isinstance(run[0], Insert) and el.le == run[0].le:
            run.append(el)
            continue
        rng.shuffle(run)
        out.extend(run)
        run = [el] if isinstance(el, Insert) else []
        if el is not None and not isinstance(el, Insert):
            out.append(el)
    return out


# ---------------------------------------------------------------------------------------------------
# several related streams (query graphs, SEMANTICS §10)

KeyType = Literal["str", "num", "mixed"]


def _key_value(j: int, key_type: KeyType, rng: random.Random, only: str | None) -> Any:
    if only is not None:
        return f"{only}{j}" if key_type == "str" else 1000 + j + 100 * len(only)
    if key_type == "str":
        return f"k{j}"
    if key_type == "num":
        return j
    # mixed: numbers compare by value across representations (1 == 1.0) but true != 1 (JSON values)
    choices: list[Any] = [j, float(j)]
    if j == 1:
        choices.append(True)
    return rng.choice(choices)


def generate_related(inputs: int | Sequence[str] = 2, *, seed: int, keys: int = 3, only: int = 1,
                     key_field: str = "k", key_type: KeyType = "str", missing_key: float = 0.0,
                     per_input: dict[str, dict[str, Any]] | None = None, **knobs: Any
                     ) -> dict[str, list[Element]]:
    """Related physical streams by input name, for query graphs (joins, unions): each is a `generate`
    stream (same knobs, see `StreamSpec`; ``per_input[name]`` overrides knobs for one input) whose payloads
    carry ``key_field``, drawn from ``keys`` keys shared by every stream plus ``only`` keys of that stream
    alone (so some keys match across streams and some never do). ``key_type``: ``str`` (``"k0"``...),
    ``num`` (``0``, ``1``...) or ``mixed`` (a shared key ``j`` appears as ``j`` or ``j.0``, and key ``1``
    sometimes as ``true``, which equals neither). ``missing_key``: fraction of inserts whose payload lacks
    ``key_field`` (a join dead-letters them and ignores their retractions). ``inputs``: a count (names
    ``a``, ``b``, ``c``...) or the names. Same seed, same streams."""
    names = [chr(ord("a") + i) for i in range(inputs)] if isinstance(inputs, int) else list(inputs)
    out: dict[str, list[Element]] = {}
    for i, name in enumerate(names):
        kn = {**knobs, **((per_input or {}).get(name, {}))}
        kn["groups"] = keys + only
        kn["group_field"] = key_field
        stream = generate(seed=seed * 7919 + i, **kn)
        rng = random.Random(f"{seed}:related:{name}")
        values: dict[str, Any] = {}
        fixed: list[Element] = []
        for el in stream:
            if isinstance(el, Insert) and isinstance(el.payload, dict) and key_field in el.payload:
                g = el.payload[key_field]
                j = int(str(g)[1:]) if isinstance(g, str) and g[:1] == "k" and g[1:].isdigit() else 0
                if key_type == "mixed":
                    v = _key_value(j, key_type, rng, None) if j < keys else _key_value(j, key_type, rng, name)
                else:
                    v = values.get(g)
                    if v is None:
                        v = values[g] = _key_value(j, key_type, rng, None if j < keys else name)
                payload = {**el.payload, key_field: v}
                if missing_key and rng.random() < missing_key:
                    del payload[key_field]
                el = Insert(el.id, el.le, el.re, payload)
            fixed.append(el)
        out[name] = fixed
    return out


def interleave(streams: Mapping[str, Sequence[Element]], order: Sequence[str] | None = None, *,
               how: str = "sync", seed: int = 0) -> list[tuple[str, Element]]:
    """One arrival order of several input streams, as ``(input name, element)`` pairs; each stream keeps its
    own order. ``how``: ``sync`` (merged by each next element's sync time, ties by input order — the
    documented order of INTERFACES §1), ``sequential`` (each input wholly, in order), ``round_robin``, or
    ``random`` (seeded). ``order``: the input order (default: the dict's)."""
    names = list(order) if order is not None else list(streams)
    pos = dict.fromkeys(names, 0)
    out: list[tuple[str, Element]] = []
    rng = random.Random(f"{seed}:interleave")
    if how == "sequential":
        return [(n, el) for n in names for el in streams.get(n, ())]
    turn = 0
    while True:
        ready = [n for n in names if pos[n] < len(streams.get(n, ()))]
        if not ready:
            return out
        if how == "sync":
            def key(n: str) -> tuple[int, int]:
                el = streams[n][pos[n]]
                try:
                    t = sync_time(el)
                except Exception:
                    t = -INF  # a bad element: take it at once
                return (t if isinstance(t, int) else -INF, names.index(n))
            pick = min(ready, key=key)
        elif how == "round_robin":
            pick = ready[turn % len(ready)]
            turn += 1
        elif how == "random":
            pick = rng.choice(ready)
        else:
            raise ValueError(f"interleave: how must be sync, sequential, round_robin or random, got {how!r}")
        out.append((pick, streams[pick][pos[pick]]))
        pos[pick] += 1
