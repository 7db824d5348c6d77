"""Reading a user's table (Parquet, CSV, JSON Lines — a file or a directory of them) as `ElementBatch`es.

The file is streamed in record batches (``ParquetFile.iter_batches``, ``pyarrow.csv.open_csv``,
``pyarrow.json.open_json``), never loaded whole, so memory stays flat however long the file is (bench:
``bench/bench_tables.py``). Each row becomes an insert shaped by `TableOptions` (point, interval or edge);
its payload is the row's other columns, as a struct column when the batch allows it. A row whose time is
null or cannot be read as a time becomes a bad row (dead-lettered with its row number and the row itself);
``line`` is the 1-based data row number over the whole input (a directory's files in name order, a CSV's
header not counted).

Edge events (semantics note 32) are read as the physical stream a live feed of samples would give: a
sample is inserted open-ended (``[t, INF)``) and retracted to ``[t, t_next)`` when its key's next sample
arrives, so the input needs no look-ahead and memory holds one open sample per key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udm.host.errors import UdmError
from udm.host.temporal.strict import TIME_MAX, TIME_MIN, echo_dumps, nonfinite_in
from udm.sdk import INF

from .batch import ElementBatch
from .jsonl import JsonlReader
from .prefetch import prefetched
from .table_columns import kind_text
from .table_options import FORMATS, UNITS, TableOptions, TableSource, detect_format

__all__ = ["TableReader", "microsecond_ticks", "open_reader", "read_table_elements", "time_kind", "timestamp_inputs"]

# lazy imports: pyarrow.parquet, pyarrow.csv, pyarrow.json — each reader only for its format

_I64 = pa.int64()
_STR = pa.string()
_BAD = np.iinfo(np.int64).min  # a time that could not be read (TIME_MIN: never a valid time)
_US = pa.timestamp("us", tz="UTC")


# ------------------------------------------------------------------------------------------ record batches
def _files(path: Path, fmt: str) -> list[Path]:
    if not path.exists():
        raise UdmError(f"input {path} does not exist")
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(("_", "."))
                   and p.name.lower().endswith(FORMATS[fmt]))
    if not files:
        raise UdmError(f"input directory {path} holds no {fmt} files ({', '.join(FORMATS[fmt])})")
    return files


def _record_batches(path: Path, fmt: str, opts: TableOptions, batch_size: int
                    ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The file's record batches, each with the bytes of the file consumed so far (for progress)."""
    size = path.stat().st_size
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            # pre_buffer (the default) keeps every row group read so far in memory: memory would grow with
            # the file; a 1 MiB read buffer streams it (bench/bench_tables.py)
            pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
            total, done = max(pf.metadata.num_rows, 1), 0
            for rb in pf.iter_batches(batch_size=batch_size):
                done += rb.num_rows
                yield rb, size * done // total
            return
        with pa.OSFile(str(path)) as raw:
            stream = pa.CompressedInputStream(raw, "gzip") if path.name.lower().endswith(".gz") else raw
            if fmt == "csv":
                import pyarrow.csv as pcsv

                # time columns are read as text and parsed here, so a bad cell is one dead letter, not a
                # type-inference failure of the whole block
                convert = pcsv.ConvertOptions(column_types={c: _STR for c in opts.time_columns},
                                              strings_can_be_null=True)
                delimiter = "\t" if path.name.lower().endswith(".tsv") else ","
                reader = pcsv.open_csv(stream, read_options=pcsv.ReadOptions(block_size=1 << 22, use_threads=False),
                                       parse_options=pcsv.ParseOptions(delimiter=delimiter),
                                       convert_options=convert)
            elif _json_array(path):
                yield from ((rb, size) for rb in _json_array_batches(path, batch_size))
                return
            else:
                import pyarrow.json as pajson

                reader = pajson.open_json(stream, read_options=pajson.ReadOptions(block_size=1 << 22))
            for rb in reader:
                yield rb, min(raw.tell(), size)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UdmError(f"cannot read {fmt} input {path}: {msg}") from None


def _json_array(path: Path) -> bool:
    if path.name.lower().endswith(".gz"):
        return False
    with path.open("rb") as f:
        return f.read(64).lstrip().startswith(b"[")


def _json_array_batches(path: Path, batch_size: int) -> Iterator[pa.RecordBatch]:
    """One JSON array of records: not streamable, so read whole (documented; JSON Lines streams)."""
    with path.open("rb") as f:
        rows = json.load(f)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UdmError(f"JSON input {path} is an array but not an array of objects")
    yield from pa.Table.from_pylist(rows).to_batches(batch_size)


# ------------------------------------------------------------------------------------------ times
def _text_times(arr: pa.Array, scale: float) -> np.ndarray:
    """Times given as text: an integer/number (in the unit) or an ISO-8601 timestamp; else `_BAD`."""
    out = np.full(len(arr), _BAD, dtype=np.int64)
    for i, s in enumerate(arr.to_pylist()):
        if s is None:
            continue
        s = s.strip()
        try:
            out[i] = _scaled(float(s) if not s.lstrip("-").isdigit() else int(s), scale)
            continue
        except (ValueError, OverflowError):
            pass
        try:
            ts = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            continue
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        delta = ts - datetime(1970, 1, 1, tzinfo=UTC)
        out[i] = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return out


def _scaled(v: float | int, scale: float) -> int:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("not finite")
    if scale == 1 and isinstance(v, int):
        return v
    return math.floor(v * scale)


def times(arr: pa.Array, unit: str) -> np.ndarray:
    """A time column as int64 ticks; rows that are null, unreadable or out of range get `_BAD` (a tick is an
    integer in ``(-2**63, 2**63-1)``, SEMANTICS §1: `udm.host.temporal.strict`)."""
    vals = _ticks(arr, unit)
    vals[vals >= TIME_MAX] = _BAD  # (_BAD is TIME_MIN: below the range already)
    return vals


def _ticks(arr: pa.Array, unit: str) -> np.ndarray:
    scale = UNITS[unit]
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr, typ = arr.dictionary_decode(), arr.type.value_type
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        us = pc.cast(arr.cast(pa.timestamp(typ.unit, tz=getattr(typ, "tz", None) or "UTC"))
                     if pa.types.is_timestamp(typ) else arr, _US, safe=False)
        return np.array(pc.fill_null(us.cast(_I64), _BAD).to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_integer(typ):
        if pa.types.is_uint64(typ):  # (beyond int64 is out of range, not an error of the whole column)
            arr = pc.if_else(pc.less(arr, pa.scalar(2**63 - 1, pa.uint64())), arr, pa.scalar(None, arr.type))
        vals = np.array(pc.fill_null(arr.cast(_I64), _BAD).to_numpy(zero_copy_only=False), dtype=np.int64)
        if scale != 1:
            return _scaled_floats(np.where(vals == _BAD, np.nan, vals.astype(np.float64)), scale)
        return vals
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        return _scaled_floats(pc.fill_null(arr.cast(pa.float64()), math.nan).to_numpy(zero_copy_only=False), scale)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return _text_times(arr.cast(_STR), scale)
    return np.full(len(arr), _BAD, dtype=np.int64)


def _scaled_floats(f: np.ndarray, scale: float) -> np.ndarray:
    """``floor(f * scale)`` as int64 ticks; `_BAD` where ``f`` is NaN/infinite or the result leaves int64."""
    with np.errstate(invalid="ignore", over="ignore"):
        t = np.floor(f * scale)
    ok = np.isfinite(t) & (t > TIME_MIN) & (t < TIME_MAX)
    out = np.full(len(f), _BAD, dtype=np.int64)
    out[ok] = t[ok].astype(np.int64)
    return out


# ------------------------------------------------------------------------------------------ payloads
def _payload_column(arr: pa.Array) -> pa.Array:
    """A payload field in a JSON type: int64, float64, bool, string (timestamps/dates as ISO text)."""
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr = arr.dictionary_decode()
        typ = arr.type
    if pa.types.is_integer(typ):
        return arr.cast(_I64)
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        return arr.cast(pa.float64())
    if pa.types.is_boolean(typ) or pa.types.is_string(typ):
        return arr
    if pa.types.is_large_string(typ):
        return arr.cast(_STR)
    if pa.types.is_null(typ):
        return arr.cast(_STR)
    try:
        return arr.cast(_STR)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else json.dumps(v, default=str) for v in arr.to_pylist()], _STR)


def _nonfinite_reasons(batch: pa.RecordBatch, reserved: frozenset[str], reason: _Reasons) -> None:
    """A row whose payload column holds NaN or an infinity is malformed (SEMANTICS §1): its reason, unless it
    has one already."""
    for name in batch.schema.names:
        typ = batch.schema.field(name).type
        if name in reserved:
            continue
        col = batch.column(name)
        if pa.types.is_floating(typ):
            bad = ~np.asarray(pc.fill_null(pc.is_finite(col), True).to_numpy(zero_copy_only=False), dtype=bool)
        elif _holds_floats(typ):  # lists, structs of floats: their values one by one
            bad = np.array([nonfinite_in(v) is not None for v in col.to_pylist()], dtype=bool)
        else:
            continue
        reason.mark(bad, f"malformed value: column {name!r} is not a finite number (NaN or an infinity)")


def _holds_floats(typ: pa.DataType) -> bool:
    """A nested type with a floating-point value somewhere inside (a list, a struct, a map of them)."""
    if pa.types.is_floating(typ):
        return True
    if pa.types.is_nested(typ):
        return any(_holds_floats(typ.field(i).type) for i in range(typ.num_fields))
    return False


def _payload(batch: pa.RecordBatch, reserved: frozenset[str]) -> pa.Array:
    """The payload of every row: a struct of the non-reserved columns, or their JSON text when a field
    holds nulls (a struct batch must have every field present, `udm.host.io.batch`)."""
    names = [n for n in batch.schema.names if n not in reserved]
    cols = [_payload_column(batch.column(n)) for n in names]
    if not names:
        return pa.array([{}] * batch.num_rows, pa.struct([]))
    if any(c.null_count for c in cols):
        rows = pa.Table.from_arrays(cols, names=names).to_pylist()
        return pa.array([json.dumps({k: v for k, v in r.items()}, separators=(",", ":"))
                         for r in rows], _STR)
    return pa.StructArray.from_arrays(cols, names=names)


# ------------------------------------------------------------------------------------------ reader
class TableReader:
    """`ElementBatch`es from a table input, in row order (iterate; `close` when done).

    ``bytes_done`` approximates the bytes consumed (whole files plus the share of the current one), for
    the progress bar. ``prefetch=k`` reads and converts up to ``k`` batches ahead in a background thread
    (decoding and the conversion's kernels run in pyarrow, without the GIL, beside the engine).
    """

    def __init__(self, source: TableSource, *, batch_size: int = 65536, prefetch: int = 0) -> None:
        self.opts = source.options.check(str(source.path))
        self.path = Path(source.path)
        self.format = detect_format(self.path, self.opts.format)
        self.files = _files(self.path, self.format)
        self.batch_size = batch_size
        self.prefetch = prefetch
        self.bytes_done = 0
        self.rows = 0
        self._open: dict[tuple[Any, ...], tuple[str, int]] = {}  # edge: key -> (id, le) of its open sample
        self._max = _BAD  # largest time seen (for CTIs)
        self._last_cti = _BAD

    def __iter__(self) -> Iterator[ElementBatch]:
        batches = self._batches()
        return prefetched(batches, self.prefetch, "udm-table-reader") if self.prefetch > 0 else batches

    def _batches(self) -> Iterator[ElementBatch]:
        for f in self.files:
            size = f.stat().st_size
            base = self.bytes_done
            checked = False  # every file of a directory must have the columns
            for rb, done in _record_batches(f, self.format, self.opts, self.batch_size):
                self.bytes_done = base + done
                if rb.num_rows == 0:
                    continue
                if not checked:
                    self._check_columns(rb.schema.names, f)
                    checked = True
                yield self._convert(rb)
            self.bytes_done = base + size

    def close(self) -> None:
        """Nothing is held open between batches (each file is opened by its iterator)."""

    def _check_columns(self, names: list[str], f: Path) -> None:
        wanted = [*self.opts.time_columns, *self.opts.key, *([self.opts.id] if self.opts.id else [])]
        missing = [c for c in wanted if c not in names]
        if missing:
            raise UdmError(f"{f}: no column {missing[0]!r}; its columns: {', '.join(names)}")

    # ------------------------------------------------------------------ one record batch
    def _convert(self, rb: pa.RecordBatch) -> ElementBatch:
        o = self.opts
        n = rb.num_rows
        first = self.rows + 1
        self.rows += n
        rows = np.arange(first, first + n, dtype=np.int64)
        le = times(rb.column(o.time or o.start or o.edge), o.unit)
        reason = _Reasons(n)
        tcol = o.time or o.start or o.edge
        reason.mark(le == _BAD, f"column {tcol!r}: no time (null, not a time, or out of range)")
        if o.shape == "point":
            re = le + 1
        elif o.shape == "interval":
            end_col = rb.column(o.end)
            re = times(end_col, o.unit)
            if end_col.null_count:
                re[np.asarray(pc.is_null(end_col).to_numpy(zero_copy_only=False), dtype=bool)] = INF
            reason.mark(re == _BAD, f"column {o.end!r}: not a time, or out of range")
            reason.mark(re <= le, f"column {o.end!r}: end is not after start")
        else:
            re = np.full(n, INF, dtype=np.int64)
        # ids "r<row>": numbers cast to text by pyarrow (numpy's char functions took ~0.25 µs a row)
        ids = (rb.column(o.id).cast(_STR) if o.id else
               pc.utf8_replace_slice(pa.array(rows, _I64).cast(_STR), start=0, stop=0, replacement="r"))
        if o.id and ids.null_count:
            reason.mark(np.asarray(pc.is_null(ids).to_numpy(zero_copy_only=False), dtype=bool),
                        f"column {o.id!r}: no id (null)")
        payload = _payload(rb, o.reserved)
        _nonfinite_reasons(rb, o.reserved, reason)
        if o.shape == "edge":
            return self._edge_batch(rb, rows, le, ids, payload, reason)
        kind = np.where(reason.ok, 0, -1).astype(np.int8)
        plan = _Plan(kind, np.arange(n), rows, ids, le, re, np.full(n, _BAD), reason)
        return self._finish(rb, plan, payload)

    def _edge_batch(self, rb: pa.RecordBatch, rows: np.ndarray, le: np.ndarray, ids: pa.Array,
                    payload: pa.Array, reason: _Reasons) -> ElementBatch:
        """Edge samples: retract the key's open sample to end here, then insert this one open-ended."""
        o = self.opts
        keys = list(zip(*(rb.column(k).to_pylist() for k in o.key), strict=True)) if o.key else [()] * len(le)
        id_list = ids.to_pylist()
        rows_out: list[tuple[int, int, str, int, int, int, int]] = []  # kind, src, id, le, re, re_new, line
        emit = rows_out.append
        good = reason.ok  # (a row's reason is set below only after its own check)
        for i in range(len(le)):
            line = int(rows[i])
            if not good[i]:
                emit((-1, i, "", _BAD, _BAD, _BAD, line))
                continue
            t = int(le[i])
            prev = self._open.get(keys[i])
            if prev is not None:
                if t < prev[1]:
                    reason.set(i, f"column {o.edge!r}: sample at {t} is earlier than the previous sample of "
                                  f"its key at {prev[1]} (edge input must be in time order per key)")
                    emit((-1, i, "", _BAD, _BAD, _BAD, line))
                    continue
                emit((1, -1, prev[0], prev[1], INF, t, line))
            emit((0, i, id_list[i], t, INF, _BAD, line))
            self._open[keys[i]] = (id_list[i], t)
        kind, src, out_ids, les, res, re_news, lines = (list(c) for c in zip(*rows_out, strict=True)) \
            if rows_out else ([] for _ in range(7))
        s = np.asarray(src, dtype=np.int64)
        plan = _Plan(np.asarray(kind, dtype=np.int8), s, np.asarray(lines, dtype=np.int64), pa.array(out_ids, _STR),
                     np.asarray(les, dtype=np.int64), np.asarray(res, dtype=np.int64),
                     np.asarray(re_news, dtype=np.int64), reason)
        return self._finish(rb, plan, payload)

    # ------------------------------------------------------------------ assembling the batch
    def _finish(self, rb: pa.RecordBatch, p: _Plan, payload: pa.Array) -> ElementBatch:
        """The plan's rows as an `ElementBatch`, column by column: a record batch of good point or interval
        rows keeps its payload as it is, other shapes take theirs by source row (CTIs, bad rows: null)."""
        if self.opts.cti_every is not None:
            p = self._with_ctis(p)
        kind, src = p.kind, p.src
        n = len(kind)
        is_ev = (kind == 0) | (kind == 1)
        bad = kind == -1
        any_bad = bool(bad.any())
        with_payload = (kind == 0) & (src >= 0)
        if n == len(payload) and bool(with_payload.all()) and bool((src == np.arange(n)).all()):
            pay = payload  # every row an insert of its own source row, in order
        else:
            pay = payload.take(pa.array(src, _I64, mask=~with_payload))
        ids = p.ids if not any_bad else pc.if_else(pa.array(is_ev), p.ids, pa.scalar(None, _STR))
        errors, raw = pa.nulls(n, _STR), pa.nulls(n, _STR)
        if any_bad:
            assert p.reason.text is not None
            errors = pa.array(np.where(bad, p.reason.text[np.maximum(src, 0)], None), _STR, from_pandas=True)
            texts: list[str | None] = [None] * n
            bad_rows = rb.take(pa.array(src[bad])).to_pylist()
            for j, r in zip(np.flatnonzero(bad).tolist(), bad_rows, strict=True):
                texts[j] = echo_dumps(r, default=str, separators=(",", ":"))
            raw = pa.array(texts, _STR)
        not_ev = None if bool(is_ev.all()) else ~is_ev
        is_cti = kind == 2
        t = p.t if p.t is not None else np.zeros(n, np.int64)
        table = pa.table({
            "kind": kind_text().take(pa.array(kind, pa.int8(), mask=bad if any_bad else None)),
            "id": ids,
            "le": pa.array(p.le, _I64, mask=not_ev),
            "re": pa.array(p.re, _I64, mask=not_ev),
            "re_new": pa.array(p.re_new, _I64, mask=kind != 1),
            "t": pa.array(t, _I64, mask=~is_cti),
            "payload": pay,
            "line": pa.array(p.line, _I64, mask=p.line < 0),
            "error": errors,
            "raw": raw,
        })
        # (the gate reads kinds and times as numpy: handed over as made, nulls as 0, as `ElementBatch.column`)
        ints = {"le": np.where(is_ev, p.le, 0), "re": np.where(is_ev, p.re, 0),
                "re_new": np.where(kind == 1, p.re_new, 0), "t": np.where(is_cti, t, 0)}
        return ElementBatch._with_columns(table, kind_codes=kind.astype(np.int8, copy=True), ints=ints)

    def _with_ctis(self, p: _Plan) -> _Plan:
        """Put a CTI after each row where the running max time minus ``cti_lag`` crosses a new multiple of
        ``cti_every`` (semantics note 33)."""
        every, lag = self.opts.cti_every, self.opts.cti_lag
        assert every is not None
        sync = np.where(p.kind == 1, p.re_new, p.le)
        sync = np.where(p.kind >= 0, sync, _BAD)
        run = np.maximum.accumulate(np.concatenate(([self._max], sync)))[1:]
        if len(run):
            self._max = int(run[-1])
        wm = np.where(run == _BAD, _BAD, run - lag)
        k = np.where(wm == _BAD, _BAD, (wm // every) * every)
        prev = np.concatenate(([self._last_cti], np.maximum.accumulate(k)[:-1])) if len(k) else k
        at = np.flatnonzero((k > prev) & (k > self._last_cti))
        if not len(at):
            return p
        self._last_cti = int(k[at[-1]])
        pos = np.concatenate((np.arange(len(p.kind)), at))
        order = np.argsort(pos, kind="stable")  # a CTI goes right after the row that moved the watermark
        cti_t = np.concatenate((np.zeros(len(p.kind), np.int64), k[at]))[order]
        kind = np.concatenate((p.kind, np.full(len(at), 2, np.int8)))[order]
        src = np.concatenate((p.src, np.full(len(at), -1)))[order]
        line = np.concatenate((p.line, np.full(len(at), -1)))[order]
        ids = p.ids.take(pa.array(order, _I64, mask=kind == 2))
        le = np.concatenate((p.le, np.zeros(len(at), np.int64)))[order]
        re = np.concatenate((p.re, np.zeros(len(at), np.int64)))[order]
        re_new = np.concatenate((p.re_new, np.zeros(len(at), np.int64)))[order]
        return _Plan(kind, src, line, ids, le, re, re_new, p.reason, cti_t)


class _Reasons:
    """Why each source row of a record batch is bad: ``ok`` per row, and the first reason found for the
    others (``text``, made when a row first turns out bad)."""

    __slots__ = ("ok", "text")

    def __init__(self, n: int) -> None:
        self.ok = np.ones(n, dtype=bool)
        self.text: np.ndarray | None = None

    def mark(self, rows: np.ndarray, why: str) -> None:
        """``why`` for the rows in ``rows`` (a boolean mask) that have no reason yet."""
        new = rows & self.ok
        if new.any():
            if self.text is None:
                self.text = np.full(len(self.ok), None, dtype=object)
            self.text[new] = why
            self.ok &= ~new

    def set(self, i: int, why: str) -> None:
        mask = np.zeros(len(self.ok), dtype=bool)
        mask[i] = True
        self.mark(mask, why)


class _Plan:
    """Output rows of one record batch: kind (0 insert, 1 retract, 2 cti, -1 bad), the source row (-1:
    none), line, id, times, and the per-source-row reasons."""

    __slots__ = ("ids", "kind", "le", "line", "re", "re_new", "reason", "src", "t")

    def __init__(self, kind: np.ndarray, src: np.ndarray, line: np.ndarray, ids: pa.Array, le: np.ndarray,
                 re: np.ndarray, re_new: np.ndarray, reason: _Reasons, t: np.ndarray | None = None) -> None:
        self.kind, self.src, self.line, self.ids = kind, src, line, ids
        self.le, self.re, self.re_new, self.reason, self.t = le, re, re_new, reason, t


# ------------------------------------------------------------------------------------------ time type
def time_kind(source: TableSource) -> str:
    """``"timestamps"`` when the table's time column holds timestamps or dates (its ticks are then
    microseconds since the Unix epoch, UTC), else ``"ticks"``; read off the first file's schema (Parquet) or
    its first record batch (CSV, JSON: a first value that is not a number is an ISO timestamp). A numeric
    column in ``s``/``ms``/``us``/``ns`` gives microsecond ticks too, but its type stays a number: ticks."""
    opts = source.options
    col = opts.time or opts.start or opts.edge
    path = Path(source.path)
    fmt = detect_format(path, opts.format)
    first = _files(path, fmt)[0]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(first)
        if col not in schema.names:
            return "ticks"  # (the reader says which column is missing)
        typ = schema.field(col).type
        if pa.types.is_dictionary(typ):
            typ = typ.value_type
        return "timestamps" if pa.types.is_timestamp(typ) or pa.types.is_date(typ) else "ticks"
    for rb, _ in _record_batches(first, fmt, opts, 1024):
        if col not in rb.schema.names:
            return "ticks"
        arr = rb.column(col)
        typ = arr.type
        if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            return "timestamps"
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            for v in arr.to_pylist():
                if v is not None and v.strip():
                    try:
                        float(v)
                    except ValueError:
                        return "timestamps"
                    return "ticks"
            continue
        return "ticks"
    return "ticks"


def timestamp_inputs(inputs: Iterable[Any]) -> bool:
    """Do the inputs' times stand for timestamps? True when there is a table input and every table input's
    time column holds timestamps or dates; element JSON Lines inputs carry ticks and say nothing."""
    tables = [s for s in inputs if isinstance(s, TableSource)]
    return bool(tables) and all(time_kind(s) == "timestamps" for s in tables)


def microsecond_ticks(inputs: Iterable[Any]) -> bool:
    """Are the inputs' ticks microseconds (timestamp columns, or numbers read with ``unit`` s/ms/us/ns), so a
    span of ticks is a duration? As `timestamp_inputs`, per table input."""
    tables = [s for s in inputs if isinstance(s, TableSource)]
    return bool(tables) and all(s.options.unit != "ticks" or time_kind(s) == "timestamps" for s in tables)


# ------------------------------------------------------------------------------------------ dispatch
def open_reader(source: Any, *, batch_size: int, **jsonl_options: Any) -> Any:
    """A reader of `ElementBatch`es for any input: a `TableSource`, else element JSON Lines."""
    if isinstance(source, TableSource):
        return TableReader(source, batch_size=batch_size, prefetch=jsonl_options.get("prefetch", 0))
    return JsonlReader(source, batch_size=batch_size, **jsonl_options)


def read_table_elements(source: TableSource | str | Path | IO[bytes], **options: Any) -> list[Any]:
    """Every ``(line, element or BadElement)`` of a table input (tests, small inputs)."""
    src = source if isinstance(source, TableSource) else TableSource(Path(str(source)), TableOptions(**options))
    reader = TableReader(src)
    return [x for b in reader for x in b.to_elements()]
