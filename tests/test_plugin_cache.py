"""The plugin cache (`udm.host.plugin_cache`): a run imports only the plugins whose UDMs its query uses, and
the cache never answers for a plugin that changed, failed, or was turned off.

Each fake plugin is a real distribution (a ``*.dist-info`` with ``entry_points.txt``) in a fresh directory
on ``sys.path``, as in test_discovery.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_discovery import PLUGINS
from udm.host.catalog import Catalog
from udm.host.errors import InvalidUDM, PluginLoadError
from udm.host.plugin_cache import cache_file

_PLUGIN = '''
from udm.sdk import UDA, hookimpl, udm

@udm(name={name!r}, version={version!r})
class U(UDA):
    """Largest value."""
    def compute(self, payloads):
        return max(payloads)

@hookimpl
def register_udms(register):
    register(U)
'''

_LIAR = PLUGINS["fake-liar"][1]  # (registers `liar`, declared algebraic without merge)


def _install(site: Path, module: str, source: str) -> None:
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[udm]\n{module} = {module}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("UDM_CATALOG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UDM_STRICT", raising=False)
    monkeypatch.delenv("UDM_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    yield root
    for name in [m for m in sys.modules if m.startswith("pc_")]:
        del sys.modules[name]


def _cache_path() -> Path:
    path = cache_file()
    assert path is not None and path.parent == Path(os.environ["UDM_CATALOG_CACHE"])
    return path


def _forget(*modules: str) -> None:
    for m in modules:
        sys.modules.pop(m, None)


def _discover(monkeypatch: pytest.MonkeyPatch, *dists: str) -> Catalog:
    monkeypatch.setenv("UDM_PLUGINS", ",".join(dists))
    return Catalog.discover()


def test_a_cached_plugin_is_imported_only_when_its_udm_is_used(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(site, "pc_used", _PLUGIN.format(name="pc_max", version="1.0"))
    _install(site, "pc_unused", _PLUGIN.format(name="pc_other", version="2.0"))
    first = _discover(monkeypatch, "pc-used", "pc-unused")
    assert {"pc_used", "pc_unused"} <= set(sys.modules)  # the first discovery imports both and caches them
    assert all(e.loaded for e in first.entries)
    _forget("pc_used", "pc_unused")

    cat = _discover(monkeypatch, "pc-used", "pc-unused")
    assert "pc_used" not in sys.modules and "pc_unused" not in sys.modules
    assert cat.names() == ["pc_max", "pc_other"]
    entry = cat.resolve("pc_max", ">=1", kind="uda")
    assert entry.distribution == "pc-used 0.1" and entry.kind_label == "uda" and not entry.loaded
    assert entry.to_json_dict() == next(e for e in first.entries if e.name == "pc_max").to_json_dict()
    udm = cat.instantiate(entry, {})
    assert udm.compute([3, 9, 4]) == 9
    assert "pc_used" in sys.modules and "pc_unused" not in sys.modules


def test_two_environments_keep_their_own_records(site: Path, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """Two virtualenvs, each with its own install of the same plugin, used in turn: each lists it from its
    own record (one shared file made each take the other's record for stale: every run imported every
    plugin again)."""
    other = tmp_path / "site-b"
    other.mkdir()
    for root in (site, other):
        _install(root, "pc_env", _PLUGIN.format(name="pc_env_max", version="1.0"))
    rest = [p for p in sys.path if p != str(site)]
    envs = [(tmp_path / "venv-a", site), (tmp_path / "venv-b", other)]
    files = set()
    for turn in range(3):
        for prefix, root in envs:
            monkeypatch.setattr(sys, "prefix", str(prefix))
            monkeypatch.setattr(sys, "path", [str(root), *rest])
            _forget("pc_env")
            assert _discover(monkeypatch, "pc-env").names() == ["pc_env_max"]
            assert ("pc_env" in sys.modules) == (turn == 0)  # imported the first time only, in each
            files.add(_cache_path())
    assert len(files) == 2


def test_an_edited_plugin_is_loaded_again(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(site, "pc_edit", _PLUGIN.format(name="pc_edit_max", version="1.0"))
    assert _discover(monkeypatch, "pc-edit").resolve("pc_edit_max").version == "1.0"
    _forget("pc_edit")
    time.sleep(0.01)
    _install(site, "pc_edit", _PLUGIN.format(name="pc_edit_max", version="1.1"))
    cat = _discover(monkeypatch, "pc-edit")
    assert [e.version for e in cat.candidates("pc_edit_max")] == ["1.1"]
    assert "pc_edit" in sys.modules  # imported: its record no longer matched


def test_a_failing_plugin_is_never_cached_and_reported_every_time(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(site, "pc_broken", "import a_module_that_is_not_installed\n")
    for _ in range(2):
        cat = _discover(monkeypatch, "pc-broken")
        assert [(e.plugin, e.stage) for e in cat.load_errors] == [("pc_broken", "import")]
        assert "a_module_that_is_not_installed" in cat.load_errors[0].error
    assert not (_cache_path()).exists()  # nothing to keep


def test_a_refused_udm_is_refused_from_the_cache_with_the_same_words(site: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _install(site, "pc_liar", _LIAR)
    with pytest.raises(InvalidUDM) as cold:
        _discover(monkeypatch, "pc-liar").resolve("liar")
    _forget("pc_liar")
    with pytest.raises(InvalidUDM) as warm:
        _discover(monkeypatch, "pc-liar").resolve("liar")
    assert str(warm.value) == str(cold.value)
    assert "declared algebraic but does not implement merge" in str(warm.value)
    assert "pc_liar" not in sys.modules


def test_the_cache_can_be_turned_off(site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _install(site, "pc_off", _PLUGIN.format(name="pc_off_max", version="1.0"))
    monkeypatch.setenv("UDM_CATALOG_CACHE", "0")
    _discover(monkeypatch, "pc-off")
    _forget("pc_off")
    _discover(monkeypatch, "pc-off")
    assert "pc_off" in sys.modules
    assert not (tmp_path / "cache").exists()


def test_a_damaged_cache_file_is_ignored_and_rewritten(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(site, "pc_dmg", _PLUGIN.format(name="pc_dmg_max", version="1.0"))
    path = _cache_path()
    path.parent.mkdir(parents=True)
    for damage in ("{not json", json.dumps({"plugins": {"udm:pc_dmg=pc_dmg": {"stamp": 3}}}), "[]"):
        path.write_text(damage)
        _forget("pc_dmg")
        assert _discover(monkeypatch, "pc-dmg").resolve("pc_dmg_max").loaded  # imported: nothing usable cached
        assert "pc_dmg" in sys.modules
        assert any("pc_dmg" in key for key in json.loads(path.read_text())["plugins"])


def test_a_stale_record_is_reported_by_name_and_dropped(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose plugin no longer registers the UDM (what no stamp should let happen, e.g. a plugin that
    registers by an environment variable) fails loudly when used, and is not trusted again."""
    _install(site, "pc_stale", _PLUGIN.format(name="pc_stale_max", version="1.0"))
    _discover(monkeypatch, "pc-stale")
    path = _cache_path()
    data = json.loads(path.read_text())
    (key,) = [k for k in data["plugins"] if "pc_stale" in k]
    data["plugins"][key]["udms"][0]["name"] = "pc_gone"
    data["plugins"][key]["udms"][0]["listing"]["name"] = "pc_gone"
    path.write_text(json.dumps(data))
    _forget("pc_stale")
    cat = _discover(monkeypatch, "pc-stale")
    with pytest.raises(PluginLoadError, match=r"UDM 'pc_gone' 1\.0 of plugin 'pc_stale' \(pc-stale 0\.1\).*no longer"):
        cat.instantiate(cat.resolve("pc_gone"), {})
    assert key not in json.loads(path.read_text())["plugins"]
    assert _discover(monkeypatch, "pc-stale").names() == ["pc_stale_max"]


def test_udm_run_imports_only_the_plugin_its_query_uses(tmp_path: Path) -> None:
    """The first-party plugins through their real entry points, in fresh processes: after the first run has
    filled the cache, a query over udm-stats' ``sum`` does not import udm-sketches or udm-patterns."""
    env = {**os.environ, "UDM_CATALOG_CACHE": str(tmp_path / "cache")}
    env.pop("UDM_PLUGINS", None)
    code = ("import sys\nfrom udm.host.catalog import Catalog\nfrom udm.host.model.plan import bind\n"
            "from udm.host.model.spec import QuerySpec\n"
            "q = QuerySpec.model_validate({'steps': [{'op': 'window', 'window': {'type': 'tumbling', 'size': 10},"
            " 'udm': 'sum', 'input': 'v'}]})\n"
            "bind(q, Catalog.discover())\n"
            "mods = ('udm_stats', 'udm_sketches', 'udm_patterns', 'datasketches')\n"
            "print(sorted(m for m in mods if m in sys.modules))\n")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0].split() == ["['datasketches',", "'udm_patterns',", "'udm_sketches',", "'udm_stats']"]
    assert runs[1].strip() == "['udm_stats']"


def _settle(root: Path, seconds_ago: float) -> None:
    """Set ``root``'s (a directory's or file's) modification time ``seconds_ago`` in the past: as if its last
    install were that old (each call its own value: importlib.metadata caches a directory's listing by time)."""
    then = time.time() - seconds_ago
    os.utime(root, (then, then))


def _scan_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def scan(**_: object) -> None:
        raise AssertionError("the installed distributions were scanned")

    monkeypatch.setattr("udm.host.plugins.entry_points", scan)


def test_the_installed_plugins_are_listed_from_the_cache_until_an_install_or_uninstall(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #26: a run does not read every distribution's metadata to find the ``udm`` entry points while
    no directory on ``sys.path`` changed; installing or uninstalling a plugin changes one, and the next
    discovery sees it."""
    rest = [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix))]
    monkeypatch.setattr(sys, "path", [str(site), *rest])
    _install(site, "pc_first", _PLUGIN.format(name="pc_first_max", version="1.0"))
    _settle(site / "pc_first-0.1.dist-info" / "entry_points.txt", 60)
    _settle(site, 60)
    assert _discover(monkeypatch, "pc-first", "pc-second").names() == ["pc_first_max"]  # scanned, and kept
    with monkeypatch.context() as m:
        _scan_forbidden(m)
        cat = _discover(monkeypatch, "pc-first", "pc-second")
        assert cat.names() == ["pc_first_max"] and cat.resolve("pc_first_max").distribution == "pc-first 0.1"

    _install(site, "pc_second", _PLUGIN.format(name="pc_second_max", version="1.0"))  # (the directory just changed)
    assert _discover(monkeypatch, "pc-first", "pc-second").names() == ["pc_first_max", "pc_second_max"]
    _settle(site / "pc_second-0.1.dist-info" / "entry_points.txt", 50)
    _settle(site, 50)
    assert _discover(monkeypatch, "pc-first", "pc-second").names() == ["pc_first_max", "pc_second_max"]
    with monkeypatch.context() as m:
        _scan_forbidden(m)
        assert _discover(monkeypatch, "pc-first", "pc-second").names() == ["pc_first_max", "pc_second_max"]

    for p in sorted((site / "pc_first-0.1.dist-info").iterdir()):
        p.unlink()
    (site / "pc_first-0.1.dist-info").rmdir()
    _settle(site, 40)  # (an uninstall long ago: the time differs from the kept one all the same)
    assert _discover(monkeypatch, "pc-first", "pc-second").names() == ["pc_second_max"]


def test_an_entry_point_edited_in_place_is_seen(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewriting a distribution's ``entry_points.txt`` leaves its directories' times as they were; the
    file's own time tells."""
    rest = [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix))]
    monkeypatch.setattr(sys, "path", [str(site), *rest])
    _install(site, "pc_moved", _PLUGIN.format(name="pc_moved_max", version="1.0"))
    _settle(site / "pc_moved-0.1.dist-info" / "entry_points.txt", 60)
    _settle(site, 60)
    assert [e.plugin for e in _discover(monkeypatch, "pc-moved").entries] == ["pc_moved"]
    (site / "pc_moved-0.1.dist-info" / "entry_points.txt").write_text("[udm]\nrenamed = pc_moved\n")
    assert [e.plugin for e in _discover(monkeypatch, "pc-moved").entries] == ["renamed"]
