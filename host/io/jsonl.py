"""Bulk JSON Lines reading into `ElementBatch`es, and the output / dead-letter writers (INTERFACES §1).

Reading: the file is cut into chunks of ``batch_size`` lines. A chunk goes through ``pyarrow.json`` (the
fast path) when every line in it is a valid element of a plain shape; the result is checked column-wise
against the same rules as `udm.host.temporal.elements.parse_element`. Any chunk the fast path cannot
take whole — a malformed line, an invalid element, ``"re": "inf"`` mixed with integer ``re`` values,
payloads of different shapes, ... — is parsed line by line with `json` + `parse_element` instead, so
each bad line becomes one `BadElement` row (reason + line number) and every good line is kept. Both
paths give the same elements (tested).

Blank (whitespace-only) lines are skipped; they are not elements and not bad input. Line numbers are
1-based and count blank lines.

Throughput: each chunk is parsed by pyarrow in one single-threaded block (GIL-free); ``workers=`` parses
several chunks at once in a thread pool and hands the batches out in line order, so parsing overlaps the
consumer (the engine) and uses both cores of a two-core machine. The fast path also hands the engine its
kind codes and time columns ready-made in numpy form (`ElementBatch.column`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from udm.host.errors import BadElement, UdmError
from udm.host.temporal.elements import Element, parse_element
from udm.host.temporal.strict import NotStrictJSON
from udm.host.temporal.strict import loads as strict_loads
from udm.sdk import INF

from .arrow_numpy import arrow_of
from .arrow_pool import use_bulk_pool
from .batch import KIND_BAD, KIND_CTI, KIND_INSERT, KIND_RETRACT, ElementBatch, ints_filled
from .dead_letters import DeadLetterSource, record_columns
from .encode import MIN_RUN, DeferredLines, EncodedLines, element_lines, element_text, merge_lines
from .prefetch import prefetched

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DeadLetterWriter",
    "JsonlReader",
    "JsonlWriter",
    "parse_line",
    "read_jsonl_batches",
    "read_jsonl_elements",
    "struct_payloads",
    "write_jsonl",
]

DEFAULT_BATCH_SIZE = 65536
_I64 = pa.int64()
_STR = pa.string()
_I64_MIN = np.iinfo(np.int64).min
_NULL_PAYLOAD = re.compile(rb'"payload"\s*:\s*null')
_INF_TIME = re.compile(rb'"(re|re_new|t)"\s*:\s*"[iI][nN][fF]"')
_PLAIN_LEAVES = (pa.types.is_int64, pa.types.is_float64, pa.types.is_string, pa.types.is_boolean)


# ---------------------------------------------------------------------------------------------- slow path
def parse_line(text: bytes | str, line: int | None) -> Element | BadElement:
    """One line of a JSONL file -> an element, or the `BadElement` saying why it is not one."""
    try:
        obj = strict_loads(text)
    except NotStrictJSON as exc:
        raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return BadElement(f"malformed value: {exc}", line=line, raw=raw.rstrip("\r\n"))
    except UnicodeDecodeError:
        raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return BadElement("line is not valid UTF-8", line=line, raw=raw.rstrip("\r\n"))
    except ValueError as exc:
        raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        msg = getattr(exc, "msg", str(exc))
        return BadElement(f"not valid JSON: {msg}", line=line, raw=raw.rstrip("\r\n"))
    except RecursionError:
        return BadElement("not valid JSON: nested too deeply", line=line, raw=None)
    try:
        return parse_element(obj, line=line, json_text=True)
    except BadElement as bad:
        return bad


def _slow_batch(lines: list[bytes], first_line: int) -> ElementBatch:
    els: list[Element | BadElement] = []
    nums: list[int] = []
    for i, text in enumerate(lines):
        if not text.strip():
            continue
        ln = first_line + i
        els.append(parse_line(text, ln))
        nums.append(ln)
    return ElementBatch.from_elements(els, nums)


# ---------------------------------------------------------------------------------------------- fast path
def _np_valid(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: not null (no compute pass for a column without nulls: most of a chunk's columns)."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)


_TOP_KEYS = frozenset({"kind", "id", "le", "re", "re_new", "t", "payload"})


def _faithful(arr: pa.Array, parent_valid: np.ndarray, chunk: bytes | bytearray) -> bool:
    """Does ``to_pylist`` of this (struct) array give back exactly what json.loads gave? Only plain
    leaves, no field missing in (or null for) a row whose parent object is present, and no float
    column that pyarrow made out of integer literals (json gives ``28``, pyarrow ``28.0``)."""
    typ = arr.type
    if pa.types.is_struct(typ):
        for k in range(typ.num_fields):
            child = arr.field(k)
            if not np.all(_np_valid(child)[parent_valid]):
                return False
            ctyp = child.type
            if pa.types.is_float64(ctyp) and _has_integral(child) and not _no_int_literals(typ.field(k).name, chunk):
                return False
            if pa.types.is_list(ctyp) and pa.types.is_float64(ctyp.value_type):
                vals = pc.list_flatten(child).drop_null()
                if len(vals) and pc.any(pc.equal(vals, pc.floor(vals))).as_py():
                    return False  # an integral value in a list: maybe written as an integer
            if not _faithful(child, parent_valid, chunk):
                return False
        return True
    if pa.types.is_list(typ):
        if pa.types.is_float64(typ.value_type) and not _finite(pc.list_flatten(arr)):
            return False
        return any(p(typ.value_type) for p in _PLAIN_LEAVES)
    if pa.types.is_float64(typ) and not _finite(arr):
        return False  # pyarrow reads NaN and Infinity, which strict JSON has not: the per-line parser says so
    return any(p(typ) for p in _PLAIN_LEAVES)


def _finite(arr: pa.Array) -> bool:
    """Every (non-null) value finite (SEMANTICS §1: a payload's NaN or infinity is a malformed value)."""
    if arr.null_count:
        arr = arr.drop_null()
    return bool(np.isfinite(arr.to_numpy(zero_copy_only=False)).all())


def _has_integral(arr: pa.Array) -> bool:
    """Any integral value (only those can have been written as integer literals)?"""
    vals = arr.drop_null().to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        return bool(np.any(vals == np.floor(vals)))


def _no_int_literals(name: str, chunk: bytes | bytearray) -> bool:
    """No ``"name": <integer literal>`` anywhere in the chunk (so a float column of that name holds
    only float literals). Conservative: any key of that name at any depth counts, and a chunk where the
    key could be spelled with escapes (``\\u``, ``\\/``) fails. The key is searched as UTF-8 text, as
    it is written in the file (not ``\\u``-escaped, as ``json.dumps`` would spell it)."""
    key_text = json.dumps(name, ensure_ascii=False)
    if name in _TOP_KEYS or "\\" in key_text or _has_escape(chunk, (b"\\u", b"\\/")):
        return False
    if key_text.isascii():
        return not _re2_found(_re2_literal(key_text) + _RE2_INT_VALUE, chunk)
    key = re.escape(key_text.encode())
    return re.search(key + rb"\s*:\s*-?\d+(?=[\s,}\]])", chunk) is None


#: the pattern of `_no_int_literals` after the key, for RE2: ``\s*:\s*-?\d+(?=[\s,}\]])`` of Python's ``re`` on
#: bytes, spelled out (``\s`` is ASCII whitespace 0x09-0x0d and space; RE2 has no look-ahead, and for "is
#: there a match" consuming that one character is the same)
_RE2_INT_VALUE = r"[\x09-\x0d ]*:[\x09-\x0d ]*-?[0-9]+[\x09-\x0d ,}\]]"


def _re2_literal(text: str) -> str:
    """An ASCII text as an RE2 pattern matching exactly it (every non-alphanumeric as a hex escape)."""
    return "".join(c if c.isalnum() else f"\\x{ord(c):02x}" for c in text)


def _re2_found(pattern: str, chunk: bytes | bytearray) -> bool:
    """Does ``pattern`` match anywhere in ``chunk``? pyarrow's RE2 over the chunk in place (no copy):
    about twice as fast as Python's ``re`` here, and it runs without the GIL, which the engine's thread
    needs while the reader's workers parse."""
    arr = pa.Array.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(np.array([0, len(chunk)], dtype=np.int64)),
                                                       pa.py_buffer(chunk)])
    return bool(pc.match_substring_regex(arr, pattern)[0].as_py())


def _has_escape(chunk: bytes | bytearray, escapes: tuple[bytes, ...]) -> bool:
    """Does any of these escapes occur? Checks for a backslash first, with numpy (several times faster
    than a substring search, and most chunks hold none)."""
    if not np.any(np.frombuffer(chunk, dtype=np.uint8) == 92):
        return False
    return any(e in chunk for e in escapes)


def _read_table(chunk: bytes | bytearray) -> pa.Table | None:
    try:
        return pajson.read_json(
            pa.BufferReader(chunk),  # zero-copy (io.BytesIO is read through Python, in copies)
            # One block, one thread: pyarrow's multi-threaded parse of a chunk costs about twice the CPU
            # of a single-threaded one (measured: 66 vs 33 ms per 4 MiB), and CPU is what ``udm run``
            # runs short of; parallelism comes from parsing several chunks at once instead (`JsonlReader`
            # ``workers``). A block as big as the chunk also means no line is ever longer than a block.
            read_options=pajson.ReadOptions(block_size=max(len(chunk), 1 << 16), use_threads=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def struct_payloads(texts: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """A column of JSON-text payloads (null: none) as the struct column the fast reader would have made
    of them, parsed by pyarrow in one call; None when they do not all make one faithful struct
    (`_faithful`: ``to_pylist`` must give back what ``json.loads`` gives) and stay text.

    Engines on Spark receive payloads as text; as a struct, the engine's fast path reads the fields as
    typed columns instead of calling ``json.loads`` per row."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not pa.types.is_string(texts.type) or len(texts) == 0:
        return None
    valid = _np_valid(texts)
    present = texts.filter(pa.array(valid)) if not valid.all() else texts
    if len(present) == 0 or pc.any(pc.match_substring(present, "\n")).as_py():
        return None  # (a text spanning lines would not be one row of the parse)
    joined = pc.binary_join_element_wise(present, pa.scalar(""), "\n")  # every text + "\n", contiguous
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset: joined.offset + len(joined) + 1]
    chunk = joined.buffers()[2][offsets[0]: offsets[-1]].to_pybytes()
    table = _read_table(chunk)
    if table is None or table.num_rows != len(present) or table.num_columns == 0:
        return None
    struct = table.to_struct_array().combine_chunks()
    if not _faithful(struct, np.ones(len(struct), dtype=bool), chunk):
        return None
    if len(present) == len(texts):
        return struct
    idx = np.cumsum(valid) - 1  # row i of the input is row idx[i] of the parse, where valid
    return struct.take(pa.array(idx, mask=~valid))


def _has_time_name(typ: pa.DataType) -> bool:
    if pa.types.is_struct(typ):
        return any(
            typ.field(k).name in ("re", "re_new", "t") or _has_time_name(typ.field(k).type)
            for k in range(typ.num_fields)
        )
    if pa.types.is_list(typ):
        return _has_time_name(typ.value_type)
    return False


def _time_column(tb: pa.Table, name: str, *, allow_inf: bool) -> pa.Array | None:
    """The column as int64 with nulls for absent values, or None when it cannot be taken as is."""
    if name not in tb.column_names:
        return pa.nulls(tb.num_rows, _I64)
    col = tb.column(name).combine_chunks()
    typ = col.type
    if pa.types.is_null(typ):
        return pa.nulls(tb.num_rows, _I64)
    if pa.types.is_int64(typ):
        return col
    if pa.types.is_string(typ) and allow_inf:
        lowered = pc.utf8_lower(col)
        if not pc.all(pc.fill_null(pc.equal(lowered, "inf"), True)).as_py():
            return None
        return pc.if_else(pc.is_valid(col), pa.scalar(INF, _I64), pa.scalar(None, _I64))
    return None


def _fast_batch(chunk: bytes | bytearray, n_lines: int, first_line: int) -> ElementBatch | None:
    """Parse a chunk with pyarrow.json; None when any line needs the per-line path."""
    # Blank lines need no check here: pyarrow skips them, so the row count below no longer matches.
    tb = _read_table(chunk)
    rewritten = False
    if tb is None and _INF_TIME.search(chunk):
        # "re": "inf" next to integer re values: pyarrow cannot mix them in one column. Spell the infinite
        # times as the int64 INF (which parse_element reads as the same INF) and try again.
        tb = _read_table(_INF_TIME.sub(rb'"\1": 9223372036854775807', chunk))
        rewritten = True
    if tb is None:
        return None
    n = tb.num_rows
    if n != n_lines or "kind" not in tb.column_names:
        return None
    kind = tb.column("kind").combine_chunks()
    if not pa.types.is_string(kind.type) or kind.null_count:
        return None
    ins = np.asarray(pc.equal(kind, "insert").to_numpy(zero_copy_only=False), dtype=bool)
    ret = np.asarray(pc.equal(kind, "retract").to_numpy(zero_copy_only=False), dtype=bool)
    cti = np.asarray(pc.equal(kind, "cti").to_numpy(zero_copy_only=False), dtype=bool)
    if not np.all(ins | ret | cti):
        return None
    ev = ins | ret

    le = _time_column(tb, "le", allow_inf=False)
    re_ = _time_column(tb, "re", allow_inf=True)
    re_new = _time_column(tb, "re_new", allow_inf=True)
    t = _time_column(tb, "t", allow_inf=True)
    if le is None or re_ is None or re_new is None or t is None:
        return None

    # id: a string, or an integer (parse_element accepts both and keeps str(id)).
    if ev.any():
        if "id" not in tb.column_names:
            return None
        ids = tb.column("id").combine_chunks()
        if pa.types.is_int64(ids.type):
            ids = pc.cast(ids, _STR)
        elif not pa.types.is_string(ids.type):
            return None
        if not np.all(_np_valid(ids)[ev]):
            return None
    else:
        ids = pa.nulls(n, _STR)

    le_v, re_v, rn_v, t_v = (_np_valid(a) for a in (le, re_, re_new, t))
    if not (np.all(le_v[ev]) and np.all(re_v[ev]) and np.all(rn_v[ret]) and np.all(t_v[cti])):
        return None
    le_np, re_np, rn_np, t_np = (ints_filled(a, 0) for a in (le, re_, re_new, t))
    # an integer 2**63-1 is INF's internal value, not a time (only "inf" writes it): the per-line parser
    # names it. An int64 column holds it only as that literal, unless "inf" was rewritten above (then the
    # chunk is searched for the literal); a column of "inf" strings gives INF rightly.
    if rewritten:
        if _re2_found("9223372036854775807", chunk):
            return None
    elif any(name in tb.column_names and pa.types.is_int64(tb.column(name).type) and np.any(vals[rows] == INF)
             for name, vals, rows in (("re", re_np, ev), ("re_new", rn_np, ret), ("t", t_np, cti))):
        return None
    if not np.all(re_np[ev] > le_np[ev]):  # also makes le finite
        return None
    if np.any(le_np[ev] == _I64_MIN):  # parse_time: below -INF
        return None
    if not np.all(rn_np[ret] >= le_np[ret]):
        return None
    if np.any(t_np[cti] == _I64_MIN):
        return None

    # payload: absent -> null; otherwise an object (struct) of a plain shape.
    payload_valid: np.ndarray | None = None
    if "payload" not in tb.column_names:
        payload: pa.Array = pa.nulls(n, _STR)
    else:
        payload = tb.column("payload").combine_chunks()
        if pa.types.is_null(payload.type):
            payload = pa.nulls(n, _STR)
        elif not pa.types.is_struct(payload.type):
            return None
        else:
            payload_valid = _np_valid(payload)
            if not _faithful(payload, payload_valid, chunk):
                return None
            if rewritten and _has_time_name(payload.type):
                return None  # the rewrite may have touched a payload field of that name

    if ins.any() and (payload_valid is None or not payload_valid[ins].all()) and _explicit_null_payload(chunk):
        return None  # maybe an insert's explicit "payload": null (bad), which pyarrow cannot tell from absent

    # Null out what a row's kind does not use (a CTI's stray "le", ...). Most chunks have nothing to null
    # out: then the columns go in as parsed, and the engine gets their numpy forms ready-made.
    if payload_valid is None:
        payload_valid = np.zeros(n, dtype=bool)
    ids_v = _np_valid(ids) if ev.any() else np.zeros(n, dtype=bool)
    kinds_codes = np.full(n, KIND_BAD, dtype=np.int8)
    kinds_codes[ins] = KIND_INSERT
    kinds_codes[ret] = KIND_RETRACT
    kinds_codes[cti] = KIND_CTI
    table = pa.table(
        {
            "kind": kind,
            "id": _only(ids, ids_v, ev),
            "le": _only(le, le_v, ev),
            "re": _only(re_, re_v, ev),
            "re_new": _only(re_new, rn_v, ret),
            "t": _only(t, t_v, cti),
            "payload": _only(payload, payload_valid, ~cti),
            "line": arrow_of(np.arange(first_line, first_line + n, dtype=np.int64)),
            "error": pa.nulls(n, _STR),
            "raw": pa.nulls(n, _STR),
        }
    )
    return ElementBatch._with_columns(
        table,
        kind_codes=kinds_codes,
        ints={name: _only_np(v, valid, where) for name, v, valid, where in (
            ("le", le_np, le_v, ev), ("re", re_np, re_v, ev), ("re_new", rn_np, rn_v, ret), ("t", t_np, t_v, cti))},
    )


def _explicit_null_payload(chunk: bytes | bytearray) -> bool:
    """Might a line say ``"payload": null``? Asked only when an insert's payload came out null: an explicit
    null is bad for an insert (`parse_element`) and an absent payload is not, and pyarrow parses both as
    null. Anywhere else a null payload is what both paths make of it (a retraction's none, a CTI's
    ignored; nested, `_faithful` refuses the null field), so a chunk whose inserts all have payload
    objects needs no search: it cost ~5 % of the reader's CPU on every block. Conservative: any match
    in the chunk, at any depth, counts. (The literal is looked for with pyarrow's RE2 first: three times
    faster than ``in`` on a block, and without the GIL, which the engine's thread needs while reader
    threads parse.)"""
    return _re2_found("null", chunk) and _NULL_PAYLOAD.search(chunk) is not None


def _only(arr: pa.Array, valid: np.ndarray, where: np.ndarray) -> pa.Array:
    """``arr`` with nulls outside ``where`` (as is when it has none there)."""
    if not np.any(valid & ~where):
        return arr
    return pc.if_else(pa.array(where), arr, pa.scalar(None, arr.type))


def _only_np(vals: np.ndarray, valid: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The int64 column as `ElementBatch.column` gives it: 0 where null, or outside ``where``."""
    return vals if not np.any(valid & ~where) else np.where(where, vals, 0)


# ---------------------------------------------------------------------------------------------- reading
_BLOCK_BYTES = 4 << 20
_PIECE_LINES = 4096  # a block the fast path refuses is retried in pieces this size, so one bad line costs little
_MIN_FAST_LINES = 64


#: the first block read is at most this big, each next one twice the last up to ``block_bytes``: the engine
#: starts on the first lines after a short parse instead of a whole block's (~30 ms per 4 MiB), which a
#: short run (200 k elements: 6 blocks) otherwise spends waiting
_FIRST_BLOCK_BYTES = 256 << 10


def _blocks(f: IO[bytes], block_bytes: int) -> Iterator[bytearray]:
    """Whole-line blocks of about ``block_bytes`` (the last one may lack its final newline); the first
    ones smaller (`_FIRST_BLOCK_BYTES`, doubling). Each block is read into a buffer of its own, right after
    the line carried over from the block before (``readinto``), so its bytes are copied once, by the read:
    joining that line and the read into a second new buffer cost ~3x the read itself (fresh pages each
    time), measured 100 -> ~25 ms of CPU per 120 MB of Nexmark bids (load ~15, medians of 3). A block is
    not changed once it is handed out."""
    rest = b""
    size = min(block_bytes, _FIRST_BLOCK_BYTES)
    while True:
        buf = bytearray(len(rest) + size)
        buf[: len(rest)] = rest
        # (`JsonlReader` gives every stream a ``readinto``; the view is gone once it returns, so buf resizes)
        got = cast(Any, f).readinto(memoryview(buf)[len(rest):]) or 0
        size = min(size * 2, block_bytes)
        if not got:
            if rest:
                yield bytearray(rest)
            return
        end = len(rest) + got
        cut = buf.rfind(b"\n", len(rest), end) + 1
        if cut == 0:  # no line ends in this read: all of it is carried over
            rest = bytes(buf[:end])
            continue
        rest = bytes(buf[cut:end])
        del buf[cut:]
        yield buf


def _split(batch: ElementBatch, batch_size: int) -> Iterator[ElementBatch]:
    n = len(batch)
    if n <= batch_size:
        if n:
            yield batch
        return
    for off in range(0, n, batch_size):
        yield batch.slice(off, batch_size)


def _parse_block(block: bytes | bytearray, newlines: int, first_line: int, batch_size: int,
                 fast: bool) -> list[ElementBatch]:
    """The batches of one whole-line block (holding ``newlines`` newlines), in line order."""
    n_lines = newlines + (0 if block.endswith(b"\n") else 1)
    if fast and n_lines >= _MIN_FAST_LINES:
        b = _fast_batch(block, n_lines, first_line)
        if b is not None:
            return list(_split(b, batch_size))
    lines = bytes(block).split(b"\n")  # (lines as bytes: what `parse_line` reports bad ones from)
    if lines and not lines[-1]:
        lines.pop()
    out: list[ElementBatch] = []
    if fast and n_lines > _PIECE_LINES:
        # Retry in pieces: only the pieces holding the odd lines go line by line.
        for off in range(0, len(lines), _PIECE_LINES):
            piece = lines[off : off + _PIECE_LINES]
            b = _fast_batch(b"".join(piece), len(piece), first_line + off)
            out.extend(_split(b if b is not None else _slow_batch(piece, first_line + off), batch_size))
        return out
    for off in range(0, len(lines), batch_size):
        out.extend(_split(_slow_batch(lines[off : off + batch_size], first_line + off), batch_size))
    return out


def _numbered_blocks(f: IO[bytes], block_bytes: int) -> Iterator[tuple[bytearray, int, int]]:
    """``(block, newlines in it, line number of its first line)``."""
    first = 1
    for block in _blocks(f, block_bytes):
        newlines = int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == 10))  # ~5x bytes.count
        yield block, newlines, first
        first += newlines


def _read(f: IO[bytes], batch_size: int, fast: bool, block_bytes: int) -> Iterator[tuple[ElementBatch, int]]:
    """``(batch, bytes of the file consumed once this batch is done)``."""
    done = 0
    for block, newlines, first in _numbered_blocks(f, block_bytes):
        batches = _parse_block(block, newlines, first, batch_size, fast)
        yield from _with_progress(batches, done, len(block))
        done += len(block)


def _with_progress(batches: list[ElementBatch], done: int, size: int) -> Iterator[tuple[ElementBatch, int]]:
    for k, b in enumerate(batches):
        yield b, done + (size if k == len(batches) - 1 else size * (k + 1) // len(batches))


def _read_parallel(
    f: IO[bytes], batch_size: int, fast: bool, block_bytes: int, workers: int, ahead: int
) -> Iterator[tuple[ElementBatch, int]]:
    """`_read`, with blocks parsed by ``workers`` threads, up to ``ahead`` blocks ahead of the consumer,
    handed out in line order. pyarrow parses without the GIL, so the parse of the next blocks overlaps
    the consumer's work (the engine) and, with two workers, uses both cores while the engine waits.
    One more thread reads the file and counts newlines (`udm.host.io.prefetch.prefetched`), so the calling thread (the
    engine's) only hands blocks to the workers and takes their batches."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="udm-jsonl-reader")
    pending: deque[tuple[Future[list[ElementBatch]], int]] = deque()
    done = 0
    # (one block read ahead of the workers' queue)
    blocks = prefetched(_numbered_blocks(f, block_bytes), 1, "udm-jsonl-reader")
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < ahead:
                nxt = next(blocks, None)
                if nxt is None:
                    exhausted = True
                    break
                block, newlines, first = nxt
                pending.append((pool.submit(_parse_block, block, newlines, first, batch_size, fast), len(block)))
            if not pending:
                return
            fut, size = pending.popleft()
            yield from _with_progress(fut.result(), done, size)
            done += size
    finally:
        blocks.close()
        for fut, _ in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


class _ReadInto:
    """A caller's binary stream that has only ``read`` (a user's file-like object), given the ``readinto``
    `_blocks` reads with: the blocks are cut from its bytes as from any file's."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def readinto(self, view: memoryview) -> int:
        data = self._f.read(len(view)) or b""
        view[: len(data)] = data
        return len(data)


class JsonlReader:
    """Iterates a JSONL file as `ElementBatch`es of at most ``batch_size`` rows, in line order.

    ``path`` may be ``"-"`` (standard input) or an open binary file (one with only ``read`` too).
    ``fast=False`` forces the per-line path (tests, comparison). ``prefetch=k`` reads up to ``k`` batches
    ahead in a background thread (pyarrow parses without the GIL, so reading overlaps the consumer's
    work). ``workers=w`` instead parses blocks (of ``block_bytes``) in ``w`` threads, up to
    ``max(prefetch, w)`` blocks ahead, so that parsing can use every core the consumer leaves idle.
    ``bytes_done`` tells how far the consumer has got (for progress bars)."""

    def __init__(
        self,
        path: str | Path | IO[bytes],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        fast: bool = True,
        prefetch: int = 0,
        block_bytes: int = _BLOCK_BYTES,
        workers: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if workers < 0 or prefetch < 0:
            raise ValueError("prefetch and workers cannot be negative")
        self.path = path
        self.batch_size = batch_size
        self.fast = fast
        self.prefetch = prefetch
        self.block_bytes = block_bytes
        self.workers = workers
        self.bytes_done = 0
        self._file: IO[bytes] | None = None
        self._it: Iterator[Any] | None = None

    def _open(self) -> IO[bytes]:
        p = self.path
        if isinstance(p, (str, Path)):
            if str(p) == "-":
                return sys.stdin.buffer
            try:
                self._file = open(p, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise UdmError(f"cannot read input {p}: {exc.strerror or exc}") from None
            return self._file
        return p if hasattr(p, "readinto") else cast(IO[bytes], _ReadInto(p))

    def __iter__(self) -> Iterator[ElementBatch]:
        use_bulk_pool()  # (the reader allocates most of a run's buffers: `udm.host.io.arrow_pool` says why)
        f = self._open()
        it: Iterator[Any]
        if self.workers > 0:
            it = _read_parallel(f, self.batch_size, self.fast, self.block_bytes, self.workers,
                                max(self.prefetch, self.workers))
        else:
            it = _read(f, self.batch_size, self.fast, self.block_bytes)
            if self.prefetch > 0:
                it = prefetched(it, self.prefetch, "udm-jsonl-reader")
        self._it = it
        try:
            for batch, done in it:
                self.bytes_done = done
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        it, self._it = self._it, None
        if it is not None and hasattr(it, "close"):
            it.close()
        f, self._file = self._file, None
        if f is not None:
            f.close()


def read_jsonl_batches(
    path: str | Path | IO[bytes],
    batch_size: int = DEFAULT_BATCH_SIZE,
    *,
    fast: bool = True,
    prefetch: int = 0,
    block_bytes: int = _BLOCK_BYTES,
    workers: int = 0,
) -> Iterator[ElementBatch]:
    """Yield the file's elements as `ElementBatch`es of at most ``batch_size`` rows each (see `JsonlReader`)."""
    return iter(JsonlReader(path, batch_size, fast=fast, prefetch=prefetch, block_bytes=block_bytes,
                            workers=workers))


def read_jsonl_elements(path: str | Path | IO[bytes], **kw: Any) -> list[tuple[int | None, Element | BadElement]]:
    """The whole file as ``(line, element or BadElement)`` pairs (small files and tests)."""
    out: list[tuple[int | None, Element | BadElement]] = []
    for b in read_jsonl_batches(path, **kw):
        out.extend(b.to_elements())
    return out


# ---------------------------------------------------------------------------------------------- writing
def _open_text(path: str | Path | IO[str], append: bool = False) -> tuple[IO[str], bool]:
    if isinstance(path, (str, Path)):
        if str(path) == "-":
            return sys.stdout, False
        p = Path(path)
        try:
            if not p.parent.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
            return open(p, "a" if append else "w", encoding="utf-8", buffering=1 << 20), True
        except OSError as exc:
            raise UdmError(f"cannot write {p}: {exc.strerror or exc}") from None
    return path, False


def _file_number(f: IO[str]) -> int | None:
    """The file descriptor under a text stream (None: a stream with no file, e.g. ``io.StringIO``, or a
    test's captured stdout)."""
    try:
        return f.fileno()
    except (AttributeError, OSError, ValueError):
        return None


class _Writer:
    """An output file. A failing write (a full disk, a vanished mount) is one `UdmError` naming the file,
    not a traceback."""

    def __init__(self, path: str | Path | IO[str], *, append: bool = False) -> None:
        self._f, self._owned = _open_text(path, append)
        self._name = str(path) if isinstance(path, (str, Path)) else getattr(path, "name", "output")
        self._fd = _file_number(self._f)
        self.count = 0

    def _failed(self, exc: OSError) -> UdmError:
        return UdmError(f"cannot write {self._name}: {exc.strerror or exc}")

    def _write_lines(self, lines: list[str]) -> None:
        if lines:
            try:
                self._f.write("\n".join(lines))
                self._f.write("\n")
            except OSError as exc:
                raise self._failed(exc) from None
            self.count += len(lines)

    def write_encoded(self, lines: EncodedLines | DeferredLines) -> None:
        """Lines already encoded (`udm.host.io.encode`), each ending in a newline, written as they are
        (`DeferredLines`: encoded here first): on a file, its pieces in one ``writev`` per `_IOV_MAX`
        pieces, straight from the encoder's buffers (``writelines`` on the buffered file copied every piece
        shorter than its buffer into it first: ~20 % of the writing's CPU on a span query's output); a
        stream with no file under it (a caller's ``StringIO``) gets the text."""
        if not lines.count:
            return
        if isinstance(lines, DeferredLines):
            lines = lines.make()
        f = self._f
        try:
            if self._fd is not None:
                f.flush()  # what the text layer holds goes first
                _write_all(self._fd, lines.data)
            else:
                f.write(lines.to_bytes().decode("utf-8"))
        except OSError as exc:
            raise self._failed(exc) from None
        self.count += lines.count

    def flush(self) -> None:
        try:
            self._f.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def sync(self) -> int:
        """Flush to disk (fsync) and return the file's size: what a checkpoint may record as written."""
        try:
            self._f.flush()
            fd = self._f.fileno()
            os.fsync(fd)
            return os.fstat(fd).st_size
        except OSError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        try:
            if self._owned:
                self._f.close()
            else:
                self._f.flush()
        except OSError as exc:
            if self._owned:  # the buffer could not be written: drop it, so the file handle is released
                with contextlib.suppress(OSError):
                    self._f.close()
            raise self._failed(exc) from None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: one element's line (without its newline): ``json.dumps(element_to_json(e))``, byte for byte
_line = element_text


class JsonlWriter(_Writer):
    """Writes elements as JSON Lines (INTERFACES §1), ``"inf"`` for infinite times."""

    def write(self, elements: Iterable[Element]) -> None:
        els = elements if isinstance(elements, list) else list(elements)
        if len(els) >= MIN_RUN:  # runs of like inserts (a window step's results) built column-wise
            self.write_encoded(element_lines(els, _line))
        else:
            self._write_lines([_line(e) for e in els])

    def write_one(self, element: Element) -> None:
        self.write((element,))

#: buffers one ``writev`` takes at most (``IOV_MAX`` on Linux and macOS)
_IOV_MAX = 1024


def _write_all(fd: int, pieces: Iterable[Any]) -> None:
    """Every byte of ``pieces``, in order, with ``writev``: a pipe or a terminal may take part of them per
    call; the rest follows from where it stopped."""
    views = [memoryview(p) for p in pieces if len(p)]
    at = 0
    while at < len(views):
        done = os.writev(fd, views[at: at + _IOV_MAX])
        while done and at < len(views):
            size = len(views[at])
            if done >= size:
                done -= size
                at += 1
            else:
                views[at] = views[at][done:]
                done = 0


class DeadLetterWriter(_Writer):
    """Writes dead-letter records, one JSON object a line: ``{"line", "reason", "element"}``; the engine's
    collection of them (a `DeadLetterSource`) column-wise, any other records (`dead_letter_record`'s
    forms) with each element encoded by itself (`udm.host.io.dead_letters`)."""

    def write(self, items: DeadLetterSource | Iterable[Any]) -> None:
        cols = items.columns() if isinstance(items, DeadLetterSource) else [record_columns(items)]
        pieces = [merge_lines(np.arange(len(c)), c.text(), [], []) for c in cols if len(c)]
        if pieces:
            self.write_encoded(EncodedLines(tuple(d for p in pieces for d in p.data), sum(p.count for p in pieces)))


def write_jsonl(path: str | Path | IO[str], elements: Iterable[Element]) -> int:
    with JsonlWriter(path) as w:
        w.write(elements)
        return w.count
