"""Session windows restored from snapshots written by an earlier udmkit (main e8b3c5c, same snapshot format
4): there a session's frozen head was a dict (code -> first LE, count, UDA state) and the groups whose sessions
had all closed sat in an ordered dict beside the tail; now both are arrays (`session_heads`, `session_quiet`),
and the tail's ``__setstate__`` converts. A streaming checkpoint taken before the change resumes through that
conversion, so it must give what an uninterrupted run gives: the output up to the cut (this version's, equal to
the old one's by the oracle) plus the output of the restored runner after it equals the oracle's CHT of the
whole stream.

The snapshots in ``data/session_snapshots_v4_e8b3c5c`` were written by e8b3c5c's engine fed the first
``CUT`` elements of `_stream` in batches of ``CHUNK`` (``python tests/data/session_snapshots_v4_e8b3c5c/make.py
TREE``, TREE a ``git archive e8b3c5c`` export); each holds frozen heads or quiet groups or both, which the test
checks through the converted state so that it cannot pass without exercising the conversion."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_engine_support import check_physical, cht

from udm.host.engine import QueryRunner
from udm.host.engine.window import session_columns
from udm.host.io.batch import ElementBatch
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing import oracle
from udm.sdk import INF

DATA = Path(__file__).parent / "data" / "session_snapshots_v4_e8b3c5c"
CUT = 2000
CHUNK = 250
N = 3000

#: (gap, udm, seed, groups) of each stored snapshot, and what its tail holds at the cut
CASES = [(8, "sum", 21, 30), (30, "avg", 22, 30), (20, "max", 24, 30)]


def _stream(seed: int, n: int, groups: int) -> list[Element]:
    """Groups 0–3 always busy (their sessions stay open past many CTIs: frozen heads), the others switching
    on and off (their sessions close and the group waits, empty, for a row: quiet groups); a few late rows,
    values int or float, CTIs 10 ticks behind."""
    rng = random.Random(seed)
    out: list[Element] = []
    t = 0
    phase = {g: g < 4 or rng.random() < 0.3 for g in range(groups)}
    cti = -1
    for i in range(n):
        t += rng.choice([0, 1, 1, 2])
        if rng.random() < 0.05:
            g = rng.randrange(4, groups)
            phase[g] = not phase[g]
        on = [g for g in range(groups) if phase[g]] or [0]
        g = rng.choice(on)
        le = t - (rng.randrange(8) if rng.random() < 0.1 else 0)
        v = rng.randrange(-50, 100) / (4 if rng.random() < 0.3 else 1)
        out.append(Insert(f"e{i}", le, le + rng.choice([1, 1, 3]), {"g": g, "v": v}))
        if rng.random() < 0.05:
            cti = max(cti, t - 10)
            out.append(Cti(cti))
    return [*out, Cti(10**18)]


def _query(gap: int, udm: str) -> Any:
    return bind(parse_query({"steps": [{"op": "window", "window": {"type": "session", "gap": gap},
                                        "group_by": ["g"], "udm": udm, "input": "v"}]}))


def _feed(r: QueryRunner, stream: list[Element], a: int, b: int) -> list[Any]:
    out: list[Any] = []
    for i in range(a, b, CHUNK):
        part = stream[i:min(i + CHUNK, b)]
        out += r.process_batch(ElementBatch.from_elements(part, list(range(i, i + len(part)))))
    return out


def _tail(r: QueryRunner) -> session_columns.Tail:
    (op,) = r.ops
    tail = op.family.tail
    assert isinstance(tail, session_columns.Tail)
    return tail


def _held(r: QueryRunner) -> dict[str, int]:
    """The state the runner holds but for its groups: an empty group is kept longer now (`session_quiet`'s
    ``KEEP_GAPS``) than when the snapshots were written, which changes nothing but the count of groups."""
    return {k: v for k, v in r.state_size().items() if k != "groups"}


@pytest.mark.parametrize(("gap", "udm", "seed", "groups"), CASES)
def test_an_old_snapshot_resumes_to_the_oracles_answer(gap: int, udm: str, seed: int, groups: int) -> None:
    q = _query(gap, udm)
    stream = _stream(seed, N, groups)
    now = QueryRunner(q)
    before = _feed(now, stream, 0, CUT)
    r = QueryRunner.restore((DATA / f"session_{udm}_{gap}_{seed}.snap").read_bytes(), q)
    assert _held(r) == _held(now)
    after = _feed(r, stream, CUT, len(stream))
    _feed(now, stream, CUT, len(stream))
    assert _held(r) == _held(now)
    after += r.finish()
    out = before + after
    check_physical(out)
    assert cht(out) == oracle(q.spec, stream)


def test_the_old_snapshots_hold_what_the_conversion_converts() -> None:
    """Between them the stored snapshots hold frozen heads and quiet groups, as the converted arrays show."""
    heads = quiet = 0
    for gap, udm, seed, _ in CASES:
        r = QueryRunner.restore((DATA / f"session_{udm}_{gap}_{seed}.snap").read_bytes(), _query(gap, udm))
        tail = _tail(r)
        heads += int((tail.heads.count > 0).sum())
        quiet += int((tail.quiet.until < INF).sum())
    assert heads > 0 and quiet > 0


def test_a_snapshot_naming_what_this_version_lacks_is_refused_in_words() -> None:
    """A snapshot naming a module or class this version does not have is refused with a message, not an
    unpickling traceback (the same name's length keeps the pickle well formed)."""
    data = (DATA / "session_avg_30_22.snap").read_bytes()
    assert b"rows_bulk" in data
    with pytest.raises(ValueError, match="lacks .*another version of udmkit"):
        QueryRunner.restore(data.replace(b"rows_bulk", b"rows_gone"), _query(30, "avg"))
