"""The columnar grid path's id checks (`udm.host.engine.window.grid_columnar`): a batch's insert ids are
proved distinct by `span_ids.ids_distinct` (rising counters, else the exact dictionary check) and
checked against the ids live before the batch (registry and columnar chunks) by Arrow's ``is_in``. On
streams whose ids are rising counters, shuffled counters or arbitrary words, with an id used twice
inside a batch or again while its first event is still open (held), the output
bytes, dead letters and statistics are the row path's and the output is the oracle's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import test_grid_columnar as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs


def _lines(seed: int, n: int, ids: str, dup: float) -> list[str]:
    """An in-order point stream (4 groups, a CTI every ~25 lines) whose ids are ``ids``-shaped; a share
    ``dup`` of the inserts reuse the id of an event no CTI has closed yet (in the same batch or held
    from an earlier one): a duplicate live id. (An id closed by a CTI is free again, semantics-notes 63:
    no duplicate.)"""
    rng = random.Random(seed)
    names = [f"e{k}" for k in range(n)]
    if ids == "shuffled":
        for a in range(0, n, 40):
            part = names[a:a + 40]
            rng.shuffle(part)
            names[a:a + 40] = part
    elif ids == "words":
        names = [rng.choice(["", "a", "b", "x-", "id/"]) + format(rng.getrandbits(24), "x") + "z" * rng.randrange(3)
                 + f"-{k}" for k in range(n)]  # (all different)
    out: list[str] = []
    open_: list[tuple[str, int]] = []  # (id, RE) of the events no CTI has closed yet
    t = cti = 0
    for k in range(n):
        if rng.random() < 0.04:
            cti = max(cti, t - rng.randrange(4))
            out.append(json.dumps({"kind": "cti", "t": cti}))
            open_ = [x for x in open_ if x[1] > cti]
        t += rng.randrange(3)
        eid = names[k]
        if open_ and rng.random() < dup:
            eid = rng.choice(open_)[0]  # (dead-lettered: nothing new is open)
        else:
            open_.append((eid, t + 1))
        out.append(json.dumps({"kind": "insert", "id": eid, "le": t, "re": t + 1,
                               "payload": {"g": f"k{rng.randrange(4)}", "v": rng.randrange(50)}}))
    return out


@pytest.mark.parametrize("ids", ["counter", "shuffled", "words"])
def test_clean_ids_of_every_shape_take_the_columnar_path(ids: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tg.count_paths(monkeypatch)
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(_lines(1, 2000, ids, 0.0)) + "\n", encoding="utf-8")
    got = tg._compare(tg._query({"type": "tumbling", "size": 9}), inp, tmp_path, monkeypatch, seen, batch=120)
    assert got["columnar"] >= 10


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=hs.integers(0, 10**6), ids=hs.sampled_from(["counter", "shuffled", "words"]),
       dup=hs.sampled_from([0.002, 0.01, 0.05]), batch=hs.sampled_from([50, 120]))
def test_reused_ids_give_the_row_paths_bytes(seed: int, ids: str, dup: float, batch: int,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    with pytest.MonkeyPatch.context() as mp:
        seen = tg.count_paths(mp)
        tmp = tmp_path_factory.mktemp("ids")
        inp = tmp / "in.jsonl"
        inp.write_text("\n".join(_lines(seed, 1200, ids, dup)) + "\n", encoding="utf-8")
        got = tg._compare(tg._query({"type": "tumbling", "size": 6}), inp, tmp, mp, seen, batch=batch)
        assert got["columnar"] + got["row"] >= 1
