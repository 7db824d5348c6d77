"""Engines kept between micro-batches in a Spark Python worker (`udm.host.spark.key_state.EngineCache`): a
bucket that takes its keys' engines from the cache gives, call by call, exactly what it gives reading every
engine from the state store, reads fewer engines, and never takes an engine whose write the store does not
hold (a retried micro-batch after the store went back a version, another worker's write, an index written
before the cache)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.test_stream_key_state import (
    DELAYED,
    EARLY_ADJUST,
    HOPPING,
    SESSION,
    SNAPSHOT,
    TUMBLING,
    TWO_WINDOWS,
    _feed,
    _prepare,
    _table,
)
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.key_state import DictStore, EngineCache, KeyedBucket, KeyedResult, _Index, dump_index, load_index
from udm.host.temporal.elements import Element
from udm.host.testing.generator import generate


def _stream(seed: int) -> list[Element]:
    return generate(seed=seed, events=200, groups=6, duration="mixed", speculation=0.4, disorder="slightly",
                    cti="regular", bad=0.05)


def _batches(stream: list[Element], size: int) -> list[list[tuple[int, Element]]]:
    numbered = list(enumerate(stream, 1))
    return [numbered[i:i + size] for i in range(0, len(numbered), size)]


def _call(query: dict[str, Any], store: DictStore, batch: list[tuple[int, Element]],
          cache: EngineCache | None) -> KeyedResult:
    return KeyedBucket(bind(parse_query(query)), None, ["g"], store, 0, track_ids=True, cache=cache).run(
        _table(batch), _feed, prepare=_prepare)


def _seen(res: KeyedResult) -> tuple[Any, ...]:
    """What a call gives its caller: output (with id prefixes), dead letters, output CTI, stats."""
    return ([(p, str(el)) for p, el in res.out], [(d.line, d.reason) for d in res.dead], res.cti, res.stats)


@pytest.mark.parametrize(("query", "seed", "size"), [(TUMBLING, 1, 9), (HOPPING, 2, 13), (SESSION, 3, 7),
                                                     (SNAPSHOT, 4, 11), (TWO_WINDOWS, 5, 10),
                                                     (EARLY_ADJUST, 6, 8), (DELAYED, 7, 12)])
def test_a_cached_engine_gives_what_the_stored_one_gives(query: dict[str, Any], seed: int, size: int) -> None:
    stored, cached, cache = DictStore(), DictStore(), EngineCache()
    for batch in _batches(_stream(seed), size):
        assert _seen(_call(query, cached, batch, cache)) == _seen(_call(query, stored, batch, None))
    assert cache.hits > 0
    assert cached.counts["engine_reads"] == stored.counts["engine_reads"] - cache.hits
    assert cached.counts["engine_writes"] == stored.counts["engine_writes"]


@pytest.mark.parametrize("query", [TUMBLING, SESSION, EARLY_ADJUST])
def test_a_retried_micro_batch_never_takes_the_engine_of_its_failed_run(query: dict[str, Any]) -> None:
    """The store goes back to its state before micro-batch k (Spark retries k after a failure past the
    bucket's writes): the cache holds the engines k wrote, under tokens the store no longer names, so the
    retry reads the store's engines and gives what a bucket without a cache gives."""
    batches = _batches(_stream(11), 9)
    store, cache = DictStore(), EngineCache()
    for batch in batches[:6]:
        _call(query, store, batch, cache)
    before = copy.deepcopy(store)
    _call(query, store, batches[6], cache)  # the failed run: its writes are lost below
    retried, plain = copy.deepcopy(before), copy.deepcopy(before)
    hits = cache.hits
    for batch in batches[6:]:
        assert _seen(_call(query, retried, batch, cache)) == _seen(_call(query, plain, batch, None))
    assert cache.hits > hits  # (the retry's own writes are cached again and taken by the next calls)


def test_workers_sharing_nothing_and_a_tiny_cache_agree() -> None:
    """Calls alternate between two workers (two caches), and a cache of one engine: the same results."""
    batches = _batches(_stream(21), 8)
    stored, two, tiny = DictStore(), DictStore(), DictStore()
    workers, one = [EngineCache(), EngineCache()], EngineCache(capacity=1)
    for i, batch in enumerate(batches):
        want = _seen(_call(HOPPING, stored, batch, None))
        assert _seen(_call(HOPPING, two, batch, workers[i % 2])) == want
        assert _seen(_call(HOPPING, tiny, batch, one)) == want
    assert len(one) <= 1


def test_an_index_written_before_the_cache_reads_and_takes_nothing_from_it() -> None:
    """An index without the last call's token and keys (as written before `EngineCache`) loads with none:
    its keys are read from the store."""
    batches = _batches(_stream(31), 10)
    store, cache = DictStore(), EngineCache()
    for batch in batches[:5]:
        _call(TUMBLING, store, batch, cache)
    state = load_index(store.index or b"").__getstate__()
    assert state.pop("written") and state.pop("token")
    old = _Index.__new__(_Index)
    old.__setstate__(state)
    assert old.token == 0 and old.written == frozenset() and old.keys
    store.index = dump_index(old)
    plain = copy.deepcopy(store)
    reads, hits = store.counts["engine_reads"], cache.hits
    assert _seen(_call(TUMBLING, store, batches[5], cache)) == _seen(_call(TUMBLING, plain, batches[5], None))
    assert cache.hits == hits and store.counts["engine_reads"] > reads
