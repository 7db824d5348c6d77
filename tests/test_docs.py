"""README.md and docs/*.md run: every shell and Python block, in order, as a reader would run them (one
scratch directory and shell session per page; `docs_runner`), every output block equals what its command
printed, every query shown binds, and nothing points outside the repository. A block that cannot run here
is marked, with its reason, and the marks are counted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_runner import SHELLS, DocSession, blocks

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: pages whose blocks start Spark (a JVM per page, tens of seconds): marked so `make test-fast` leaves them out
SPARK_PAGES = {"query-writer.md"}
#: every "<!-- docs-test: skip REASON -->" of a page: few, each justified where it stands
SKIPS_ALLOWED = {"README.md": 3, "query-writer.md": 1, "marketplace.md": 2}


def _params() -> list[object]:
    out = []
    for page in PAGES:
        marks = [pytest.mark.spark, pytest.mark.slow] if page.name in SPARK_PAGES else []
        out.append(pytest.param(page, id=page.name, marks=marks))
    return out


@pytest.mark.parametrize("page", _params())
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    found = blocks(page.read_text(encoding="utf-8"))
    session = DocSession(tmp_path / "work")
    try:
        for block in found:
            if block.skip is None:
                session.run(block)
    finally:
        session.close()
    skipped = [b for b in found if b.skip is not None]
    assert len(skipped) <= SKIPS_ALLOWED.get(page.name, 0), [(b.where, b.skip) for b in skipped]


def test_the_runner_fails_a_broken_block(tmp_path: Path) -> None:
    """The runner is a test that can fail: a failing command, a Python error, an output that differs from
    the page, a query that does not bind."""
    cases = {
        "```bash\nfalse\n```\n": "exited with 1",
        "```python\nraise ValueError('no')\n```\n": "ValueError: no",
        "```bash\necho hello\n```\n\n```text output\nhullo\n```\n": "the page shows",
        "```yaml\nsteps: [{op: window, window: {type: tumbling, size: 10}, udm: no_such_udm}]\n```\n": "no_such_udm",
    }
    for i, (text, words) in enumerate(cases.items()):
        session = DocSession(tmp_path / f"w{i}")
        try:
            with pytest.raises(AssertionError, match=re.escape(words)):
                for block in blocks(text):
                    session.run(block)
        finally:
            session.close()


def test_a_shell_session_keeps_its_directory_and_exports(tmp_path: Path) -> None:
    text = ("```bash\nmkdir -p d && cd d && export X=1 && echo hi > f\n```\n\n"
            "```bash\ntest \"$X\" = 1 && cat f && test \"$HOME\" != ~root\n```\n\n```text output\nhi\n```\n\n"
            "```python\nprint(open('f').read().strip())\n```\n")
    session = DocSession(tmp_path / "w")
    try:
        for block in blocks(text):
            session.run(block)
        assert session.last_output == "hi\n"
    finally:
        session.close()


def test_a_skip_marker_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        blocks("<!-- docs-test: skip -->\n```bash\nmake demo\n```\n")
    (b,) = blocks("<!-- docs-test: skip it starts Spark for minutes -->\n```bash\nmake demo\n```\n")
    assert b.skip == "it starts Spark for minutes"


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"`((?:docs|host|sdk|templates|tests|bench|plugins|registry)/[\w./-]+\.(?:md|py))`")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_nothing_points_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "shared/" not in text and "../" not in text, "a path outside the repository"
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        assert path.is_relative_to(REPO) and path.exists(), target
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path.read_text(encoding="utf-8")), target
    for rel in _PATH.findall(text):
        assert (REPO / rel).exists(), rel


def _anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer (GitHub's rule) gives the headings: lower case, punctuation dropped,
    spaces as hyphens."""
    from markdown_it import MarkdownIt

    toks = MarkdownIt("commonmark").parse(markdown)
    titles = [toks[i + 1].content for i, t in enumerate(toks) if t.type == "heading_open"]
    return {re.sub(r"[^\w\- ]", "", t.replace("`", "").lower()).replace(" ", "-") for t in titles}


def test_readme_states_what_a_newcomer_needs() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for words in ("Python 3.11", "Java 17", "1.1 GB", "source .venv/bin/activate", ".venv/bin/udm",
                  "udm-demo-out/demo.png", "(docs/reference.md)"):
        assert words in text, words
    shells = [b for b in blocks(text) if b.lang in SHELLS]
    assert any("udm run query.yaml" in b.code for b in shells)
    assert any(b.attrs.get("file") == "events.jsonl" for b in blocks(text))
    assert any(b.attrs.get("file") == "query.yaml" for b in blocks(text))


def test_the_makefiles_messages_fit_80_columns() -> None:
    for line in (REPO / "Makefile").read_text().splitlines():
        m = re.search(r'@echo "(.*)"', line)
        if m:
            shown = m.group(1).replace("$(VENV)", ".venv")
            assert len(shown) <= 80, shown
