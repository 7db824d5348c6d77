"""Session windows as columns (`udm.host.engine.window.session_columns`): the groups that hold only rows of
never-output sessions are kept as family-wide arrays, and the sessions a CTI closes are valued and written
together at each flush. It must be the per-group rule's vector form: the same output CHT, dead letters and run
statistics as the per-group structure alone and the kit's oracle, on generated streams (many groups, late
events that bridge sessions, retractions of held events, long and endless events, CTIs inside batches,
speculation at the watermark, batches of one element and of a thousand), with the columns really taking
part."""

from __future__ import annotations

import random
from typing import Any

import pytest
from batch_runs import run_in_batches
from test_engine_support import check_physical, cht

from udm.host.engine import QueryRunner
from udm.host.engine.window import session, session_columns, session_heads, session_released
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing import oracle
from udm.sdk import INF


def _stream(seed: int, n: int, groups: int, kind: str) -> list[Element]:
    """``groups`` groups with bursts and pauses (sessions open and close), events up to 60 ticks late (some
    behind a CTI: refused), a few long or endless ones, deletions, shortened and extended lifetimes (some
    right at a CTI that equals the end), CTIs that trail the stream; values int, float or both."""
    rng = random.Random(seed)
    out: list[Element] = []
    live: list[tuple[str, int, int]] = []
    cti = -1
    t = 0
    for i in range(n):
        t += rng.choice([0, 1, 1, 2, 3, 15])
        le = t - (rng.randrange(60) if rng.random() < 0.15 else 0)
        r = rng.random()
        re = le + (INF - le if r < 0.005 else rng.randrange(2, 40) if r < 0.05 else 1)
        v: Any = rng.randrange(-50, 100)
        if kind == "float" or (kind == "mixed" and rng.random() < 0.5):
            v = v / 4
        g = int(rng.paretovariate(1.2)) % groups
        out.append(Insert(f"e{i}", le, re, {"g": g, "v": v}))
        live.append((f"e{i}", le, re))
        if rng.random() < 0.04 and live:
            j = rng.randrange(max(0, len(live) - 30), len(live))
            eid, le0, re0 = live[j]
            if re0 < INF:
                new = rng.choice([le0, le0 + 1, re0 + rng.randrange(1, 20)])
                if new != re0 and new > le0:
                    live[j] = (eid, le0, new)
                elif new != re0:
                    del live[j]
                out.append(Retract(eid, le0, re0, new))
        if rng.random() < 0.04:
            cti = max(cti, t - rng.randrange(50))
            if rng.random() < 0.3:  # (a CTI at an end, then that end extended: still allowed)
                eid, le0, re0 = live[-1]
                if cti <= re0 < INF:
                    cti = re0
                    live[-1] = (eid, le0, re0 + 5)
                    out.append(Cti(cti))
                    out.append(Retract(eid, le0, re0, re0 + 5))
                    continue
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


def _run(q: Any, stream: list[Element], chunk: int) -> list[Any]:
    """The output CHT after every batch (so the timing of outputs counts too), dead letters, run statistics."""
    r = QueryRunner(q)
    out: list[Any] = []
    tables = []
    for a in range(0, len(stream), chunk):
        part = stream[a:a + chunk]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
        tables.append(cht([e for e in out if not isinstance(e, Cti)] + [Cti(INF)]))
    out += r.finish()
    check_physical(out)
    st = r.stats
    return [cht(out), tables, [(d.line, d.reason) for d in r.dead_letters], st.windows_emitted, st.truncated_at,
            [e.t for e in out if isinstance(e, Cti)]]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the sessions the columns write."""
    written = [0]
    real = session_columns.Tail._write

    def counted(self: Any, step: Any, out: Any, em: Any, s0: Any, *a: Any) -> None:
        written[0] += len(s0)
        real(self, step, out, em, s0, *a)

    monkeypatch.setattr(session_columns.Tail, "_write", counted)
    return written


def _off(m: pytest.MonkeyPatch) -> None:
    """Every group by the per-group structure."""
    m.setattr(session, "columns_ok", lambda step: False)


def _same_both_ways(q: Any, stream: list[Element], chunks: tuple[int, ...], seed: int) -> Any:
    """For each batch size, the per-group structure's run equals the oracle, and the columns' run equals it
    (output after every batch, dead letters, statistics). Returns the oracle's CHT."""
    want = oracle(q.spec, stream)
    for chunk in chunks:
        with pytest.MonkeyPatch.context() as m:
            _off(m)
            off = _run(q, stream, chunk)
        assert off[0] == want
        assert _run(q, stream, chunk) == off, (seed, chunk)
    return want


def _query(gap: int, udm: str, **kw: Any) -> Any:
    step = {"op": "window", "window": {"type": "session", "gap": gap}, "group_by": ["g"], "udm": udm,
            "input": "v", **kw}
    return bind(parse_query({"steps": [step]}))


@pytest.mark.parametrize("gap", [0, 5, 30])
@pytest.mark.parametrize(("udm", "kind"), [("count", "int"), ("sum", "int"), ("sum", "mixed"), ("avg", "float"),
                                           ("max", "mixed")])
def test_columns_equal_the_per_group_rule(gap: int, udm: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = _query(gap, udm)
    written = _counted(monkeypatch)
    for seed in range(2):
        stream = _stream(seed, 1500, 40, kind)
        _same_both_ways(q, stream, (137, 1000), seed)
    assert written[0] > 100  # the columns valued many sessions


@pytest.mark.parametrize("max_delay", [20, INF])
def test_speculation_and_strong_consistency(max_delay: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions output before a CTI closes them (``max_delay`` behind the watermark) leave the columns and are
    diffed by the per-group structure when they change; under strong consistency the columns stay out."""
    q = _query(10, "sum", max_delay=max_delay)
    written = _counted(monkeypatch)
    for seed in range(3):
        stream = _stream(seed, 1200, 25, "int")
        _same_both_ways(q, stream, (137, 1000), seed)
    assert (written[0] > 50) == (max_delay < INF)


def test_a_count_without_input_reads_whole_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``count`` with no input receives payloads (objects, not numbers): same output."""
    q = bind(parse_query({"steps": [{"op": "window", "window": {"type": "session", "gap": 8}, "group_by": ["g"],
                                     "udm": "count"}]}))
    stream = _stream(5, 1500, 30, "int")
    written = _counted(monkeypatch)
    on = _run(q, stream, 500)
    assert on[0] == oracle(q.spec, stream)
    assert written[0] > 50
    _off(monkeypatch)
    assert _run(q, stream, 500) == on


def test_a_snapshot_between_batches_keeps_the_columns() -> None:
    """A runner pickled between batches (rows held in the columns) and restored gives the same output."""
    q = _query(12, "sum")
    stream = _stream(7, 2000, 30, "int")
    want = oracle(q.spec, stream)
    assert run_in_batches(q, stream, 300, cuts=range(len(stream))).table == want


@pytest.mark.parametrize("gap", [0, 3])
def test_a_session_ending_at_the_cti_is_final_only_with_a_gap(gap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``gap`` 0 a session ending at the CTI holds a member ending there, which a later element can still
    extend: it is not closed (nor dropped) by that CTI; with a gap its members end before the CTI."""
    first: list[Element] = [Insert(f"p{i}", i, i + 1, {"g": 1 + i % 4, "v": i}) for i in range(20)]
    first += [Insert("x", 30, 35 - gap, {"g": 0, "v": 7}), Cti(35)]
    stream = [*first, *(Insert(f"q{i}", 40 + i, 41 + i, {"g": i % 3, "v": i}) for i in range(19)),
              Retract("x", 30, 35 - gap, 38), Cti(10**18)]
    q = _query(gap, "sum")
    want = oracle(q.spec, stream)
    on = _run(q, stream, len(first))
    assert on[0] == want
    _off(monkeypatch)
    assert _run(q, stream, len(first)) == on


def _kinds_stream(seed: int, n: int, groups: int) -> list[Element]:
    """Groups whose values are all ints, all floats (integral ones among them: ``3.0``) or both, arriving in
    phases of ints alone, floats alone and both, so that one flush values sessions from columns of different
    kinds and an all-int session's rows come from an int column and a mixed one; late events, retractions,
    CTIs."""
    rng = random.Random(seed)
    out: list[Element] = []
    live: list[tuple[str, int, int]] = []
    t = cti = 0
    for i in range(n):
        phase = (i // 97) % 3  # ints alone, floats alone, both
        t += rng.choice([0, 1, 2, 4, 13])
        le = max(cti, t - (rng.randrange(30) if rng.random() < 0.1 else 0))
        g = rng.randrange(groups)
        kind = g % 3  # this group's values: int, float, both
        if phase < 2 and kind != 2 and kind != phase:
            g -= kind - 2  # (a group that takes this phase's kind)
            kind = 2
        v: Any = rng.randrange(-50, 100)
        if kind == 1 or (kind == 2 and (phase == 1 or (phase == 2 and rng.random() < 0.5))):
            v = v / rng.choice([1, 4])
        re = le + (rng.randrange(2, 25) if rng.random() < 0.05 else 1)
        out.append(Insert(f"e{i}", le, re, {"g": g, "v": v}))
        live.append((f"e{i}", le, re))
        if rng.random() < 0.03:
            j = rng.randrange(max(0, len(live) - 20), len(live))
            eid, le0, re0 = live.pop(j)
            if re0 > cti:
                out.append(Retract(eid, le0, re0, le0 if le0 >= cti else re0 + 3))
        if rng.random() < 0.05:
            cti = max(cti, t - rng.randrange(40))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


@pytest.mark.parametrize("udm", ["sum", "max", "min", "avg"])
def test_sessions_of_int_and_float_values_are_written_as_the_oracle_writes_them(
        udm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An all-int session gives an int (``49``, not ``49.0``) and an integral float stays a float, whatever the
    kinds of the columns its rows came in and of the sessions valued beside it; a snapshot half-way changes
    nothing."""
    q = _query(6, udm)
    written = _counted(monkeypatch)
    for seed in range(3):
        stream = _kinds_stream(seed, 1800, 12)
        want = oracle(q.spec, stream)
        for chunk in (97, 150, 700):
            assert _run(q, stream, chunk)[0] == want, (seed, chunk)
        assert run_in_batches(q, stream, 200, cuts={800}).table == want, seed
    assert written[0] > 300


def test_a_key_back_within_the_gap_keeps_its_group_and_quiet_groups_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group whose sessions all closed waits in the tail until the CTI is a ``gap`` past its last session's
    end: a key back before that (a new session each round) keeps its group, and keys that stop leave no group
    behind; the output is the oracle's all along."""
    made = [0]
    real = session.SessionFamily.new_group

    def counted(self: Any, g: Any) -> None:
        made[0] += 1
        real(self, g)

    monkeypatch.setattr(session.SessionFamily, "new_group", counted)
    q = _query(10, "sum")
    rounds: list[list[Element]] = []
    for i in range(40):
        t = 20 * i  # (each round's sessions end by t + 13 and close at its CTI, t + 15)
        keys = range(50) if i < 20 else range(25)
        rounds.append([*(Insert(f"e{i}-{k}", t + k % 3, t + k % 3 + 1, {"g": k, "v": i * k}) for k in keys),
                       Cti(t + 15)])
    stream = [el for part in rounds for el in part]
    r = QueryRunner(q)
    out: list[Any] = []
    groups = []
    a = 0
    for part in rounds:  # (a round a batch)
        out += r.process_batch(ElementBatch.from_elements(part, list(range(a, a + len(part)))))
        a += len(part)
        groups.append(r.ops[0].state_size()["groups"])
    out += r.finish()
    assert cht(out) == oracle(q.spec, [*stream, Cti(10**18)])
    assert made[0] == 50  # (every key's group made once)
    assert groups[-1] == 25  # (the keys that stopped: dropped)


def _hot_stream(seed: int, n: int, kind: str) -> list[Element]:
    """A few busy keys whose sessions never pause for the gap (they span the whole stream) beside sporadic
    ones; long events among them that a later retraction shortens, extends or deletes after CTIs passed their
    starts (their sync time is their end; none of key 3, which stays in the tail all along), events a little
    late, CTIs every few events."""
    rng = random.Random(seed)
    out: list[Element] = []
    long: list[tuple[str, int, int]] = []
    t = cti = 0
    for i in range(n):
        t += rng.choice([0, 1, 1, 2])
        le = max(cti, t - (rng.randrange(8) if rng.random() < 0.2 else 0))
        g = rng.randrange(4) if rng.random() < 0.8 else 4 + rng.randrange(40)
        re = le + (rng.randrange(15, 120) if rng.random() < 0.04 else 1)
        v: Any = rng.randrange(-50, 100)
        if kind == "float" or (kind == "mixed" and (i // 200) % 2):
            v = v / 4
        out.append(Insert(f"e{i}", le, re, {"g": g, "v": v}))
        if re > le + 1 and g != 3:
            long.append((f"e{i}", le, re))
        if long and rng.random() < 0.03:
            eid, le0, re0 = long.pop(rng.randrange(len(long)))
            if re0 > cti:
                new = rng.choice([le0, max(cti, le0 + 1), re0 + rng.randrange(1, 30)])
                if new != re0:
                    out.append(Retract(eid, le0, re0, new))
        if rng.random() < 0.1:
            cti = max(cti, t - rng.randrange(10))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


@pytest.mark.parametrize(("udm", "kind", "max_delay"), [("count", "int", 0), ("sum", "mixed", 0), ("avg", "float", 0),
                                                        ("max", "mixed", 0), ("sum", "int", 15)])
def test_long_sessions_freeze_into_heads(udm: str, kind: str, max_delay: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions open across many flushes keep their members before the CTI as one head row and frozen rows
    (`session_heads`): the output is the per-group rule's and the oracle's, whether the session closes (valued
    from its frozen members and the rows after its head, with the flush's other sessions), leaves the tail
    early (a retraction of a frozen member, a speculative release: the frozen members come back as events) or
    is snapshotted half-way; the heads really form, close and leave."""
    seen = {"fold": 0, "members": 0, "take": 0, "compact": 0}
    heads = session_heads.Heads
    real = {k: getattr(heads, k) for k in ("fold", "members", "take", "_compact")}

    def counting(name: str) -> Any:
        def f(self: Any, *a: Any) -> Any:
            got = real[name](self, *a)
            seen[name.strip("_")] += (sum(map(bool, got)) if name == "take" else got is not None if name == "fold"
                                      else 1)
            return got
        return f

    for name in real:
        monkeypatch.setattr(heads, name, counting(name))
    q = _query(10, udm, max_delay=max_delay)
    for seed in range(2):
        stream = _hot_stream(seed, 2500, kind)
        want = _same_both_ways(q, stream, (23, 400), seed)
        assert run_in_batches(q, stream, 50, cuts=range(0, len(stream), 500)).table == want, seed
    assert min(seen.values()) > 0, seen


def _late_stream(seed: int, n: int) -> list[Element]:
    """Sessions that end well before the watermark while the CTI lags behind (output at the speculation
    point, not closed), then late members that join one, bridge two or land just before one."""
    rng = random.Random(seed)
    out: list[Element] = []
    t = cti = 0
    for i in range(n):
        t += rng.choice([0, 1, 2, 3])
        le = max(cti, t - (rng.randrange(25) if rng.random() < 0.3 else 0))
        re = le + (rng.randrange(2, 9) if rng.random() < 0.1 else 1)
        out.append(Insert(f"e{i}", le, re, {"g": rng.randrange(12), "v": rng.randrange(-9, 30)}))
        if rng.random() < 0.08:
            cti = max(cti, t - 30 - rng.randrange(10))
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


def _events_and_windows(r: QueryRunner) -> tuple[int, int]:
    size = r.ops[0].state_size()
    return size["events"], size["windows"]


@pytest.mark.parametrize("udm", ["count", "sum"])
def test_sessions_output_before_their_close_stay_in_the_tail(udm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session released at the watermark before the CTI closes it is written by the tail, which keeps what it
    wrote: unchanged, it closes later without output; changed by a late member, its group leaves with those
    outputs and the per-group structure diffs the change. The same output as the per-group rule and the
    oracle, batch by batch, with snapshots half-way; both cases really happen."""
    seen = {"known": 0, "changed": 0}
    real = session_released.Released.match

    def counted(self: Any, *a: Any) -> Any:
        known, changed = real(self, *a)
        seen["known"] += int(known.sum())
        seen["changed"] += len(changed)
        return known, changed

    monkeypatch.setattr(session_released.Released, "match", counted)
    q = _query(10, udm)
    for seed in range(3):
        stream = _late_stream(seed, 1500)
        want = _same_both_ways(q, stream, (5, 61, 400), seed)
        on = run_in_batches(q, stream, 40, cuts=range(0, len(stream), 400), probe=_events_and_windows)
        with monkeypatch.context() as m:
            _off(m)
            off = run_in_batches(q, stream, 40, probe=_events_and_windows)
        assert on.table == want, seed
        assert on.probes == off.probes, seed  # (groups: quiet)
    assert seen["known"] > 100 and seen["changed"] > 10, seen

