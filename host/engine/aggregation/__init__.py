"""Ordered aggregators: partial aggregates under int keys, combined in key order, for window slices.

The window operator keeps one partial per slice (general stream slicing: slices shared by overlapping
windows) and needs the combine of the slices a window covers, at a cost per event that does not grow with
the window. ``combine`` is a UDA's ``merge``: associative but not necessarily commutative, so every
aggregator combines in key order; it never needs an inverse.

- `FingerBTree` (FiBA): any insert, replace or remove at distance ``d`` from either end in O(log d)
  combines, in-order ones and evictions in O(1), ``query`` in 2. For disordered input.
- `TwoStacks`: O(1) amortized for in-order use; out-of-order changes are correct but cost a combine per
  entry they pass.
- `FingerStacks`: two stacks for the entries that arrive in order, a `FingerBTree` for the rest: two-stacks
  costs while the input is in order, FiBA's once it is not. For sweeps whose members may leave out of order.
- `SortedFold`: a sorted dict folded per query; the oracle of the tests and the benchmark's baseline.

All four satisfy `OrderedAggregator`, pickle without their combine function and take it back with
``attach(combine)``.
"""

from __future__ import annotations

from .fiba import NOTHING, FingerBTree
from .finger_stacks import FingerStacks
from .protocol import Combine, CombineNotAttached, OrderedAggregator
from .reference import SortedFold
from .two_stacks import TwoStacks

__all__ = ["NOTHING", "Combine", "CombineNotAttached", "FingerBTree", "FingerStacks", "OrderedAggregator", "SortedFold",
           "TwoStacks"]
