"""`udm new`: every variant renders a project that validates, passes its own tests, and pip-installs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from child_venv import make_venv

from udm.host.local_plugins import load_project_catalog
from udm.templates import NewProjectError, ProjectOptions, render_project

REPO = Path(__file__).resolve().parent.parent
# Distinct names: each project's package is imported into this process, and module names must not clash.
VARIANTS = [ProjectOptions(f"ex_{v.variant.replace('-', '_')}", v.kind, v.incremental, v.time_sensitive)
            for v in ProjectOptions.all_variants()]
CLI = [sys.executable, "-m", "udm.host.cli.app"]


def _udm(*args: str, cwd: Path | None = None, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "udm.host.cli.app", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def _new(tmp_path: Path, opts: ProjectOptions) -> Path:
    dest = tmp_path / opts.distribution
    render_project(opts, dest)
    return dest


# -- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Bad", "bad-name", "1st", "class", "with space", "_x", "x_", "a__b", "a" * 41])
def test_invalid_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(NewProjectError, match=r"invalid UDM name"):
        ProjectOptions(name, "uda")


@pytest.mark.parametrize(("flags", "word"), [({"incremental": True}, "--incremental"),
                                              ({"time_sensitive": True}, "--time-sensitive")])
def test_udf_flags_are_refused(flags: dict[str, bool], word: str) -> None:
    with pytest.raises(NewProjectError, match=word):
        ProjectOptions("f", "udf", **flags)


def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    for args in (["new", "Bad-Name", "--kind", "uda"], ["new", "ok", "--kind", "udx"],
                 ["new", "ok", "--kind", "udf", "--time-sensitive"]):
        proc = _udm(*args, cwd=tmp_path)
        assert proc.returncode == 1, proc
        assert proc.stderr.startswith("error:") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_existing_non_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(NewProjectError, match="not an empty directory"):
        render_project(ProjectOptions("ok", "uda"), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# -- what is generated ----------------------------------------------------------------------------

def test_cli_creates_the_project_in_dir(tmp_path: Path) -> None:
    proc = _udm("new", "my_avg", "--kind", "uda", "--incremental", "--dir", str(tmp_path / "p"))
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "p"
    expected = {"pyproject.toml", "README.md", ".gitignore", ".udm-template.json", ".github/workflows/ci.yml",
                "src/udm_my_avg/__init__.py", "src/udm_my_avg/my_avg.py", "src/udm_my_avg/py.typed",
                "tests/test_my_avg.py"}
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == expected
    answers = json.loads((root / ".udm-template.json").read_text())
    assert answers["kind"] == "uda" and answers["incremental"] is True and answers["time_sensitive"] is False


def test_default_directory_is_the_distribution_name(tmp_path: Path) -> None:
    proc = _udm("new", "peak", "--kind", "udo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "udm-peak" / "pyproject.toml").is_file()


@pytest.mark.parametrize("opts", VARIANTS, ids=[v.variant for v in VARIANTS])
def test_variant_declares_entry_point_sdk_dependency_and_validates(tmp_path: Path, opts: ProjectOptions) -> None:
    root = _new(tmp_path, opts)
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["udm"] == {opts.name: f"udm_{opts.name}"}
    assert any(dep.startswith("udmkit>=") for dep in meta["project"]["dependencies"])
    assert meta["project"]["name"] == "udm-" + opts.name.replace("_", "-")
    cat = load_project_catalog(root)
    assert not cat.load_errors
    [entry] = cat.entries
    assert entry.valid, entry.problems
    man = entry.manifest
    assert (man.name, man.kind) == (opts.name, opts.kind)
    assert man.properties.incremental == opts.incremental
    assert man.properties.time_sensitive == opts.time_sensitive
    assert entry.cls.__mro__[1].__name__ == opts.base
    assert f"`{opts.name}`" in (root / "README.md").read_text()
    assert "pytest" in (root / ".github" / "workflows" / "ci.yml").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("opts", VARIANTS, ids=[v.variant for v in VARIANTS])
def test_generated_tests_pass_out_of_the_box(tmp_path: Path, opts: ProjectOptions) -> None:
    root = _new(tmp_path, opts)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout


# -- really installing --------------------------------------------------------------------------

@pytest.mark.slow
def test_pip_install_generated_project_then_udm_list_shows_it(tmp_path: Path) -> None:
    root = _new(tmp_path, ProjectOptions("pipped", "udo", time_sensitive=True))
    py = make_venv(tmp_path / "venv")
    env = {**os.environ, "PIP_NO_INDEX": "1"}  # the dependency (udmkit) is already importable: no fetching
    proc = subprocess.run([str(py), "-m", "pip", "install", "--no-build-isolation", "--no-index", str(root)],
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    listed = _udm("list", "--json", python=str(py))
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["udms"]}
    assert rows["pipped"]["status"] == "ok"
    assert rows["pipped"]["distribution"] == "udm-pipped 0.1.0"
    assert rows["pipped"]["properties"]["time_sensitive"] is True
    # ...and the project's .venv did not get it.
    assert "pipped" not in _udm("list", "--json").stdout


@pytest.mark.slow
def test_udmkit_wheel_ships_template_data_files(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        (src / name).write_bytes((REPO / name).read_bytes())
    for folder in ("udm", "sdk", "host", "registry", "templates"):
        subprocess.run(["cp", "-r", str(REPO / folder), str(src / folder)], check=True)
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                           str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in ("project/.gitignore", "project/.udm-template.json.jinja", "project/.github/workflows/ci.yml.jinja",
                "project/pyproject.toml.jinja", "project/src/{{ package }}/py.typed",
                "project/tests/test_{{ name }}.py.jinja", "examples/uda.py.jinja", "registry/index.html.jinja"):
        assert f"udm/templates/{rel}" in names, rel
