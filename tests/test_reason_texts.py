"""Dead-letter reason texts are written once, in `udm.host.engine.rules` (issue 26): the unknown-id reason is
the oracle's (`udm.host.testing.cht`, which keeps its own copy on purpose) for ids with quotes, backslashes
and non-ASCII characters, on the gate's row and column paths alike; and no other engine module spells a
reason that `rules` owns."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host.engine import rules
from udm.host.engine.context import Context
from udm.host.engine.gate import InputGate
from udm.host.io.batch import ElementBatch
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.host.testing.cht import apply_stream

_ENGINE = Path(rules.__file__).parent
#: the fixed wording of each reason `rules` owns (any one copy elsewhere would be a second route)
_OWNED = ["retraction of unknown id", "but the live event is", "missing field {", '"payload must be a JSON object']
_IDS = ["a", 'k"q', "k'q", "k\\b", "ké", "𝄞 x", ""]


def _oracle_reasons(stream: list[Element]) -> list[str]:
    return [r.reason for r in apply_stream(stream).rejected]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=8))
def test_unknown_id_reason_is_the_oracles(name: str) -> None:
    assert [rules.unknown_id_reason(name)] == _oracle_reasons([Retract(name, 0, 5, 3)])


@pytest.mark.parametrize("columns", [True, False])
def test_the_gate_refuses_unknown_ids_with_the_oracles_reason(columns: bool) -> None:
    """Both gate paths, for ids never inserted, in one batch with a live event and a CTI."""
    stream: list[Element] = [Insert("live", 0, 4, {"v": 1}), Cti(6)]
    stream += [Retract(i, 10 + k, 20, 19) for k, i in enumerate(_IDS)]
    want = _oracle_reasons(stream)
    assert len(want) == len(_IDS)
    ctx = Context("dead_letter")
    g = InputGate("main", ctx)
    raw = ElementBatch.from_elements(stream, list(range(1, len(stream) + 1)))
    g.process(raw) if columns else g.process_elements(raw.to_elements())
    assert [d.category for d in ctx.dead_letters] == [rules.UNKNOWN_ID] * len(want)
    assert [d.reason for d in ctx.dead_letters] == want


def test_no_engine_module_but_rules_spells_a_reason_rules_owns() -> None:
    rules_path = Path(rules.__file__).resolve()
    offenders = [f"{p.relative_to(_ENGINE)}: {text!r}"
                 for p in sorted(_ENGINE.rglob("*.py")) if p.resolve() != rules_path
                 for text in _OWNED if text in p.read_text(encoding="utf-8")]
    assert offenders == []
    rules_text = rules_path.read_text(encoding="utf-8")
    assert all(rules_text.count(text) == 1 for text in _OWNED)
