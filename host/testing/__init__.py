"""udm.host.testing — the conformance kit (seeds/002), for UDM writers and engine writers alike.

- **Generator by intent** (`StreamSpec`, `generate`, `physical_variants`): declarative, seeded streams —
  durations, overlap, boundary patterns, disorder, CTI eagerness, duplicates, speculation (retraction
  chains), group keys, bad elements; many physical streams of one logical stream.
- **Reference oracle** (`oracle`): the expected output CHT of a query, by brute force over the input CHT,
  written from SEMANTICS.md and independent of the engine.
- **Canonical verifier** (`CHT`, `cht`, `verify`, `assert_equivalent`): CHT(output) == expected, with
  float tolerance and a readable diff.
- **Property validator** (`check_properties`): physical validity, CTIs, prefix finality, liveliness,
  final CTI.
- **UDM contract checks** (`run_contract_checks`, `assert_contracts`, `CheckResult`): run against any UDM.
- **Engines** (`udm.host.testing.engine_conformance.check_engine`): run any engine and verify it.
- **pytest plugin** (auto-loaded): fixtures ``udm_contracts``, ``udm_seed``, ``udm_stream``, ``udm_streams``; option
  ``--udm-seed``.

A plugin author's whole conformance test::

    def test_my_udm(udm_contracts):
        udm_contracts(MyUDM)
"""

from .cht import CHT, Rejected, StreamState, apply_stream, cht, stream_text, to_elements
from .contracts import CHECKS, CheckResult, assert_contracts, format_failures, run_contract_checks
from .engine_conformance import (
    INTERLEAVINGS,
    EngineReport,
    Interleaved,
    assert_engine,
    check_composition,
    check_engine,
    registered_engine,
    runner_engine,
    shrink_failure,
    write_stream,
)
from .generator import (
    StreamSpec,
    generate,
    generate_related,
    interleave,
    lmerge_inputs,
    logical_events,
    physical_variants,
)
from .lmerge_compat import compatibility_problems, trace_problems
from .oracle import OracleResult, OracleUndecidable, group_windows, oracle, oracle_run
from .properties import check_properties, liveliness_bound
from .shape import output_ordering, output_shape, retraction_count
from .verifier import Verdict, assert_equivalent, payloads_close, verify

__all__ = [
    "CHECKS",
    "CHT",
    "INTERLEAVINGS",
    "CheckResult",
    "EngineReport",
    "Interleaved",
    "OracleResult",
    "OracleUndecidable",
    "Rejected",
    "StreamSpec",
    "StreamState",
    "Verdict",
    "apply_stream",
    "assert_contracts",
    "assert_engine",
    "assert_equivalent",
    "check_composition",
    "check_engine",
    "check_properties",
    "cht",
    "compatibility_problems",
    "format_failures",
    "generate",
    "generate_related",
    "group_windows",
    "interleave",
    "liveliness_bound",
    "lmerge_inputs",
    "logical_events",
    "oracle",
    "oracle_run",
    "output_ordering",
    "output_shape",
    "payloads_close",
    "physical_variants",
    "registered_engine",
    "retraction_count",
    "run_contract_checks",
    "runner_engine",
    "shrink_failure",
    "stream_text",
    "to_elements",
    "trace_problems",
    "verify",
    "write_stream",
]
