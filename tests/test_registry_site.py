"""The registry's catalog site as files: what the index and each UDM page say (read back with an HTML parser,
compared with the catalog they were built from), escaping of publisher text, and which files a publish
rewrites. The same site in a real browser: tests/test_registry_browser.py."""

from __future__ import annotations

import html.parser
import json
import os
from pathlib import Path

import pytest
import yaml

from bench.registry_gen import fake_catalog, fake_release
from udm.host.catalog import Catalog
from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.registry import RegistryCatalog, UdmRecord
from udm.registry._index import write_index
from udm.registry._inspect import _check_one
from udm.registry._markdown import render_markdown
from udm.registry._site_model import kind_label
from udm.registry._snippet import query_snippet


class _Page(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text inside each element that has an id."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self._open: list[tuple[str, str | None]] = []
        self.text_by_id: dict[str, str] = {}
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag not in ("br", "meta", "link", "input", "img"):
            self._open.append((tag, a.get("id")))
            if a.get("id"):
                self.text_by_id[a["id"]] = ""

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            t, _ = self._open.pop()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self._open:
            if ident:
                self.text_by_id[ident] += data

    def all(self, tag: str, **want: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(want[k] in a.get(k, "").split() for k in want)]


def _page(root: Path, rel: str) -> _Page:
    return _Page((root / rel).read_text(encoding="utf-8"))


def _cards(root: Path) -> dict[str, dict[str, str]]:
    return {a["data-name"]: a for a in _page(root, "index.html").all("li", **{"class": "card"})}


@pytest.fixture()
def two_versions() -> RegistryCatalog:
    """Two distributions; ``fake_udm_00000`` and ``fake_udm_00001`` published in 1.0.0 and 1.1.0."""
    return fake_catalog(4, per_release=2, versions=2)


# -- what the pages say -----------------------------------------------------------------------------

def test_index_lists_the_latest_version_of_each_udm_with_its_filter_data(tmp_path: Path,
                                                                           two_versions: RegistryCatalog) -> None:
    write_index(tmp_path, two_versions)
    cards = _cards(tmp_path)
    assert sorted(cards) == [f"fake_udm_{i:05d}" for i in range(4)]
    for rel in two_versions.releases:
        for u in rel.udms:
            card = cards[u.name]
            assert card["data-search"] == " ".join([u.name, u.summary, u.kind, rel.distribution,
                                                    *(p.replace("_", "-") for p in u.property_names())]).lower()
            expected_props = [k for k in ("incremental", "algebraic", "time_sensitive", "time_bound")
                              if u.properties[k]]
            assert card["data-kind"] == u.kind
            assert card["data-props"].split() == expected_props
    index = _page(tmp_path, "index.html")
    assert [a["value"] for a in index.all("input", name="kind")] == ["udf", "uda", "udo", "span udo"]
    assert [a["value"] for a in index.all("input", name="prop")] == ["incremental", "algebraic", "time_sensitive",
                                                                      "time_bound"]
    assert index.all("form", id="filters")[0].get("hidden") == ""  # shown by the script, so no-JS sees no dead form
    links = {a["href"] for a in index.all("a")}
    assert {f"udm/fake_udm_{i:05d}.html" for i in range(4)} <= links
    assert "1.1.0" in index.text_by_id.get("udms", "") and "1.0.0" not in index.text_by_id["udms"]


def test_a_udm_page_shows_manifest_parameters_policies_and_every_version(tmp_path: Path,
                                                                        two_versions: RegistryCatalog) -> None:
    write_index(tmp_path, two_versions)
    page = _page(tmp_path, "udm/fake_udm_00001.html")
    rows = page.all("tr", **{})
    versions = [a["data-version"] for a in rows if "data-version" in a]
    assert versions == ["1.1.0", "1.0.0"]  # newest first
    text = (tmp_path / "udm" / "fake_udm_00001.html").read_text()
    for rel in two_versions.releases:
        if rel.distribution == "udm-fake-00000":
            assert rel.sha256 in text and f'href="../files/{rel.filename}"' in text
    latest = next(u for r in two_versions.releases if r.version == "1.1.0"
                  for u in r.udms if u.name == "fake_udm_00001")
    assert page.text_by_id["udm-name"] == "fake_udm_00001"
    assert page.text_by_id["install-line"] == "udm registry install 'fake_udm_00001==1.1.0'"
    assert "pip install --index-url" in page.text_by_id["pip-line"] and "udm-fake-00000==1.1.0" in page.text_by_id[
        "pip-line"]
    params = page.text_by_id["parameters"]
    assert "how many to keep" in params and "integer" in params and "≥ 1" in params
    assert json.loads(page.text_by_id["manifest-json"]) == latest.model_dump(mode="json")
    assert "7 passed" in page.text_by_id["versions"]
    assert page.all("a", href="fake_udm_00000.html")  # the distribution's other UDM


def test_docs_are_rendered_as_markdown_and_scripts_stay_text() -> None:
    out = render_markdown("A *b* `c`\n\n<script>x()</script>\n\n[x](javascript:alert(1)) [y](https://e.org)\n\n"
                          "![img](https://tracker.example/p.png)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<em>b</em>" in out and "<code>c</code>" in out and "<table>" in out
    assert "&lt;script&gt;x()&lt;/script&gt;" in out and "<script" not in out
    assert "[x](javascript:alert(1))" in out and 'href="javascript' not in out  # a dropped link stays text
    assert '<a href="https://e.org" rel="nofollow noopener noreferrer">y</a>' in out
    assert "<img" not in out


def test_publisher_text_is_escaped_on_every_page(tmp_path: Path) -> None:
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)>" onmouseover="alert(3)'
    rel = fake_release("udm-evil", "1.0.0", ["evil"])
    data = rel.model_dump(mode="json")
    data["summary"] = evil
    data["readme"], data["readme_type"] = evil, "text/markdown"
    u = data["udms"][0]
    u["summary"] = u["docs"] = u["input_type"] = evil
    u["params"]["properties"]["k"]["description"] = evil
    u["params"]["properties"][evil] = {"type": "string", "default": evil, "description": evil}
    write_index(tmp_path, RegistryCatalog.model_validate({"releases": [data]}))
    for rel_path in ("index.html", "udm/evil.html"):
        text = (tmp_path / rel_path).read_text()
        tags = _Page(text).tags
        assert [a.get("src") for t, a in tags if t == "script"] == [
            ("../" if "/" in rel_path else "") + "static/site.js"], rel_path
        assert not [t for t, _ in tags if t in ("img", "iframe")], rel_path
        assert not [a for _, a in tags if any(k.startswith("on") for k in a)], rel_path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_udm_name_that_is_not_an_identifier_is_refused() -> None:
    data = fake_release("udm-x", "1.0.0", ["fine"]).model_dump(mode="json")
    data["udms"][0]["name"] = "../../index"
    with pytest.raises(ValueError, match="is not an identifier"):
        RegistryCatalog.model_validate({"releases": [data]})


def test_kind_labels_span_udos() -> None:
    base = fake_release("udm-x", "1.0.0", ["a"]).udms[0].model_dump(mode="json")
    assert kind_label(UdmRecord.model_validate({**base, "kind": "udo", "span": True})) == "span udo"
    assert kind_label(UdmRecord.model_validate({**base, "kind": "udo"})) == "udo"
    assert kind_label(UdmRecord.model_validate({**base, "kind": "uda", "span": True})) == "uda"


def test_query_snippets_of_the_installed_udms_bind() -> None:
    """Every first-party UDM's snippet, built from its manifest as publish records it, is a query the host
    binds (names, versions, UDF args, policies): what a query writer copies runs."""
    cat = Catalog.discover()
    names = set()
    for entry in cat.entries:
        rec = UdmRecord.model_validate(_check_one(entry.cls, "p", 0)["manifest"])
        bind(parse_query(yaml.safe_load(query_snippet(rec, kind_label(rec)))), cat)
        names.add(rec.name)
    assert {"count", "median", "twa", "in_range", "topk", "members", "follows"} <= names


# -- incremental rebuild ------------------------------------------------------------------------------

def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with (inode, mtime): an atomic rewrite gives a new inode."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            st = os.stat(Path(dirpath, n))
            out[str(Path(dirpath, n).relative_to(root))] = (st.st_ino, st.st_mtime_ns)
    return out


def _rewritten(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> set[str]:
    return {p for p, v in after.items() if before.get(p) != v}


def test_publishing_one_release_rewrites_only_what_changed(tmp_path: Path) -> None:
    catalog = fake_catalog(40, per_release=2, versions=1)
    first = write_index(tmp_path, catalog)
    assert len(first.written) == 40 + 1 + 20 + 1 + 1 + 2  # UDM pages, index, project pages, root, catalog, static
    before = _files(tmp_path)
    # a new version of one distribution (udm-fake-00007: fake_udm_00014 and _00015)
    catalog.releases.append(fake_release("udm-fake-00007", "2.0.0", ["fake_udm_00014", "fake_udm_00015"]))
    build = write_index(tmp_path, catalog)
    expected = {"udm/fake_udm_00014.html", "udm/fake_udm_00015.html", "index.html", "catalog.json",
                "simple/udm-fake-00007/index.html"}
    assert set(build.written) == expected
    assert _rewritten(before, _files(tmp_path)) == expected | {".udm-site.json"}
    assert build.kept == len(first.written) - len(expected)
    # a new distribution also adds itself to the project list
    before = _files(tmp_path)
    catalog.releases.append(fake_release("udm-brand-new", "0.1.0", ["brand_new"]))
    build = write_index(tmp_path, catalog)
    assert set(build.written) == {"udm/brand_new.html", "index.html", "catalog.json", "simple/index.html",
                                  "simple/udm-brand-new/index.html"}
    assert _rewritten(before, _files(tmp_path)) == set(build.written) | {".udm-site.json"}
    # nothing changed: nothing written, not even the state
    before = _files(tmp_path)
    assert write_index(tmp_path, catalog).written == []
    assert _rewritten(before, _files(tmp_path)) == set()


def test_missing_files_new_templates_and_lost_state_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = fake_catalog(6, per_release=3, versions=1)
    n_files = len(write_index(tmp_path, catalog).written)
    (tmp_path / "udm" / "fake_udm_00002.html").unlink()
    (tmp_path / "static" / "site.js").write_text("// edited by hand")
    assert set(write_index(tmp_path, catalog).written) == {"udm/fake_udm_00002.html"}  # the key, not the bytes
    (tmp_path / ".udm-site.json").unlink()
    assert len(write_index(tmp_path, catalog).written) == n_files
    assert "edited by hand" not in (tmp_path / "static" / "site.js").read_text()
    import udm.registry._site as site

    monkeypatch.setattr(site, "SITE_FORMAT", site.SITE_FORMAT + 1)  # as a udmkit with other page models
    assert len(write_index(tmp_path, catalog).written) == n_files


def test_pages_no_longer_made_are_removed_and_nothing_else(tmp_path: Path) -> None:
    catalog = fake_catalog(4, per_release=2, versions=1)
    write_index(tmp_path, catalog)
    (tmp_path / "udm" / "mine.txt").write_text("not the site's")
    state = json.loads((tmp_path / ".udm-site.json").read_text())
    state["keys"]["../outside.txt"] = state["keys"]["udm/fake_udm_00003.html"] = "stale"
    (tmp_path.parent / "outside.txt").write_text("keep me")
    (tmp_path / ".udm-site.json").write_text(json.dumps(state))
    catalog.releases = [r for r in catalog.releases if r.distribution != "udm-fake-00001"]
    build = write_index(tmp_path, catalog)
    assert set(build.removed) == {"udm/fake_udm_00002.html", "udm/fake_udm_00003.html",
                                  "simple/udm-fake-00001/index.html"}
    assert (tmp_path / "udm" / "mine.txt").exists() and (tmp_path.parent / "outside.txt").exists()
    assert not (tmp_path / "udm" / "fake_udm_00003.html").exists()

