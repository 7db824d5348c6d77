"""Whether a query graph that needs stages runs as stages or in one bucket on a Spark session (issue #31).

Why a rule: a staged plan does the engine work of the one-bucket plan and, on top, an exchange per stage
boundary (a shuffle, one more Arrow round trip to Python of the exchanged rows, a Spark stage of tasks per
bucket). What it buys is elapsed time, when buckets run on cores that the one bucket's single Python task
leaves idle. With two task slots there was nothing to buy: ``python -m bench.bench_stages`` (join then
window, 4 buckets, ``local[2]``) measured the staged plan at 1.6–2.0x the CPU and 1.5–1.9x the elapsed time
of one bucket, with skewed keys and with uniform ones alike (docs/query-writer.md). So a session with at
most `MIN_SLOTS` task slots runs such a graph in one bucket; a larger one keeps the stages (not measured
here: the rule only cuts where it was measured).

The session setting `STAGED_CONF` overrides the rule for every graph run on the session (``udm run``
users set it through ``$UDM_SPARK_CONF``): ``"true"`` always stages, ``"false"`` never, ``"auto"`` (the
default) applies the rule. `udm.host.spark.graph.run_graph_batch`'s ``staged`` argument wins over both.
Either plan gives the same output CHT and dead letters (the tests hold both to the local engine).
"""

from __future__ import annotations

from typing import Any

from udm.host.errors import UdmError

__all__ = ["MIN_SLOTS", "STAGED_CONF", "session_slots", "staging_pays"]

#: the most task slots on which a staged plan measured slower than one bucket
MIN_SLOTS = 2
#: the session setting that forces either plan (module doc)
STAGED_CONF = "spark.udm.graph.staged"
_CHOICES = ("auto", "true", "false")


def session_slots(spark: Any) -> int | None:
    """The task slots of ``spark``'s executors (its default parallelism), or None when the session does not
    say (Spark Connect has no SparkContext)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:
        return None


def staging_pays(spark: Any) -> bool:
    """Whether a graph with no single partitioning should run as stages on ``spark`` (module doc): the
    session's `STAGED_CONF`, or, on ``"auto"``, whether it has more than `MIN_SLOTS` task slots (a session
    that does not say keeps the stages)."""
    value = str(spark.conf.get(STAGED_CONF, "auto") or "auto").strip().lower()
    if value not in _CHOICES:
        raise UdmError(f"{STAGED_CONF} must be one of {', '.join(_CHOICES)}; got {value!r}")
    if value != "auto":
        return value == "true"
    slots = session_slots(spark)
    return slots is None or slots > MIN_SLOTS
