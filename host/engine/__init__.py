"""udm.host.engine — the local temporal engine (SEMANTICS §1–7 and §9's pane rule; seeds/000 §V).

`QueryRunner` runs a bound query graph over physical streams and returns output elements (inserts,
retractions, CTIs; ids chosen by the engine). One route: an `InputGate` per query input (``gate``; every
rule once, in ``rules``) validates a batch and hands on a columnar `Batch` (``batch``, ``payload``) of
valid elements; one operator per step (``build``: ``ops/`` for span and multi-input steps, ``window/`` for
window steps) takes and returns batches in topological order, then flushes. `DeadLetter` records what it
refused; `QueryRunner.stats` (a `udm.host.run_result.RunResult`) counts what it did. The module map is in
docs/architecture.md.

Choices the engine makes where the documents leave room (all also followed by the conformance kit):

* **Output CTIs** are the largest safe value. Two boundary cases are treated as "can still change": an
  event whose RE equals the CTI can still be *extended* (its retraction has sync time = CTI), which
  matters to time-sensitive UDMs without right clipping; and a snapshot window ending at the CTI can
  still merge with the next one, which matters to time-sensitive UDMs. On count and rows windows a later
  value can make a window over members before the CTI, so ``time_bound`` does not give output CTI = input
  CTI there (the time-insensitive rule applies; ``time_bound`` gives it on tumbling/hopping/cumulate/
  snapshot/session windows: semantics-notes 72).
* **Speculation**: a window is output once the watermark passes its end (``max_delay`` ticks later);
  after that, every change is output at once, as a minimal diff. ``time_bound`` windows are also output
  as soon as they start before the CTI.
* **Strong consistency** (``max_delay: inf``, semantics-notes 72): a window is output at the CTI that
  makes it final (no member end it sees can still move, no endpoint at the CTI can still go), never
  before, so the output has no retraction; ``time_bound`` gives nothing early then.
* **Cleanup**: at every CTI ``c`` windows that can no longer change are dropped, and so are the ids of
  events with ``RE < c`` (they can never be retracted again). An id may therefore be reused once its
  event is closed by a CTI. At the end of input all state is dropped.
* **T** (semantics-notes 2) is one value per run, from what the first step accepts; endless members of
  tumbling/hopping/cumulate windows stop at ``W.LE <= T`` (reported as ``RunResult.truncated_at``), members with
  a finite end always give all their windows.
* **Adjust**: an insert moved to ``[c, RE)`` is still named by its original LE in later retractions.
* **Floats**: incremental states (add/remove chains), pane merges and the vectorized ``add_array`` /
  ``add_batch`` hooks (semantics-notes 35)
  sum in a different order than a one-shot computation, so float results may differ in the last bits
  (integer data is exact); compare float outputs with a tolerance (`udm.host.testing.verify`).
"""

from __future__ import annotations

from .common import DeadLetter
from .runner import QueryRunner

__all__ = ["DeadLetter", "QueryRunner"]
