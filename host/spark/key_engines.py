"""The engines of one streaming key bucket in one call, and its clocks (`udm.host.spark.key_state`'s
module doc says what a key, its due and its hold are).

Apart from `udm.host.spark.key_state.KeyedBucket` (which routes a call's rows to keys and writes the
state back) because this is what one engine over the bucket would be: the bucket's index read (and
refused when of another layout), each key's engine loaded on first use and brought to the bucket's CTI
and T so far, the idle engine fed the CTIs, the end of input, a key's hold. A call sees it all as one
engine would (semantics-notes 41, 52).
"""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from udm.host.engine import QueryRunner
from udm.host.engine.common import INF, NEG, DeadLetter
from udm.host.query.runners import make_runner
from udm.host.spark.key_store import INDEX_VERSION, BucketStore, EngineSlabs, KeyIndex, load_index
from udm.host.temporal.elements import Cti, Element

if TYPE_CHECKING:  # pragma: no cover
    from udm.host.model.plan import BoundQuery

__all__ = ["BucketEngines", "LiveEngine"]


@dataclass
class LiveEngine:
    """A key's engine loaded in this call, with what the bucket keeps beside it."""

    runner: QueryRunner
    serial: int
    out: int = NEG
    #: ids of live events (the id map's entries of this engine's keys, ``track_ids``) and their REs
    ids: dict[str, int] = field(default_factory=dict)
    #: ids this call fed, and the key of each
    touched: dict[str, str] = field(default_factory=dict)
    #: a graph's key: the CTI each input was brought to
    fed: dict[str, int] = field(default_factory=dict)



class BucketEngines:
    """One bucket's engines in one call: its index, the keys' engines it loaded, the idle engine, the output
    and dead letters so far (module doc)."""

    def __init__(self, bound: BoundQuery, on_violation: str | None, graph: bool, store: BucketStore, bucket: int,
                 *, buckets: int = 0, derived_inputs: tuple[str, ...] = ()) -> None:
        """``graph``: a query graph's bucket (semantics-notes 52). ``derived_inputs``: a stage's exchange
        streams (`udm.host.spark.stage_bucket`): they do not move T, which the caller brings in as ``reach``
        rows (semantics-notes 59). Raises ValueError on an index of another layout or bucket count."""
        self.bound = bound
        self.derived_inputs = derived_inputs
        self.on_violation = on_violation
        self.graph = graph
        self.store = store
        self.bucket = bucket
        blob = store.get_index()
        self.index: KeyIndex = load_index(blob) if blob is not None else KeyIndex()
        if not isinstance(self.index, KeyIndex) or self.index.v != INDEX_VERSION:
            raise ValueError("bucket state of another layout: start from a new checkpoint")
        if blob is None:
            self.index.graph = self.graph
            self.index.ctis = {} if self.graph else None
        elif self.index.graph != self.graph:
            raise ValueError("bucket state of another layout (a linear query's and a query graph's): start "
                             "from a new checkpoint")
        if buckets and self.index.buckets and self.index.buckets != buckets:  # keys would be routed elsewhere
            raise ValueError(f"the checkpoint's state was written with {self.index.buckets} key buckets, this "
                             f"query has {buckets}: restart with buckets={self.index.buckets} (or the same "
                             "spark.sql.shuffle.partitions)")
        if buckets:
            self.index.buckets = buckets
        self.idle = (self._restore(self.index.idle) if self.index.idle is not None else self._new_runner())
        self.loaded: dict[str, LiveEngine] = {}
        self.out: list[tuple[str, Element]] = []
        self.dead: list[DeadLetter] = []
        self.reasons: Counter[str] = Counter()
        self._before: dict[str, dict[str, int]] = {}
        self.slabs = EngineSlabs(store, self.index)

    # -- engines ----------------------------------------------------------------------------------------
    def _new_runner(self) -> QueryRunner:
        return make_runner(self.bound, self.on_violation, derived_inputs=self.derived_inputs)

    def _restore(self, snapshot: bytes) -> QueryRunner:
        """An engine from its snapshot, knowing its derived inputs again (a snapshot does not keep them, and
        without them the columnar fast paths would take an exchange stream for a real input)."""
        return QueryRunner.restore(snapshot, self.bound, derived_inputs=self.derived_inputs)


    def _engine(self, key: str, upto: int | None = None) -> LiveEngine:
        """Engine ``key`` (an engine's name, `_home`), loaded (and brought to the bucket's CTI, or to
        ``upto`` of a linear query: the CTI its next rows follow) on first use in this call."""
        live = self.loaded.get(key)
        if live is None:
            e = self.index.get(key)
            snap = self.slabs.engine(key, e) if e is not None else None
            if snap is not None and e is not None:
                engine, ids, *fed = pickle.loads(snap)
                live = LiveEngine(self._restore(engine), e.serial, e.out, ids, fed=fed[0] if fed else {})
            else:
                self.index.serial += 1
                live = LiveEngine(self._new_runner(), self.index.serial)
            self.loaded[key] = live
            self._before[key] = dict(live.runner.stats.reasons)
        r = live.runner
        if self.index.reached > r.ctx.reached:
            r.ctx.reached = self.index.reached
        if self.graph:  # each input to its CTI, in the graph's input order
            ctis = self.index.ctis or {}
            for name in r.inputs:
                t = ctis.get(name)
                if t is not None and live.fed.get(name, NEG) < t:
                    live.fed[name] = t
                    self._emit(live, r.process(Cti(t), None, name))
            return live
        c = self.index.cti if upto is None else upto
        if c > NEG and r.input_cti() < c:
            self._emit(live, r.process(Cti(c)))
        return live

    def _emit(self, live: LiveEngine, els: list[Element]) -> None:
        prefix = f"{self.bucket}.{live.serial}"
        for el in els:
            if isinstance(el, Cti):
                live.out = max(live.out, el.t)
            else:
                self.out.append((prefix, el))

    # -- rows -------------------------------------------------------------------------------------------
    def _input_cti(self, input: str | None) -> int:
        """The CTI so far of ``input`` (a linear query: of its one input)."""
        if not self.graph:
            return self.index.cti
        return (self.index.ctis or {}).get(input or "", NEG)


    # -- clocks -----------------------------------------------------------------------------------------
    def _reach(self, t: int) -> None:
        """T so far rises to ``t`` (one engine's ``ctx.reached`` set by its caller): the idle engine and the
        keys loaded in this call take it now, others when they are loaded (`_engine`)."""
        if t <= self.index.reached:
            return
        self.index.reached = t
        for r in [self.idle] + [live.runner for live in self.loaded.values()]:
            r.ctx.reached = max(r.ctx.reached, t)

    def _cti(self, t: int, input: str | None = None) -> None:
        """Input ``input``'s CTI moves to ``t`` (None: every input's, the event-time watermark)."""
        ctis: dict[str, int] = {}
        moved: list[str | None]
        if self.graph:
            ctis = self.index.ctis if self.index.ctis is not None else {}
            self.index.ctis = ctis
            moved = [name for name in self.idle.inputs if (input is None or name == input) and t > ctis.get(name, NEG)]
            if not moved:
                return
            self.index.cti += 1  # a graph's clock: one tick per advance (semantics-notes 52)
        elif t <= self.index.cti:
            return
        else:
            self.index.cti = t
            moved = [None]
        if self.index.reached > self.idle.ctx.reached:
            self.idle.ctx.reached = self.index.reached
        got: list[Element] = []
        for name in moved:
            if name is not None:
                ctis[name] = t
            got += self.idle.process(Cti(t), None, name)
        for el in got:
            if isinstance(el, Cti):
                self.index.idle_out = max(self.index.idle_out, el.t)
        # a CTI raises T as an element does (semantics-notes 2): keys brought to a later CTI in this call
        # without this one (`_engine` feeds only the latest) must still see it
        self.index.reached = max(self.index.reached, self.idle.ctx.reached)

    def _finish(self) -> None:
        """End of input: every live key's engine, then the idle one, ends (one engine would end them all)."""
        if self.index.finished:
            return
        if sum(1 for k in self.index if k not in self.loaded) > 1:
            self.slabs.read_all(k for k in self.index if k not in self.loaded)
        for key in dict.fromkeys([*self.index, *self.loaded]):  # (a key first loaded in this call too)
            self._engine(key)
        for live in self.loaded.values():
            self._emit(live, live.runner.finish())
        for el in self.idle.finish():
            if isinstance(el, Cti):
                self.index.idle_out = max(self.index.idle_out, el.t)
        self.index.finished = True

    # -- write back -------------------------------------------------------------------------------------

    def _hold(self, live: LiveEngine, snap: bytes, c: int, due: int) -> int:
        """The key's output CTI cap until its due (module doc)."""
        now = live.out
        if due >= INF:
            return INF
        if due <= c + 1:
            return now
        cap = live.runner.hold(due)
        if cap is not None:  # the window's own rule, without a copy of the engine
            return max(now, cap)
        probe = self._restore(snap)
        cap = now
        for el in probe.process(Cti(due - 1)):
            if isinstance(el, Cti):
                cap = max(cap, el.t)
        return cap
