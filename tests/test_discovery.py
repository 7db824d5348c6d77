"""Plugin discovery through real entry points: broken plugins are reported by name, never fatal.

Each fake plugin is a real distribution (a ``*.dist-info`` with ``entry_points.txt``) on ``sys.path``, so
discovery goes through importlib.metadata exactly as for a pip-installed third party.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from udm.host.catalog import Catalog
from udm.host.errors import AmbiguousUDM, InvalidUDM, ParamError, PluginLoadError, UnknownUDM

_HONEST = '''
from udm.sdk import UDA, hookimpl, udm

def make(name, version):
    @udm(name=name, version=version)
    class U(UDA):
        """Largest value."""
        def compute(self, payloads):
            return max(payloads)
    return U
'''



def _registers(name: str, version: str) -> str:
    return _HONEST + f"\n@hookimpl\ndef register_udms(register):\n    register(make({name!r}, {version!r}))\n"


PLUGINS = {
    "fake-good": ("fake_good", _registers("good_max", "1.0")),
    "fake-broken": ("fake_broken", "import numpy_that_is_not_installed\n"),
    "fake-exit": ("fake_exit", "raise SystemExit(3)\n"),
    "fake-hook": ("fake_hook", _HONEST + "\n@hookimpl\ndef register_udms(register):\n"
                  "    register(make('never_seen', '1.0'))\n    raise RuntimeError('database unreachable')\n"),
    "fake-liar": ("fake_liar", textwrap.dedent('''
        from udm.sdk import IncrementalUDA, hookimpl, udm

        @udm(name="liar", version="1.0", algebraic=True)
        class Liar(IncrementalUDA):
            def initial_state(self): return 0
            def add(self, s, d): return s + len(d)
            def remove(self, s, d): return s - len(d)
            def compute(self, s): return s

        @hookimpl
        def register_udms(register):
            register(Liar)
    ''')),
    "fake-v1": ("fake_v1", _registers("dup", "1.0")),
    "fake-v2": ("fake_v2", _registers("dup", "2.0")),
    "fake-twin-a": ("fake_twin_a", _registers("twin", "1.0")),
    "fake-twin-b": ("fake_twin_b", _registers("twin", "1.0")),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    for dist, (module, source) in PLUGINS.items():
        (root / f"{module}.py").write_text(source)
        info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[udm]\n{module} = {module}\n")
    return root


@pytest.fixture
def fake_site(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(site))
    for var in ("UDM_STRICT", "UDM_DISABLE_PLUGIN_AUTOLOAD", "UDM_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    return site


def _only(monkeypatch: pytest.MonkeyPatch, *dists: str) -> None:
    monkeypatch.setenv("UDM_PLUGINS", ",".join(dists))


def test_broken_plugins_are_reported_and_others_still_load(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, "fake-good", "fake-broken", "fake-exit", "fake-hook", "fake-liar")
    cat = Catalog.discover()
    errors = {e.plugin: e for e in cat.load_errors}
    assert set(errors) == {"fake_broken", "fake_exit", "fake_hook"}
    assert errors["fake_broken"].stage == "import"
    assert errors["fake_broken"].distribution == "fake-broken 0.1"
    assert "ModuleNotFoundError" in errors["fake_broken"].error
    assert "numpy_that_is_not_installed" in errors["fake_broken"].error
    assert errors["fake_exit"].stage == "import" and "SystemExit" in errors["fake_exit"].error
    assert errors["fake_hook"].stage == "hook" and "database unreachable" in errors["fake_hook"].error
    # The good plugin loaded; the hook that raised registered nothing, not half of its UDMs.
    assert cat.resolve("good_max").distribution == "fake-good 0.1"
    assert "never_seen" not in {e.name for e in cat.entries}


def test_lying_manifest_is_refused_naming_udm_distribution_and_rule(
    fake_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(monkeypatch, "fake-liar", "fake-good")
    cat = Catalog.discover()
    with pytest.raises(InvalidUDM) as info:
        cat.resolve("liar")
    msg = str(info.value)
    assert "'liar' 1.0" in msg and "fake-liar 0.1" in msg
    assert "algebraic: declared algebraic but does not implement merge" in msg
    assert "liar" not in cat.names()  # refused UDMs are not offered to queries
    assert "good_max" in cat.names()


def test_strict_mode_turns_load_errors_into_failures(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, "fake-good", "fake-broken")
    monkeypatch.setenv("UDM_STRICT", "1")
    with pytest.raises(PluginLoadError, match="fake_broken"):
        Catalog.discover()
    monkeypatch.delenv("UDM_STRICT")
    with pytest.raises(PluginLoadError, match="liar"):
        _only(monkeypatch, "fake-liar")
        Catalog.discover(strict=True)


def test_autoload_can_be_limited_or_disabled(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, "fake_good")  # entry-point name works as well as the distribution name
    assert {e.name for e in Catalog.discover().entries} == {"good_max"}
    monkeypatch.setenv("UDM_PLUGINS", "")
    assert Catalog.discover().entries == []
    monkeypatch.delenv("UDM_PLUGINS")
    monkeypatch.setenv("UDM_DISABLE_PLUGIN_AUTOLOAD", "1")
    cat = Catalog.discover()
    assert cat.entries == [] and cat.load_errors == []


def test_two_versions_of_one_name(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, "fake-v1", "fake-v2")
    cat = Catalog.discover()
    assert cat.resolve("dup").version == "2.0"  # highest matching, like pip
    assert cat.resolve("dup", "<2").version == "1.0"
    assert cat.resolve("dup", "==1.*").distribution == "fake-v1 0.1"
    with pytest.raises(UnknownUDM, match=r"no version of UDM 'dup' matches '>=3'; installed: 1.0, 2.0"):
        cat.resolve("dup", ">=3")
    with pytest.raises(UnknownUDM, match="not a PEP 440 specifier"):
        cat.resolve("dup", "latest please")


def test_same_name_and_version_twice_is_ambiguous_and_lists_candidates(
    fake_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(monkeypatch, "fake-twin-a", "fake-twin-b")
    cat = Catalog.discover()
    with pytest.raises(AmbiguousUDM) as info:
        cat.resolve("twin")
    assert "fake-twin-a 0.1" in str(info.value) and "fake-twin-b 0.1" in str(info.value)


def test_unknown_name_lists_what_is_available(fake_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, "fake-good", "fake-v1")
    with pytest.raises(UnknownUDM, match="no UDM named 'mediam'; available: dup, good_max"):
        Catalog.discover().resolve("mediam")


def test_bad_parameter_values_name_the_parameter() -> None:
    cat = Catalog.discover()  # the first-party plugins installed with the project
    topk = cat.resolve("topk")
    with pytest.raises(ParamError) as info:
        cat.instantiate(topk, {"k": 0})
    assert "parameter 'k'" in str(info.value) and "greater than or equal to 1" in str(info.value)
    with pytest.raises(ParamError, match="parameter 'kk': unknown parameter"):
        cat.instantiate(topk, {"kk": 2})
    with pytest.raises(ParamError, match="parameter 'k'.*got 'three'"):
        cat.instantiate(topk, {"k": "three"})
    assert cat.instantiate(topk, {"k": 5, "by": "price"}).params.k == 5


def test_first_party_plugins_come_through_entry_points() -> None:
    cat = Catalog.discover()
    wanted = {"count", "sum", "avg", "min", "max", "variance", "median", "twa", "topk", "members", "follows",
              "approx_distinct", "approx_quantile", "frequent_items"}
    assert wanted <= set(cat.names())
    for name in wanted:
        entry = cat.resolve(name)
        assert entry.valid, entry.problems
        assert entry.distribution.split(" ")[0] in {"udm-stats", "udm-patterns", "udm-sketches"}
    assert cat.resolve("approx_distinct").distribution.startswith("udm-sketches ")


def test_distribution_labels_are_name_and_version_from_the_metadata() -> None:
    from importlib.metadata import entry_points

    expected = {ep.name: f"{ep.dist.metadata['Name']} {ep.dist.version}" for ep in entry_points(group="udm")
                if ep.dist is not None}
    got = {e.plugin: e.distribution for e in Catalog.discover().entries}
    assert {"stats", "patterns", "sketches"} <= got.keys() and got == {p: expected[p] for p in got}


def test_udm_list_reports_a_broken_plugin_without_crashing(site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(site), "UDM_PLUGINS": "fake-good,fake-broken,fake-liar"}
    env.pop("UDM_STRICT", None)
    udm_cli = Path(sys.executable).with_name("udm")
    res = subprocess.run([str(udm_cli), "list", "--json"], capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    status = {u["name"]: u["status"] for u in data["udms"]}
    assert status == {"good_max": "ok", "liar": "refused"}
    assert [e["plugin"] for e in data["load_errors"]] == ["fake_broken"]
    human = subprocess.run([str(udm_cli), "list"], capture_output=True, text=True, env=env, check=False)
    assert human.returncode == 0 and "plugin failed" in human.stdout and "Traceback" not in human.stderr
    strict = subprocess.run([str(udm_cli), "--strict", "list"], capture_output=True, text=True, env=env, check=False)
    assert strict.returncode == 1
    assert strict.stderr.startswith("error: plugin load failed (strict mode)")
    assert "Traceback" not in strict.stderr


def test_a_plugin_hanging_at_import_is_reported_and_others_still_load(
        fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin whose import never finishes (a network call, a lock) is reported by name after
    ``UDM_PLUGIN_IMPORT_TIMEOUT`` seconds; discovery goes on with the others."""
    import time

    (tmp_path / "fake_hang.py").write_text("import time\ntime.sleep(30)\n")
    info = tmp_path / "fake_hang-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-hang\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[udm]\nfake_hang = fake_hang\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("UDM_PLUGIN_IMPORT_TIMEOUT", "1")
    _only(monkeypatch, "fake-hang", "fake-good")
    t0 = time.monotonic()
    cat = Catalog.discover()
    assert time.monotonic() - t0 < 10
    errors = {e.plugin: e for e in cat.load_errors}
    assert set(errors) == {"fake_hang"}
    assert errors["fake_hang"].stage == "import" and errors["fake_hang"].distribution == "fake-hang 0.1"
    assert "did not finish within 1s" in errors["fake_hang"].error
    assert cat.resolve("good_max").distribution == "fake-good 0.1"
