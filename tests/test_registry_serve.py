"""`udm registry serve`: the registry directory over HTTP on 127.0.0.1, its site and its PEP 503 index, which
pip installs from; hidden files stay hidden; clear one-line refusals."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from market_plugins import STATS, write_plugin
from serve_harness import UDM, serving
from venvs import child_venv

from udm.registry import Location, publish, read_catalog, refresh_site


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("serve")
    root = tmp / "registry"
    publish(Location(path=root), write_plugin(tmp, "udm-basket-stats", STATS), isolation=False)
    return root


def _get(url: str) -> tuple[int, Message, bytes]:
    """Status, headers (case-insensitive) and body."""
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, b""


def test_serve_previews_the_site_and_the_index(registry: Path) -> None:
    rel = read_catalog(Location(path=registry)).releases[0]
    with serving(registry) as url:
        status, headers, body = _get(url)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert headers["Cache-Control"] == "no-cache"
        assert b'href="udm/basket_total.html"' in body
        status, _, body = _get(url + "udm/basket_total.html")
        assert status == 200 and rel.sha256.encode() in body
        assert _get(url + "static/site.js")[1]["Content-Type"].startswith("text/javascript")
        assert json.loads(_get(url + "catalog.json")[2])["releases"][0]["sha256"] == rel.sha256
        status, _, body = _get(url + "simple/udm-basket-stats/")
        assert status == 200 and f"{rel.filename}#sha256={rel.sha256}".encode() in body
        status, _, wheel = _get(url + f"files/{rel.filename}")
        assert status == 200 and hashlib.sha256(wheel).hexdigest() == rel.sha256
        for hidden in (".lock", ".udm-site.json", "udm/../.lock", "%2Eudm-site.json"):
            assert _get(url + hidden)[0] == 404, hidden
    log = (registry.parent / "registry-serve.log").read_text()
    assert '"GET /udm/basket_total.html HTTP/1.1" 200' in log


def test_serve_brings_an_old_site_up_to_date(tmp_path: Path, registry: Path) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(registry), str(copy)], check=True)
    (copy / ".udm-site.json").unlink()  # as written by a udmkit before the site existed
    (copy / "static" / "site.css").unlink()
    with serving(copy) as url:
        assert _get(url + "static/site.css")[0] == 200


def test_a_read_only_registry_is_served_as_it_is(tmp_path: Path, registry: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import udm.registry._serve as serve

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(registry), str(copy)], check=True)
    (copy / ".udm-site.json").unlink()
    monkeypatch.setattr(serve.os, "access", lambda path, mode: False)  # root may write anywhere: pretend
    assert refresh_site(Location(path=copy)) is None
    assert not (copy / ".udm-site.json").exists()
    monkeypatch.undo()
    written = refresh_site(Location(path=copy))  # writable again: without its state, everything is rebuilt
    assert written == len(json.loads((copy / ".udm-site.json").read_text())["keys"]) > 0


def _run_udm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*UDM, *args], capture_output=True, text=True, timeout=120, check=False)


def test_serve_refusals_are_one_line(tmp_path: Path, registry: Path) -> None:
    proc = _run_udm("registry", "serve", "--registry", str(tmp_path / "empty"))
    assert proc.returncode == 1 and proc.stderr.startswith("error: nothing to serve:")
    assert "udm registry publish PROJECT_DIR --registry" in proc.stderr
    proc = _run_udm("registry", "serve", "--registry", "https://udm.example.invalid/reg/")
    assert proc.returncode == 1 and "previews a registry directory" in proc.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _run_udm("registry", "serve", "--registry", str(registry), "--port", str(port))
    assert proc.returncode == 1 and f"cannot serve on 127.0.0.1:{port}: the port is in use" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_pip_installs_from_the_served_index(tmp_path: Path, registry: Path) -> None:
    py = child_venv(tmp_path / "venv")
    with serving(registry) as url:
        proc = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                               "--index-url", url + "simple/", "udm-basket-stats"],
                              capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Successfully installed udm-basket-stats-0.1.0" in proc.stdout
    listed = subprocess.run([str(py), "-m", "udm.host.cli.app", "list", "--json"], capture_output=True, text=True,
                            timeout=120, check=True).stdout
    rows = {r["name"]: r for r in json.loads(listed)["udms"]}
    assert rows["basket_total"]["status"] == "ok" and rows["basket_total"]["distribution"] == "udm-basket-stats 0.1.0"
