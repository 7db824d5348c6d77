"""The registry: publish (build, validate, contract-check, index), search/info from the catalog, install
with pip from the static PEP 503 index (hash-pinned, host API checked first)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from venvs import child_venv

from udm.registry import (
    Location,
    RegistryError,
    info,
    install,
    plan_install,
    publish,
    read_catalog,
    resolve_location,
    search,
)
from udm.templates import ProjectOptions, render_project


def _udm(*args: str, env: dict[str, str] | None = None,
         python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([python, "-m", "udm.host.cli.app", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})}, check=False)


def _project(tmp_path: Path, name: str, kind: str = "uda", **flags: bool) -> Path:
    opts = ProjectOptions(name, kind, **flags)  # type: ignore[arg-type]
    dest = tmp_path / opts.distribution
    render_project(opts, dest)
    return dest


def _set_version(project: Path, version: str) -> None:
    """Bump both the distribution version and the UDM's manifest version."""
    for f in [project / "pyproject.toml", *project.glob("src/*/*.py")]:
        f.write_text(re.sub(r'version ?= ?"0\.1\.0"', lambda m: m.group(0).replace("0.1.0", version),
                            f.read_text()))


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Location, Path]:
    """A registry holding one published project (built once: building is the slow part)."""
    tmp = tmp_path_factory.mktemp("reg")
    loc = Location(path=tmp / "registry")
    project = _project(tmp, "spread_pub")
    res = publish(loc, project, isolation=False)
    assert res.status == "published"
    return loc, project


# -- publish ----------------------------------------------------------------------------------------

def test_publish_writes_pep503_index_with_real_sha256(published: tuple[Location, Path]) -> None:
    loc, _ = published
    root = loc.writable_dir()
    [wheel] = (root / "files").glob("*.whl")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert 'href="udm-spread-pub/"' in (root / "simple" / "index.html").read_text()
    page = (root / "simple" / "udm-spread-pub" / "index.html").read_text()
    assert f'href="../../files/{wheel.name}#sha256={sha}"' in page
    assert 'data-requires-python="&gt;=3.11"' in page


def test_publish_writes_a_catalog_of_manifests(published: tuple[Location, Path]) -> None:
    loc, _ = published
    data = json.loads((loc.writable_dir() / "catalog.json").read_text())
    [row] = data["udms"]
    assert row["name"] == "spread_pub" and row["version"] == "0.1.0" and row["kind"] == "uda"
    assert row["distribution"] == "udm-spread-pub"
    assert row["host_api"] == ">=1.0,<2"
    assert row["properties"]["incremental"] is False
    assert row["summary"] == "Largest minus smallest input value."
    [rel] = data["releases"]
    assert rel["checks"] and all(c["passed"] for c in rel["checks"])


def test_publish_writes_the_catalog_site(published: tuple[Location, Path]) -> None:
    root = published[0].writable_dir()
    index = (root / "index.html").read_text()
    assert '<a href="udm/spread_pub.html">spread_pub</a>' in index and '<input type="search"' in index
    page = (root / "udm" / "spread_pub.html").read_text()
    assert "udm registry install &#39;spread_pub==0.1.0&#39;" in page
    [rel] = read_catalog(published[0]).releases
    assert rel.sha256 in page and rel.readme_type == "text/markdown"
    assert "<h1>udm-spread-pub</h1>" in page  # the generated README, rendered as Markdown
    passed = sum(1 for c in rel.checks if not c.get("skipped"))
    skipped = len(rel.checks) - passed
    assert f"{passed} passed</span>, {skipped} not applicable" in page and skipped > 0


def test_republishing_identical_contents_is_a_no_op(published: tuple[Location, Path]) -> None:
    loc, project = published
    assert publish(loc, project, isolation=False).status == "unchanged"
    assert len(read_catalog(loc).releases) == 1


def test_republishing_a_version_with_different_contents_is_refused(tmp_path: Path) -> None:
    loc = Location(path=tmp_path / "registry")
    project = _project(tmp_path, "changing")
    publish(loc, project, isolation=False)
    module = project / "src" / "udm_changing" / "changing.py"
    module.write_text(module.read_text().replace("Largest minus smallest", "Largest minus the smallest"))
    with pytest.raises(RegistryError, match=r"0\.1\.0 is already published .* different contents.*bump"):
        publish(loc, project, isolation=False)
    _set_version(project, "0.2.0")
    assert publish(loc, project, isolation=False).status == "published"
    assert [r.version for r in read_catalog(loc).releases] == ["0.1.0", "0.2.0"]
    assert [h.udm.version for h in info(read_catalog(loc), "changing")] == ["0.1.0", "0.2.0"]


def test_publish_refuses_a_lying_manifest_and_writes_nothing(tmp_path: Path) -> None:
    loc = Location(path=tmp_path / "registry")
    project = _project(tmp_path, "liar")
    module = project / "src" / "udm_liar" / "liar.py"
    module.write_text(module.read_text().replace('host_api=">=1.0,<2",', 'host_api=">=1.0,<2", algebraic=True,'))
    with pytest.raises(RegistryError, match=r"'liar' is refused by the host: .*algebraic"):
        publish(loc, project, isolation=False)
    assert not (tmp_path / "registry" / "catalog.json").exists()


def test_publish_refuses_a_project_without_udm_entry_point(tmp_path: Path) -> None:
    project = _project(tmp_path, "hidden")
    pp = project / "pyproject.toml"
    pp.write_text(pp.read_text().replace("[project.entry-points.udm]", "[project.entry-points.other]"))
    with pytest.raises(RegistryError, match="no entry points in group 'udm'"):
        publish(Location(path=tmp_path / "registry"), project, isolation=False)


def test_publish_a_wheel_and_name_squatting_is_refused(tmp_path: Path, published: tuple[Location, Path]) -> None:
    loc, _ = published
    [wheel] = (loc.writable_dir() / "files").glob("*.whl")
    other = Location(path=tmp_path / "other")
    assert publish(other, wheel).status == "published"
    # Another distribution registering the same UDM name is refused.
    squat = _project(tmp_path, "spread_pub")
    pp = squat / "pyproject.toml"
    pp.write_text(pp.read_text().replace('name = "udm-spread-pub"', 'name = "udm-squatter"'))
    with pytest.raises(RegistryError, match="already published by distribution 'udm-spread-pub'"):
        publish(other, squat, isolation=False)


def test_publish_to_an_url_or_a_bad_target_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="needs a registry directory"):
        publish(Location(url="https://example.invalid/reg/"), tmp_path)
    with pytest.raises(RegistryError, match="neither a project directory nor a .whl"):
        (tmp_path / "x.txt").write_text("")
        publish(Location(path=tmp_path / "r"), tmp_path / "x.txt")


# -- search / info ------------------------------------------------------------------------------------

def test_search_and_info_read_the_catalog(published: tuple[Location, Path]) -> None:
    cat = read_catalog(published[0])
    assert [h.udm.name for h in search(cat, "SMALLEST largest")] == ["spread_pub"]
    assert [h.udm.name for h in search(cat, "uda")] == ["spread_pub"]
    assert search(cat, "nothing-like-this") == []
    assert info(cat, "udm-spread-pub")[0].udm.name == "spread_pub"  # by distribution name too
    with pytest.raises(RegistryError, match="did you mean spread_pub"):
        info(cat, "spread")


def test_cli_search_and_info_json(published: tuple[Location, Path]) -> None:
    loc, _ = published
    proc = _udm("registry", "search", "spread", "--json", env={"UDM_REGISTRY": str(loc)})
    assert proc.returncode == 0, proc.stderr
    [hit] = json.loads(proc.stdout)["results"]
    assert hit["name"] == "spread_pub" and hit["supports_this_host"] is True
    proc = _udm("registry", "info", "spread_pub", "--registry", str(loc), "--json")
    assert json.loads(proc.stdout)["versions"][0]["install"] == "udm registry install 'spread_pub==0.1.0'"
    proc = _udm("registry", "info", "nope", "--registry", str(loc))
    assert proc.returncode == 1 and proc.stderr.startswith("error: no UDM or distribution named 'nope'")


@pytest.fixture()
def http_registry(published: tuple[Location, Path]) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(published[0].path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_search_over_http(http_registry: str) -> None:
    loc = resolve_location(http_registry)
    assert loc.url == http_registry + "/"
    assert [h.udm.name for h in search(read_catalog(loc), "")] == ["spread_pub"]
    plan = plan_install(loc, read_catalog(loc), "spread_pub")
    assert plan.index_url == http_registry + "/simple/"


def test_unreadable_registries_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text("{not json")
    with pytest.raises(RegistryError, match="not a valid udm registry catalog"):
        read_catalog(Location(path=tmp_path))
    with pytest.raises(RegistryError, match="cannot reach"):
        read_catalog(resolve_location("http://127.0.0.1:9/"))


# -- location ---------------------------------------------------------------------------------------

def test_location_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UDM_REGISTRY", str(tmp_path / "env"))
    assert resolve_location(str(tmp_path / "flag")).path == tmp_path / "flag"
    assert resolve_location(None).path == tmp_path / "env"
    assert resolve_location((tmp_path / "u").as_uri()).path == tmp_path / "u"
    monkeypatch.delenv("UDM_REGISTRY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_location(None).path == tmp_path / "xdg" / "udm" / "registry"
    with pytest.raises(RegistryError, match="only directories and http"):
        resolve_location("ftp://host/reg")


# -- install ----------------------------------------------------------------------------------------

def test_install_refuses_host_api_mismatch_before_pip(published: tuple[Location, Path]) -> None:
    loc, _ = published
    with pytest.raises(RegistryError, match=r"no matching release works with this host \(host API 2\.0\).*"
                                            r"'spread_pub' supports host API >=1\.0,<2"):
        install(loc, read_catalog(loc), "spread_pub", api_version="2.0", python="/nonexistent/python")


def test_install_refuses_unknown_names_and_unmatched_specs(published: tuple[Location, Path]) -> None:
    loc, _ = published
    cat = read_catalog(loc)
    with pytest.raises(RegistryError, match="no UDM or distribution named 'median'"):
        plan_install(loc, cat, "median")
    with pytest.raises(RegistryError, match=r"no published version of 'spread_pub' matches '>=2'; published: 0\.1\.0"):
        plan_install(loc, cat, "spread_pub>=2")
    with pytest.raises(RegistryError, match="is not NAME or NAME<version spec>"):
        plan_install(loc, cat, "spread pub")
    assert plan_install(loc, cat, "spread_pub==0.1.0").pin == "udm-spread-pub==0.1.0"


def test_cli_install_refuses_a_release_for_another_host_api(tmp_path: Path,
                                                            published: tuple[Location, Path]) -> None:
    """A registry written by a newer host: the catalog says host API >=2; nothing reaches pip."""
    src = published[0].writable_dir()
    reg = tmp_path / "newer"
    subprocess.run(["cp", "-r", str(src), str(reg)], check=True)
    cat = reg / "catalog.json"
    cat.write_text(cat.read_text().replace('">=1.0,<2"', '">=2.0,<3"'))
    proc = _udm("registry", "install", "spread_pub", "--registry", str(reg))
    assert proc.returncode == 1
    assert "refusing to install spread_pub" in proc.stderr and "supports host API >=2.0,<3" in proc.stderr
    assert "this host (host API 1.0)" in proc.stderr


def test_install_refuses_a_tampered_artifact(tmp_path: Path, published: tuple[Location, Path]) -> None:
    reg = tmp_path / "tampered"
    subprocess.run(["cp", "-r", str(published[0].writable_dir()), str(reg)], check=True)
    [wheel] = (reg / "files").glob("*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    with pytest.raises(RegistryError, match="does not match its published sha256"):
        install(Location(path=reg), read_catalog(Location(path=reg)), "spread_pub", python="/nonexistent")


@pytest.mark.slow
def test_install_with_pip_from_the_index_then_udm_list_shows_it(tmp_path: Path,
                                                                 published: tuple[Location, Path]) -> None:
    loc, _ = published
    py = child_venv(tmp_path / "venv")
    proc = _udm("registry", "install", "spread_pub>=0.1", "--registry", str(loc), python=str(py))
    assert proc.returncode == 0, proc.stderr
    assert "installed udm-spread-pub==0.1.0" in proc.stdout and "sha256 verified" in proc.stdout
    listed = json.loads(_udm("list", "--json", python=str(py)).stdout)
    [row] = [r for r in listed["udms"] if r["name"] == "spread_pub"]
    assert row["status"] == "ok" and row["distribution"] == "udm-spread-pub 0.1.0"
    assert "spread_pub" not in _udm("list", "--json").stdout  # the project's own .venv is untouched
