"""Query graphs whose partitioning key changes along the way: the stage shapes both Spark paths (batch,
`test_spark_stages`, and Structured Streaming, `test_spark_streaming_stages`) are checked on."""

from __future__ import annotations

__all__ = ["INPUT_IN_TWO_STAGES", "JOIN_THEN_KEYLESS", "JOIN_THEN_WINDOW", "MULTICAST", "QUERIES", "TWO",
           "WINDOW_THEN_JOIN"]

TWO = {"a": {}, "b": {}}
#: joined by k, then counted per v: no key serves both steps
JOIN_THEN_WINDOW = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "b_"},
    {"id": "w", "op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["v"], "udm": "count",
     "as": "n"}]}
#: counted per k, then the counts joined to b's values: b is read by the second stage directly
WINDOW_THEN_JOIN = {"inputs": TWO, "steps": [
    {"id": "w", "from": "a", "op": "window", "window": {"type": "hopping", "size": 10, "hop": 5},
     "group_by": ["k"], "udm": "count", "as": "n"},
    {"id": "j", "op": "join", "from": ["w", "b"], "on": [["n", "v"]], "left_prefix": "w_"}]}
#: a keyed join feeding a keyless snapshot window (one bucket for the last stage only)
JOIN_THEN_KEYLESS = {"inputs": TWO, "steps": [
    {"id": "j", "op": "join", "from": ["a", "b"], "on": "k", "right_prefix": "b_"},
    {"id": "s", "op": "filter", "udf": "in_range", "args": {"field": "v"}, "params": {"lo": 20, "hi": 100}},
    {"id": "w", "op": "window", "window": {"type": "snapshot"}, "udm": "sum", "input": "b_v", "as": "total"}]}
#: one shifted stream read by two stages (multicast across stages), their outputs unioned
MULTICAST = {"inputs": TWO, "steps": [
    {"id": "p", "from": "a", "op": "alter_lifetime", "le": {"shift": 1}, "duration": "keep"},
    {"id": "w", "from": "p", "op": "window", "window": {"type": "tumbling", "size": 5}, "group_by": ["k"],
     "udm": "sum", "input": "v", "as": "v"},
    {"id": "j", "op": "join", "from": ["p", "b"], "on": "v", "left_prefix": "l_", "right_prefix": "r_"},
    {"id": "u", "op": "union", "from": ["w", "j"]}]}

#: a read by two stages (counted per k; joined to its own counts by v): its bad lines are dead letters once
INPUT_IN_TWO_STAGES = {"inputs": TWO, "steps": [
    {"id": "w", "from": "a", "op": "window", "window": {"type": "hopping", "size": 10, "hop": 5},
     "group_by": ["k"], "udm": "count", "as": "n"},
    {"id": "j", "op": "join", "from": ["w", "a"], "on": [["n", "v"]], "left_prefix": "w_"},
    {"id": "u", "op": "union", "from": ["j", "b"]}]}

QUERIES = {"join_then_window": JOIN_THEN_WINDOW, "window_then_join": WINDOW_THEN_JOIN,
           "join_then_keyless": JOIN_THEN_KEYLESS, "multicast": MULTICAST,
           "input_in_two_stages": INPUT_IN_TWO_STAGES}
