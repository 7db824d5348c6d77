"""What the parts of the shared rows store (`rows_shared.RowStore`) hold, declared once: the store's rule is
split by concept over modules (`rows_shared_cti`: its rules at a CTI; `rows_shared_flush`: the windows a flush
releases), each a base class of `RowStore` working on these arrays."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .key_columns import CodeFields
from .state import Group

__all__ = ["StoreArrays"]


class StoreArrays:
    """The arrays and maps of `rows_shared.RowStore` (made there, in ``reset``)."""

    #: rows, sorted by (G, canonical order): group number, LE, RE, engine id, value
    G: np.ndarray
    L: np.ndarray
    R: np.ndarray
    I: np.ndarray  # noqa: E741  (engine ids)
    V: np.ndarray
    #: by group number: rows dropped before the first held, last window evaluated, first window kept
    P: np.ndarray
    D: np.ndarray
    F: np.ndarray
    #: the groups in the store by number; those of them holding output records
    groups: dict[int, Group]
    #: the key fields of the groups by number
    fields: CodeFields
    out: dict[int, Group]
    #: the rows of groups that left, removed (`RowStore._settle`)
    _settle: Callable[[], None]
