"""The exact side of the ``error_bound`` contract check: random data for an approximate aggregate, the
error of its value against the exact answer, and how many misses a declared confidence allows.

The measures are those of `udm.sdk.ErrorBound` (what the manifest promises): relative error of a distinct
count, rank error of a quantile, count error of a frequency (relative to the number of members). Values
are compared as Python compares them (``1 == 1.0``; a string never equals a number), which is how JSON
numbers compare.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["allowed_misses", "estimate_errors", "random_members"]

#: chance that a correct estimator still fails the check (its misses exceed what its confidence allows)
RISK = 1e-6


def allowed_misses(trials: int, confidence: float, risk: float = RISK) -> int:
    """The fewest misses ``m`` such that more than ``m`` of ``trials`` independent estimates outside the
    bound has probability at most ``risk`` when each is inside with probability ``confidence``."""
    p = 1.0 - confidence
    if p <= 0.0:
        return 0
    tail = 1.0  # P(X > m - 1) = P(X >= m)
    for m in range(trials + 1):
        tail -= math.comb(trials, m) * p ** m * (1 - p) ** (trials - m)
        if tail <= risk:
            return m
    return trials


def random_members(estimates: str, kinds: Sequence[str], rng: random.Random, n: int) -> list[Any]:
    """``n`` members for an estimator of ``estimates`` whose declared input admits the JSON ``kinds``
    (`udm.host.input_types`): numbers and/or strings, with as many repeats as distinct values in some
    draws and almost none in others, so the estimator runs in its exact and its estimating regimes."""
    numbers = "number" in kinds or "integer" in kinds
    strings = "string" in kinds
    if not (numbers or strings):
        raise ValueError("the error-bound check draws numbers or strings; the declared input admits neither")
    as_text = strings and (not numbers or rng.random() < 0.5)
    fractional = not as_text and "number" in kinds and rng.random() < 0.5
    universe = max(1, int(n * rng.choice((0.02, 0.3, 1.0, 5.0))))
    if estimates == "frequencies" and rng.random() < 0.5:  # log-uniform ranks: heavy hitters, a long tail
        raw = [int(universe ** rng.random()) for _ in range(n)]
    elif estimates == "frequencies":  # ten hitters among uniform noise: the sketch evicts and re-counts
        raw = [rng.randrange(10) if rng.random() < 0.3 else rng.randrange(universe) for _ in range(n)]
    elif estimates == "quantile" and not as_text and "number" in kinds and rng.random() < 0.5:
        return [round(rng.lognormvariate(0.0, 2.0), 6) for _ in range(n)]
    else:
        raw = [rng.randrange(universe) for _ in range(n)]
    if as_text:  # the empty string is a value too (some sketches skip it)
        return [f"v{r}" if r else "" for r in raw]
    return [r + 0.25 for r in raw] if fractional else raw


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def estimate_errors(estimates: str, value: Any, members: Sequence[Any], ranks: Sequence[float] = ()
                    ) -> tuple[list[float], str | None]:
    """The errors of ``value`` (one per estimate it holds, in the bound's measure) against the exact
    answer over ``members``, and a problem that no confidence excuses (a malformed value, a frequency
    outside its own guaranteed bounds), or None."""
    n = len(members)
    if estimates == "distinct_count":
        if not _is_number(value):
            return [], f"a distinct count must be a number, got {value!r}"
        d = len(set(members))
        return [abs(value - d) / d], None
    if estimates == "quantile":
        values = list(value) if isinstance(value, list) else [value]
        if len(values) != len(ranks):
            return [], f"{len(values)} value(s) for the {len(ranks)} rank(s) of quantile_ranks() {list(ranks)}"
        ordered = sorted(members)
        errs = []
        for q, x in zip(ranks, values, strict=True):
            if not _is_number(x):
                return [], f"a quantile must be a number, got {x!r} for rank {q}"
            lo, hi = bisect_left(ordered, x) / n, bisect_right(ordered, x) / n
            errs.append(max(0.0, lo - q, q - hi))
        return errs, None
    if estimates == "frequencies":
        if not isinstance(value, list):
            return [], f"frequencies must be a list of items, got {value!r}"
        counts = Counter(members)
        worst = 0.0
        for row in value:
            if not (isinstance(row, Mapping) and {"item", "estimate", "lower_bound", "upper_bound"} <= row.keys()):
                return [], f"each frequent item needs item, estimate, lower_bound, upper_bound; got {row!r}"
            f = counts.get(row["item"], 0)
            if not row["lower_bound"] <= f <= row["upper_bound"]:
                return [], (f"item {row['item']!r} occurs {f} times, outside its own bounds "
                            f"[{row['lower_bound']}, {row['upper_bound']}]")
            worst = max(worst, abs(row["estimate"] - f) / n)
        return [worst], None
    return [], f"unknown estimate kind {estimates!r}"
