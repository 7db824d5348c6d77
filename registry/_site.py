"""Writing a registry's derived files — the catalog site, the PEP 503 pages, catalog.json — incrementally.

Every derived file has a key: a hash of everything it is made from (its page model from `_site_model`,
or its bytes for files that cost nothing to make) and of the site's templates and renderer. The keys of
the last build are kept in ``.udm-site.json``; a file whose key did not change and that is still on disk
is neither rendered nor written again. So publishing one release rewrites its distribution's index page,
the pages of its UDMs, the site's index page and catalog.json, and nothing else; a new udmkit whose
templates differ rebuilds every page once. Files are replaced atomically (`atomic_write`), so a reader
never sees half a page.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

import udm.templates

from ._markdown import render_inline, render_markdown, renderer_version
from ._store import atomic_write

__all__ = ["STATE_FILE", "SiteBuild", "SiteWriter", "page_renderer", "static_files"]

#: bump when the page models change meaning, so every page is rebuilt once
SITE_FORMAT = 1
STATE_FILE = ".udm-site.json"
_STATIC = ("site.css", "site.js")
#: the only folders a build removes stale files from (the state file is data a reader could have edited)
_OWNED_DIRS = ("udm", "simple", "static")


def _templates_dir() -> Path:
    """The registry site templates, shipped in ``udm.templates`` (also when installed from a wheel)."""
    return Path(udm.templates.__file__).resolve().parent / "registry"


def static_files() -> dict[str, bytes]:
    """The site's stylesheet and script, by their path in the registry."""
    return {f"static/{name}": (_templates_dir() / name).read_bytes() for name in _STATIC}


def _readme_html(text: str, content_type: str) -> Markup:
    """A distribution's README: Markdown when it says so, else preformatted text (reStructuredText stays raw)."""
    if not text:
        return Markup("")
    if content_type in ("text/markdown", "text/x-markdown"):
        return Markup(render_markdown(text))
    return Markup('<pre class="readme">{}</pre>').format(text)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_templates_dir())), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["markdown"] = lambda text: Markup(render_markdown(text))
    env.filters["markdown_inline"] = lambda text: Markup(render_inline(text))
    env.filters["readme"] = _readme_html
    return env


def _site_salt() -> str:
    """What every page depends on besides its own data: the templates, the assets, the renderer."""
    h = hashlib.sha256(f"{SITE_FORMAT}\0{renderer_version()}\0".encode())
    for f in sorted(_templates_dir().iterdir()):
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def page_renderer(template: str) -> Callable[[dict[str, Any]], str]:
    """Render ``template`` with a page model (what a publisher wrote goes through `_markdown`'s filters)."""
    tpl = _environment().get_template(template)

    def render(model: dict[str, Any]) -> str:
        return tpl.render(**model)

    return render


@dataclass
class SiteBuild:
    """What one build did, by path relative to the registry root."""

    written: list[str] = field(default_factory=list)
    kept: int = 0
    removed: list[str] = field(default_factory=list)


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8") + b"\0")
    return h.hexdigest()


class SiteWriter:
    """Writes the derived files of one build, skipping those whose key matches the last build's."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.salt = _site_salt()
        self.old = self._read_state()
        self.new: dict[str, str] = {}
        self.report = SiteBuild()

    def _read_state(self) -> dict[str, str]:
        try:
            data = json.loads((self.root / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # no state (a new registry, or one written by an older udmkit): rebuild everything
        if not isinstance(data, dict) or data.get("format") != SITE_FORMAT or not isinstance(data.get("keys"), dict):
            return {}
        return {str(k): str(v) for k, v in data["keys"].items()}

    def _unchanged(self, rel: str, key: str) -> bool:
        self.new[rel] = key
        if self.old.get(rel) == key and (self.root / rel).is_file():
            self.report.kept += 1
            return True
        return False

    def put_bytes(self, rel: str, data: bytes) -> None:
        """A file that costs nothing to make: keyed by its bytes."""
        if not self._unchanged(rel, _key("bytes", hashlib.sha256(data).hexdigest())):
            atomic_write(self.root / rel, data)
            self.report.written.append(rel)

    def put_page(self, rel: str, model: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
        """A rendered page: keyed by its model and the site's templates; rendered only when that changed."""
        blob = json.dumps(model, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        if not self._unchanged(rel, _key("page", self.salt, blob)):
            atomic_write(self.root / rel, render(model).encode("utf-8"))
            self.report.written.append(rel)

    def finish(self) -> SiteBuild:
        """Remove the files the last build made and this one did not; save the keys."""
        root = self.root.resolve()
        for rel in sorted(set(self.old) - set(self.new)):
            path = (self.root / rel).resolve()
            if path.parent != root and path.is_relative_to(root) and rel.split("/", 1)[0] in _OWNED_DIRS:
                path.unlink(missing_ok=True)
                self.report.removed.append(rel)
        if self.new != self.old:
            state = {"format": SITE_FORMAT, "keys": dict(sorted(self.new.items()))}
            atomic_write(self.root / STATE_FILE, (json.dumps(state, indent=0) + "\n").encode("utf-8"))
        return self.report
