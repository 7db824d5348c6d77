"""`stream_parts.bucket_blobs`: a linear query's staged micro-batch cut per key bucket on the driver holds, for
each bucket, exactly the rows `run_stream` sends it when it is handed the element rows (its own, every
broadcast row, bucket 0 the unroutable ones), in order, with the columns the bucket's call reads. The
reference below follows `run_stream`'s routing rule row by row; the Spark tests run both forms end to end."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from udm.host.spark.convert import ELEMENT_COLUMNS
from udm.host.spark.stream_parts import bucket_blobs, part_schema
from udm.host.spark.stream_wire import BROADCAST, END_KIND, UNROUTABLE


def _part() -> pa.Table:
    rows = [
        ("insert", "a", 0, 5, None, None, '{"k": 1}', 1, None, None, 1, 1, "[1]"),
        ("insert", "b", 1, 6, None, None, '{"k": 2}', 2, None, None, 3, 0, "[2]"),
        ("cti", None, None, None, None, 1, None, 3, None, None, 5, BROADCAST, None),
        ("retract", "z", 0, 5, 3, None, None, 4, None, None, 7, UNROUTABLE, None),
        ("insert", "c", 2, 7, None, None, '{"k": 1}', 5, None, None, 9, 1, "[1]"),
        (None, None, None, None, None, None, None, 6, "bad json", "{", 11, 0, None),
        (END_KIND, None, None, None, None, None, None, None, None, None, 13, BROADCAST, None),
    ]
    names = [*ELEMENT_COLUMNS, "_seq", "_bucket", "_key"]
    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(names)}).cast(part_schema())


def _decoded(blobs: pa.Table) -> dict[int, list[dict[str, object]]]:
    return {b: pa.ipc.open_stream(blob).read_all().to_pylist()
            for b, blob in zip(blobs.column("_bucket").to_pylist(), blobs.column("_blob").to_pylist(), strict=True)}


def test_each_bucket_gets_the_rows_run_stream_would_send_it() -> None:
    for n in (1, 2, 3):
        part = _part()
        part = part.filter(pc.less(part.column("_bucket"), n))  # (routes the driver gives over n buckets)
        want: dict[int, list[dict[str, object]]] = {}
        for r in part.to_pylist():
            route = r["_bucket"]
            targets = range(n) if route == BROADCAST else [0] if route == UNROUTABLE else [route]
            for b in targets:
                want.setdefault(b, []).append({**{c: r[c] for c in ELEMENT_COLUMNS}, "udm_seq": r["_seq"],
                                               "udm_route": route, "udm_bucket": b, "udm_key": r["_key"]})
        got = _decoded(bucket_blobs(part, n))
        assert got == want
        assert sorted(got) == list(range(n))


def test_a_bucket_without_rows_gets_no_row() -> None:
    part = _part()
    part = part.filter(pc.equal(part.column("_bucket"), 1))
    assert bucket_blobs(part, 3).column("_bucket").to_pylist() == [1]
    assert bucket_blobs(part.slice(0, 0), 3).num_rows == 0
