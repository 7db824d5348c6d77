"""The columnar grid path's fresh-window form (`udm.sdk.IncrementalUDA` ``compute_slices``): the windows
made and emitted inside one batch get their values from one ``compute_slices`` call. The output bytes,
dead letters and statistics are the row path's (path off) and the output is the oracle's, when the form
is used, when it declines (raises, returns the wrong length, a non-numeric array or mixed kinds: the
scalar forms run instead), and on streams that hand batches to the row path and back (retractions,
duplicate ids, late and bad lines)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_grid_columnar as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import udm.host.io.jsonl as jsonl
import udm.host.query.runners as runners
from udm.host.testing import generate
from udm.sdk import udm


@udm(name="t_slices_total", version="1.0.0")
class SlicesTotal(tg.Total):
    """`test_grid_columnar.Total` (an int sum with every batch form) plus ``compute_slices``; ``mode``
    picks what that does (and ``calls`` counts its calls)."""

    mode = "ok"
    calls = 0

    def compute_slices(self, values: Any, offsets: Any) -> Any:
        type(self).calls += 1
        sums = [int(values[a:b].sum()) for a, b in itertools.pairwise(offsets)]
        mode = type(self).mode
        if mode == "raise":
            raise RuntimeError("no batch form today")
        if mode == "short":
            return np.array(sums[:-1], dtype=np.int64)
        if mode == "object":
            return np.array(sums, dtype=object)
        if mode == "mixed":
            return [float(s) if i % 2 else s for i, s in enumerate(sums)]
        if mode == "list":
            return sums
        return np.array(sums, dtype=np.int64)


tg._CATALOG.add(SlicesTotal)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    return tg.count_paths(monkeypatch)


def _stream(seed: int, groups: int = 5) -> list[Any]:
    return generate(seed=seed, events=1200, disorder="in_order", duration="point", overlap="high", groups=groups,
                    cti="regular")


@pytest.mark.parametrize("mode", ["ok", "list", "raise", "short", "object", "mixed"])
def test_the_form_or_its_fallback_gives_the_row_paths_bytes(mode: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            taken: dict[str, int]) -> None:
    monkeypatch.setattr(SlicesTotal, "mode", mode)
    monkeypatch.setattr(SlicesTotal, "calls", 0)
    seen = tg._compare(tg._query({"type": "tumbling", "size": 10}, "t_slices_total"), _stream(7), tmp_path,
                       monkeypatch, taken)
    assert seen["columnar"] >= 5 and SlicesTotal.calls >= 5


@pytest.mark.parametrize("udm_name", ["sum", "avg", "count"])
def test_first_party_forms_on_many_groups_and_values_of_both_kinds(udm_name: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   taken: dict[str, int]) -> None:
    for values in ("int", "float"):
        stream = generate(seed=11, events=1500, disorder="in_order", duration="point", overlap="high", groups=200,
                          cti="eager", values=values)
        seen = tg._compare(tg._query({"type": "tumbling", "size": 6}, udm_name), stream, tmp_path, monkeypatch,
                           taken)
        assert seen["columnar"] >= 5


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=hs.integers(0, 10**6), size=hs.integers(1, 25), udm_name=hs.sampled_from(["sum", "avg", "t_slices_total"]),
       batch=hs.sampled_from([60, 150]))
def test_hand_overs_with_retractions_duplicates_and_bad_lines(seed: int, size: int, udm_name: str, batch: int,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """`test_grid_columnar._dirty_in_order` streams (retractions, duplicate ids, late and bad lines mixed
    into in-order data): the batches without them take the form, the others the row path."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runners, "READER_OPTIONS", {"block_bytes": 12000})
        mp.setattr(jsonl, "_PIECE_LINES", 20)
        mp.setattr(jsonl, "_MIN_FAST_LINES", 10)
        mp.setattr(SlicesTotal, "mode", "ok")
        seen = tg.count_paths(mp)
        tmp = tmp_path_factory.mktemp("h")
        inp = tmp / "in.jsonl"
        inp.write_text("\n".join(tg._dirty_in_order(seed, 1200)) + "\n", encoding="utf-8")
        got = tg._compare(tg._query({"type": "tumbling", "size": size}, udm_name), inp, tmp, mp, seen, batch=batch)
        assert got["columnar"] >= 1 and got["row"] >= 1
        assert any(json.loads(line).get("kind") == "insert" for line in (tmp / "col.jsonl").read_text().splitlines())
