"""The property validator (seeds/002 §6.3, SEMANTICS §7): what must hold of any physical output.

`check_properties` returns a list of problems (empty: every property holds):

- **physical validity**: inserts have ``le < re``, unique live ids; retractions name a live event with
  its current lifetime; ``re_new >= le``;
- **no output CTI violation**: after ``cti(t)`` no element with sync time ``< t``;
- **CTIs non-decreasing**;
- **prefix finality** at every output ``cti(t)``: output events with ``RE < t`` are final, and the set
  of ``(LE, payload)`` of output events with ``LE < t`` is final;
- **liveliness** (SEMANTICS §7) where it is decidable from the query: every window family of a query with
  one window step (with ``time_bound`` and under strong consistency, ``max_delay`` INF: semantics-notes 72),
  span-only queries (a time-sensitive ``flat_map`` without ``time_bound``: the earliest LE of an event that
  can still change, `_flat_map_bound`) — checked when a ``trace`` says which outputs each input element
  produced;
- **final CTI**: ``cti(INF)`` in (or a finished run) gives ``cti(INF)`` out, as the last CTI.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from udm.host.model.plan import BoundQuery, build_plan
from udm.host.model.spec import (
    AlignStep,
    CountByEnd,
    CountByStart,
    Cumulate,
    FilterStep,
    FinalizeStep,
    FlatMapStep,
    Hopping,
    MapStep,
    QuerySpec,
    Rows,
    Session,
    Snapshot,
    Tumbling,
    WindowStep,
)
from udm.host.temporal.elements import Cti, Element, Insert, Retract, sync_time
from udm.host.temporal.strict import canonical_json
from udm.sdk import INF, Event, MalformedPayload

from .cht import StreamState, apply_stream, format_time
from .oracle_steps import MISSING, canonical_rows, group_windows, span_physical, step_value, window_input

__all__ = ["check_properties", "liveliness_bound"]

_MAX_REPORTS = 20


@dataclass
class _Incarnation:
    id: str
    le: int
    payload_key: str
    inserted_at: int
    history: list[tuple[int, int]] = field(default_factory=list)  # (position, re) after each change
    deleted_at: int | None = None

    def re_at(self, pos: int) -> int | None:
        re = None
        for p, r in self.history:
            if p > pos:
                break
            re = r
        return re

    @property
    def final_re(self) -> int | None:
        return None if self.deleted_at is not None else self.history[-1][1]


def _pkey(el: Insert) -> str:
    try:
        return canonical_json(el.payload)
    except (TypeError, ValueError):
        return repr(el.payload)


def _physical(output: Sequence[Any], problems: list[str]) -> list[_Incarnation]:
    live: dict[str, _Incarnation] = {}
    all_incs: list[_Incarnation] = []
    last_cti: int | None = None
    for i, el in enumerate(output):
        where = f"output #{i}"
        if isinstance(el, Cti):
            if last_cti is not None and el.t < last_cti:
                problems.append(f"CTIs decrease: {where} cti({format_time(el.t)}) after cti({format_time(last_cti)})")
            last_cti = el.t if last_cti is None else max(last_cti, el.t)
            continue
        if not isinstance(el, (Insert, Retract)):
            problems.append(f"physical: {where} is not a stream element: {el!r}")
            continue
        s = sync_time(el)
        if last_cti is not None and s < last_cti:
            problems.append(f"CTI violation: {where} {type(el).__name__.lower()} id {el.id!r} has sync time {s} "
                            f"< the output's own cti({format_time(last_cti)})")
        if isinstance(el, Insert):
            if not isinstance(el.payload, dict):
                problems.append(f"physical: {where} insert {el.id!r} has a non-object payload {el.payload!r}")
            if el.re <= el.le:
                problems.append(f"physical: {where} insert {el.id!r} has an empty lifetime [{el.le}, {el.re})")
                continue
            if el.id in live:
                problems.append(f"physical: {where} insert reuses the live id {el.id!r}")
                continue
            inc = _Incarnation(el.id, el.le, _pkey(el), i, [(i, el.re)])
            live[el.id] = inc
            all_incs.append(inc)
        else:
            inc = live.get(el.id)  # type: ignore[assignment]
            if inc is None:
                problems.append(f"physical: {where} retracts {el.id!r}, which is not a live output event")
                continue
            cur = inc.history[-1][1]
            if el.le != inc.le or el.re != cur:
                problems.append(f"physical: {where} retraction of {el.id!r} names [{el.le}, {format_time(el.re)}) "
                                f"but the event is [{inc.le}, {format_time(cur)})")
                continue
            if el.re_new < el.le:
                problems.append(f"physical: {where} retraction of {el.id!r} has re_new {el.re_new} < le {el.le}")
                continue
            if el.re_new == el.le:
                inc.deleted_at = i
                del live[el.id]
            else:
                inc.history.append((i, el.re_new))
    return all_incs


def _prefix_finality(output: Sequence[Any], incs: list[_Incarnation], problems: list[str]) -> None:
    final_lp = Counter((inc.le, inc.payload_key) for inc in incs if inc.deleted_at is None)
    seen_t: int | None = None
    for q, el in enumerate(output):
        if not isinstance(el, Cti):
            continue
        t = el.t
        if seen_t is not None and t <= seen_t:
            continue
        seen_t = t
        # events live at q
        live_lp: Counter[tuple[int, str]] = Counter()
        for inc in incs:
            if inc.inserted_at > q or (inc.deleted_at is not None and inc.deleted_at < q):
                continue
            re_q = inc.re_at(q)
            if re_q is None:
                continue
            if inc.le < t:
                live_lp[(inc.le, inc.payload_key)] += 1
            if re_q < t and inc.final_re != re_q:
                fin = "deleted" if inc.final_re is None else f"[{inc.le}, {format_time(inc.final_re)})"
                problems.append(f"prefix finality: at output #{q} cti({format_time(t)}) event {inc.id!r} "
                                f"[{inc.le}, {re_q}) ended before the CTI but later became {fin}")
        want = Counter({k: n for k, n in final_lp.items() if k[0] < t})
        if live_lp != want:
            extra = live_lp - want
            lack = want - live_lp
            parts = []
            if lack:
                parts.append("added later: " + ", ".join(f"LE {le} {p}" for le, p in sorted(lack.elements())[:5]))
            if extra:
                parts.append("removed later: " + ", ".join(f"LE {le} {p}" for le, p in sorted(extra.elements())[:5]))
            problems.append(f"prefix finality: at output #{q} cti({format_time(t)}) the (LE, payload) set of events "
                            f"with LE < {format_time(t)} is not final ({'; '.join(parts)})")


# ---------------------------------------------------------------------------------------------------
# liveliness


def _grid(win: Any) -> tuple[int, int] | None:
    """(size, hop) of the windows whose starts decide the bound: tumbling and hopping as given; a cumulate
    period's windows all start at the period's start and the last one spans it, so for the earliest
    start a window with ``W.RE > t`` (or holding an event) can have, cumulate is tumbling by its period."""
    if isinstance(win, Tumbling):
        return win.size, win.size
    if isinstance(win, Hopping):
        return win.size, win.hop
    if isinstance(win, Cumulate):
        return win.size, win.size
    return None


def _window_bound(step: WindowStep, props: Any, c: int, groups: dict[str, list[tuple[int, int, Any]]],
                  reached: int | None) -> int | None:
    """Least output CTI SEMANTICS §7 demands after input cti(c); None when undecidable.

    Read as a lower bound a correct engine can always meet, which makes boundary cases explicit: an event
    whose RE equals c can still be *extended* (its retraction has sync time ``min(RE, RE_new) = c``), so for
    time-sensitive UDMs without right clipping the events "with RE > c" include RE == c, and a snapshot
    window ending at c can still grow (its payload changes when members are clipped on the right, so
    time-sensitive UDMs count snapshot windows with ``W.RE >= c``).

    ``time_bound`` (semantics-notes 72) gives c where an element at or after c changes windows only as the
    UDM's promise covers: tumbling, hopping, snapshot and session windows. Count and rows windows can make a
    window over members before c, so there the promise only lifts the wait for member ends (the
    time-insensitive rule). Strong consistency (``max_delay`` INF) outputs a window only once it is final:
    ``time_bound`` gives nothing early, and a snapshot window ending at c waits whatever the UDM.
    """
    win = step.window
    strong = step.max_delay >= INF
    tb = step.output == "time_bound" and not strong
    sees_ends = props.time_sensitive and step.clip in ("none", "left")
    if tb and isinstance(win, (Tumbling, Hopping, Cumulate, Snapshot, Session)):
        return c
    if isinstance(win, Session):
        return _session_bound(win, c, groups)
    if isinstance(win, Rows):
        return _rows_bound(win, sees_ends and not tb, c, groups)
    if isinstance(win, (CountByStart, CountByEnd)):
        return _count_bound(win, sees_ends and not tb, c, groups)
    bound = c
    grid = _grid(win)
    if grid is not None:
        size, hop = grid
        k = (c - win.offset - size) // hop + 1  # first window with W.RE > c (any can get members)
        bound = min(bound, win.offset + k * hop)
    elif isinstance(win, Snapshot):
        for evs in groups.values():
            for w in group_windows(win, evs, reached):
                reaches = w.re >= c if props.time_sensitive or strong else w.re > c
                if reaches and any(w.holds(le, re) for le, re, _ in evs):
                    bound = min(bound, w.le)
    else:
        return None  # (a window type this kit does not know)
    if sees_ends:
        for evs in groups.values():
            for le, re, _ in evs:
                if re < c:
                    continue
                if grid is not None:
                    size, hop = grid
                    k = (le - size - win.offset) // hop + 1  # earliest window holding the event
                    bound = min(bound, win.offset + k * hop)
                else:
                    bound = min(bound, le)
    return bound


def _count_bound(win: CountByStart | CountByEnd, sees_ends: bool, c: int,
                 groups: dict[str, list[tuple[int, int, Any]]]) -> int:
    """SEMANTICS §7 for count windows. The distinct values below c are final (a new event starts at or
    after c, an event starting before c cannot be deleted, an end before c cannot move or appear); a window
    whose last value is below c is final, and every later window — one that exists, or one that values to
    come will complete — can still change: the first of them (``hop``-aligned, positions from the first
    value) bounds the CTI by its start. ``count_by_end`` windows start one tick before their first RE: one
    starting at an RE that is, or can become, c (an event starting before c may end at c) gives ``c - 1``.
    A UDM seeing member ends also waits for every window holding an event that ends at or after c."""
    n, hop = win.n, win.hop
    bound = c
    by_end = isinstance(win, CountByEnd)
    for evs in groups.values():
        vals = sorted({re for _, re, _ in evs if re < INF} if by_end else {le for le, _, _ in evs})
        m = sum(1 for v in vals if v < c)
        i = max(0, m - n + 1)
        i += (-i) % hop  # the first aligned window whose last position is at or past m
        if i < m:
            bound = min(bound, vals[i] - 1 if by_end else vals[i])
        elif by_end and i == m and any(le < c <= re for le, re, _ in evs):
            bound = min(bound, c - 1)
        if sees_ends and not by_end:  # (count_by_end: such an event is only in windows counted above)
            for le, re, _ in evs:
                if re >= c and le < c:
                    p = vals.index(le)
                    j = max(0, p - n + 1)
                    j += (-j) % hop  # the first aligned window holding position p
                    if j <= p:
                        bound = min(bound, vals[j])
    return bound


def _rows_bound(win: Rows, sees_ends: bool, c: int, groups: dict[str, list[tuple[int, int, Any]]]) -> int:
    """SEMANTICS §7 for rows windows (no ``time_bound`` exception: a late row renumbers later windows).
    With ``P`` rows before ``c`` (a new row, ``LE >= c``, lands after them), the windows of yield rows
    ``> P`` can change (W.RE > c, or created over old rows): the first LE of the earliest one. A row that
    can still end elsewhere (``RE >= c``) moves only among the rows of its LE: a UDM seeing ends
    (time-sensitive without right clipping) sees every window from that block's first row on change;
    any other UDM only the windows holding *part* of the block (a window holding all of it keeps its
    members)."""
    n, slide = win.n, win.slide

    def first(k: int) -> int:  # row numbers from 1
        return max(1, k - n + 1)

    def up(x: int) -> int:  # the smallest yield row >= x
        return -(-x // slide) * slide

    bound = c
    for evs in groups.values():
        rows = canonical_rows([(le, re, canonical_json(p)) for le, re, p in evs])
        count = len(rows)
        before = sum(1 for le, _, _ in rows if le < c)
        rs = [first(up(before + 1))]
        for le in sorted({le for le, re, _ in rows if le < c and re >= c}):
            s0 = 1 + sum(1 for x, _, _ in rows if x < le)  # the block of rows at this LE: s0..e0
            e0 = s0 - 1 + sum(1 for x, _, _ in rows if x == le)
            if sees_ends:
                rs.append(first(up(s0)))
            elif e0 > s0:
                k = up(max(s0, 1 if win.partial else n))
                while k <= count and first(k) <= e0:
                    if not ((first(k) <= s0 and k >= e0) or k < s0 or first(k) > e0):
                        rs.append(first(k))
                        break
                    k += slide
        r = min(rs)
        if r <= count:
            bound = min(bound, rows[r - 1][0])
    return bound


def _session_bound(win: Session, c: int, groups: dict[str, list[tuple[int, int, Any]]]) -> int:
    """SEMANTICS §7 for sessions, whatever the UDM (a late bridging event merges sessions, so no
    ``time_bound`` exception): the first LE of the earliest session that can still change — one whose
    window reaches past ``c`` (a new event, ``LE >= c``, joins it when ``LE < W.RE``), or, with ``gap``
    0, ends at ``c`` (a member ending at ``c`` can still be extended)."""
    bound = c
    for evs in groups.values():
        rows = [(le, re, canonical_json(p)) for le, re, p in evs]
        for w in group_windows(win, rows, None):
            if w.re > c or (w.re == c and win.gap == 0):
                bound = min(bound, w.le)
                break
    return bound


def liveliness_bound(query: QuerySpec | BoundQuery, input_prefix: Sequence[Element], c: int,
                     catalog: Any = None) -> int | None:
    """The least output CTI SEMANTICS §7 demands once ``input_prefix`` (ending in ``cti(c)``) is processed;
    None when the kit cannot decide it for this query (several window steps, a step before the window it
    cannot follow); every window family alone is decided."""
    if c >= INF:
        return INF
    bq = build_plan(query, catalog)
    windows = [bs for bs in bq.steps if isinstance(bs.step, WindowStep)]
    aligns = [bs.step for bs in bq.steps if isinstance(bs.step, AlignStep)]
    if aligns:
        return _align_bound(bq, input_prefix, c) if not windows and len(aligns) == 1 else None
    if not windows:
        return _flat_map_bound(bq, input_prefix, c)  # other span-based steps (finalize too) pass CTIs through
    if len(windows) > 1 or any(_holds(bs) for bs in bq.steps):
        return None  # (a held flat_map after the window lowers its bound by what the window emits)
    st = StreamState(on_violation=bq.spec.on_violation)
    for el in input_prefix:
        st.apply(el)
    stream = list(st.accepted)
    for bs in bq.steps:
        if isinstance(bs.step, (FilterStep, MapStep)):
            stream = span_physical(bs, stream)
            continue
        step = bs.step
        if not isinstance(step, WindowStep):
            return None  # (what reaches the window depends on that step: not decided here)
        wst = window_input(bs, stream, bq.spec.on_violation)
        groups: dict[str, list[tuple[int, int, Any]]] = {}
        for le, re, p in wst.events():
            if any(k not in p for k in step.group_by) or step_value(bs, p) is MISSING:
                continue
            gid = canonical_json([p[k] for k in step.group_by])
            groups.setdefault(gid, []).append((le, re, p))
        props = (SimpleNamespace(time_sensitive=any(p.entry.manifest.properties.time_sensitive for p in bs.parts))
                 if bs.parts else bs.entry.manifest.properties)
        return _window_bound(step, props, c, groups, wst.max_finite)
    return None


def _holds(bs: Any) -> bool:
    """A ``flat_map`` whose output CTI is held: its time-sensitive UDO may change any output of an event
    that can still change (no ``time_bound`` promise)."""
    if not isinstance(bs.step, FlatMapStep):
        return False
    props = bs.entry.manifest.properties
    return bool(props.time_sensitive and not props.time_bound)


def _flat_map_bound(bq: BoundQuery, input_prefix: Sequence[Element], c: int) -> int | None:
    """A span-only query: ``c``, or with a time-sensitive ``flat_map`` without ``time_bound`` (reading the
    input through filter/map steps) the earliest LE of an event it reads that a retraction can still change
    (``RE >= c``: one ending at ``c`` can be extended), when that is lower. None when undecided here."""
    holding = [bs for bs in bq.steps if _holds(bs)]
    if not holding:
        return c
    if len(holding) > 1 or not bq.graph.is_linear:
        return None
    st = StreamState(on_violation=bq.spec.on_violation)
    for el in input_prefix:
        st.apply(el)
    stream = list(st.accepted)
    for bs in bq.steps:
        if bs is holding[0]:
            break
        if not isinstance(bs.step, (FilterStep, MapStep)):
            return None
        stream = span_physical(bs, stream)
    bound = c
    for le, re, p in apply_stream(stream).events():
        if re < c or le >= bound:
            continue
        try:
            holding[0].udm.compute(Event(le, re, p))
        except MalformedPayload:
            continue  # refused by the step: it holds nothing for it
        except Exception:
            pass  # the oracle reports a UDO that fails; the event is held all the same
        bound = le
    return bound


def _align_bound(bq: BoundQuery, input_prefix: Sequence[Element], c: int) -> int | None:
    """``align`` after span steps (SEMANTICS §7, seeds/003 §4.5): the output CTI is ``c`` held at the LE of
    every event align still holds — alive, not final (``RE >= c``) and less than ``max_delay`` behind the
    watermark ``m = max(c, max LE seen)``. (``max_wait`` releases sooner: this stays a lower bound.)"""
    if any(not isinstance(bs.step, (FilterStep, MapStep, AlignStep, FinalizeStep)) for bs in bq.steps):
        return None
    st = StreamState(on_violation=bq.spec.on_violation)
    for el in input_prefix:
        st.apply(el)
    stream: list[Any] = list(st.accepted)
    for bs in bq.steps:
        step = bs.step
        if isinstance(step, (FilterStep, MapStep)):
            stream = span_physical(bs, stream)
        elif isinstance(step, FinalizeStep):
            if step.max_memory_time < INF:
                return None
        elif isinstance(step, AlignStep):
            at = StreamState()
            les = [el.le for el in stream if isinstance(el, Insert)]
            m = max([c, *les])
            for el in stream:
                at.apply(el)
            held = [le for le, re, _ in at.events()
                    if re >= c and (step.max_delay >= INF or le > m - step.max_delay)]
            return min([c, *held])
    return c


def _liveliness(input: Sequence[Any], trace: Sequence[Sequence[Any]], query: Any, catalog: Any,
                problems: list[str]) -> None:
    if len(trace) != len(input):
        problems.append(f"trace has {len(trace)} entries for {len(input)} input elements")
        return
    best: int | None = None
    latest: int | None = None
    for i, (el, outs) in enumerate(zip(input, trace, strict=True)):
        for o in outs:
            if isinstance(o, Cti):
                best = o.t if best is None else max(best, o.t)
        if not isinstance(el, Cti) or (latest is not None and el.t <= latest):
            continue
        latest = el.t
        if query is None:
            need: int | None = INF if el.t >= INF else None
        else:
            need = liveliness_bound(query, input[: i + 1], el.t, catalog)
        if need is None:
            continue
        if best is None or best < need:
            got = "no output CTI" if best is None else f"output cti({format_time(best)})"
            problems.append(f"liveliness: after input #{i} cti({format_time(el.t)}) the output must reach "
                            f"cti({format_time(need)}) but has {got}")


def check_properties(input: Sequence[Element], output: Sequence[Element],
                     query: QuerySpec | BoundQuery | None = None, *,
                     trace: Sequence[Sequence[Element]] | None = None, finished: bool | None = None,
                     catalog: Any = None) -> list[str]:
    """Problems with a physical ``output`` of ``query`` over ``input`` (empty list: all properties hold).

    ``trace[i]`` (optional) lists the outputs emitted while processing ``input[i]``; with it, liveliness is
    checked after every input CTI. ``finished`` says the run was ended (``finish()``, semantics-notes 1),
    which demands a final ``cti(INF)`` like an input ``cti(INF)`` does; by default it is True when the
    input contains ``cti(INF)``.
    """
    problems: list[str] = []
    output = list(output)
    incs = _physical(output, problems)
    _prefix_finality(output, incs, problems)
    if trace is not None:
        _liveliness(list(input), trace, query, catalog, problems)
    in_inf = any(isinstance(e, Cti) and e.t >= INF for e in input)
    if finished is None:
        finished = in_inf
    if finished:
        ctis = [e for e in output if isinstance(e, Cti)]
        if not ctis or ctis[-1].t < INF:
            why = "the input ends with cti(inf)" if in_inf else "the run was finished"
            problems.append(f"final CTI: {why} but the output's last CTI is "
                            f"{'missing' if not ctis else f'cti({format_time(ctis[-1].t)})'}, not cti(inf)")
    if len(problems) > _MAX_REPORTS:
        problems = [*problems[:_MAX_REPORTS], f"... and {len(problems) - _MAX_REPORTS} more problems"]
    return problems
