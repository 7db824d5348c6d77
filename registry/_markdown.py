"""Rendering what a publisher wrote (docstrings, READMEs) as Markdown that cannot run in a reader's browser.

A registry shows text written by whoever published to it. markdown-it-py (CommonMark) runs with raw HTML
off, so ``<script>`` or ``<img onerror=...>`` in a docstring comes out as visible text; its link check
drops ``javascript:``, ``vbscript:`` and ``data:`` URLs; images are off too (a remote image would be
fetched from the reader's browser, and the site must work offline), and every link opens with
``rel="nofollow noopener noreferrer"``. The site's pages also carry a Content-Security-Policy that
allows no inline script, in case anything ever slipped through.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import markdown_it
from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["render_inline", "render_markdown", "renderer_version"]


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    result: str = self.renderToken(tokens, idx, options, env)
    return result


@functools.lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable("image")
    md.add_render_rule("link_open", _link_open)
    return md


def render_markdown(text: str) -> str:
    """HTML for ``text`` (CommonMark plus tables); every HTML tag in ``text`` is escaped, not kept."""
    return _md().render(text)


def render_inline(text: str) -> str:
    """HTML for one line such as a summary: code spans, emphasis and links, no paragraph."""
    return _md().renderInline(text)


def renderer_version() -> str:
    """Part of the site's build key: a different renderer may render the same docs differently."""
    return f"markdown-it-py {markdown_it.__version__}"
