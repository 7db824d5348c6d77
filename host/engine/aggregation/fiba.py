"""FiBA: the finger B-tree aggregator, for partials that arrive and leave out of order.

Sources: K. Tangwongsan, M. Hirzel, S. Schneider, "Optimal and General Out-of-Order Sliding-Window
Aggregation", PVLDB 12(10), 2019 (the finger B-tree with position-aware partial aggregates), and
"Out-of-Order Sliding-Window Aggregation with Efficient Bulk Evictions and Insertions", PVLDB 16(11), 2023;
the layout follows their reference implementation, IBM/sliding-window-aggregators, ``cpp/src/FiBA.hpp``
(``btree::Aggregate`` with ``Kind::finger``), re-written for Python.

Why it is fast:
- **Fingers.** The oldest and youngest leaves are held directly; a search for a key at distance ``d``
  from either end climbs from that finger only until the key is in range, then descends: O(log d) nodes.
- **Position-aware aggregates.** A node off both spines keeps the aggregate of its whole subtree (its
  "up" aggregate). A node on the left spine keeps the aggregate of everything in the root's leftmost child
  *to its right* (its own entries and children but its leftmost child, then its parent's aggregate), the
  right spine the mirror image, and the root the aggregate between its leftmost and rightmost children. So
  ``query()`` is ``left finger + root + right finger`` (two combines), and a change at distance ``d``
  repairs the up aggregates to the first spine node (O(log d) nodes) and the spine below it.
- **Amortized rebalancing.** Nodes hold ``min_arity - 1`` to ``2 * min_arity - 1`` entries (children
  ``min_arity`` to ``2 * min_arity``), so splits and merges are amortized O(1) per insert or evict.

Changes for Python and for the engine's use:
- An entry appended at the youngest end, or combined into the youngest entry, costs one combine
  (``agg := agg + value`` on the right finger, by associativity) unless its leaf splits.
- The combine function has no identity: empty aggregates are the `NOTHING` marker and never reach it.
- `evict_before` drops a prefix of the left finger's entries at once and rebalances once per leaf.
- Removing an entry of an inner node first removes its neighbour in a leaf (rebalancing from there), then
  puts that neighbour in the entry's place, two repairs of O(log d) each.
- Pickling writes the nodes in preorder with their aggregates (no combine on restore), never the combine.

Costs in combines, for ``d`` the number of entries between the key and the nearer end, amortized:
``insert``/``replace``/``remove``/``get`` O(log d) (O(1) at the youngest end), ``evict_before`` O(1) per entry
dropped, ``query`` 2, ``query_range`` O(log d) for a range whose far end is at distance ``d``.
Combine counts, not only times, are asserted by ``tests/test_aggregation_cost.py``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from functools import reduce
from typing import Any, Generic, TypeVar

from .fiba_tree import NOTHING, FingerTree, Node, fix_kid_flags, height
from .protocol import unattached

__all__ = ["NOTHING", "FingerBTree"]

S = TypeVar("S")


class FingerBTree(FingerTree, Generic[S]):
    """`OrderedAggregator` for out-of-order use: O(log d) per change at distance d from an end, O(1) query."""

    __slots__ = ()

    # ---- operations -------------------------------------------------------------------------------
    def insert(self, key: int, value: S) -> None:
        rf = self._rf
        keys = rf.keys
        if keys:
            last = keys[-1]
            if key > last:  # in order: append at the right finger
                keys.append(key)
                rf.vals.append(value)
                self._size += 1
                if len(keys) <= self._max_keys:
                    rf.agg = self._combine(rf.agg, value)
                else:
                    self._split_finger(rf)
                return
            if key == last:  # into the youngest entry: agg + value is the new aggregate
                c = self._combine
                rf.vals[-1] = c(rf.vals[-1], value)
                rf.agg = c(rf.agg, value)
                return
        node, i, found = self._search(key)
        if found:
            node.vals[i] = self._combine(node.vals[i], value)
            self._repair(node, node.lsp, node.rsp)
            return
        node.keys.insert(i, key)
        node.vals.insert(i, value)
        self._size += 1
        self._after_insert(node)

    def replace(self, key: int, value: S) -> None:
        node, i, found = self._search(key)
        if not found:
            node.keys.insert(i, key)
            node.vals.insert(i, value)
            self._size += 1
            self._after_insert(node)
            return
        node.vals[i] = value
        self._repair(node, node.lsp, node.rsp)

    def remove(self, key: int) -> None:
        node, i, found = self._search(key)
        if not found:
            raise KeyError(key)
        self._size -= 1
        if node.kids is None:
            del node.keys[i], node.vals[i]
            self._repair(*self._rebalance_evict(node))
            return
        # an inner entry: take its neighbour out of a leaf, rebalance, then put it in the entry's place
        right = node.kids[i + 1]
        if len(right.keys) >= self._min:
            leaf = right
            while leaf.kids is not None:
                leaf = leaf.kids[0]
            nk, nv = leaf.keys.pop(0), leaf.vals.pop(0)
        else:
            leaf = node.kids[i]
            while leaf.kids is not None:
                leaf = leaf.kids[-1]
            nk, nv = leaf.keys.pop(), leaf.vals.pop()
        self._repair(*self._rebalance_evict(leaf))
        node, i, found = self._search(key)
        assert found
        node.keys[i] = nk
        node.vals[i] = nv
        self._repair(node, node.lsp, node.rsp)

    def evict_before(self, key: int) -> int:
        dropped = 0
        while True:
            lf = self._lf
            keys = lf.keys
            j = bisect_left(keys, key)
            if j == 0:
                return dropped
            if lf.parent is None:  # the root is the only leaf
                del keys[:j], lf.vals[:j]
                self._size -= j
                self._recalc(lf)
                return dropped + j
            # leave the leaf at most one entry short, so one rebalance step per level mends it
            r = min(j, len(keys) - self._min + 2)
            del keys[:r], lf.vals[:r]
            self._size -= r
            dropped += r
            if len(keys) >= self._min - 1:  # no underflow: only the finger's own aggregate changes
                suf = lf.suf
                if suf is not None:
                    del suf[:r]
                    lf.agg = suf[0]
                else:
                    self._recalc(lf)
                if r == j:
                    return dropped
                continue
            self._repair(*self._rebalance_evict(lf))

    def get(self, key: int) -> S | None:
        if not self._size:
            return None
        node, i, found = self._search(key)
        return node.vals[i] if found else None

    def query(self) -> S | None:
        root = self._root
        if root.kids is None:
            agg = root.agg
            return None if agg is NOTHING else agg
        c = self._combine
        return c(c(self._lf.agg, root.agg), self._rf.agg)

    def query_range(self, lo: int, hi: int) -> S | None:
        if lo >= hi or not self._size:
            return None
        a, _, _ = self._search(lo)
        b, _, _ = self._search(hi - 1)
        ha, hb = height(a), height(b)
        while ha < hb:
            assert a.parent is not None
            a, ha = a.parent, ha + 1
        while hb < ha:
            assert b.parent is not None
            b, hb = b.parent, hb + 1
        while a is not b:
            assert a.parent is not None and b.parent is not None
            a, b = a.parent, b.parent
        acc = self._range(a, lo, hi)
        return None if acc is NOTHING else acc

    def _range(self, node: Node, lo: int | None, hi: int | None) -> Any:
        """The combine of ``node``'s subtree entries in [lo, hi) (``None``: unbounded), or `NOTHING`."""
        if lo is None and hi is None and node.parent is not None and not (node.lsp or node.rsp):
            return node.agg
        c = self._combine
        keys, vals, kids = node.keys, node.vals, node.kids
        a = 0 if lo is None else bisect_left(keys, lo)
        b = len(keys) if hi is None else bisect_left(keys, hi)
        if kids is None:
            return reduce(c, vals[a:b]) if a < b else NOTHING
        acc = NOTHING
        for i in range(a, b + 1):
            part = self._range(kids[i], lo if i == a else None, hi if i == b else None)
            if part is not NOTHING:
                acc = part if acc is NOTHING else c(acc, part)
            if i < b:
                acc = vals[i] if acc is NOTHING else c(acc, vals[i])
        return acc

    def __len__(self) -> int:
        return self._size

    def min_key(self) -> int:
        if not self._size:
            raise IndexError("min_key of an empty aggregator")
        return self._lf.keys[0]

    def max_key(self) -> int:
        if not self._size:
            raise IndexError("max_key of an empty aggregator")
        return self._rf.keys[-1]

    def __iter__(self) -> Iterator[tuple[int, S]]:
        stack: list[tuple[Node, int]] = []
        node = self._root
        while True:
            if node.kids is not None:
                stack.append((node, 0))
                node = node.kids[0]
                continue
            yield from zip(node.keys, node.vals, strict=True)
            while stack:
                n, i = stack.pop()
                if i < len(n.keys):
                    yield n.keys[i], n.vals[i]
                    stack.append((n, i + 1))
                    assert n.kids is not None
                    node = n.kids[i + 1]
                    break
            else:
                return

    # ---- pickling ---------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        nodes = []
        stack = [self._root]
        while stack:
            n = stack.pop()
            nodes.append((n.keys, n.vals, n.agg, -1 if n.kids is None else len(n.kids)))
            if n.kids is not None:
                stack.extend(reversed(n.kids))
        return {"min_arity": self._min, "size": self._size, "nodes": nodes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._combine = unattached
        self._min = state["min_arity"]
        self._max_keys = 2 * self._min - 1
        self._size = state["size"]
        stack: list[list[Any]] = []  # [node, children still to attach]
        root: Node | None = None
        for keys, vals, agg, nkids in state["nodes"]:
            n = Node(None if nkids < 0 else [])
            n.keys, n.vals, n.agg = list(keys), list(vals), agg
            if stack:
                top = stack[-1]
                n.parent = top[0]
                top[0].kids.append(n)
                top[1] -= 1
                if not top[1]:
                    stack.pop()
            else:
                root = n
            if nkids > 0:
                stack.append([n, nkids])
        assert root is not None and not stack
        self._root = root
        walk = [root]
        while walk:
            n = walk.pop()
            if n.kids is not None:
                fix_kid_flags(n)
                walk.extend(n.kids)
        lf = rf = root
        while lf.kids is not None:
            lf = lf.kids[0]
        while rf.kids is not None:
            rf = rf.kids[-1]
        self._lf, self._rf = lf, rf
