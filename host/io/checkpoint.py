"""Checkpoints of a local run (`udm run --checkpoint DIR`, INTERFACES §3): a run killed at any point and
started again with the same command writes exactly the output of an uninterrupted run.

A *mark* is committed after whole batches: the engine snapshot (`QueryRunner.snapshot`), the last input
line the engine consumed, and the sizes of the output and dead-letter files at that moment (flushed and
fsynced first). It is written to a temporary file, fsynced and renamed over ``DIR/local-run.pkl``, so a kill
leaves either the old mark or the new one, never half of one. Resuming truncates both files to the
mark's sizes (dropping whatever the killed run wrote after it), restores the engine and skips the input
lines it had consumed; since the reader cuts the same batches again, the output continues byte for byte
as the uninterrupted run's would.

The mark also holds the run's *fingerprint* (query, input file digest, output paths, policy): a checkpoint
directory of another run is refused with one line, never silently mixed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udm.host.errors import UdmError

__all__ = ["FORMAT", "LocalCheckpoint", "Mark", "file_digest", "truncate_to"]

#: the layout of a local run's checkpoint, engine state included: a checkpoint of another is refused in one line
#: (2: a snapshot window's state keeps a heap of its events' ends)
FORMAT = 2
_NAME = "local-run.pkl"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes: what identifies an input across a resume."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@dataclass
class Mark:
    """What one commit records."""

    #: the engine snapshot (`QueryRunner.snapshot`)
    snapshot: bytes
    #: the last input line consumed (0: none)
    line: int
    #: bytes of the output / dead-letter file that belong to the consumed lines
    out_bytes: int
    dl_bytes: int
    #: the run reached its end (output final)
    done: bool = False


class LocalCheckpoint:
    """The checkpoint directory of one local run."""

    def __init__(self, directory: str | Path, fingerprint: dict[str, Any]) -> None:
        self.dir = Path(directory)
        self.path = self.dir / _NAME
        self.fingerprint = fingerprint

    def load(self) -> Mark | None:
        """The last committed mark, or None for a fresh run (an empty or new directory)."""
        if not self.path.exists():
            if self.dir.exists() and any(p.name != _NAME + ".tmp" for p in self.dir.iterdir()):
                raise UdmError(f"--checkpoint {self.dir} is not empty and holds no udm local run")
            return None
        try:
            with self.path.open("rb") as f:
                data = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise UdmError(f"checkpoint {self.path} cannot be read ({exc}); delete it to start over") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UdmError(f"checkpoint {self.path} was written by another version of udmkit; delete it to "
                           f"start over")
        old = data["fingerprint"]
        for key, value in self.fingerprint.items():
            if old.get(key) != value:
                what = {"query": "query spec", "input": "input file"}.get(key, key.replace("_", " "))
                raise UdmError(f"checkpoint {self.dir} belongs to a run with a different {what}; use a new "
                               f"--checkpoint directory (or delete this one) to start over")
        mark = data["mark"]
        assert isinstance(mark, Mark)
        return mark

    def commit(self, mark: Mark) -> None:
        """Replace the committed mark atomically (a kill leaves the old one or the new one)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(_NAME + ".tmp")
        with tmp.open("wb") as f:
            pickle.dump({"format": FORMAT, "fingerprint": self.fingerprint, "mark": mark}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def truncate_to(path: str | Path | None, size: int, what: str) -> None:
    """Cut a file written by the killed run back to the mark's size."""
    if path is None or size < 0:
        return
    p = Path(path)
    have = p.stat().st_size if p.exists() else -1
    if have < size:
        raise UdmError(f"the {what} file {p} is shorter than the checkpoint recorded ({max(have, 0)} < {size} "
                       f"bytes): it was changed after the run stopped; delete the checkpoint to start over")
    os.truncate(p, size)
