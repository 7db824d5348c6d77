"""Input–output compatibility of a logical merge, seeds/001 §III.D conditions C1–C3, checked from the
definitions (it imports nothing from the engine).

At one instant the inputs have delivered prefixes ``I_1[k_1] .. I_n[k_n]`` (TDB_m, latest CTI L_m) and the
merge has emitted ``O[j]`` (TDB_O, latest CTI L). Relative to a CTI ``c`` an event ``(p, Vs, Ve)`` is *half
frozen* (HF) when ``Vs < c <= Ve``, *fully frozen* (FF) when ``Ve < c``, else unfrozen (UF):

- C1: ``L <= max L_m``;
- C2: TDB_O has at most one event per ``(p, Vs)`` (``(LE, payload)`` a key, the R3 case); an HF output event
  needs an input holding ``(p, Vs, Vm)`` that is HF with ``L_m <= L`` or FF with ``L <= Vm``; an FF output
  event needs an input holding exactly it, FF;
- C3: if some input holds ``(p, Vs, Ve)`` FF, TDB_O must still be able to get it: ``L <= Vs``, or
  ``Vs < L <= Ve`` and TDB_O has ``(p, Vs, _)`` HF, or ``Ve < L`` and TDB_O holds exactly it; else, if some
  inputs hold ``(p, Vs, _)`` HF (the one with the largest L_m: ``L_m*``), ``L <= Vs`` or ``Vs < L <= L_m*``
  and TDB_O has ``(p, Vs, _)`` HF.

With duplicates (R4) the paper states the condition only for ``L`` tracking the largest ``L_m``: per
``(p, Vs)`` with ``Vs < L``, TDB_O holds the same FF events as each input at ``L_m = L`` and as many HF
ones; `compatibility_problems` checks that form when ``duplicates=True``.

`trace_problems` applies the check after every input element of a traced run (`runner_engine`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from udm.host.temporal.elements import Cti, Element
from udm.sdk import INF

from .cht import apply_stream

__all__ = ["compatibility_problems", "trace_problems"]

NEG = -(2**63)
Row = tuple[int, int, str]


def _tdb(stream: Sequence[Element]) -> tuple[list[Row], int]:
    st = apply_stream(stream)
    rows = [(le, re, text) for le, re, text in st.cht().elements()]
    return rows, st.cti if st.cti is not None else NEG


def _hf(vs: int, ve: int, c: int) -> bool:
    return vs < c <= ve


def _ff(ve: int, c: int) -> bool:
    return ve < c


def _t(t: int) -> str:
    return "inf" if t >= INF else str(t)


def compatibility_problems(inputs: Mapping[str, Sequence[Element]], output: Sequence[Element], *,
                           duplicates: bool = False) -> list[str]:
    """What makes ``output`` (a prefix) incompatible with the input prefixes (empty: compatible)."""
    tdbs = {name: _tdb(s) for name, s in inputs.items()}
    out_rows, L = _tdb(output)
    problems: list[str] = []
    max_lm = max((lm for _, lm in tdbs.values()), default=NEG)
    if max_lm < L:
        problems.append(f"C1: output CTI {_t(L)} exceeds every input's CTI (largest {_t(max_lm)})")
    by_key: dict[tuple[int, str], list[int]] = {}
    for vs, ve, p in out_rows:
        by_key.setdefault((vs, p), []).append(ve)
    if duplicates:
        return problems + _r4(tdbs, by_key, L)
    for (vs, p), ends in by_key.items():
        if len(ends) > 1:
            problems.append(f"C2: {len(ends)} output events for (LE {vs}, {p})")
            continue
        ve = ends[0]
        if _hf(vs, ve, L):
            if not any(ivs == vs and ip == p and ((_hf(ivs, ive, lm) and lm <= L) or (_ff(ive, lm) and ive >= L))
                       for rows, lm in tdbs.values() for ivs, ive, ip in rows):
                problems.append(f"C2: half-frozen output [{vs}, {_t(ve)}) {p} has no input support")
        elif _ff(ve, L) and not any((ivs, ive, ip) == (vs, ve, p) and _ff(ive, lm)
                                    for rows, lm in tdbs.values() for ivs, ive, ip in rows):
            problems.append(f"C2: fully frozen output [{vs}, {_t(ve)}) {p} is fully frozen on no input")
    seen: set[tuple[int, str]] = set()
    for rows, _lm in tdbs.values():
        for vs, _ve, p in rows:
            if (vs, p) in seen:
                continue
            problems += _c3(vs, p, tdbs, by_key.get((vs, p), []), L)
            seen.add((vs, p))
    return problems


def _c3(vs: int, p: str, tdbs: Mapping[str, tuple[list[Row], int]], out_ends: list[int], L: int) -> list[str]:
    if vs >= L:
        return []
    out_hf = any(_hf(vs, e, L) for e in out_ends)
    ff = [ive for rows, lm in tdbs.values() for ivs, ive, ip in rows if ivs == vs and ip == p and _ff(ive, lm)]
    for ve in ff:
        if ve >= L and out_hf:
            continue
        if ve < L and ve in out_ends:
            continue
        return [f"C3: input event [{vs}, {_t(ve)}) {p} is fully frozen but the output (CTI {_t(L)}) can no "
                f"longer match it (output ends: {[_t(e) for e in out_ends]})"]
    if ff:
        return []
    hf_lms = [lm for rows, lm in tdbs.values() for ivs, ive, ip in rows if ivs == vs and ip == p and _hf(ivs, ive, lm)]
    if hf_lms and not (max(hf_lms) >= L and out_hf):
        return [f"C3: input event (LE {vs}, {p}) is half frozen (CTI {_t(max(hf_lms))}) but the output (CTI "
                f"{_t(L)}) has no half-frozen event for it"]
    return []


def _r4(tdbs: Mapping[str, tuple[list[Row], int]], by_key: dict[tuple[int, str], list[int]], L: int) -> list[str]:
    problems: list[str] = []
    for name, (rows, lm) in tdbs.items():
        if lm != L:
            continue
        keys: dict[tuple[int, str], list[int]] = {}
        for vs, ve, p in rows:
            keys.setdefault((vs, p), []).append(ve)
        for key in set(keys) | set(by_key):
            vs, p = key
            if vs >= L:
                continue
            ins, outs = keys.get(key, []), by_key.get(key, [])
            if Counter(e for e in ins if e < L) != Counter(e for e in outs if e < L):
                problems.append(f"R4: (LE {vs}, {p}): fully frozen ends {sorted(e for e in outs if e < L)} out, "
                                f"{sorted(e for e in ins if e < L)} on input {name!r} at the same CTI")
            elif len(ins) != len(outs):
                problems.append(f"R4: (LE {vs}, {p}): {len(outs)} events out, {len(ins)} on input {name!r}")
    return problems


def trace_problems(feed: Sequence[tuple[str, Element]], trace: Sequence[Sequence[Element]], *,
                   names: Sequence[str] | None = None, duplicates: bool = False) -> list[str]:
    """Check compatibility after every input element of a traced run: ``feed`` the ``(input, element)``
    pairs in arrival order, ``trace[i]`` the output emitted while processing ``feed[i]``. Stops at the
    first incompatible instant (or when the output ends: ``cti(INF)``)."""
    prefixes: dict[str, list[Element]] = {n: [] for n in (names or sorted({n for n, _ in feed}))}
    output: list[Any] = []
    for i, ((name, el), emitted) in enumerate(zip(feed, trace, strict=True)):
        prefixes.setdefault(name, []).append(el)
        output.extend(emitted)
        found = compatibility_problems(prefixes, output, duplicates=duplicates)
        if found:
            return [f"after input element {i} ({name}: {el!r}): {p}" for p in found]
        if any(isinstance(o, Cti) and o.t >= INF for o in emitted):
            break
    return []
