"""Nexmark-shaped streams (after the Nexmark generator of Tucker et al., as Flink and Beam ship it):
persons, auctions and bids as INTERFACES §1 JSON Lines.

Shape, per ``events`` generated (proportions 1 : 3 : 46 as in Nexmark):

- ticks are milliseconds of event time, one tick per generated event; every event is a point event
  ``[t, t + 1)`` (a bid is an instant);
- *hot keys*: half of the bids go to one of ``HOT_AUCTIONS`` auctions, half of them come from one of
  ``HOT_BIDDERS`` bidders; the rest pick among the recent auctions / all persons uniformly;
- *bounded disorder*: an event's ``le`` lies up to ``disorder`` ticks before its arrival position;
- *CTIs*: every ``cti_every`` elements, a CTI at ``arrival - disorder - 1`` (no element is ever late).

Written with plain string formatting (like `bench.gen`) so generation is not the bottleneck.

`to_parquet` writes the bids as a user's table (``bench.nexmark --format parquet``): one row per bid,
columns ``le``, ``auction``, ``bidder``, ``price``, ``channel``, no id column and no CTI rows; read with
`table_options` (``--time le``, a CTI every 1000 ticks ``disorder + 1`` behind the largest time: the
stream's own CTIs are ``disorder + 1`` behind the arrival position, so no bid is late either way).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HOT_AUCTIONS", "HOT_BIDDERS", "Streams", "generate", "table_options", "to_parquet"]

HOT_AUCTIONS = 10
HOT_BIDDERS = 10
PERSON, AUCTION, BID = 1, 3, 46  # Nexmark's proportions
CHANNELS = ("apple", "google", "facebook", "baidu")


@dataclass(frozen=True)
class Streams:
    bids: Path
    auctions: Path
    persons: Path
    counts: dict[str, int]


def generate(out_dir: Path, events: int, *, disorder: int = 100, cti_every: int = 1000,
             seed: int = 13) -> Streams:
    """Write ``bids.jsonl``, ``auctions.jsonl`` and ``persons.jsonl`` under ``out_dir`` from ``events``
    Nexmark events (the bids file holds 46/50 of them, plus its CTIs)."""
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {k: out_dir / f"{k}.jsonl" for k in ("bids", "auctions", "persons")}
    files = {k: open(p, "w", encoding="utf-8") for k, p in paths.items()}  # noqa: SIM115
    buf: dict[str, list[str]] = {k: [] for k in paths}
    since: dict[str, int] = dict.fromkeys(paths, 0)
    counts: dict[str, int] = dict.fromkeys(paths, 0)
    n_person = n_auction = 0
    total = PERSON + AUCTION + BID
    try:
        for t in range(events):
            r = t % total
            le = max(0, t - rng.randrange(disorder + 1))
            if r < PERSON:
                kind = "persons"
                line = (f'{{"kind":"insert","id":"p{n_person}","le":{le},"re":{le + 1},"payload":'
                        f'{{"id":{n_person},"name":"person{n_person}","state":"{"ABCDEFGH"[n_person % 8]}A",'
                        f'"city":"c{n_person % 50}"}}}}')
                n_person += 1
            elif r < PERSON + AUCTION:
                kind = "auctions"
                seller = n_person - 1 - rng.randrange(min(n_person, 100)) if n_person else 0
                line = (f'{{"kind":"insert","id":"a{n_auction}","le":{le},"re":{le + 1},"payload":'
                        f'{{"id":{n_auction},"seller":{seller},"category":{10 + rng.randrange(5)},'
                        f'"reserve":{100 + rng.randrange(10_000)}}}}}')
                n_auction += 1
            else:
                kind = "bids"
                if rng.random() < 0.5:
                    auction = rng.randrange(HOT_AUCTIONS) * 7  # a few ids everybody bids on
                else:
                    auction = max(0, n_auction - 1 - rng.randrange(min(max(n_auction, 1), 2000)))
                bidder = rng.randrange(HOT_BIDDERS) * 11 if rng.random() < 0.5 else rng.randrange(max(n_person, 1))
                line = (f'{{"kind":"insert","id":"b{t}","le":{le},"re":{le + 1},"payload":'
                        f'{{"auction":{auction},"bidder":{bidder},"price":{100 + rng.randrange(1_000_000)},'
                        f'"channel":"{CHANNELS[rng.randrange(4)]}"}}}}')
            b = buf[kind]
            b.append(line)
            counts[kind] += 1
            since[kind] += 1
            if since[kind] >= cti_every:
                b.append(f'{{"kind":"cti","t":{max(0, t - disorder - 1)}}}')
                counts[kind] += 1
                since[kind] = 0
            if len(b) >= 65536:
                files[kind].write("\n".join(b) + "\n")
                b.clear()
        for k, b in buf.items():
            if b:
                files[k].write("\n".join(b) + "\n")
    finally:
        for f in files.values():
            f.close()
    return Streams(paths["bids"], paths["auctions"], paths["persons"], counts)


def table_options(disorder: int = 100, cti_every: int = 1000) -> dict[str, Any]:
    """`udm.host.io.table_options.TableOptions` of the `to_parquet` table (``udm run --time le --cti-every
    1000 --cti-lag 101``)."""
    return {"time": "le", "cti_every": cti_every, "cti_lag": disorder + 1}


def to_parquet(bids: Path, out: Path) -> Path:
    """The bids of ``bids`` (element JSON Lines from `generate`) as a Parquet table at ``out``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    t = pajson.read_json(bids)
    t = t.filter(pc.equal(t["kind"], "insert"))
    p = t["payload"].combine_chunks()
    cols = {"le": t["le"], **{f: p.field(f) for f in ("auction", "bidder", "price", "channel")}}
    pq.write_table(pa.table(cols), out)
    return out
