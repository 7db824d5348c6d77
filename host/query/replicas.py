"""High availability and cutover by logical merge (seeds/001 §II, §V.B): several running copies of one query
(replicas, or an old and a new version of a plan) feed an ``lmerge``, whose output is one stream compatible
with all of them. The consumer reads the merged stream and never notices a replica dying or a plan changing.

`ReplicaMerge` is the merging side: feed it each replica's output elements as they arrive (from a local
`QueryRunner`, a Spark job's output file, a Structured Streaming sink, ...). `kill` a replica that died (its
further output is ignored; the merged output goes on as long as another replica carries the stream);
`join` a replica that starts late — a new plan version replaying the input — with the time from which its
output is complete, and `caught_up` says when it leads so the old version can be killed (cutover).

The merge algorithm is chosen from what the replicated query's output promises (`derive_properties`):
a UDA window step's output has ``(LE, payload)`` as a key (R3), anything else gets R4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from udm.host.model.plan import BoundQuery
from udm.host.model.spec import parse_query
from udm.host.model.stream_properties import derive_properties

from .runners import make_runner

__all__ = ["ReplicaMerge"]


class ReplicaMerge:
    """Merges the output streams of replicas of one query (see the module docstring)."""

    def __init__(self, query: BoundQuery, replicas: Sequence[str], *, algorithm: str = "auto",
                 step: str = "merged") -> None:
        if len(replicas) < 2 or len(set(replicas)) != len(replicas):
            raise ValueError(f"a replica merge needs two or more distinct replica names, got {list(replicas)}")
        graph = query.graph
        udas = frozenset(n.name for n in graph.nodes if query.step(n.name).entry is not None
                         and query.step(n.name).entry.manifest.kind == "uda")
        out = derive_properties(query.spec, graph, udas)[graph.output]
        props = out.model_dump(mode="json")
        spec = parse_query({"inputs": {r: {"properties": props} for r in replicas},
                            "steps": [{"id": step, "op": "lmerge", "from": list(replicas), "algorithm": algorithm}]})
        self.step = step
        self.runner = make_runner(spec)
        #: the merged stream so far
        self.output: list[Any] = []
        self.killed: set[str] = set()

    @property
    def algorithm(self) -> str:
        return str(self.runner.bound.step(self.step).step.algorithm)

    def feed(self, replica: str, elements: Iterable[Any]) -> list[Any]:
        """Output elements of ``replica``, in its order; returns the merged elements they caused."""
        out: list[Any] = []
        if replica in self.killed:
            return out
        for el in elements:
            out.extend(self.runner.process(el, input=replica))
        self.output.extend(out)
        return out

    def kill(self, replica: str) -> None:
        """``replica`` died (or is retired): ignore it from now on."""
        self.runner.detach(self.step, replica)
        self.killed.add(replica)

    def join(self, replica: str, at: int | None = None) -> None:
        """``replica`` (re)joins, its output complete for every event ending at ``at`` or later (default:
        the current merged CTI, for a replica that replays the input from its start)."""
        self.killed.discard(replica)
        self.runner.attach(self.step, replica, at=at)

    def caught_up(self, replica: str) -> bool:
        """True once ``replica``'s own CTI reached the merged CTI: it can carry the stream alone."""
        m = self.runner.merge_step(self.step)
        port = m.port_of(replica)
        return bool(m.port_cti[port] >= m.core.stable and m.status[port] == "attached")

    def finish(self) -> list[Any]:
        """End of the merged stream (every replica still attached has ended, or the first one did)."""
        out = list(self.runner.finish())
        self.output.extend(out)
        return out

    def chattiness(self) -> dict[str, int]:
        return dict(self.runner.chattiness()[self.step])
