"""`udm.host.io.jsonl._blocks`: the file cut into whole-line blocks, every byte once, in order — checked
against the file's own bytes and lines over random texts, read sizes and block sizes."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from udm.host.io import jsonl as jl


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=30),
       newline_at_end=st.booleans(), first=st.integers(1, 64), block=st.integers(1, 160))
def test_blocks_are_whole_lines_of_the_file(lines: list[bytes], newline_at_end: bool, first: int, block: int) -> None:
    text = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jl, "_FIRST_BLOCK_BYTES", first)
        blocks = list(jl._blocks(io.BytesIO(text), block))
    assert b"".join(blocks) == text  # every byte once, in order
    assert all(type(b) is bytearray and b for b in blocks)
    assert all(b.endswith(b"\n") for b in blocks[:-1])  # only the last may end mid-line
    # a block holds whole lines: no line is split between two blocks
    assert [ln for b in blocks for ln in b.split(b"\n")[: b.count(b"\n")]] == text.split(b"\n")[: text.count(b"\n")]
