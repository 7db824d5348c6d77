"""Shared helpers for the engine tests: a brute-force reference straight from SEMANTICS §1–6 (on the
CHT, no physical tricks), a CHT builder, stream generators and physical-property checks.

The reference is deliberately naive (every window enumerated, members found by scanning) so that it
is easy to check against the spec by eye; the hand-computed tests in the other files are the primary
evidence, this is for randomized agreement.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract, sync_time
from udm.sdk import INF, Event, IncrementalUDA, WindowDescriptor, udm

__all__ = ["apply_valid", "check_physical", "cht", "expected", "gen_stream", "run", "runner", "shuffle_physical"]


def cj(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------------------
# CHT
# ---------------------------------------------------------------------------------------------------------
def apply_valid(elements: list[Element], policy: str = "dead_letter", fields: tuple[str, ...] = (),
                times: list[int] | None = None) -> dict[str, tuple[int, int, dict]]:
    """SEMANTICS §1 on a physical stream: the live events after applying every valid element.
    ``times`` collects the times of valid elements (for T, semantics-notes 2)."""
    live: dict[str, list] = {}
    c = -(2**64)
    tt = times if times is not None else []
    for el in elements:
        if isinstance(el, Cti):
            c = max(c, el.t)
            tt.append(el.t)
            continue
        if isinstance(el, Insert):
            le = el.le
            if el.re <= le or el.id in live or any(f not in el.payload for f in fields):
                continue
            if le < c:
                if policy == "adjust" and el.re > c:
                    le = c
                else:
                    continue
            live[el.id] = [le, el.re, el.payload, el.le]  # effective LE, RE, payload, LE the source used
            tt += [le, el.re]
        else:
            if min(el.re, el.re_new) < c:
                continue
            e = live.get(el.id)
            if e is None or e[3] != el.le or e[1] != el.re or el.re_new < el.le:
                continue
            tt += [el.re, el.re_new]
            if el.re_new <= e[0]:
                del live[el.id]
            else:
                e[1] = el.re_new
    return {k: (v[0], v[1], v[2]) for k, v in live.items()}


def cht(elements: list[Element]) -> Counter:
    """CHT of an output stream (assumed valid): multiset of (le, re, canonical payload)."""
    live: dict[str, list] = {}
    for el in elements:
        if isinstance(el, Insert):
            assert el.id not in live, f"output reuses live id {el.id}"
            assert el.le < el.re
            live[el.id] = [el.le, el.re, el.payload]
        elif isinstance(el, Retract):
            e = live[el.id]
            assert e[0] == el.le and e[1] == el.re, f"output retraction {el} does not match {e}"
            if el.re_new == el.le:
                del live[el.id]
            else:
                e[1] = el.re_new
    return Counter((le, re, cj(p)) for le, re, p in live.values())


# ---------------------------------------------------------------------------------------------------------
# reference
# ---------------------------------------------------------------------------------------------------------
def _windows(win: dict, evs: list[tuple[int, int, Any]], T: int) -> list[tuple[int, int, list]]:
    t = win["type"]
    out = []
    if t in ("tumbling", "hopping"):
        size = win["size"]
        hop = win.get("hop", size)
        off = win.get("offset", 0)
        if not evs:
            return []
        # a finite event gives all its windows; an endless one those with W.LE <= T (semantics-notes 2)
        ks: set[int] = set()
        for le, re, _ in evs:
            last = (re - 1 - off) // hop if re < INF else (T - off) // hop
            ks.update(range((le - size - off) // hop + 1, last + 1))
        for k in sorted(ks):
            wle, wre = off + k * hop, off + k * hop + size
            mem = [e for e in evs if e[0] < wre and e[1] > wle]
            if mem:
                out.append((wle, wre, mem))
        return out
    if t == "snapshot":
        pts = sorted({e[0] for e in evs} | {e[1] for e in evs if e[1] < INF})
        bounds = list(itertools.pairwise(pts))
        if any(e[1] >= INF for e in evs):
            bounds.append((pts[-1], INF))
        for wle, wre in bounds:
            mem = [e for e in evs if e[0] < wre and e[1] > wle]
            if mem:
                out.append((wle, wre, mem))
        return out
    n = win["n"]
    hop = win.get("hop", 1)
    if t == "count_by_start":
        s = sorted({e[0] for e in evs})
        for i in range(len(s)):
            if i + n - 1 < len(s) and i % hop == 0:
                wle, wre = s[i], s[i + n - 1] + 1
                mem = [e for e in evs if e[0] < wre and e[1] > wle and s[i] <= e[0] <= s[i + n - 1]]
                if mem:
                    out.append((wle, wre, mem))
        return out
    r = sorted({e[1] for e in evs if e[1] < INF})
    for i in range(len(r)):
        if i + n - 1 < len(r) and i % hop == 0:
            wle, wre = r[i] - 1, r[i + n - 1]
            mem = [e for e in evs if e[0] < wre and e[1] > wle and r[i] <= e[1] <= r[i + n - 1]]
            if mem:
                out.append((wle, wre, mem))
    return out


def _window_step(step: dict, udm: Any, man: Any, live: list[tuple[int, int, dict]], T: int
                 ) -> list[tuple[int, int, dict]]:
    gb = step.get("group_by", [])
    inp = step.get("input")
    clip = step.get("clip", "none")
    policy = step.get("output", "window") if man.properties.time_sensitive else "window"
    alias = step.get("as") or step["udm"]
    ts = man.properties.time_sensitive
    groups: dict[str, list] = {}
    for le, re, p in live:
        if any(f not in p for f in gb):
            continue
        if isinstance(inp, str):
            if inp not in p:
                continue
            v = p[inp]
        elif isinstance(inp, dict):
            if any(f not in p for f in inp.values()):
                continue
            v = {u: p[f] for u, f in inp.items()}
        else:
            v = p
        key = cj([p[f] for f in gb])
        groups.setdefault(key, [{f: p[f] for f in gb}, []])[1].append((le, re, v))
    out = []
    for gfields, evs in groups.values():
        for wle, wre, mem in _windows(step["window"], evs, T):
            rows = []
            for le, re, v in mem:
                if clip in ("left", "full"):
                    le = max(le, wle)
                if clip in ("right", "full"):
                    re = min(re, wre)
                rows.append((le, re, cj(v), v))
            rows.sort(key=lambda r: r[:3])
            items = [Event(le, re, v) for le, re, _, v in rows] if ts else [v for *_, v in rows]
            wd = WindowDescriptor(wle, wre)
            if man.properties.incremental:
                st = udm.add(udm.initial_state(), items)
                res = udm.compute(st, wd) if ts else udm.compute(st)
            else:
                res = udm.compute(items, wd) if ts else udm.compute(items)
            if man.kind == "uda":
                out.append((wle, wre, {**gfields, alias: res}))
                continue
            for o in res:
                if ts:
                    le, re, p = (o.le, o.re, o.payload) if isinstance(o, Event) else o
                    if policy == "window":
                        le, re = wle, wre
                    elif policy == "clip":
                        le, re = max(le, wle), min(re, wre)
                        if re <= le:
                            continue
                else:
                    le, re, p = wle, wre, o
                p = dict(p) if isinstance(p, dict) else {"value": p}
                out.append((le, re, {**p, **gfields}))
    return out


def expected(query: dict, elements: list[Element], catalog: Any = None) -> Counter:
    """Expected output CHT of ``query`` on the physical ``elements`` (with end of input)."""
    bound = bind(parse_query(query), catalog)
    policy = query.get("on_violation", "dead_letter")
    steps = query["steps"]
    first = steps[0]
    fields: tuple[str, ...] = ()
    if first["op"] in ("filter", "map"):
        fields = tuple(first.get("args", {}).values())
    else:
        inp = first.get("input")
        fields = tuple(first.get("group_by", [])) + ((inp,) if isinstance(inp, str) else
                                                     tuple(inp.values()) if isinstance(inp, dict) else ())
    times: list[int] = []
    live = list(apply_valid(elements, policy, fields, times).values())
    T = max([t for t in times if t < INF], default=-(2**64))
    for st, bs in zip(steps, bound.steps, strict=True):
        if st["op"] == "filter":
            live = [(le, re, p) for le, re, p in live
                    if all(f in p for f in st["args"].values())
                    and bs.udm.compute(**{a: p[f] for a, f in st["args"].items()})]
        elif st["op"] == "map":
            live = [(le, re, {**p, st["as"]: bs.udm.compute(**{a: p[f] for a, f in st["args"].items()})})
                    for le, re, p in live if all(f in p for f in st["args"].values())]
        else:
            live = _window_step(st, bs.udm, bs.entry.manifest, live, T)
    return Counter((le, re, cj(p)) for le, re, p in live)


# ---------------------------------------------------------------------------------------------------------
# running and checking
# ---------------------------------------------------------------------------------------------------------
def runner(query: dict, catalog: Any = None, **kw: Any) -> QueryRunner:
    return QueryRunner(bind(parse_query(query), catalog), **kw)


def run(query: dict, elements: list[Element], catalog: Any = None, *, mode: str = "many", **kw: Any
        ) -> tuple[list[Element], QueryRunner]:
    r = runner(query, catalog, **kw)
    out: list[Element] = []
    if mode == "each":
        for i, el in enumerate(elements):
            out += r.process(el, i + 1)
    else:
        out += r.process_many(elements, range(1, len(elements) + 1))
    out += r.finish()
    return out, r


def check_physical(out: list[Element]) -> None:
    """Output validity, no CTI violation, CTIs non-decreasing, ends with cti(INF), prefix finality."""
    c = -(2**64)
    live: dict[str, list] = {}
    history: list[tuple[int, Counter, Counter]] = []
    for el in out:
        if isinstance(el, Cti):
            assert el.t >= c, f"output CTIs decrease: {el.t} after {c}"
            c = el.t
            history.append((c, Counter((le, re, cj(p)) for le, re, p in live.values() if re < c),
                            Counter((le, cj(p)) for le, re, p in live.values() if le < c)))
            continue
        assert sync_time(el) >= c, f"{el} violates output CTI {c}"
        if isinstance(el, Insert):
            assert el.id not in live
            live[el.id] = [el.le, el.re, el.payload]
        else:
            e = live[el.id]
            assert (e[0], e[1]) == (el.le, el.re), f"{el} does not match {e}"
            if el.re_new == el.le:
                del live[el.id]
            else:
                e[1] = el.re_new
    assert out and isinstance(out[-1], Cti) and out[-1].t == INF, "output must end with cti(inf)"
    final = Counter((le, re, cj(p)) for le, re, p in live.values())
    final_le = Counter((le, cj(p)) for le, re, p in live.values())
    for t, ended, started in history:
        # every output event with RE < t is final; the (LE, payload) set with LE < t is final
        now_ended = Counter({k: v for k, v in final.items() if k[1] < t})
        assert ended == now_ended, f"prefix finality broken at cti {t}: {ended} vs final {now_ended}"
        now_started = Counter({k: v for k, v in final_le.items() if k[0] < t})
        assert started == now_started, f"(LE, payload) finality broken at cti {t}: {started} vs {now_started}"


def gen_stream(rng: random.Random, n: int = 30, *, span: int = 40, maxlen: int = 12, p_inf: float = 0.08,
               p_retract: float = 0.3, p_cti: float = 0.1, disorder: int = 8, groups: int = 2,
               values: int = 5) -> list[Element]:
    """A valid physical stream: inserts in roughly increasing LE with bounded disorder, retractions
    (shorten, extend, full) placed after their insert, CTIs that respect everything after them."""
    events = []
    for i in range(n):
        le = rng.randrange(span)
        re = INF if rng.random() < p_inf else le + 1 + rng.randrange(maxlen)
        events.append((f"e{i}", le, re, {"g": rng.randrange(groups), "v": rng.randrange(values)}))
    events.sort(key=lambda e: e[1] + rng.randrange(disorder + 1))
    phys: list[Element] = []
    for eid, le, re, p in events:
        phys.append(Insert(eid, le, re, p))
        cur = re
        while rng.random() < p_retract:
            kind = rng.random()
            if kind < 0.2:
                new = le
            elif kind < 0.6 or cur >= INF:
                new = le + 1 + rng.randrange(max(1, min(cur, le + maxlen * 2) - le))
            else:
                new = cur + 1 + rng.randrange(maxlen)
            if new == cur:
                break
            phys.append(Retract(eid, le, cur, new))
            cur = new
            if new == le:
                break
    # insert CTIs at safe positions: cti(t) only if every later element has sync >= t
    out: list[Element] = []
    suffix_min = [INF] * (len(phys) + 1)
    for i in range(len(phys) - 1, -1, -1):
        suffix_min[i] = min(suffix_min[i + 1], sync_time(phys[i]))
    last = -1
    for i, el in enumerate(phys):
        if rng.random() < p_cti:
            t = suffix_min[i] - rng.randrange(3)
            if t > last and t < INF:
                out.append(Cti(t))
                last = t
        out.append(el)
    return out


def shuffle_physical(rng: random.Random, elements: list[Element]) -> list[Element]:
    """Another physical order of the same logical stream: inserts of final lifetimes (no retractions)
    in a random order, a few speculative inserts later fixed, and no CTIs until the end."""
    live = apply_valid(elements)
    items = list(live.items())
    rng.shuffle(items)
    out: list[Element] = []
    for eid, (le, re, p) in items:
        if rng.random() < 0.3 and re < INF:
            out.append(Insert(eid, le, INF, p))
            out.append(Retract(eid, le, INF, re))
        elif rng.random() < 0.2:
            out.append(Insert(eid, le, re + 3 if re < INF else INF, p))
            if re < INF:
                out.append(Retract(eid, le, re + 3, re))
        else:
            out.append(Insert(eid, le, re, p))
        if rng.random() < 0.1:
            out.append(Insert(eid + "x", le, le + 2, p))
            out.append(Retract(eid + "x", le, le + 2, le))
    return out


# ---------------------------------------------------------------------------------------------------------
# small helpers for hand-computed tests
# ---------------------------------------------------------------------------------------------------------
_CATALOG: Any = None


def catalog_with(*classes: Any) -> Any:
    """The installed plugins plus test-only UDM classes."""
    from udm.host.catalog import Catalog

    global _CATALOG
    if _CATALOG is None:
        _CATALOG = Catalog.discover()
    cat = Catalog()
    cat.entries = list(_CATALOG.entries)
    for c in classes:
        entry = cat.add(c)
        assert entry.valid, entry.problems
    return cat


def table(out: list[Element]) -> list[tuple[int, int, dict]]:
    """The output CHT as a sorted list of (le, re, payload)."""
    rows = []
    for (le, re, pj), n in cht(out).items():
        rows += [(le, re, json.loads(pj))] * n
    rows.sort(key=lambda r: (r[0], r[1], cj(r[2])))
    return rows


def rows(*items: tuple[int, int, dict]) -> list[tuple[int, int, dict]]:
    """Expected rows, sorted like `table`."""
    return sorted(items, key=lambda r: (r[0], r[1], cj(r[2])))


def window_query(window: dict, udm: str, **kw: Any) -> dict:
    step = {"op": "window", "window": window, "udm": udm, **kw}
    return {"steps": [step]}


def ctis(out: list[Element]) -> list[int]:
    return [el.t for el in out if isinstance(el, Cti)]


#: what `CountingSum` was asked to do: calls by method, and ``values`` handed to add/remove
UDA_CALLS: Counter[str] = Counter()


@udm(name="counting_sum", version="1.0.0", algebraic=True)
class CountingSum(IncrementalUDA):
    """An algebraic sum that counts every call into `UDA_CALLS` (for tests of the work per event)."""

    def initial_state(self) -> int:
        UDA_CALLS["initial_state"] += 1
        return 0

    def add(self, state: int, delta: Sequence[int]) -> int:
        UDA_CALLS["add"] += 1
        UDA_CALLS["values"] += len(delta)
        return state + sum(delta)

    def remove(self, state: int, delta: Sequence[int]) -> int:
        UDA_CALLS["remove"] += 1
        UDA_CALLS["values"] += len(delta)
        return state - sum(delta)

    def merge(self, a: int, b: int) -> int:
        UDA_CALLS["merge"] += 1
        return a + b

    def compute(self, state: int) -> int:
        UDA_CALLS["compute"] += 1
        return state


__all__ += ["UDA_CALLS", "CountingSum", "catalog_with", "ctis", "rows", "table", "window_query"]
