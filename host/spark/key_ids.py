"""The id map of a streaming key bucket (``track_ids``): which key holds a live event's id.

Why: a one-bucket DataFrame stream's retractions need not repeat the key fields, so a retraction (or an
insert reusing a live id) is sent to the key that holds its id, as one engine over the bucket would judge it
(semantics-notes 41). The map lives in the bucket's store (`udm.host.spark.key_store.BucketStore`: an entry
per live id with its key and RE); ids inserted in this call are known before the store is written. A graph's
ids are qualified by their input (``input\\x1fid``): each input has ids of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from udm.host.engine import QueryRunner
from udm.host.spark.key_store import BucketStore

__all__ = ["IdMap"]


class IdMap:
    """One call's view of the id map (module doc)."""

    def __init__(self, store: BucketStore, graph: bool) -> None:
        self.store = store
        self.graph = graph
        #: ids inserted in this call -> their key
        self.fresh: dict[str, str] = {}

    def qualify(self, id: str | None, input: str | None) -> str | None:
        """An id as the map keys it: a graph's inputs have ids of their own."""
        return id if id is None or not self.graph else f"{input}\x1f{id}"

    def input_of(self, qualified: str) -> str | None:
        return qualified.split("\x1f", 1)[0] if self.graph else None

    def key_of(self, id: str, input_cti: int) -> str | None:
        """The key holding live id ``id`` (None: none; an entry whose event ended by the input's CTI is gone)."""
        k = self.fresh.get(id)
        if k is None:
            got = self.store.get_id(id)
            if got is not None and got[1] >= input_cti:
                k = got[0]
        return k

    def inserted(self, id: str, key: str) -> None:
        self.fresh[id] = key

    def live_re(self, r: QueryRunner, qualified: str) -> int | None:
        """The RE of live event ``qualified`` in engine ``r``, or None when it is not live."""
        if not self.graph:
            return r.live_end(qualified, r.inputs[0])
        name, id = qualified.split("\x1f", 1)
        return r.live_end(id, name)

    def update(self, r: QueryRunner, ids: dict[str, int], touched: dict[str, str], finished: bool,
               input_cti: Callable[[str | None], int]) -> None:
        """An engine's entries after it (``r``) ran: the ids this call touched (with their keys) as the engine
        now holds them; ``ids`` (its keys' live ids and their REs) kept in step; closed ids forgotten."""
        for id, key in touched.items():
            re = None if finished else self.live_re(r, id)
            if re is not None:
                if ids.get(id) != re:
                    ids[id] = re
                    self.store.put_id(id, key, re)
            elif ids.pop(id, None) is not None or self.fresh.get(id) == key:
                got = self.store.get_id(id)
                if got is not None and got[0] == key:
                    self.store.drop_id(id)
        for id in [i for i, re in ids.items() if finished or re < input_cti(self.input_of(i))]:
            del ids[id]  # closed: the engine forgot it (`Operator.forget_closed`)
            self.store.drop_id(id)
