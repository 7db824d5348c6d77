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

from .protocol import Combine, unattached

__all__ = ["NOTHING", "FingerBTree"]

S = TypeVar("S")


class _Nothing:
    """The aggregate of no entries (the combine function has no identity to stand for it)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "NOTHING"

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Any = _Nothing()


class _Node:
    """A B-tree node: ``keys``/``vals`` its entries, ``kids`` ``len(keys) + 1`` children or ``None`` for a leaf."""

    __slots__ = ("agg", "keys", "kids", "lsp", "parent", "rsp", "suf", "vals")

    def __init__(self, kids: list[_Node] | None) -> None:
        self.parent: _Node | None = None
        self.agg: Any = NOTHING
        self.suf: list[Any] | None = None  # a left-spine leaf's suffix aggregates: agg of vals[i:] + parent
        self.keys: list[int] = []
        self.vals: list[Any] = []
        self.kids = kids
        self.lsp = False  # on the left spine (leftmost child of the root or of a left-spine node)
        self.rsp = False


def _fix_kid_flags(node: _Node) -> None:
    """Spine flags of ``node``'s children from its own (after its children changed)."""
    kids = node.kids
    assert kids is not None
    for k in kids:
        k.lsp = k.rsp = False
    root = node.parent is None
    kids[0].lsp = root or node.lsp
    kids[-1].rsp = root or node.rsp


def _height(node: _Node) -> int:
    h = 0
    while node.kids is not None:
        node = node.kids[0]
        h += 1
    return h


class FingerBTree(Generic[S]):
    """`OrderedAggregator` for out-of-order use: O(log d) per change at distance d from an end, O(1) query."""

    __slots__ = ("_combine", "_lf", "_max_keys", "_min", "_rf", "_root", "_size")

    def __init__(self, combine: Combine, min_arity: int = 4) -> None:
        if min_arity < 2:
            raise ValueError(f"FingerBTree: min_arity must be at least 2, got {min_arity}")
        self._combine = combine
        self._min = min_arity
        self._max_keys = 2 * min_arity - 1
        self._root = _Node(None)
        self._lf = self._rf = self._root
        self._size = 0

    def attach(self, combine: Combine) -> None:
        self._combine = combine

    # ---- aggregates -------------------------------------------------------------------------------
    def _recalc(self, node: _Node) -> None:
        """``node.agg`` from its entries, its children's aggregates and (on a spine) its parent's."""
        c = self._combine
        kids = node.kids
        p = node.parent
        if kids is None:
            vals = node.vals
            if node.lsp and not node.rsp and vals:
                # the left finger keeps every suffix (same combines as one fold): evicting from it is free
                n = len(vals)
                suf = [None] * n
                if p is not None and p.parent is not None:
                    acc = p.agg
                    i = n - 1
                else:
                    acc = suf[n - 1] = vals[n - 1]
                    i = n - 2
                while i >= 0:
                    acc = suf[i] = c(vals[i], acc)
                    i -= 1
                node.suf = suf
                node.agg = acc
                return
            node.suf = None
            acc = reduce(c, vals) if vals else NOTHING
            if p is not None and p.parent is not None and node.rsp and not node.lsp:
                acc = c(p.agg, acc)
            node.agg = acc
            return
        seq: list[Any] = [None] * (2 * len(kids) - 1)
        seq[0::2] = [k.agg for k in kids]
        seq[1::2] = node.vals
        if p is None or (node.lsp and node.rsp):
            node.agg = reduce(c, seq[1:-1]) if len(seq) > 2 else NOTHING
        elif node.lsp:
            acc = reduce(c, seq[1:])
            node.agg = acc if p.parent is None else c(acc, p.agg)
        elif node.rsp:
            acc = reduce(c, seq[:-1])
            node.agg = acc if p.parent is None else c(p.agg, acc)
        else:
            node.agg = reduce(c, seq)

    def _repair(self, node: _Node, hit_l: bool, hit_r: bool) -> None:
        """Recompute ``node``'s aggregate, its ancestors' up to the first spine node or the root, and the
        spine below that node (whose aggregates include their parents'); ``hit_l``/``hit_r`` say a spine
        node was restructured below a root that the climb reaches."""
        rc = self._recalc
        rc(node)
        while node.parent is not None and not (node.lsp or node.rsp):
            node = node.parent
            rc(node)
        root = node.parent is None
        if node.lsp or (hit_l and root):
            n = node
            while n.kids is not None:
                n = n.kids[0]
                rc(n)
        if node.rsp or (hit_r and root):
            n = node
            while n.kids is not None:
                n = n.kids[-1]
                rc(n)

    # ---- search -----------------------------------------------------------------------------------
    def _search(self, key: int) -> tuple[_Node, int, bool]:
        """(node, index, found): the entry at ``key``, or the leaf and position it would go to; climbs from
        the nearer finger."""
        node = self._root
        if node.kids is not None:
            rk = node.keys
            if key < rk[0]:
                node = self._lf
                while node.parent is not None and node.keys[-1] < key:
                    node = node.parent
            elif rk[-1] < key:
                node = self._rf
                while node.parent is not None and key < node.keys[0]:
                    node = node.parent
        while True:
            keys = node.keys
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                return node, i, True
            if node.kids is None:
                return node, i, False
            node = node.kids[i]

    # ---- structure --------------------------------------------------------------------------------
    def _split(self, left: _Node) -> None:
        m = self._min
        parent = left.parent
        assert parent is not None
        right = _Node(None if left.kids is None else left.kids[m + 1:])
        right.keys = left.keys[m + 1:]
        right.vals = left.vals[m + 1:]
        bk, bv = left.keys[m], left.vals[m]
        del left.keys[m:], left.vals[m:]
        if left.kids is not None:
            del left.kids[m + 1:]
            assert right.kids is not None
            for k in right.kids:
                k.parent = right
        pk = parent.kids
        assert pk is not None
        j = pk.index(left)  # nodes compare by identity
        parent.keys.insert(j, bk)
        parent.vals.insert(j, bv)
        pk.insert(j + 1, right)
        right.parent = parent
        if self._rf is left:
            self._rf = right
        # the only spine flag that moves: the right spine passes to the new right half (the children that
        # move keep theirs: the first is a middle child of both nodes, the last keeps its place at the end)
        if left.rsp:
            left.rsp, right.rsp = False, True
        if not (left.lsp or left.rsp):
            self._recalc(left)
        if not (right.lsp or right.rsp):
            self._recalc(right)

    def _after_insert(self, node: _Node) -> None:
        hit_l, hit_r = node.lsp, node.rsp
        while len(node.keys) > self._max_keys:
            if node.parent is None:
                root = _Node([node])
                node.parent = root
                node.lsp = node.rsp = True
                self._root = root
                hit_l = hit_r = True
            self._split(node)
            node = node.parent
            assert node is not None
            hit_l |= node.lsp
            hit_r |= node.rsp
        self._repair(node, hit_l, hit_r)

    def _split_finger(self, rf: _Node) -> None:
        """Split the full right finger after an append. Its parent (root or right spine) excludes its last
        child from its aggregate, so the parent's new aggregate is the old one + left half + separator: two
        combines, not a fold of the parent."""
        parent = rf.parent
        if parent is None or len(parent.keys) >= self._max_keys:
            self._after_insert(rf)
            return
        self._split(rf)
        c = self._combine
        parent.agg = c(c(parent.agg, rf.agg), parent.vals[-1])
        self._recalc(self._rf)

    def _merge(self, parent: _Node, b: int) -> _Node:
        """Merge ``parent``'s children ``b`` and ``b + 1`` with the entry between them into child ``b``."""
        pk = parent.kids
        assert pk is not None
        left, right = pk[b], pk[b + 1]
        left.keys.append(parent.keys[b])
        left.keys.extend(right.keys)
        left.vals.append(parent.vals[b])
        left.vals.extend(right.vals)
        if left.kids is not None:
            assert right.kids is not None
            for k in right.kids:
                k.parent = left
            left.kids.extend(right.kids)
        del parent.keys[b], parent.vals[b], pk[b + 1]
        if self._rf is right:
            self._rf = left
        if right.rsp:  # the right spine passes to the merged node; right's children keep their flags
            left.rsp = True
        if not (left.lsp or left.rsp):
            self._recalc(left)
        return left

    def _move(self, parent: _Node, ri: int, gi: int) -> None:
        """Rotate entries (and children) from child ``gi`` through the parent to its sibling ``ri`` until the
        two hold about as many: one rotation per underflow would borrow again at the next evict."""
        pk = parent.kids
        assert pk is not None
        rec, giv = pk[ri], pk[gi]
        b = min(ri, gi)
        k = max(1, (len(giv.keys) - len(rec.keys)) // 2)
        pkeys, pvals = parent.keys, parent.vals
        if ri < gi:  # the giver's first k entries: k - 1 and the parent's go to the recipient's end
            rec.keys.append(pkeys[b])
            rec.vals.append(pvals[b])
            rec.keys.extend(giv.keys[:k - 1])
            rec.vals.extend(giv.vals[:k - 1])
            pkeys[b], pvals[b] = giv.keys[k - 1], giv.vals[k - 1]
            del giv.keys[:k], giv.vals[:k]
            if giv.kids is not None:
                assert rec.kids is not None
                moved = giv.kids[:k]
                del giv.kids[:k]
                rec.kids.extend(moved)
                for ch in moved:
                    ch.parent = rec
        else:  # the giver's last k entries go to the recipient's front
            rec.keys[:0] = [*giv.keys[len(giv.keys) - k + 1:], pkeys[b]]
            rec.vals[:0] = [*giv.vals[len(giv.vals) - k + 1:], pvals[b]]
            pkeys[b], pvals[b] = giv.keys[-k], giv.vals[-k]
            del giv.keys[-k:], giv.vals[-k:]
            if giv.kids is not None:
                assert rec.kids is not None
                moved = giv.kids[-k:]
                del giv.kids[-k:]
                rec.kids[:0] = moved
                for ch in moved:
                    ch.parent = rec
        # moved children are middle children of both nodes before and after: no spine flag changes
        if not (rec.lsp or rec.rsp):
            self._recalc(rec)
        if not (giv.lsp or giv.rsp):
            self._recalc(giv)

    def _rebalance_evict(self, node: _Node) -> tuple[_Node, bool, bool]:
        """Fix an underflow of ``node`` (at most one entry short) upwards: (top node changed, hit_l, hit_r)."""
        hit_l, hit_r = node.lsp, node.rsp
        min_keys = self._min - 1
        while node.parent is not None and len(node.keys) < min_keys:
            parent = node.parent
            pk = parent.kids
            assert pk is not None
            idx = pk.index(node)
            si = idx - 1 if idx == len(pk) - 1 else idx + 1
            sib = pk[si]
            hit_l |= sib.lsp
            hit_r |= sib.rsp
            if len(sib.keys) <= min_keys:
                merged = self._merge(parent, min(idx, si))
                if parent.parent is None and not parent.keys:
                    merged.parent = None
                    merged.lsp = merged.rsp = False
                    self._root = merged
                    if merged.kids is None:
                        self._lf = self._rf = merged
                    node = merged
                    hit_l = hit_r = True
                    break
                node = parent
            else:
                self._move(parent, idx, si)
                node = parent
            hit_l |= node.lsp
            hit_r |= node.rsp
        return node, hit_l, hit_r

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
        ha, hb = _height(a), _height(b)
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

    def _range(self, node: _Node, lo: int | None, hi: int | None) -> Any:
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
        stack: list[tuple[_Node, int]] = []
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
        root: _Node | None = None
        for keys, vals, agg, nkids in state["nodes"]:
            n = _Node(None if nkids < 0 else [])
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
                _fix_kid_flags(n)
                walk.extend(n.kids)
        lf = rf = root
        while lf.kids is not None:
            lf = lf.kids[0]
        while rf.kids is not None:
            rf = rf.kids[-1]
        self._lf, self._rf = lf, rf
