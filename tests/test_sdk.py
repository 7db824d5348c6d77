"""The SDK: value types, the @udm decorator's defaults, and the import-weight promise."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from udm.sdk import (
    INF,
    UDA,
    UDF,
    Event,
    IncrementalUDA,
    Manifest,
    NoParams,
    TimeSensitiveUDO,
    WindowDescriptor,
    udm,
)


def test_importing_sdk_pulls_in_neither_pyspark_nor_the_host() -> None:
    code = (
        "import sys, udm.sdk\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'pyspark', 'pandas', 'pyarrow'}"
        " or m.startswith('udm.host'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_sdk_works_when_pyspark_cannot_be_imported() -> None:
    # A finder that refuses pyspark proves the SDK never needs it, not merely that it did not load it.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pyspark': raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from udm.sdk import UDA, udm\n"
        "@udm(name='x')\n"
        "class X(UDA):\n"
        "    def compute(self, payloads): return len(payloads)\n"
        "print(X.manifest.name, X().compute([1, 2]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["x", "2"]


def test_inf_orders_after_every_int64_tick() -> None:
    assert INF == 2**63 - 1
    assert WindowDescriptor(0, INF).duration == INF
    assert WindowDescriptor(5, 12).duration == 7


@pytest.mark.parametrize(("le", "re"), [(5, 5), (5, 4), (INF, INF)])
def test_event_and_window_refuse_empty_or_unbounded_start(le: int, re: int) -> None:
    with pytest.raises(ValueError):
        Event(le, re, {})
    with pytest.raises(ValueError):
        WindowDescriptor(le, re)


def test_event_overlap_is_half_open() -> None:
    w = WindowDescriptor(10, 20)
    assert Event(5, 11).overlaps(w)
    assert not Event(5, 10).overlaps(w)  # back-to-back: [5,10) ends where W starts
    assert not Event(20, 21).overlaps(w)
    assert Event(19, INF).overlaps(w)


def test_decorator_reads_defaults_off_the_class() -> None:
    class P(BaseModel):
        k: int = 2

    @udm(name="first_k", version="2.1")
    class FirstK(UDA):
        """Sum of the first k values.

        Longer docs here."""

        Params = P

        def compute(self, payloads: Sequence[float]) -> float:
            return sum(payloads[: self.params.k])

    m = FirstK.manifest
    assert isinstance(m, Manifest)
    assert (m.name, m.version, m.kind) == ("first_k", "2.1", "uda")
    assert m.summary == "Sum of the first k values."
    assert "Longer docs" in m.docs
    assert m.params is P
    assert m.properties.incremental is False and m.properties.time_sensitive is False
    assert m.allowed_output == ("window",)
    assert m.input_type == "Sequence[float]" and m.output_type == "float"
    assert FirstK().compute([1, 2, 3]) == 3
    assert FirstK(P(k=3)).compute([1, 2, 3]) == 6


def test_decorator_defaults_for_other_kinds() -> None:
    @udm()
    class Shout(UDF):
        def compute(self, text: str) -> str:
            return text.upper()

    @udm(time_bound=True)
    class Echo(TimeSensitiveUDO):
        def compute(self, events, window):  # type: ignore[no-untyped-def]
            return events

    @udm(algebraic=True)
    class Cnt(IncrementalUDA):
        def initial_state(self) -> int:
            return 0

        def add(self, s: int, d: Sequence[object]) -> int:
            return s + len(d)

        def remove(self, s: int, d: Sequence[object]) -> int:
            return s - len(d)

        def merge(self, a: int, b: int) -> int:
            return a + b

        def compute(self, s: int) -> int:
            return s

    assert Shout.manifest.name == "shout" and Shout.manifest.kind == "udf"
    assert Shout.manifest.allowed_output == () and Shout.manifest.allowed_clip == ()
    assert Shout.manifest.params is NoParams
    assert Echo.manifest.properties.time_sensitive and Echo.manifest.properties.time_bound
    assert Echo.manifest.allowed_output == ("window", "unaltered", "clip", "time_bound")
    assert Cnt.manifest.properties.incremental and Cnt.manifest.properties.algebraic


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [("name", "not-an-identifier", "identifier"), ("version", "one.two", "PEP 440"),
     ("host_api", "~~1", "specifier")],
)
def test_manifest_rejects_bad_fields(field: str, value: str, needle: str) -> None:
    data = {"name": "ok", "kind": "uda", field: value}
    with pytest.raises(ValueError, match=needle):
        Manifest(**data)  # type: ignore[arg-type]


def test_manifest_json_view_is_serialisable() -> None:
    import json

    m = Manifest(name="x", kind="udo", allowed_output=("window", "clip"))
    data = m.to_json_dict()
    assert data["params"]["type"] == "object"
    assert data["allowed_output"] == ["window", "clip"]
    json.dumps(data)
