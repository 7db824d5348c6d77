"""The JSONL reader's integer-literal check (`jsonl._no_int_literals`), now run by pyarrow's RE2, against the
Python ``re`` search it replaces, on keys and spellings chosen to tell them apart."""

from __future__ import annotations

import json
import random
import re

import pytest

from udm.host.io import jsonl


def reference(name: str, chunk: bytes) -> bool:
    """The check as Python's ``re`` spells it (the behaviour to keep)."""
    key_text = json.dumps(name, ensure_ascii=False)
    if name in jsonl._TOP_KEYS or "\\" in key_text or jsonl._has_escape(chunk, (b"\\u", b"\\/")):
        return False
    key = re.escape(key_text.encode())
    return re.search(key + rb"\s*:\s*-?\d+(?=[\s,}\]])", chunk) is None


KEYS = ["price", "p", "a.b", "a b", "x+y", "[k]", "(k)", "k*", "a|b", "^k$", "k?", "{k}", "a-b", "é", "日本", "k#~&",
        "le", "PRICE", "pricey", "1"]
VALUES = ["5", "-5", "5.0", "-5.5", "5e3", "5E-3", "0", "-0", "12345678901234567890", '"5"', "null", "true", "[5]",
          "[5.0, 6]", "{\"price\": 7}", "{\"price\": 7.5}", "-", "5 ", " 5", "5\t", "\v5", "5\v", "5\f", "05"]
SEPS = [":", " : ", ":\t", "\t:", ":\n", " :  ", "\v:", ":\v", "\f:\f"]


def _chunk(rng: random.Random) -> tuple[str, bytes]:
    key = rng.choice(KEYS)
    lines = []
    for _ in range(rng.randrange(1, 6)):
        k = rng.choice([key, *rng.sample(KEYS, 2)])
        sep = rng.choice(SEPS)
        v = rng.choice(VALUES)
        end = rng.choice(["}", ",\"z\":1}", "]}", " }", "\n}"])
        lines.append('{"kind":"insert","payload":{' + json.dumps(k, ensure_ascii=False) + sep + v + end + "}")
    return key, "\n".join(lines).encode()


def test_the_re2_check_answers_like_python_re() -> None:
    rng = random.Random(3)
    seen = set()
    for _ in range(4000):
        key, chunk = _chunk(rng)
        want = reference(key, chunk)
        assert jsonl._no_int_literals(key, chunk) == want, (key, chunk)
        seen.add(want)
    assert seen == {True, False}


@pytest.mark.parametrize("key", KEYS)
def test_each_key_matches_only_itself(key: str) -> None:
    for other in KEYS:
        chunk = ('{"payload":{' + json.dumps(other, ensure_ascii=False) + ":5}}").encode()
        assert jsonl._no_int_literals(key, chunk) == reference(key, chunk), other
