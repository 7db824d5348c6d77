"""A watched directory on ``--engine spark-streaming`` gives the file run's answer: a CTI applies in place
within its own file (a later element of that file that violates it is a dead letter, as on the local
engine), and to the other files of its micro-batch at the end of it (semantics-notes 44); the summary
counts elements, not files.

The references: the local engine's run of the same file (output CHT, dead-letter file, element count),
the oracle over the order the rule defines, and, for the ordering itself, the rule checked row by row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.cli_harness import udm
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.stream_order import partition_cti_order
from udm.host.temporal.elements import parse_element
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

#: a small stream with a late event (sync time 6) after cti(10) in the same file
EVENTS = [
    {"kind": "insert", "id": "a1", "le": 1, "re": 2, "payload": {"k": "A", "v": 10}},
    {"kind": "insert", "id": "b1", "le": 2, "re": 3, "payload": {"k": "B", "v": 5}},
    {"kind": "insert", "id": "a2", "le": 4, "re": 5, "payload": {"k": "A", "v": 20}},
    {"kind": "insert", "id": "b2", "le": 7, "re": 8, "payload": {"k": "B", "v": 7}},
    {"kind": "cti", "t": 10},
    {"kind": "insert", "id": "late", "le": 6, "re": 7, "payload": {"k": "A", "v": 99}},
    {"kind": "insert", "id": "a3", "le": 12, "re": 13, "payload": {"k": "A", "v": 30}},
    {"kind": "insert", "id": "b3", "le": 15, "re": 16, "payload": {"k": "B", "v": 9}},
    {"kind": "cti", "t": 20},
]
QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["k"],
                    "udm": "avg", "input": "v"}]}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name("." + path.name)
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.rename(path)


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _dead(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _order(rows: list[tuple[int, str, int | None]]) -> list[int]:
    """The positions `partition_cti_order` puts rows ``(partition, kind, t)`` (given in udm_seq order) in."""
    table = pa.table({"udm_seq": pa.array(range(len(rows)), pa.int64()),
                      "udm_part": pa.array([p for p, _, _ in rows], pa.int64()),
                      "kind": pa.array([k for _, k, _ in rows]), "t": pa.array([t for _, _, t in rows], pa.int64())})
    return partition_cti_order(table).column("udm_seq").to_pylist()


def test_each_cti_is_in_place_in_its_partition_and_after_the_others() -> None:
    """Row by row: each partition keeps its order, and when an element reaches the engine, the engine's
    CTI (the largest before it in the new order) is exactly its own partition's latest CTI before it
    (none: no CTI at all)."""
    none = -(2**63)
    rng = np.random.default_rng(5)
    for _ in range(300):
        rows: list[tuple[int, str, int | None]] = []
        own: list[int] = []  # each row's partition's latest CTI up to it, in the input order
        latest: dict[int, int] = {}
        for _ in range(int(rng.integers(1, 30))):
            p = int(rng.integers(0, 4))
            if rng.random() < 0.25:
                t = int(rng.integers(0, 40))  # (lower than the partition's last CTI sometimes: ignored)
                latest[p] = max(latest.get(p, none), t)
                rows.append((p, "cti", t))
            else:
                rows.append((p, "insert", None))
            own.append(latest.get(p, none))
        order = _order(rows)
        assert sorted(order) == list(range(len(rows)))
        for p in {r[0] for r in rows}:
            mine = [i for i in order if rows[i][0] == p]
            assert mine == sorted(mine)
        engine = none
        for i in order:
            if rows[i][1] == "cti":
                t = rows[i][2]
                engine = max(engine, none if t is None else t)
            else:
                assert engine == own[i], (rows, order, i)
    assert _order([(1, "insert", None), (0, "cti", 10), (0, "insert", None), (1, "insert", None)]) == [0, 3, 1, 2]


def _watch(capsys: pytest.CaptureFixture[str], q: Path, inbox: Path, out: Path, dead: Path) -> str:
    code, _, err = udm(capsys, "run", str(q), "-i", str(inbox), "-o", str(out), "--dead-letter", str(dead),
                       "--engine", "spark-streaming", "--until-idle", "2")
    assert code == 0, err
    return err


@pytest.mark.spark
def test_a_watched_directory_equals_the_file_run(spark: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(QUERY), encoding="utf-8")
    src = tmp_path / "events.jsonl"
    _write(src, EVENTS)
    code, _, local_err = udm(capsys, "run", str(q), "-i", str(src), "-o", str(tmp_path / "file.jsonl"),
                             "--dead-letter", str(tmp_path / "file.dead.jsonl"))
    assert code == 0, local_err
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _write(inbox / "events.jsonl", EVENTS)
    err = _watch(capsys, q, inbox, tmp_path / "dir.jsonl", tmp_path / "dir.dead.jsonl")
    verdict = verify(_read(tmp_path / "dir.jsonl"), _read(tmp_path / "file.jsonl"))
    assert verdict, str(verdict)
    assert _dead(tmp_path / "dir.dead.jsonl") == _dead(tmp_path / "file.dead.jsonl")
    assert [d["element"]["id"] for d in _dead(tmp_path / "dir.dead.jsonl")] == ["late"]
    assert err.startswith(f"{len(EVENTS)} elements in,") and local_err.startswith(f"{len(EVENTS)} elements in,")


@pytest.mark.spark
def test_a_cti_does_not_judge_another_file_of_its_micro_batch(spark: Any, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Files A and B land together (one micro-batch): A's late element after A's cti(10) is a dead letter;
    B's element at 5 is not, A's CTI promising only that nothing in a *later* micro-batch is earlier."""
    a = [{"kind": "insert", "id": "x", "le": 1, "re": 2, "payload": {"k": "A", "v": 1.0}},
         {"kind": "cti", "t": 10},
         {"kind": "insert", "id": "lateA", "le": 6, "re": 7, "payload": {"k": "A", "v": 50.0}}]
    b = [{"kind": "insert", "id": "y", "le": 5, "re": 6, "payload": {"k": "A", "v": 2.0}},
         {"kind": "insert", "id": "z", "le": 12, "re": 13, "payload": {"k": "B", "v": 3.0}},
         {"kind": "cti", "t": 20}]
    q = tmp_path / "q.json"
    q.write_text(json.dumps(QUERY), encoding="utf-8")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    _write(inbox / "a.jsonl", a)
    _write(inbox / "b.jsonl", b)
    err = _watch(capsys, q, inbox, tmp_path / "o.jsonl", tmp_path / "d.jsonl")
    logical = [parse_element(r) for r in (a[0], b[0], b[1], a[1], a[2], b[2])]
    expected = oracle_run(bind(parse_query(QUERY)), logical)
    verdict = verify(_read(tmp_path / "o.jsonl"), expected.cht)
    assert verdict, str(verdict)
    dead = _dead(tmp_path / "d.jsonl")
    assert [(d["line"], d["element"]["id"]) for d in dead] == [(3, "lateA")]
    assert dead[0]["reason"] == "CTI violation: sync time 6 < CTI 10"
    assert err.startswith("6 elements in,")
