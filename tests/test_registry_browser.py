"""The catalog site in a real headless Chromium (Debian's chromium, driven by Playwright; see tests/browser.py),
served by `udm registry serve`: two plugins are published (one of them in two versions), then the index is
filtered, a UDM page is read, and its copied install line installs the UDM. Also: the site with JavaScript
off and opened from disk, and a hostile manifest whose text must stay text."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium
from market_plugins import ALGEBRAIC_UDAS, HOSTILE_SNIPPETS, OPS, STATS, hostile_source, write_plugin
from serve_harness import serving
from venvs import child_venv

from udm.registry import Location, publish

ALL = {"basket_total", "basket_count", "basket_median", "basket_big", "basket_top", "basket_twa"}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("market")
    loc = Location(path=tmp / "registry")
    publish(loc, write_plugin(tmp, "udm-basket-stats", STATS), isolation=False)
    publish(loc, write_plugin(tmp, "udm-basket-ops", OPS), isolation=False)
    publish(loc, write_plugin(tmp, "udm-basket-stats", STATS, version="0.2.0"), isolation=False)
    assert loc.path is not None
    return loc.path


@pytest.fixture(scope="module")
def url(registry: Path) -> Iterator[str]:
    with serving(registry) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A fresh page allowed to use the clipboard; fails the test on any script error it saw."""
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"],
                                  viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield pg
    context.close()
    assert errors == []


def _visible(pg: Any) -> set[str]:
    return set(pg.eval_on_selector_all("#udms > li:not([hidden])", "els => els.map(e => e.dataset.name)"))


# -- the index ----------------------------------------------------------------------------------

def test_index_filters_to_algebraic_udas(page: Any, url: str) -> None:
    page.goto(url)
    assert _visible(page) == ALL
    assert page.inner_text("#shown") == "6 UDMs"
    page.check("input[name=kind][value=uda]")
    assert _visible(page) == {"basket_total", "basket_count", "basket_median", "basket_twa"}
    page.check("input[name=prop][value=algebraic]")
    assert _visible(page) == ALGEBRAIC_UDAS
    assert page.inner_text("#shown") == "2 of 6 UDMs"
    assert page.url.endswith("?kind=uda&prop=algebraic")
    page.fill("#q", "number of")  # basket_count's summary
    assert _visible(page) == {"basket_count"}
    page.fill("#q", "no such words")
    assert _visible(page) == set() and page.is_visible("#none")
    page.click("button[type=reset]")
    # (the page applies a reset once the form has cleared its fields: on the next task, not in the click)
    page.wait_for_function("n => document.querySelectorAll('#udms > li:not([hidden])').length === n", arg=len(ALL))
    assert _visible(page) == ALL and page.url == url


def test_a_filtered_view_is_a_link(page: Any, url: str) -> None:
    page.goto(url + "index.html?kind=udo&kind=udf")
    assert _visible(page) == {"basket_top", "basket_big"}
    assert page.is_checked("input[name=kind][value=udo]") and not page.is_checked("input[name=kind][value=uda]")
    page.goto(url + "index.html?prop=time_sensitive")
    assert _visible(page) == {"basket_twa"}


# -- a UDM page -----------------------------------------------------------------------------------

def test_a_udm_page_shows_its_manifest_and_every_version(page: Any, url: str, registry: Path) -> None:
    page.goto(url + "index.html?kind=uda&prop=algebraic")
    page.click("#udms a[href='udm/basket_total.html']")
    page.wait_for_url(url + "udm/basket_total.html")
    assert page.inner_text("#udm-name") == "basket_total"
    assert page.inner_text("#udm-summary") == "Total amount of the baskets in the window."
    assert "Kept as an exact fraction" in page.inner_text("#docs")
    facts = dict(zip(page.eval_on_selector_all("#manifest dt", "els => els.map(e => e.innerText)"),
                     page.eval_on_selector_all("#manifest dd", "els => els.map(e => e.innerText)"), strict=True))
    assert facts["kind"] == "uda" and facts["input → output"] == "float → float"
    on = set(page.eval_on_selector_all("#manifest .flag.on", "els => els.map(e => e.textContent)"))
    assert {"incremental", "algebraic", "deterministic", "none", "left", "right", "full", "window"} == on
    page.click("#manifest summary")
    shown = json.loads(page.inner_text("#manifest-json"))
    catalog = json.loads((registry / "catalog.json").read_text())
    latest = [u for u in catalog["udms"] if u["name"] == "basket_total" and u["version"] == "0.2.0"]
    assert shown == {k: v for k, v in latest[0].items()
                     if k not in ("distribution", "distribution_version", "filename", "sha256", "install")}
    rows = page.eval_on_selector_all("#versions tbody tr", """rows => rows.map(r => ({
        version: r.dataset.version, wheel: r.querySelector('[data-label=wheel] a').textContent,
        sha: r.querySelector('.sha').textContent, api: r.querySelector('[data-label="host API"]').innerText,
        checks: r.querySelector('.checks summary').innerText}))""")
    assert [r["version"] for r in rows] == ["0.2.0", "0.1.0"]
    for r in rows:
        wheel = registry / "files" / r["wheel"]
        assert r["wheel"] == f"udm_basket_stats-{r['version']}-py3-none-any.whl"
        assert r["sha"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert r["api"] == ">=1.0,<2" and " passed" in r["checks"]
    assert page.inner_text("#siblings p") == "basket_count, basket_median, basket_big"


def test_a_udf_page_shows_its_parameters_and_a_query_that_calls_it(page: Any, url: str) -> None:
    page.goto(url + "udm/basket_big.html")
    cells = page.eval_on_selector_all("#parameters tbody td", "els => els.map(e => e.innerText)")
    assert cells == ["threshold", "number", "100.0", "smallest amount that counts as big"]
    snippet = page.inner_text("#query-snippet")
    assert "udf: basket_big" in snippet and 'args: {"amount": "price"}' in snippet and "op: filter" in snippet


@pytest.mark.slow
def test_the_copied_install_line_installs_from_serve(page: Any, url: str, tmp_path: Path) -> None:
    page.goto(url + "udm/basket_total.html")
    page.click("button[data-copy=install-line]")
    page.wait_for_function("document.querySelector('button[data-copy=install-line]').textContent === 'Copied'")
    line = page.evaluate("navigator.clipboard.readText()")
    assert line == f"udm registry install 'basket_total==0.2.0' --registry {url}"
    argv = shlex.split(line)
    py = child_venv(tmp_path / "venv")
    proc = subprocess.run([str(py), "-m", "udm.host.cli.app", *argv[1:]], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "installed udm-basket-stats==0.2.0" in proc.stdout and "sha256 verified" in proc.stdout
    listed = json.loads(subprocess.run([str(py), "-m", "udm.host.cli.app", "list", "--json"], capture_output=True,
                                       text=True, timeout=120, check=True).stdout)
    got = {r["name"]: r["distribution"] for r in listed["udms"] if r["name"].startswith("basket_")}
    assert got == {n: "udm-basket-stats 0.2.0" for n in ("basket_total", "basket_count", "basket_median",
                                                          "basket_big")}


# -- without a server, without JavaScript -----------------------------------------------------------

def test_without_javascript_every_udm_is_listed(browser: Any, url: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    pg = context.new_page()
    pg.goto(url + "index.html?kind=udo")
    assert _visible(pg) == ALL  # no script, no filtering: the full list
    assert not pg.is_visible("#filters")
    assert "Filtering needs JavaScript" in pg.inner_text("body")
    pg.goto(url + "udm/basket_total.html")
    assert pg.inner_text("#install-line") == "udm registry install 'basket_total==0.2.0'"
    assert not pg.is_visible("button[data-copy]")
    context.close()


def test_the_site_works_opened_from_disk(page: Any, registry: Path) -> None:
    page.goto(registry.as_uri() + "/index.html")
    page.check("input[name=prop][value=algebraic]")
    assert _visible(page) == ALGEBRAIC_UDAS
    page.click("#udms a[href='udm/basket_count.html']")
    assert page.inner_text("#install-line") == (f"udm registry install 'basket_count==0.2.0' "
                                                f"--registry {registry.as_uri()}/")


# -- a hostile publisher ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("hostile")
    project = write_plugin(tmp, "udm-hostile", hostile_source(), summary=HOSTILE_SNIPPETS["dist"],
                           readme=HOSTILE_SNIPPETS["readme"])
    publish(Location(path=tmp / "registry"), project, isolation=False)
    with serving(tmp / "registry") as base:
        yield base


def test_a_hostile_manifest_renders_as_text(browser: Any, hostile_url: str) -> None:
    context = browser.new_context()
    pg = context.new_page()
    console: list[str] = []
    pg.on("console", lambda msg: console.append(msg.text))
    injected = """() => ({
        pwned: window.__pwned === undefined ? null : String(window.__pwned),
        elements: Array.from(document.querySelectorAll('[id^=pwned], img, iframe, b, [onerror]'), e => e.outerHTML),
        scripts: Array.from(document.scripts, s => s.getAttribute('src'))})"""
    pg.goto(hostile_url)
    pg.wait_for_load_state("load")
    assert pg.evaluate(injected) == {"pwned": None, "elements": [], "scripts": ["static/site.js"]}
    assert pg.inner_text("#udms .summary") == HOSTILE_SNIPPETS["summary"]
    pg.goto(hostile_url + "udm/hostile_sum.html")
    pg.click("#readme summary")
    pg.wait_for_load_state("load")
    assert pg.evaluate(injected) == {"pwned": None, "elements": [], "scripts": ["../static/site.js"]}
    assert pg.inner_text("#udm-summary") == HOSTILE_SNIPPETS["summary"]
    assert pg.eval_on_selector_all("#parameters tbody td", "els => els.map(e => e.innerText)")[3] == \
        HOSTILE_SNIPPETS["param"]
    assert '<img id="pwned-docs" src="x"' in pg.inner_text("#docs")
    assert pg.locator("#docs a").count() == 0  # the javascript: link was dropped, its text kept
    assert HOSTILE_SNIPPETS["readme"] in pg.inner_text("#readme")
    # nothing was even attempted: escaping stopped it, not the Content-Security-Policy
    assert not [m for m in console if "Content Security Policy" in m], console
    context.close()
