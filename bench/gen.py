"""Benchmark inputs (INTERFACES §1 JSON Lines), written with plain string formatting for speed.

Both generators write exactly ``n`` elements, a CTI every ``cti_every`` elements, payloads
``{"sym": one of SYMS, "price": 0.0..99.9}``. Every element is valid (nothing is dead-lettered), so the
figures measure the engine, not the error path.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["SYMS", "disordered", "in_order", "join_streams"]

SYMS = ("AAA", "BBB", "CCC", "DDD")


def in_order(path: Path, n: int, *, cti_every: int = 1000, seed: int = 1) -> dict[str, int]:
    """Insert-only, ``le`` non-decreasing (one tick per insert), short lifetimes; CTI(le) every
    ``cti_every`` elements."""
    rng = random.Random(seed)
    lines: list[str] = []
    t = 0
    counts = {"insert": 0, "retract": 0, "cti": 0}
    with open(path, "w", encoding="utf-8") as f:
        for k in range(1, n + 1):
            if k % cti_every == 0:
                lines.append(f'{{"kind":"cti","t":{t}}}')
                counts["cti"] += 1
            else:
                d = 1 + rng.randrange(8)
                sym = SYMS[rng.randrange(4)]
                lines.append(f'{{"kind":"insert","id":"e{k}","le":{t},"re":{t + d},'
                             f'"payload":{{"sym":"{sym}","price":{rng.randrange(1000) / 10}}}}}')
                counts["insert"] += 1
                t += 1
            if len(lines) >= 65536:
                f.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            f.write("\n".join(lines) + "\n")
    return counts


def disordered(path: Path, n: int, *, cti_every: int = 1000, jitter: int = 50, retract_share: float = 0.2,
               seed: int = 2, syms: tuple[str, ...] = SYMS) -> dict[str, int]:
    """Inserts whose ``le`` is off by up to ``jitter`` ticks from arrival order, about ``retract_share`` of
    them later shortened or deleted by a retraction (1–10 elements later); CTIs lag far enough behind
    that no element violates them."""
    rng = random.Random(seed)
    lines: list[str] = []
    pending: list[tuple[int, str]] = []  # (due element index, retraction line)
    base = 0
    lag = 2 * jitter + 20
    counts = {"insert": 0, "retract": 0, "cti": 0}
    k = 0
    with open(path, "w", encoding="utf-8") as f:
        while k < n:
            k += 1
            if k % cti_every == 0:
                lines.append(f'{{"kind":"cti","t":{max(0, base - lag)}}}')
                counts["cti"] += 1
            elif pending and pending[0][0] <= k:
                lines.append(pending.pop(0)[1])
                counts["retract"] += 1
            else:
                le = max(0, base + rng.randint(-jitter, jitter))
                d = 1 + rng.randrange(20)
                sym = syms[rng.randrange(len(syms))]
                lines.append(f'{{"kind":"insert","id":"e{k}","le":{le},"re":{le + d},'
                             f'"payload":{{"sym":"{sym}","price":{rng.randrange(1000) / 10}}}}}')
                counts["insert"] += 1
                base += 1
                if rng.random() < retract_share:
                    re_new = le + rng.randrange(d)  # == le deletes the event
                    pending.append((k + 1 + rng.randrange(10),
                                    f'{{"kind":"retract","id":"e{k}","le":{le},"re":{le + d},"re_new":{re_new}}}'))
                    pending.sort()
            if len(lines) >= 65536:
                f.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            f.write("\n".join(lines) + "\n")
    return counts



def join_streams(left: Path, right: Path, n: int, *, keys: int = 10_000, cti_every: int = 1000, jitter: int = 20,
                 per_tick: int = 4, max_dur: int = 50, retract_share: float = 0.05, seed: int = 3,
                 skew: float = 3.0) -> dict[str, dict[str, int]]:
    """Two streams for a join on ``k`` (``n`` elements in all, half each): inserts ``{"k": key, "v"|"q": ...}``
    with keys skewed towards 0 (``int(keys * u**skew)``; ``skew=1``: uniform), lifetimes of 1..``max_dur``
    ticks, ``le`` off by up to ``jitter`` ticks from arrival order (time advances one tick every ``per_tick``
    inserts on each side, so both cover the same span), about ``retract_share`` of them later shortened or
    deleted (1–10 elements later); a CTI every ``cti_every`` elements of each input, far enough behind that
    nothing violates it."""
    rng = random.Random(seed)
    lag = 2 * jitter + 20
    counts: dict[str, dict[str, int]] = {}
    for side, path, field, m in (("left", left, "v", n - n // 2), ("right", right, "q", n // 2)):
        lines: list[str] = []
        pending: list[tuple[int, str]] = []  # (due element index, retraction line)
        c = counts[side] = {"insert": 0, "retract": 0, "cti": 0}
        inserts = 0
        with open(path, "w", encoding="utf-8") as f:
            for k in range(1, m + 1):
                base = inserts // per_tick
                if k % cti_every == 0:
                    lines.append(f'{{"kind":"cti","t":{max(0, base - lag)}}}')
                    c["cti"] += 1
                elif pending and pending[0][0] <= k:
                    lines.append(pending.pop(0)[1])
                    c["retract"] += 1
                else:
                    le = max(0, base + rng.randint(-jitter, jitter))
                    d = 1 + rng.randrange(max_dur)
                    key = int(keys * rng.random() ** skew)
                    val = rng.randrange(1000) / 10 if field == "v" else rng.randrange(100)
                    lines.append(f'{{"kind":"insert","id":"{side[0]}{k}","le":{le},"re":{le + d},'
                                 f'"payload":{{"k":{key},"{field}":{val}}}}}')
                    c["insert"] += 1
                    inserts += 1
                    if rng.random() < retract_share:
                        re_new = le + rng.randrange(d)  # == le deletes the event
                        pending.append((k + 1 + rng.randrange(10),
                                        f'{{"kind":"retract","id":"{side[0]}{k}","le":{le},"re":{le + d},'
                                        f'"re_new":{re_new}}}'))
                        pending.sort()
                if len(lines) >= 65536:
                    f.write("\n".join(lines) + "\n")
                    lines.clear()
            if lines:
                f.write("\n".join(lines) + "\n")
    return counts
