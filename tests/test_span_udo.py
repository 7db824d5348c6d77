"""Span UDOs in the SDK and at load time (INTERFACES §4): the manifest says ``span`` (kind ``udo``), read off
the base class; the host refuses a span UDO whose manifest or signature lies, naming the rule; the catalog
and ``udm list``/``udm info`` show the kind as ``span udo``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from udm.host.catalog import Catalog
from udm.host.cli.app import app
from udm.host.validation import check_udm
from udm.sdk import UDO, Event, MalformedPayload, Manifest, SpanUDO, TimeSensitiveSpanUDO, udm


@udm(name="split", version="1.0.0")
class Split(SpanUDO):
    """Words of ``text``."""

    def compute(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        if "text" not in payload:
            raise MalformedPayload("no text")
        for w in str(payload["text"]).split():
            yield {"w": w}


@udm(name="halves", version="1.0.0", time_bound=True)
class Halves(TimeSensitiveSpanUDO):
    """The event's first tick."""

    def compute(self, event: Event) -> Iterator[tuple[int, int, dict[str, Any]]]:
        yield event.le, event.le + 1, dict(event.payload)


def _rules(cls: type) -> list[str]:
    return [p.split(":")[0] for p in check_udm(cls)]


def test_manifest_reads_span_and_no_policies_off_the_base() -> None:
    for cls, ts in ((Split, False), (Halves, True)):
        m = cls.manifest
        assert (m.kind, m.span, m.properties.time_sensitive, m.properties.incremental) == ("udo", True, ts, False)
        assert m.allowed_clip == () and m.allowed_output == ()
        assert check_udm(cls) == []
        assert m.to_json_dict()["span"] is True
    assert Halves.manifest.properties.time_bound
    assert MalformedPayload("why").reason == "why"


def test_existing_kinds_are_not_span_and_old_manifests_stay_valid() -> None:
    @udm(name="plain", version="1.0.0")
    class Plain(UDO):
        def compute(self, payloads: Any) -> list[Any]:
            return []

    assert Plain.manifest.span is False and check_udm(Plain) == []
    old = Manifest(name="x", kind="udo")  # a manifest written before span existed
    assert old.span is False


def test_only_an_operator_can_be_span_based() -> None:
    with pytest.raises(ValidationError, match="only an operator .udo. can be span-based, not a uda"):
        Manifest(name="x", kind="uda", span=True)


def test_lies_are_refused_naming_the_rule() -> None:
    class TwoArgs(SpanUDO):
        def compute(self, payload: Any, window: Any) -> list[Any]:
            return []

    TwoArgs.manifest = Manifest(name="two", kind="udo", span=True)
    assert "signature" in _rules(TwoArgs)
    assert "needs compute(payload)" in "; ".join(check_udm(TwoArgs))

    class NotSpan(UDO):
        def compute(self, payloads: Any) -> list[Any]:
            return []

    NotSpan.manifest = Manifest(name="ns", kind="udo", span=True)
    assert "span" in _rules(NotSpan)

    class Unmarked(SpanUDO):
        def compute(self, payload: Any) -> list[Any]:
            return []

    Unmarked.manifest = Manifest(name="um", kind="udo")  # span missing, and window policies
    rules = _rules(Unmarked)
    assert "span" in rules

    class WithPolicies(SpanUDO):
        def compute(self, payload: Any) -> list[Any]:
            return []

    WithPolicies.manifest = Manifest(name="wp", kind="udo", span=True, allowed_clip=("none",),
                                     allowed_output=("window",))
    assert "a span UDO runs once per event" in "; ".join(check_udm(WithPolicies))

    class Incremental(SpanUDO):
        def compute(self, payload: Any) -> list[Any]:
            return []

    Incremental.manifest = Manifest(name="inc", kind="udo", span=True, allowed_clip=(), allowed_output=(),
                                    properties={"incremental": True})
    assert "cannot be incremental" in "; ".join(check_udm(Incremental))


def test_catalog_and_cli_show_the_span_kind() -> None:
    cat = Catalog()
    for cls in (Split, Halves):
        cat.add(cls)
    assert cat.names_of_kind("udo", span=True) == ["halves", "split"]
    assert cat.names_of_kind("udo", span=False) == []
    entry = cat.resolve("split")
    assert entry.kind_label == "span udo" and entry.to_json_dict()["span"] is True
    runner = CliRunner()
    res = runner.invoke(app, ["info", "explode"], terminal_width=200)
    assert res.exit_code == 0 and "span udo" in res.output, res.output
    res = runner.invoke(app, ["list"], terminal_width=200)
    line = next(x for x in res.output.splitlines() if " explode " in x)
    assert "span udo" in line
