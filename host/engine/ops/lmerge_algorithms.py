"""The merge cores of ``lmerge`` (SEMANTICS §8, seeds/001 §IV): algorithms R0–R4 on element level.

Each core receives the elements of its input ports (already valid per port) and returns the output
elements they cause; ports, attach/detach and counters are the operator's (`udm.host.engine.ops.lmerge`).
Rows are matched by ``(LE, canonical payload JSON)``, never by id; the core chooses its own output ids.

R0–R2 take insert-only inputs ordered by LE and output an insert at once (it is final): R0 (strictly
increasing LE) keeps only the largest LE seen, R1 (equal LEs in the same order on every input) one counter
per port, R2 (equal LEs in any order, ``(LE, payload)`` a key) the payloads at the largest LE.

R3 (in²t: per ``(LE, payload)`` node the current end on each port) and R4 (in³t: per node and port a
multiset of ends, for duplicates) take any valid input. Their output policy is the "wait until half frozen"
one of seeds/001 §V.A (semantics-notes 22): a node is output only when the port that advances the largest
CTI freezes its LE, as ``[LE, RE)`` when that port already froze the end, else as ``[LE, INF)``; the one
later change is the retraction to the end that port freezes. Each output row thus costs at most one insert
and one retraction, and a phantom (inserted and deleted before any port froze it) is never output, which is
what keeps the chattiness bound (Theorem 1) when every input delivers the stream: inserts + retractions out
<= inserts in, CTIs out <= CTIs in.
"""

from __future__ import annotations

import heapq
from typing import Any

from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.temporal.strict import canonical_json

from ..common import INF, NEG

__all__ = ["ALGORITHMS", "InsertOnlyViolation", "MergeCore", "make_core"]

#: a node's key: (LE, canonical payload JSON)
Key = tuple[int, str]


class InsertOnlyViolation(Exception):
    """A retraction reached an insert-only algorithm (R0–R2): the declared input property was wrong."""


class MergeCore:
    """What every algorithm shares: the largest CTI seen (the output CTI) and output ids."""

    algorithm = ""

    def __init__(self, ports: int) -> None:
        self.ports = ports
        #: the largest CTI over the attached ports (MaxStable): the output CTI
        self.stable = NEG
        self.next_id = 0

    def _new_id(self) -> str:
        self.next_id += 1
        return f"m{self.next_id}"

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        raise NotImplementedError

    def retract(self, port: int, id: str, le: int, re: int, rn: int) -> list[Element]:
        raise InsertOnlyViolation(f"lmerge algorithm {self.algorithm} takes insert-only input")

    def cti(self, port: int, t: int) -> list[Element]:
        """``cti(t)`` of an attached port: the output CTI moves to the largest CTI seen."""
        if t <= self.stable:
            return []
        self.stable = t
        return [Cti(t)]

    def forget_port(self, port: int) -> None:
        """A detached port: what it alone held is dropped."""

    def held(self) -> int:
        """Rows held (for state-size tests and the memory benchmark)."""
        return 0


class R0(MergeCore):
    """Strictly increasing LE, insert-only: one number (the largest LE output) decides."""

    algorithm = "R0"

    def __init__(self, ports: int) -> None:
        super().__init__(ports)
        self.max_le = NEG

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        if le <= self.max_le or le < self.stable:
            return []
        self.max_le = le
        return [Insert(self._new_id(), le, re, payload)]


class R1(MergeCore):
    """Non-decreasing LE, equal LEs in one deterministic order: per port, how many rows at the largest LE."""

    algorithm = "R1"

    def __init__(self, ports: int) -> None:
        super().__init__(ports)
        self.max_le = NEG
        self.same = [0] * ports

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        if le < self.max_le or le < self.stable:
            return []
        if le > self.max_le:
            self.same = [0] * self.ports
            self.max_le = le
        out: list[Element] = []
        if self.same[port] == max(self.same):
            out.append(Insert(self._new_id(), le, re, payload))
        self.same[port] += 1
        return out

    def forget_port(self, port: int) -> None:
        self.same[port] = 0


class R2(MergeCore):
    """Non-decreasing LE, ``(LE, payload)`` a key, equal LEs in any order: the payloads at the largest LE."""

    algorithm = "R2"

    def __init__(self, ports: int) -> None:
        super().__init__(ports)
        self.max_le = NEG
        self.seen: set[str] = set()

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        if le < self.max_le or le < self.stable:
            return []
        if le > self.max_le:
            self.seen = set()
            self.max_le = le
        text = canonical_json(payload)
        if text in self.seen:
            return []
        self.seen.add(text)
        return [Insert(self._new_id(), le, re, payload)]

    def held(self) -> int:
        return len(self.seen)


class _Node:
    """One ``(LE, payload)`` of the in²t/in³t index: the ports' ends, the output rows, the ids naming it."""

    __slots__ = ("ends", "ids", "le", "outs", "payload")

    def __init__(self, le: int, payload: Any) -> None:
        self.le = le
        self.payload = payload
        #: per port: R3 the current end (int), R4 end -> count (dict)
        self.ends: dict[int, Any] = {}
        #: output id -> its current end (INF while the row is half frozen)
        self.outs: dict[str, int] = {}
        #: (port, input id) naming this node, forgotten with it
        self.ids: list[tuple[int, str]] = []

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.le, self.payload, self.ends, self.outs, self.ids)

    def __setstate__(self, s: tuple[Any, ...]) -> None:
        self.le, self.payload, self.ends, self.outs, self.ids = s


class _Indexed(MergeCore):
    """The index R3 and R4 share: nodes by key, a heap of the LEs not yet frozen, the frozen nodes."""

    def __init__(self, ports: int) -> None:
        super().__init__(ports)
        self.nodes: dict[Key, _Node] = {}
        #: (LE, key) of nodes whose LE no CTI has passed yet
        self.fresh: list[Key] = []
        #: keys of nodes with LE < stable (half frozen on the leading port)
        self.frozen: set[Key] = set()
        #: per port: input id -> key (R3) or (key, end) (R4)
        self.ids: list[dict[str, Any]] = [{} for _ in range(ports)]
        #: output elements that consistent inputs never need and the output CTI forbade (counted, not emitted)
        self.inconsistent = 0

    def _node(self, port: int, id: str, le: int, payload: Any) -> tuple[Key, _Node] | None:
        key = (le, canonical_json(payload))
        node = self.nodes.get(key)
        if node is None:
            if le < self.stable:
                return None  # final on the leading port: a lagging port's row, dropped
            node = self.nodes[key] = _Node(le, payload)
            heapq.heappush(self.fresh, key)
        node.ids.append((port, id))
        return key, node

    def _drop(self, key: Key, node: _Node) -> None:
        del self.nodes[key]
        self.frozen.discard(key)
        for port, id in node.ids:
            self.ids[port].pop(id, None)

    def _freeze(self, port: int, node: _Node, t: int, out: list[Element]) -> bool:
        """Make the output rows of ``node`` agree with ``port``, which froze its LE at ``t``; True when the
        node is final (every end ``port`` holds is below ``t``)."""
        raise NotImplementedError

    def cti(self, port: int, t: int) -> list[Element]:
        if t <= self.stable:
            return []
        fresh = self.fresh
        while fresh and fresh[0][0] < t:
            key = heapq.heappop(fresh)
            if key in self.nodes:
                self.frozen.add(key)
        out: list[Element] = []
        done = []
        for key in self.frozen:
            node = self.nodes[key]
            if self._freeze(port, node, t, out):
                done.append(key)
        for key in done:
            self._drop(key, self.nodes[key])
        self.stable = t
        out.append(Cti(t))
        if t >= INF:
            self.nodes = {}
            self.fresh = []
            self.frozen = set()
            self.ids = [{} for _ in range(self.ports)]
        return out

    def _emit_insert(self, node: _Node, re: int, out: list[Element]) -> None:
        if node.le < self.stable:
            self.inconsistent += 1
            return
        oid = self._new_id()
        node.outs[oid] = re
        out.append(Insert(oid, node.le, re, node.payload))

    def _emit_end(self, node: _Node, oid: str, re: int, out: list[Element]) -> None:
        old = node.outs[oid]
        if min(old, re) < self.stable:
            self.inconsistent += 1
            return
        if re <= node.le:
            del node.outs[oid]
        else:
            node.outs[oid] = re
        out.append(Retract(oid, node.le, old, max(re, node.le), node.payload))

    def forget_port(self, port: int) -> None:
        for node in self.nodes.values():
            node.ends.pop(port, None)
        self.ids[port] = {}

    def held(self) -> int:
        return len(self.nodes)


class R3(_Indexed):
    """in²t: ``(LE, payload)`` is a key on every port, so each port holds at most one end per node."""

    algorithm = "R3"

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        found = self._node(port, id, le, payload)
        if found is not None:
            key, node = found
            node.ends[port] = re
            self.ids[port][id] = key
        return []

    def retract(self, port: int, id: str, le: int, re: int, rn: int) -> list[Element]:
        key = self.ids[port].get(id)
        if key is None:
            return []
        node = self.nodes[key]
        if rn <= le:
            node.ends.pop(port, None)
            del self.ids[port][id]
        else:
            node.ends[port] = rn
        return []

    def _freeze(self, port: int, node: _Node, t: int, out: list[Element]) -> bool:
        end = node.ends.get(port)
        if not node.outs:
            if end is None:
                return True  # the leading port froze LE without this row: not in the stream
            self._emit_insert(node, end if end < t else INF, out)
            return end < t
        oid = next(iter(node.outs))
        if end is None:
            if node.le < self.stable:
                return False  # output and frozen earlier, yet unknown to this port: wait for one that knows
            self._emit_end(node, oid, node.le, out)
            return True
        if end < t:
            if node.outs[oid] != end:
                self._emit_end(node, oid, end, out)
            return True
        return False


class R4(_Indexed):
    """in³t: a port may hold several rows with one ``(LE, payload)``: per port a multiset of ends."""

    algorithm = "R4"

    def insert(self, port: int, id: str, le: int, re: int, payload: Any) -> list[Element]:
        found = self._node(port, id, le, payload)
        if found is not None:
            key, node = found
            ends = node.ends.setdefault(port, {})
            ends[re] = ends.get(re, 0) + 1
            self.ids[port][id] = (key, re)
        return []

    def retract(self, port: int, id: str, le: int, re: int, rn: int) -> list[Element]:
        held = self.ids[port].get(id)
        if held is None:
            return []
        key, old = held
        node = self.nodes[key]
        ends = node.ends.get(port)
        if ends is not None and ends.get(old, 0) > 0:
            ends[old] -= 1
            if not ends[old]:
                del ends[old]
            if rn > le:
                ends[rn] = ends.get(rn, 0) + 1
        if rn <= le:
            del self.ids[port][id]
        else:
            self.ids[port][id] = (key, rn)
        return []

    def _freeze(self, port: int, node: _Node, t: int, out: list[Element]) -> bool:
        ends: dict[int, int] = node.ends.get(port) or {}
        if not ends and node.outs and node.le < self.stable:
            return False  # output and frozen earlier, yet unknown to this port: wait for one that knows
        if ends and node.outs and min(ends) >= t and len(node.outs) == sum(ends.values()) \
                and min(node.outs.values()) >= INF:
            return False  # every row still open on the leading port and open in the output: nothing to do
        want: dict[int, int] = {e: c for e, c in ends.items() if e < t}  # frozen ends, matched exactly
        open_rows = sum(c for e, c in ends.items() if e >= t)  # rows still open: one [LE, INF) each
        spare: list[str] = []
        for oid, re in node.outs.items():
            if re < INF and want.get(re, 0) > 0:
                want[re] -= 1
            else:
                spare.append(oid)
        spare.sort(key=lambda o: node.outs[o] < INF)  # open rows first: they may take any end
        for e, c in sorted(want.items()):
            for _ in range(c):
                if spare:
                    self._emit_end(node, spare.pop(0), e, out)
                else:
                    self._emit_insert(node, e, out)
        opened = [o for o in spare if node.outs.get(o) == INF]
        wrong = [o for o in spare if node.outs.get(o, INF) < INF]
        for oid in wrong:  # a frozen output row no port end supports (inconsistent inputs)
            if open_rows > len(opened):
                self._emit_end(node, oid, INF, out)
                opened.append(oid)
            else:
                self._emit_end(node, oid, node.le, out)
        while len(opened) > open_rows:
            self._emit_end(node, opened.pop(), node.le, out)
        for _ in range(open_rows - len(opened)):
            self._emit_insert(node, INF, out)
        return open_rows == 0


ALGORITHMS: dict[str, type[MergeCore]] = {"R0": R0, "R1": R1, "R2": R2, "R3": R3, "R4": R4}


def make_core(algorithm: str, ports: int) -> MergeCore:
    """The core of a concrete algorithm (``auto`` is resolved when the query is bound)."""
    return ALGORITHMS[algorithm](ports)
