"""What a Spark batch run gives back: `SparkRun` (output and dead letters as DataFrames), the schemas of
its output and dead-letter rows, and a failed Spark job as the engine's one-line error. The linear plans
(`udm.host.spark.batch`), the graph plans (`udm.host.spark.graph`) and the streaming file runner share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from udm.host.errors import ContractViolation, UdmError, ViolationError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["DEAD_LETTER_DDL", "OUTPUT_DDL", "SparkRun", "explain_failure"]

#: Output element columns (`ELEMENT_DDL` without the bad-row columns).
OUTPUT_DDL = "kind string, id string, le bigint, re bigint, re_new bigint, t bigint, payload string, line bigint"
#: Dead letters: the input line, the reason, and the element as JSON text (INTERFACES §1 record), plus the
#: counter it went to (``cti_violation``, ``duplicate_id``, ...; `udm.host.run_result.RunResult.reasons`).
DEAD_LETTER_DDL = "line bigint, reason string, element string, category string"


@dataclass
class SparkRun:
    """The result of `run_batch`: physical output elements and dead letters, both DataFrames (backed by
    one persisted computation; call `unpersist` when done)."""

    output: DataFrame
    dead_letters: DataFrame
    buckets: int
    keys: list[str]
    _result: DataFrame
    #: ``"engine"`` (one QueryRunner per key bucket or time range) or ``"algebraic"`` (partial + final).
    path: str = "engine"
    #: ``"keys"``, ``"time"`` (keyless query split by time range) or ``"single"``: how buckets were formed.
    split: str = "keys"

    #: every persisted computation behind the run (a staged graph plan's last result holds every stage's rows)
    parts: list[DataFrame] = field(default_factory=list)
    #: the small rows (``ids``, ``T``; a graph plan's ``lmerge`` too, with a ``part`` column: the index of
    #: the stage that made the row), collected by the one job that ran the plan (an Arrow table)
    side: Any = None

    def __post_init__(self) -> None:
        if not self.parts:
            self.parts = [self._result]

    def unpersist(self) -> None:
        for part in self.parts:
            part.unpersist()


def explain_failure(exc: Exception) -> UdmError:
    """A failed Spark job as the engine's one-line error (the Python traceback is in the message)."""
    text = str(exc)
    for cls in (ViolationError, ContractViolation, UdmError):
        marker = f"{cls.__name__}: "
        for line in text.splitlines():
            if marker in line:
                return cls(line.split(marker, 1)[1].strip())
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return UdmError(f"Spark job failed: {first}")

