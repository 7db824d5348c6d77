"""Parsing physical elements (INTERFACES §1): every malformed shape is a BadElement with a reason."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any

import pytest

from udm.host.errors import BadElement
from udm.host.temporal import Cti, Insert, Retract, element_to_json, parse_element, sync_time
from udm.host.temporal.elements import inserts
from udm.sdk import INF


def test_parses_the_three_kinds_of_interfaces_section_1() -> None:
    ins = parse_element({"kind": "insert", "id": "e1", "le": 5, "re": 10, "payload": {"sym": "A", "price": 10.5}})
    ret = parse_element({"kind": "retract", "id": "e1", "le": 5, "re": 10, "re_new": 7})
    cti = parse_element({"kind": "cti", "t": 8})
    assert ins == Insert("e1", 5, 10, {"sym": "A", "price": 10.5})
    assert ret == Retract("e1", 5, 10, 7)
    assert cti == Cti(8)


def test_inf_and_defaults() -> None:
    e = parse_element({"kind": "insert", "id": 7, "le": 1, "re": "inf"})
    assert e == Insert("7", 1, INF, {})
    assert parse_element({"kind": "cti", "t": "INF"}) == Cti(INF)
    full = parse_element({"kind": "retract", "id": "a", "le": 1, "re": "inf", "re_new": 1})
    assert isinstance(full, Retract) and full.is_full


def test_sync_time_follows_semantics_section_1() -> None:
    assert sync_time(Insert("a", 3, 9)) == 3
    assert sync_time(Retract("a", 3, 9, 5)) == 5  # shorten: earliest time changed is the new end
    assert sync_time(Retract("a", 3, 9, 12)) == 9  # extend: the old end
    assert sync_time(Cti(4)) == 4


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ([1, 2], "JSON object"),
        ({"kind": "upsert", "id": "a"}, "unknown element kind"),
        ({"kind": "insert", "le": 1, "re": 2}, "missing field 'id'"),
        ({"kind": "insert", "id": "a", "re": 2}, "missing field 'le'"),
        ({"kind": "insert", "id": "a", "le": 5, "re": 5}, "le < re"),
        ({"kind": "insert", "id": "a", "le": 5, "re": 3}, "le < re"),
        ({"kind": "insert", "id": "a", "le": "inf", "re": "inf"}, "le cannot be"),
        ({"kind": "insert", "id": "a", "le": 1.0, "re": 3}, "float"),
        ({"kind": "insert", "id": "a", "le": True, "re": 3}, "integer tick"),
        ({"kind": "insert", "id": "a", "le": 1, "re": 3, "payload": [1]}, "payload must be a JSON object"),
        ({"kind": "insert", "id": {"x": 1}, "le": 1, "re": 3}, "id must be a string"),
        ({"kind": "retract", "id": "a", "le": 5, "re": 9, "re_new": 4}, "re_new >= le"),
        ({"kind": "retract", "id": "a", "le": 5, "re": 9}, "missing field 're_new'"),
        ({"kind": "cti"}, "missing field 't'"),
        ({"kind": "cti", "t": "soon"}, "integer tick"),
    ],
)
def test_malformed_elements_name_the_problem(obj: Any, needle: str) -> None:
    with pytest.raises(BadElement) as info:
        parse_element(obj, line=12)
    assert needle in info.value.reason
    assert info.value.line == 12
    assert str(info.value).startswith("line 12: ")


def test_json_round_trip() -> None:
    for el in (Insert("a", 1, INF, {"x": 1}), Retract("a", 1, INF, 4), Retract("b", 2, 3, 2, {"y": 2}), Cti(INF)):
        data = element_to_json(el)
        assert parse_element(data) == el
    assert element_to_json(Insert("a", 1, INF))["re"] == "inf"


def test_inserts_made_at_once_are_the_inserts_insert_makes() -> None:
    rng = random.Random(3)
    rows = [(f"o{i}", rng.randrange(-5, 5), rng.randrange(5, 10), {"v": rng.random(), "g": None}) for i in range(50)]
    got = inserts(*(list(c) for c in zip(*rows, strict=True)))
    want = [Insert(*r) for r in rows]
    assert got == want
    assert [hash((x.id, x.le, x.re)) for x in got] == [hash((x.id, x.le, x.re)) for x in want]
    assert [repr(x) for x in got] == [repr(x) for x in want]
    assert pickle.loads(pickle.dumps(got)) == want
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].le = 1  # type: ignore[misc]
    assert inserts([], [], [], []) == []
