"""The finger B-tree under FiBA (`fiba`): nodes, position-aware aggregates, and how the tree keeps its shape.

A node off both spines keeps the aggregate of its whole subtree; a node on the left spine the aggregate of
everything in the root's leftmost child to its right (its parent's included), the right spine the mirror
image, the root the aggregate between its leftmost and rightmost children (see `fiba` for why, and for the
sources). This module holds what every operation shares: the search that climbs from the nearer finger, the
repair of aggregates after a change (O(log d) nodes), and the splits, merges and rotations that keep nodes
between ``min_arity - 1`` and ``2 * min_arity - 1`` entries (amortized O(1) per insert or evict).
"""

from __future__ import annotations

from bisect import bisect_left
from functools import reduce
from typing import Any

from .protocol import Combine

__all__ = ["NOTHING", "FingerTree", "Node", "fix_kid_flags", "height"]


class _Nothing:
    """The aggregate of no entries (the combine function has no identity to stand for it)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "NOTHING"

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING: Any = _Nothing()


class Node:
    """A B-tree node: ``keys``/``vals`` its entries, ``kids`` ``len(keys) + 1`` children or ``None`` for a leaf."""

    __slots__ = ("agg", "keys", "kids", "lsp", "parent", "rsp", "suf", "vals")

    def __init__(self, kids: list[Node] | None) -> None:
        self.parent: Node | None = None
        self.agg: Any = NOTHING
        self.suf: list[Any] | None = None  # a left-spine leaf's suffix aggregates: agg of vals[i:] + parent
        self.keys: list[int] = []
        self.vals: list[Any] = []
        self.kids = kids
        self.lsp = False  # on the left spine (leftmost child of the root or of a left-spine node)
        self.rsp = False


def fix_kid_flags(node: Node) -> None:
    """Spine flags of ``node``'s children from its own (after its children changed)."""
    kids = node.kids
    assert kids is not None
    for k in kids:
        k.lsp = k.rsp = False
    root = node.parent is None
    kids[0].lsp = root or node.lsp
    kids[-1].rsp = root or node.rsp


def height(node: Node) -> int:
    h = 0
    while node.kids is not None:
        node = node.kids[0]
        h += 1
    return h


class FingerTree:
    """The shape of a finger B-tree and its position-aware aggregates: search from the nearer finger, the
    repair of aggregates after a change, splits, merges and rotations. `FingerBTree` adds the operations."""

    __slots__ = ("_combine", "_lf", "_max_keys", "_min", "_rf", "_root", "_size")

    def __init__(self, combine: Combine, min_arity: int = 4) -> None:
        if min_arity < 2:
            raise ValueError(f"FingerBTree: min_arity must be at least 2, got {min_arity}")
        self._combine = combine
        self._min = min_arity
        self._max_keys = 2 * min_arity - 1
        self._root = Node(None)
        self._lf = self._rf = self._root
        self._size = 0

    def attach(self, combine: Combine) -> None:
        self._combine = combine

    # ---- aggregates -------------------------------------------------------------------------------
    def _recalc(self, node: Node) -> None:
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

    def _repair(self, node: Node, hit_l: bool, hit_r: bool) -> None:
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
    def _search(self, key: int) -> tuple[Node, int, bool]:
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
    def _split(self, left: Node) -> None:
        m = self._min
        parent = left.parent
        assert parent is not None
        right = Node(None if left.kids is None else left.kids[m + 1:])
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

    def _after_insert(self, node: Node) -> None:
        hit_l, hit_r = node.lsp, node.rsp
        while len(node.keys) > self._max_keys:
            if node.parent is None:
                root = Node([node])
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

    def _split_finger(self, rf: Node) -> None:
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

    def _merge(self, parent: Node, b: int) -> Node:
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

    def _move(self, parent: Node, ri: int, gi: int) -> None:
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

    def _rebalance_evict(self, node: Node) -> tuple[Node, bool, bool]:
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
