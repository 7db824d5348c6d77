"""The first-party ``explode`` (INTERFACES §6): one output per element of the list in ``field``, the payload
with ``as`` (default ``field``) set to the element and ``field`` removed when ``as`` differs; a missing or
non-list field is a malformed payload, which ``udm run`` writes to the dead-letter file with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from udm.host.testing import cht, run_contract_checks
from udm.host.testing.cht import format_row
from udm.sdk import MalformedPayload
from udm_patterns import Explode


def _explode(payload: Any, **params: Any) -> list[dict[str, Any]]:
    return list(Explode(Explode.Params.model_validate(params)).compute(payload))


def test_one_output_per_element_in_order_with_duplicates() -> None:
    assert _explode({"k": 1, "items": [3, 1, 3]}) == [{"k": 1, "items": 3}, {"k": 1, "items": 1},
                                                      {"k": 1, "items": 3}]
    assert _explode({"k": 1, "items": []}) == []


def test_as_sets_another_field_and_drops_the_list() -> None:
    assert _explode({"k": 1, "tags": ["a", {"x": [1]}, None]}, field="tags", **{"as": "tag"}) == [
        {"k": 1, "tag": "a"}, {"k": 1, "tag": {"x": [1]}}, {"k": 1, "tag": None}]
    # `as` naming an existing field overwrites it
    assert _explode({"tag": "old", "tags": ["new"]}, field="tags", **{"as": "tag"}) == [{"tag": "new"}]
    # `as` equal to `field`: the default
    assert _explode({"tags": [1]}, field="tags", **{"as": "tags"}) == [{"tags": 1}]


@pytest.mark.parametrize(("payload", "reason"), [
    ({"k": 1}, "missing field 'items'"),
    ({"items": "abc"}, "field 'items' must be a list, got a string"),
    ({"items": {"a": 1}}, "field 'items' must be a list, got an object"),
    ({"items": None}, "field 'items' must be a list, got null"),
    ({"items": 4.5}, "field 'items' must be a list, got a number"),
])
def test_a_missing_or_non_list_field_is_malformed(payload: dict[str, Any], reason: str) -> None:
    with pytest.raises(MalformedPayload) as exc:
        _explode(payload)
    assert exc.value.reason == reason


def test_parameters_validate() -> None:
    with pytest.raises(Exception, match="field"):
        Explode.Params.model_validate({"field": ""})
    with pytest.raises(Exception, match="extra"):
        Explode.Params.model_validate({"fields": "x"})
    p = Explode.Params.model_validate({"field": "t", "as": "x"})
    assert (p.field, p.as_) == ("t", "x")
    assert set(Explode.manifest.params.model_json_schema()["properties"]) == {"field", "as"}


def test_explode_passes_the_conformance_kit() -> None:
    results = run_contract_checks(Explode, seed=3)
    assert all(r.passed for r in results), [str(r) for r in results]
    ran = {r.name for r in results if not r.skipped}
    assert ran == {"manifest", "params_roundtrip", "deterministic", "physical_reordering"}


def test_udm_run_explodes_and_dead_letters_malformed_payloads(tmp_path: Path) -> None:
    events = [
        {"kind": "insert", "id": "o1", "le": 1, "re": 9, "payload": {"order": 1, "skus": ["a", "b"]}},
        {"kind": "insert", "id": "o2", "le": 2, "re": 4, "payload": {"order": 2, "skus": "c"}},
        {"kind": "insert", "id": "o3", "le": 3, "re": 5, "payload": {"order": 3}},
        {"kind": "cti", "t": 3},
        {"kind": "retract", "id": "o1", "le": 1, "re": 9, "re_new": 6},
        {"kind": "retract", "id": "o2", "le": 2, "re": 4, "re_new": 3},
        {"kind": "cti", "t": "inf"},
    ]
    src, out, dl, query = (tmp_path / n for n in ("in.jsonl", "out.jsonl", "dl.jsonl", "q.yaml"))
    src.write_text("".join(json.dumps(e) + "\n" for e in events))
    query.write_text("steps:\n  - op: flat_map\n    udm: explode\n    params: {field: skus, as: sku}\n")
    proc = subprocess.run([sys.executable, "-m", "udm.host.cli.app", "run", str(query), "-i", str(src), "-o",
                           str(out), "--dead-letter", str(dl), "--json"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    from udm.host.temporal.elements import parse_element

    got = cht([parse_element(json.loads(x)) for x in out.read_text().splitlines()])
    assert [format_row(r) for r in got.rows()] == ['[1, 6) {"order":1,"sku":"a"}', '[1, 6) {"order":1,"sku":"b"}']
    dead = [json.loads(x) for x in dl.read_text().splitlines()]
    assert [(d["line"], d["reason"]) for d in dead] == [
        (2, "step s0: malformed payload for UDM explode 1.0.0: field 'skus' must be a list, got a string"),
        (3, "step s0: malformed payload for UDM explode 1.0.0: missing field 'skus'"),
        (6, "step s0: retraction of unknown id 'o2'"),
    ]
    summary = json.loads(proc.stdout)
    assert summary["dead_lettered"] == 3 and summary["elements_out"] == len(out.read_text().splitlines())
