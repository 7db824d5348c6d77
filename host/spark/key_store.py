"""Where a streaming key bucket's state lives, and its layout: the stores (`BucketStore`: Spark's state, or
dicts for tests), the per-bucket index of live keys (`KeyIndex`, one small compressed blob), and the slabs
the keys' engines are packed in (`EngineSlabs`: what one call reads and writes of them).

Apart from `udm.host.spark.key_state` (how a call runs its keys' engines) because this is the checkpoint's
format: a change here needs a new streaming layout number (semantics-notes 42, 74).

**Slabs** (semantics-notes 74): a call writes the engines it changed packed together into *slabs*, a state
value each of up to `SLAB_BYTES`; the index names each key's slab. A call reads each slab holding a key it
loads once, and writes one value per `SLAB_BYTES` of changed engines, instead of a state-store round trip
per key each way (at 100 keys a micro-batch those round trips were half of the bucket's time). A slab read
in a call and left under half full has its remaining keys moved to the call's new slabs, so the store holds
at most about twice the live engines; a slab no key lives in is dropped. A slab is stored compressed, as the
index is (`dump_slab`, semantics-notes 77).
"""

from __future__ import annotations

import pickle
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, Protocol

import numpy as np

from udm.host.engine.common import NEG

__all__ = ["INDEX_VERSION", "PARK_KEYS", "SLAB_BYTES", "BucketStore", "DictStore", "EngineSlabs", "KeyEntry",
           "KeyIndex", "SparkStore", "dump_index", "dump_slab", "load_index", "load_slab"]

#: index layout (a new one needs a new streaming layout number, semantics-notes 42); 5: keys first seen in one
#: call share an engine (semantics-notes 78); 4: slabs compressed (semantics-notes 77); 3: the keys as columns
#: worked on in place (semantics-notes 75); 2: engines in slabs
INDEX_VERSION = 5
#: at most this many keys first seen in one call share one engine (semantics-notes 78)
PARK_KEYS = 256
#: a key's numbers in the index, a column each (`KeyIndex`)
_COLUMNS = ("due", "hold", "serial", "out", "slab")
#: `NEG` in an int64 column (no time is -2**63, SEMANTICS §1)
_NEG64 = -(2**63)


def _int64(v: int) -> int:
    return _NEG64 if v <= _NEG64 else v


def _tick(v: Any) -> int:
    return NEG if v == _NEG64 else int(v)
#: a slab's size: the changed engines of a call are written in values of about this many bytes (before
#: compression)
SLAB_BYTES = 1 << 20


#: the start of a compressed index blob (semantics-notes 61)
_ZINDEX = b"udmz1"


def _packed(obj: Any) -> bytes:
    return _ZINDEX + zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), 1)


def dump_index(ix: Any) -> bytes:
    """The index blob: pickled, then zlib-compressed (level 1). Its columns repeat the same large numbers
    (INF dues, NEG CTIs) and key shapes, so 10,000 keys' ~590 KB become ~55 KB for ~2.5 ms of CPU — the blob
    is read and written on every call, by Spark over its state server (semantics-notes 61)."""
    return _packed(ix)


def dump_slab(engines: dict[str, bytes]) -> bytes:
    """A slab blob (pickled engines by key), compressed as the index is. The engines of one query repeat the
    same pickled structure, so a slab shrinks ~100x (500 keys holding one open window each: 1.66 MB to
    ~13 KB, ~6 us of CPU per engine each way): every byte of a slab goes through Spark's state server, its
    state store and its checkpoint, written when the key changes and read when it is loaded again
    (semantics-notes 77)."""
    return _packed(engines)


def load_slab(blob: bytes) -> dict[str, bytes]:
    """`dump_slab`'s blob. (A slab of an older layout is never reached: its index is refused first.)"""
    got: dict[str, bytes] = pickle.loads(zlib.decompress(blob[len(_ZINDEX):]))
    return got


def load_index(blob: bytes) -> Any:
    """`dump_index`'s blob (a plain pickled one, of streaming layouts 3 and 4, is refused as another layout)."""
    if not blob.startswith(_ZINDEX):
        raise ValueError("bucket state of another layout: start from a new checkpoint")
    try:
        return pickle.loads(zlib.decompress(blob[len(_ZINDEX):]))
    except (AttributeError, ImportError) as exc:  # (an index of layouts up to 6: a class of key_state's)
        raise ValueError("bucket state of another layout: start from a new checkpoint") from exc


class BucketStore(Protocol):
    """Where a bucket's per-key state lives: slabs of engines by number (module doc), ids, the index."""

    def get_slab(self, n: int) -> bytes | None: ...
    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        """Every slab in one pass (the end of input needs every key)."""
        ...
    def put_slab(self, n: int, blob: bytes) -> None: ...
    def drop_slab(self, n: int) -> None: ...
    def get_id(self, id: str) -> tuple[str, int] | None: ...
    def put_id(self, id: str, key: str, re: int) -> None: ...
    def drop_id(self, id: str) -> None: ...
    def get_index(self) -> bytes | None: ...
    def put_index(self, blob: bytes) -> None: ...


@dataclass
class DictStore:
    """A `BucketStore` in dicts, counting slab reads and writes (tests: a micro-batch reads only what it
    touches)."""

    slabs: dict[int, bytes] = field(default_factory=dict)
    ids: dict[str, tuple[str, int]] = field(default_factory=dict)
    index: bytes | None = None
    counts: Counter[str] = field(default_factory=Counter)

    def get_slab(self, n: int) -> bytes | None:
        self.counts["slab_reads"] += 1
        got = self.slabs.get(n)
        self.counts["bytes_read"] += len(got) if got is not None else 0
        return got

    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        self.counts["bulk_reads"] += 1
        for n, blob in list(self.slabs.items()):
            self.counts["bytes_read"] += len(blob)
            yield n, blob

    def put_slab(self, n: int, blob: bytes) -> None:
        self.counts["slab_writes"] += 1
        self.slabs[n] = blob

    def drop_slab(self, n: int) -> None:
        self.slabs.pop(n, None)

    def get_id(self, id: str) -> tuple[str, int] | None:
        self.counts["id_reads"] += 1
        return self.ids.get(id)

    def put_id(self, id: str, key: str, re: int) -> None:
        self.counts["id_writes"] += 1
        self.ids[id] = (key, re)

    def drop_id(self, id: str) -> None:
        self.ids.pop(id, None)

    def get_index(self) -> bytes | None:
        self.counts["bytes_read"] += len(self.index) if self.index is not None else 0
        return self.index

    def put_index(self, blob: bytes) -> None:
        self.index = blob


@dataclass
class KeyEntry:
    """One live key in the index."""

    due: int
    hold: int
    serial: int
    #: the output CTI its engine emitted so far
    out: int = NEG
    #: a graph's key with exact dues: per input, the CTI that loads it (`graph_due`)
    dues: dict[str, int] | None = None
    #: the slab holding its engine (module doc; -1 until the call's slabs are written)
    slab: int = -1


@dataclass(eq=False)
class KeyIndex:
    """The per-bucket index (one small blob): which engine each live key lives in, every engine's due and
    hold, the bucket's CTI so far, the idle engine and the counters. The keys first seen in one call share an
    engine (up to `PARK_KEYS` of them, semantics-notes 78): the rows below are engines, named by
    `new_engine`; ``home`` names a key's.

    The keys are kept as columns (int64 arrays and a list of names), not an object each, and a call works
    on them in place: a key's entry is made when it is asked for (`get`), the keys due and the lowest hold
    are found by a comparison over the columns, and the sorted lists of index 2 are gone. Before, every
    call rebuilt an object and two sorted-list entries per key held, in Python: at 5,000 keys a bucket
    ~17 ms a call, 30% of a micro-batch with nothing else to do (semantics-notes 75)."""

    cti: int = NEG
    out: int = NEG
    reached: int = NEG
    truncated_at: int | None = None
    serial: int = 0
    finished: bool = False
    idle: bytes | None = None
    idle_out: int = NEG
    #: how many buckets the stream has (routing by key depends on it; 0: not recorded)
    buckets: int = 0
    #: a query graph's bucket (semantics-notes 52): ``cti`` counts CTI advances of any input, ``ctis`` holds
    #: each input's CTI
    graph: bool = False
    ctis: dict[str, int] | None = None
    #: per slab: how many keys it was written with, and how many of them it still holds
    slabs: dict[int, list[int]] = field(default_factory=dict)
    next_slab: int = 0
    v: int = INDEX_VERSION
    #: every key's engine (semantics-notes 78): key -> the name of the engine it lives in, and each engine's
    #: keys; the next engine's number
    home: dict[str, str] = field(default_factory=dict, repr=False)
    members: dict[str, list[str]] = field(default_factory=dict, repr=False)
    next_engine: int = 0
    #: the engines' rows: engine -> row of the columns (a removed engine's row stays, dead, until the next dump)
    rows: dict[str, int] = field(default_factory=dict, repr=False)
    names: list[str] = field(default_factory=list, repr=False)
    #: the columns by name (`_COLUMNS`); a graph's exact dues per input (`NEG`: none); rows appended in
    #: this call wait in ``fresh`` until a column is read
    cols: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    by_input: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    fresh: list[tuple[int, ...]] = field(default_factory=list, repr=False)
    fresh_dues: list[dict[str, int] | None] = field(default_factory=list, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        self._settle()
        state = {k: v for k, v in self.__dict__.items() if k not in ("rows", "fresh", "fresh_dues")}
        if len(self.rows) < len(self.names):  # (dead rows dropped)
            live = self._live()
            state["names"] = list(compress(self.names, live))
            state["cols"] = {c: a[live] for c, a in self.cols.items()}
            state["by_input"] = {x: a[live] for x, a in self.by_input.items()}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if state.get("v") != INDEX_VERSION:  # another layout: refused by its reader
            return
        self.rows = dict(zip(self.names, range(len(self.names)), strict=True))
        self.fresh, self.fresh_dues = [], []

    # -- the columns ------------------------------------------------------------------------------------
    def _settle(self) -> None:
        """This call's new rows into the columns (a graph's dues of a new input as a new column)."""
        if not self.fresh:
            return
        n = len(self.names) - len(self.fresh)
        add = np.array([[_int64(v) for v in row] for row in self.fresh], np.int64).reshape(-1, len(_COLUMNS))
        self.cols = {c: np.concatenate([self.cols.get(c, np.empty(0, np.int64)), add[:, j]])
                     for j, c in enumerate(_COLUMNS)}
        for x in {x for d in self.fresh_dues if d for x in d} | set(self.by_input):
            new = np.array([_int64(d.get(x, NEG)) if d else _NEG64 for d in self.fresh_dues], np.int64)
            self.by_input[x] = np.concatenate([self.by_input.get(x, np.full(n, _NEG64, np.int64)), new])
        self.fresh, self.fresh_dues = [], []

    def _col(self, c: str) -> np.ndarray:
        self._settle()
        return self.cols.get(c, np.empty(0, np.int64))

    def _live(self) -> np.ndarray:
        """Rows of live keys (a removed or re-added key's older row is dead)."""
        live = np.zeros(len(self.names), bool)
        live[np.fromiter(self.rows.values(), np.int64, len(self.rows))] = True
        return live

    # -- keys -------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, key: object) -> bool:
        return key in self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.rows))

    def get(self, key: str) -> KeyEntry | None:
        i = self.rows.get(key)
        if i is None:
            return None
        base = len(self.names) - len(self.fresh)
        if i >= base:
            due, hold, serial, out, slab = self.fresh[i - base]
            return KeyEntry(due, hold, serial, out, self.fresh_dues[i - base], slab)
        due, hold, serial, out, slab = (_tick(self.cols[c][i]) for c in _COLUMNS)
        dues = {x: _tick(a[i]) for x, a in self.by_input.items() if a[i] != _NEG64}
        return KeyEntry(due, hold, serial, out, dues or None, slab)

    def entries(self) -> Iterator[tuple[str, KeyEntry]]:
        for k in list(self.rows):
            e = self.get(k)
            assert e is not None
            yield k, e

    def set(self, key: str, e: KeyEntry) -> None:
        """Key ``key``'s entry (a new row: rows are not written in place, so a column read stays valid)."""
        self.rows[key] = len(self.names)
        self.names.append(key)
        self.fresh.append((e.due, e.hold, e.serial, e.out, e.slab))
        self.fresh_dues.append(dict(e.dues) if e.dues else None)

    def slab_of(self, key: str) -> int | None:
        """The slab holding key ``key``'s engine (None: not a live key)."""
        i = self.rows.get(key)
        if i is None:
            return None
        base = len(self.names) - len(self.fresh)
        return self.fresh[i - base][4] if i >= base else int(self.cols["slab"][i])

    def set_slab(self, key: str, n: int) -> None:
        i = self.rows[key]
        base = len(self.names) - len(self.fresh)
        if i >= base:
            due, hold, serial, out, _ = self.fresh[i - base]
            self.fresh[i - base] = (due, hold, serial, out, n)
        else:
            self.cols["slab"][i] = n

    def remove(self, key: str) -> None:
        """Engine ``key`` is gone, and with it its keys' home."""
        self.rows.pop(key, None)
        for k in self.members.pop(key, ()):
            if self.home.get(k) == key:
                del self.home[k]

    def new_engine(self) -> str:
        """The name of an engine for keys not seen before (semantics-notes 78)."""
        self.next_engine += 1
        name = f"e{self.next_engine}"
        self.members[name] = []
        return name

    def join(self, key: str, engine: str) -> None:
        """Key ``key`` lives in engine ``engine`` from now on."""
        self.home[key] = engine
        self.members[engine].append(key)

    def lowest_hold(self) -> int | None:
        """The lowest hold of a live key (None: no key)."""
        if not self.rows:
            return None
        hold = self._col("hold")
        return _tick(hold[self._live()].min())

    def due_by(self, c: int) -> list[str]:
        """Keys due by ``c`` (a graph's: by its tick ``c``, or by an input's CTI for exact dues), by due."""
        if not self.rows:
            return []
        live = self._live()
        due = self._col("due")
        hit = live & (due <= _int64(c))
        keys = [k for _, k in sorted((due[i], self.names[i]) for i in np.flatnonzero(hit))]
        if self.ctis and self.by_input:
            more = np.zeros(len(self.names), bool)
            for x, t in self.ctis.items():
                col = self.by_input.get(x)
                if col is not None:
                    more |= (col != _NEG64) & (col <= _int64(t))
            keys += sorted(self.names[i] for i in np.flatnonzero(more & live & ~hit))
        return keys


class SparkStore:
    """`BucketStore` over the bucket's ``transformWithStateInPandas`` state:
    a MapState of slabs by number (the ``engines`` state of streaming layouts 3 to 6, keyed by the slab's
    number as text), a MapState of ids, a ValueState index."""

    def __init__(self, engines: Any, ids: Any, index: Any) -> None:
        self.engines, self.ids, self.index = engines, ids, index

    def get_slab(self, n: int) -> bytes | None:
        got = self.engines.getValue((str(n),))
        return None if got is None else bytes(got[0])

    def all_slabs(self) -> Iterator[tuple[int, bytes]]:
        for (n,), (blob,) in self.engines.iterator():  # (fetched from the state server in batches)
            yield int(n), bytes(blob)

    def put_slab(self, n: int, blob: bytes) -> None:
        self.engines.updateValue((str(n),), (blob,))

    def drop_slab(self, n: int) -> None:
        self.engines.removeKey((str(n),))

    def get_id(self, id: str) -> tuple[str, int] | None:
        got = self.ids.getValue((id,))
        return None if got is None else (str(got[0]), int(got[1]))

    def put_id(self, id: str, key: str, re: int) -> None:
        self.ids.updateValue((id,), (key, re))

    def drop_id(self, id: str) -> None:
        self.ids.removeKey((id,))

    def get_index(self) -> bytes | None:
        return bytes(self.index.get()[0]) if self.index.exists() else None

    def put_index(self, blob: bytes) -> None:
        self.index.update((blob,))


class EngineSlabs:
    """One call's view of the slabs: each read at most once, the call's changed engines written into new ones
    (module doc)."""

    def __init__(self, store: BucketStore, index: KeyIndex) -> None:
        self.store = store
        self.index = index
        #: the slabs read in this call, by number: each key's pickled engine
        self.read: dict[int, dict[str, bytes]] = {}
        #: engines read in bulk (`read_all`), taken by `engine` instead of one read per slab
        self.bulk: dict[str, bytes] = {}

    def engine(self, key: str, e: KeyEntry) -> bytes | None:
        """Key ``key``'s pickled engine (its entry ``e``), or None when its slab does not hold it."""
        snap = self.bulk.pop(key, None)
        return snap if snap is not None else self._slab(e.slab).get(key)

    def read_all(self, keys: Iterable[str]) -> None:
        """Every slab in one pass, for ``keys`` (the end of input needs them all)."""
        where = {k: self.index.slab_of(k) for k in keys}
        for n, blob in self.store.all_slabs():  # (a slab may hold an older copy of a key moved since)
            self.bulk.update((k, snap) for k, snap in load_slab(blob).items() if where.get(k) == n)

    def _slab(self, n: int) -> dict[str, bytes]:
        """Slab ``n``'s engines (read once a call)."""
        got = self.read.get(n)
        if got is None:
            blob = self.store.get_slab(n)
            got = self.read[n] = {} if blob is None else load_slab(blob)
        return got

    def leave(self, n: int) -> None:
        """A key's engine no longer lives in slab ``n``."""
        self.index.slabs[n][1] -= 1

    def write(self, written: dict[str, bytes]) -> None:
        """The call's changed engines into new slabs, with the keys of slabs read in this call and left under
        half full (their bytes as read: moved, not restored); slabs no key lives in dropped (module doc)."""
        ix = self.index
        for n, got in self.read.items():
            size, live = ix.slabs.get(n, (0, 0))
            if live > 0 and 2 * live < size:
                for k, snap in got.items():
                    if ix.slab_of(k) == n and k not in written:
                        written[k] = snap
                        self.leave(n)
        for n in [n for n, (_, live) in ix.slabs.items() if live == 0]:
            del ix.slabs[n]
            self.store.drop_slab(n)
        part: dict[str, bytes] = {}
        size = 0
        for i, (k, snap) in enumerate(written.items()):
            part[k] = snap
            size += len(snap)
            if size >= SLAB_BYTES or i == len(written) - 1:
                n = ix.next_slab
                ix.next_slab += 1
                self.store.put_slab(n, dump_slab(part))
                ix.slabs[n] = [len(part), len(part)]
                for key in part:
                    ix.set_slab(key, n)
                part, size = {}, 0
