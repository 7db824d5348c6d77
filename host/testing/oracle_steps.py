"""What each step of a linear query means to the reference oracle (`udm.host.testing.oracle`): the windows a
group's events define (SEMANTICS §3), a window step's output by brute force, filter and map over a
physical stream or a CHT, and the input a step accepts.

The linear oracle (`udm.host.testing.oracle`) and the graph oracle (`udm.host.testing.oracle_graph`) both
walk their steps with these pieces; like them, it imports nothing from ``udm.host.engine``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from udm.host.errors import ContractViolation
from udm.host.input_types import step_checks
from udm.host.model.plan import BoundStep
from udm.host.model.spec import (
    CountByEnd,
    CountByStart,
    Cumulate,
    FilterStep,
    Hopping,
    MapStep,
    Rows,
    Session,
    Snapshot,
    Tumbling,
    WindowStep,
)
from udm.host.temporal.elements import Element, Insert, Retract, canonical_json
from udm.sdk import INF, Event, WindowDescriptor

from .cht import CHT, Rejected, StreamState

__all__ = ["MISSING", "OracleResult", "OracleUndecidable", "Window", "canonical_rows", "group_windows", "map_physical",
           "map_rows", "span_physical", "span_reach", "span_rows", "step_value", "window_input", "window_step"]

MISSING = object()


class OracleUndecidable(Exception):
    """The expected output depends on physical details the oracle cannot know at this point."""


@dataclass(frozen=True)
class Window:
    """A window ``[le, re)``; count windows also bound their members' LE (by start) or RE (by end)."""

    le: int
    re: int
    lo: int | None = None  # count windows: member bound lo <= key <= hi
    hi: int | None = None
    key: str | None = None  # "le" (count_by_start) or "re" (count_by_end)
    #: rows / session windows: the members, as positions in the group's events in canonical order
    #: (`canonical_rows`); membership is this list, not overlap
    rows: tuple[int, ...] | None = None

    def holds(self, le: int, re: int) -> bool:
        if not (le < self.re and re > self.le):  # overlap (SEMANTICS §3)
            return False
        if self.key == "le":
            return self.lo <= le <= self.hi  # type: ignore[operator]
        if self.key == "re":
            return self.lo <= re <= self.hi  # type: ignore[operator]
        return True

    def text(self) -> str:
        re = "inf" if self.re >= INF else str(self.re)
        return f"[{self.le}, {re})"


@dataclass
class OracleResult:
    cht: CHT
    truncated_at: int | None = None  # semantics-notes 2: set when endless events were cut at T
    rejected: list[Rejected] = field(default_factory=list)  # input elements the query dead-letters
    step_chts: list[CHT] = field(default_factory=list)
    #: query graphs: the rejected elements of each input, by input name
    rejected_by_input: dict[str, list[Rejected]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# windows (SEMANTICS §3), from a group's events directly


def canonical_rows(events: Sequence[tuple[int, int, Any]]) -> list[tuple[int, int, Any]]:
    """A group's events in canonical order (SEMANTICS §5): ``(LE, RE)``, ties by the canonical JSON text
    of the value, which is each event's third item (as `window_step` passes them)."""
    return sorted(events, key=lambda e: (e[0], e[1], e[2]))


def _rows_windows(spec: Rows, events: Sequence[tuple[int, int, Any]]) -> list[Window]:
    """SEMANTICS §9, word by word: rows 1..m in canonical order; yield rows k = slide, 2*slide, ...; the
    window of row k holds rows max(1, k-n+1)..k, exists when it holds n rows (or always with partial),
    and spans [LE(first row), LE(row k) + 1)."""
    rows = canonical_rows(events)
    out = []
    for k in range(spec.slide, len(rows) + 1, spec.slide):
        first = max(1, k - spec.n + 1)
        if k - first + 1 < spec.n and not spec.partial:
            continue
        out.append(Window(rows[first - 1][0], rows[k - 1][0] + 1, rows=tuple(range(first - 1, k))))
    return out


def _session_windows(spec: Session, events: Sequence[tuple[int, int, Any]]) -> list[Window]:
    """SEMANTICS §9: sorted by LE, a session is a maximal run in which each next LE is < gap + the largest
    RE so far in the run; window [first LE, largest RE + gap) (INF when a member never ends)."""
    rows = canonical_rows(events)
    out = []
    i = 0
    while i < len(rows):
        j = i + 1
        top = rows[i][1]
        while j < len(rows) and (top >= INF or rows[j][0] < top + spec.gap):
            top = max(top, rows[j][1])
            j += 1
        out.append(Window(rows[i][0], INF if top >= INF else top + spec.gap, rows=tuple(range(i, j))))
        i = j
    return out


def group_windows(spec: Any, events: Sequence[tuple[int, int, Any]], reached: int | None) -> list[Window]:
    """Every window the group's events define. ``reached`` is T of semantics-notes 2 (for endless events
    on tumbling/hopping/cumulate windows: only windows with ``W.LE <= T``). Rows and session windows list their
    members as positions in `canonical_rows` of ``events``."""
    if isinstance(spec, Rows):
        return _rows_windows(spec, events)
    if isinstance(spec, Session):
        return _session_windows(spec, events)
    if isinstance(spec, (Tumbling, Hopping)):
        size = spec.size
        hop = spec.size if isinstance(spec, Tumbling) else spec.hop
        off = spec.offset
        ks: set[int] = set()
        for le, re, _ in events:
            k_first = (le - size - off) // hop + 1  # first k with off + k*hop + size > le
            if re < INF:
                k_last = (re - 1 - off) // hop  # last k with off + k*hop < re
            else:
                if reached is None:
                    continue
                k_last = (reached - off) // hop  # W.LE <= T
            ks.update(range(k_first, k_last + 1))
        return [Window(off + k * hop, off + k * hop + size) for k in sorted(ks)]
    if isinstance(spec, Cumulate):
        # every period an event (or, for an endless one, the stretch up to T) overlaps, with all its
        # windows [off + k*size, off + k*size + i*step), i = 1..size/step; members are tested by overlap later
        periods: set[int] = set()
        for le, re, _ in events:
            end = re
            if re >= INF:
                if reached is None:
                    continue
                end = reached + 1  # W.LE <= T
            k = (le - spec.offset) // spec.size  # the period holding le
            while spec.offset + k * spec.size < end:
                periods.add(k)
                k += 1
        n = spec.size // spec.step
        return [Window(spec.offset + k * spec.size, spec.offset + k * spec.size + i * spec.step)
                for k in sorted(periods) for i in range(1, n + 1)]
    if isinstance(spec, Snapshot):
        points = sorted({le for le, _, _ in events} | {re for _, re, _ in events if re < INF})
        wins = [Window(a, b) for a, b in itertools.pairwise(points)]
        if any(re >= INF for _, re, _ in events):
            wins.append(Window(points[-1], INF))
        return wins
    if isinstance(spec, CountByStart):
        starts = sorted({le for le, _, _ in events})
        return [Window(starts[i], starts[i + spec.n - 1] + 1, starts[i], starts[i + spec.n - 1], "le")
                for i in range(len(starts)) if i + spec.n - 1 < len(starts) and i % spec.hop == 0]
    if isinstance(spec, CountByEnd):
        ends = sorted({re for _, re, _ in events if re < INF})
        return [Window(ends[i] - 1, ends[i + spec.n - 1], ends[i], ends[i + spec.n - 1], "re")
                for i in range(len(ends)) if i + spec.n - 1 < len(ends) and i % spec.hop == 0]
    raise TypeError(f"unknown window spec {spec!r}")


def _clip(le: int, re: int, w: Window, policy: str) -> tuple[int, int]:
    if policy in ("left", "full"):
        le = max(le, w.le)
    if policy in ("right", "full"):
        re = min(re, w.re)
    return le, re


# ---------------------------------------------------------------------------------------------------
# invoking the UDM


def _label(bs: BoundStep) -> str:
    return f"UDM {bs.entry.name!r} {bs.entry.version}"


def _violation(bs: BoundStep, w: Window | None, what: str) -> ContractViolation:
    where = f" in window {w.text()}" if w is not None else ""
    return ContractViolation(f"{_label(bs)}{where}: {what}")


def _json_ok(value: Any) -> bool:
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return False
    return True


def _map_input(spec_input: str | dict[str, str] | None, payload: Mapping[str, Any]) -> Any:
    """semantics-notes 4; `MISSING` when a needed field is absent (notes 3)."""
    if spec_input is None:
        return payload
    if isinstance(spec_input, str):
        return payload.get(spec_input, MISSING) if spec_input in payload else MISSING
    out = {}
    for u, f in spec_input.items():
        if f not in payload:
            return MISSING
        out[u] = payload[f]
    return out


def _well_typed(bs: BoundStep, payload: Mapping[str, Any]) -> bool:
    """SEMANTICS §1: a value not of the declared input type of the step's UDM is a malformed payload
    (semantics-notes 17); an absent field is left to the field checks (notes 3)."""
    for f, tp in step_checks(bs):
        if f is None:
            if not tp.accepts(payload):
                return False
        elif f in payload and not tp.accepts(payload[f]):
            return False
    return True


def _invoke_window(bs: BoundStep, members: list[tuple[int, int, str]], w: Window
                   ) -> list[tuple[int, int, Any]]:
    """Call the UDM on one window's clipped, canonically ordered members; outputs as (le, re, payload)."""
    step = bs.step
    assert isinstance(step, WindowStep)
    man = bs.entry.manifest
    props = man.properties
    udm = bs.udm
    values = [json.loads(v) for _, _, v in members]  # fresh objects: a mutating UDM cannot corrupt us
    wd = WindowDescriptor(w.le, w.re)
    arg: list[Any] = ([Event(le, re, v) for (le, re, _), v in zip(members, values, strict=True)]
                      if props.time_sensitive else values)
    try:
        if props.incremental:
            state = udm.initial_state()
            state = udm.add(state, arg)
            result = udm.compute(state, wd) if props.time_sensitive else udm.compute(state)
        else:
            result = udm.compute(arg, wd) if props.time_sensitive else udm.compute(arg)
    except ContractViolation:
        raise
    except Exception as exc:
        raise _violation(bs, w, f"raised {type(exc).__name__}: {exc}") from exc

    if man.kind == "uda":
        return [(w.le, w.re, result)]

    try:
        items = list(result)
    except TypeError:
        raise _violation(bs, w, f"a UDO must return an iterable, got {result!r}") from None
    out: list[tuple[int, int, Any]] = []
    policy = step.output
    for item in items:
        if props.time_sensitive:
            if isinstance(item, Event):
                le, re, payload = item.le, item.re, item.payload
            elif isinstance(item, (tuple, list)) and len(item) == 3:
                le, re, payload = item
            else:
                raise _violation(bs, w, f"a time-sensitive UDO yields Event or (le, re, payload), got {item!r}")
            if (isinstance(le, bool) or isinstance(re, bool) or not isinstance(le, int)
                    or not isinstance(re, int) or re <= le or le >= INF):
                raise _violation(bs, w, f"output lifetime must be integer ticks with le < re, got {item!r}")
            if policy == "window":
                le, re = w.le, w.re
            elif policy in ("unaltered", "time_bound"):
                if le < w.le:
                    raise _violation(bs, w, f"{policy} output starts before the window: {item!r}")
            elif policy == "clip":
                le, re = max(le, w.le), min(re, w.re)
                if re <= le:
                    continue
        else:
            le, re, payload = w.le, w.re, item
        out.append((le, re, payload))
    return out


def _udo_payload(payload: Any, keys: dict[str, Any]) -> dict[str, Any]:
    base = dict(payload) if isinstance(payload, Mapping) else {"value": payload}
    return {**base, **keys}


def step_value(bs: BoundStep, payload: Mapping[str, Any]) -> Any:
    """What a window step's UDM receives of ``payload`` (notes 4), or `MISSING` (notes 3). With
    ``aggregates``: the list of what each UDA receives (missing when any one misses a field)."""
    if bs.parts:
        values = [_map_input(p.step.input, payload) for p in bs.parts]
        return MISSING if any(v is MISSING for v in values) else values
    return _map_input(bs.step.input, payload)


def _aggregates_window(bs: BoundStep, members: list[tuple[int, int, str]], w: Window) -> dict[str, Any]:
    """SEMANTICS §9 ``aggregates``: each UDA on its own component of the members' values, in its own
    canonical order (notes 5); one payload holding every alias."""
    out: dict[str, Any] = {}
    for i, part in enumerate(bs.parts):
        mine = [(le, re, canonical_json(json.loads(v)[i])) for le, re, v in members]
        mine.sort(key=lambda m: (m[0], m[1], m[2]))
        ((_, _, value),) = _invoke_window(part, mine, w)
        out[part.step.alias] = value
    return out


def window_step(bs: BoundStep, events: Iterable[tuple[int, int, Any]], reached: int | None
                 ) -> tuple[list[tuple[int, int, str]], bool]:
    """The output rows of one window step over its input events; also whether endless events were cut."""
    step = bs.step
    assert isinstance(step, WindowStep)
    kind = "uda" if bs.parts else bs.entry.manifest.kind
    groups: dict[str, tuple[dict[str, Any], list[tuple[int, int, str]]]] = {}
    for le, re, payload in events:
        if any(k not in payload for k in step.group_by):
            continue  # notes 3: dead-lettered by this step
        value = step_value(bs, payload)
        if value is MISSING or not _well_typed(bs, payload):
            continue
        keys = {k: payload[k] for k in step.group_by}
        gid = canonical_json([keys[k] for k in step.group_by])
        groups.setdefault(gid, (keys, []))[1].append((le, re, canonical_json(value)))

    rows: list[tuple[int, int, str]] = []
    cut = False
    for gid in sorted(groups):
        keys, evs = groups[gid]
        if isinstance(step.window, (Tumbling, Hopping, Cumulate)) and any(re >= INF for _, re, _ in evs):
            cut = True
        ordered = canonical_rows(evs)
        for w in group_windows(step.window, evs, reached):
            listed = w.rows is not None
            members = [ordered[i] for i in w.rows or ()] if listed else [e for e in evs if w.holds(e[0], e[1])]
            if not members:
                continue  # empty-preserving
            clipped = [(*_clip(le, re, w, step.clip), v) for le, re, v in members]
            clipped.sort(key=lambda m: (m[0], m[1], m[2]))  # SEMANTICS §5 / notes 5
            if bs.parts:
                payload = {**keys, **_aggregates_window(bs, clipped, w)}
                if not _json_ok(payload):
                    raise _violation(bs.parts[0], w, f"output is not JSON-serializable: {payload!r}")
                rows.append((w.le, w.re, canonical_json(payload)))
                continue
            for le, re, out in _invoke_window(bs, clipped, w):
                payload = {**keys, step.alias: out} if kind == "uda" else _udo_payload(out, keys)
                if not _json_ok(payload):
                    raise _violation(bs, w, f"output is not JSON-serializable: {out!r}")
                rows.append((le, re, canonical_json(payload)))
    return rows, cut


# ---------------------------------------------------------------------------------------------------
# span steps (notes 7), physical or on rows


def _udf_call(bs: BoundStep, payload: Mapping[str, Any]) -> Any:
    step = bs.step
    assert isinstance(step, (FilterStep, MapStep))
    args = {}
    for name, f in step.args.items():
        if f not in payload:
            return MISSING
        args[name] = payload[f]
    if not _well_typed(bs, payload):
        return MISSING  # dead-lettered by the step (notes 17)
    try:
        return bs.udm.compute(**args)
    except Exception as exc:
        raise _violation(bs, None, f"raised {type(exc).__name__}: {exc} on {dict(payload)!r}") from exc


def _span_payload(bs: BoundStep, payload: Mapping[str, Any]) -> Any:
    """The step's output payload for an input payload, or `MISSING` when the event does not pass."""
    result = _udf_call(bs, payload)
    if result is MISSING:
        return MISSING
    if isinstance(bs.step, FilterStep):
        return dict(payload) if result else MISSING
    out = {**payload, bs.step.as_: result}
    if not _json_ok(out):
        raise _violation(bs, None, f"result is not JSON-serializable: {result!r}")
    return out


def map_physical(stream: Iterable[Element], payload_of: Callable[[Any], Any]) -> list[Element]:
    """A stream through a payload function (`MISSING`: the insert is dropped, and so are its
    retractions); CTIs pass. The physical form of a filter, a map or a project step."""
    out: list[Element] = []
    passed: set[str] = set()
    for el in stream:
        if isinstance(el, Insert):
            p = payload_of(el.payload)
            if p is MISSING:
                continue
            passed.add(el.id)
            out.append(Insert(el.id, el.le, el.re, p))
        elif isinstance(el, Retract):
            if el.id in passed:
                out.append(Retract(el.id, el.le, el.re, el.re_new))
                if el.re_new <= el.le:
                    passed.discard(el.id)
        else:
            out.append(el)
    return out


def map_rows(rows: Iterable[tuple[int, int, str]], payload_of: Callable[[Any], Any]) -> list[tuple[int, int, str]]:
    """`map_physical` over CHT rows ``(le, re, canonical payload text)``."""
    out = []
    for le, re, text in rows:
        p = payload_of(json.loads(text))
        if p is not MISSING:
            out.append((le, re, canonical_json(p)))
    return out


def span_physical(bs: BoundStep, stream: Iterable[Element]) -> list[Element]:
    return map_physical(stream, lambda p: _span_payload(bs, p))


def span_rows(bs: BoundStep, rows: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    return map_rows(rows, lambda p: _span_payload(bs, p))


def span_reach(bs: BoundStep, stream: Iterable[Element]) -> int | None:
    """Largest finite time among the elements a first span step accepts (inserts with every argument
    field, their retractions, CTIs) — whether or not its predicate keeps them."""
    step = bs.step
    assert isinstance(step, (FilterStep, MapStep))
    fields = list(step.args.values())
    st = StreamState()
    for el in stream:
        if isinstance(el, Insert) and (any(f not in el.payload for f in fields) or not _well_typed(bs, el.payload)):
            continue
        st.apply(el)
    return st.max_finite


def window_input(bs: BoundStep, stream: Iterable[Element], on_violation: str) -> StreamState:
    """The window step's view of a physical stream: field checks (notes 3) then validity with the
    step's ``max_memory_time`` (notes 8)."""
    step = bs.step
    assert isinstance(step, WindowStep)
    st = StreamState(on_violation=on_violation, max_memory_time=step.max_memory_time)  # type: ignore[arg-type]
    for el in stream:
        if isinstance(el, Insert) and (any(k not in el.payload for k in step.group_by)
                                       or step_value(bs, el.payload) is MISSING
                                       or not _well_typed(bs, el.payload)):
            st.rejected.append(Rejected(st.count, el, "missing field or wrong type"))
            st.count += 1
            continue  # its later retractions are unknown ids: StreamState rejects them
        st.apply(el)
    return st
