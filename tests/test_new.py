"""`udm new`: every variant renders a project that validates, passes its own tests, and pip-installs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from venvs import child_venv

from udm.host.local_plugins import load_project_catalog
from udm.templates import NewProjectError, ProjectOptions, render_project

REPO = Path(__file__).resolve().parent.parent
# Distinct names: each project's package is imported into this process, and module names must not clash.
VARIANTS = [ProjectOptions(f"ex_{v.variant.replace('-', '_')}", v.kind, v.incremental, v.time_sensitive, v.span)
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


@pytest.mark.parametrize(("kind", "flags", "word"), [("uda", {}, "--kind udo only"), ("udf", {}, "--kind udo only"),
                                                     ("udo", {"incremental": True}, "--incremental")])
def test_span_flag_combinations_are_refused(kind: str, flags: dict[str, bool], word: str) -> None:
    with pytest.raises(NewProjectError, match=word):
        ProjectOptions("f", kind, span=True, **flags)  # type: ignore[arg-type]


def test_span_variants_use_the_span_bases() -> None:
    spans = {v.variant: v.base for v in ProjectOptions.all_variants() if v.span}
    assert spans == {"udo-span": "SpanUDO", "udo-span-time_sensitive": "TimeSensitiveSpanUDO"}


def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    for args in (["new", "Bad-Name", "--kind", "uda"], ["new", "ok", "--kind", "udx"],
                 ["new", "ok", "--kind", "udf", "--time-sensitive"], ["new", "ok", "--kind", "uda", "--span"]):
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
    assert (man.name, man.kind, man.span) == (opts.name, opts.kind, opts.span)
    assert man.properties.incremental == opts.incremental
    assert man.properties.time_sensitive == opts.time_sensitive
    assert entry.cls.__mro__[1].__name__ == opts.base
    assert f"`{opts.name}`" in (root / "README.md").read_text()
    assert "pytest" in (root / ".github" / "workflows" / "ci.yml").read_text()


def _fences(markdown: str) -> list[tuple[str, str, str]]:
    """Every fenced block of a Markdown text as markdown-it-py (CommonMark) parses it: (info, content, the
    line that closes it)."""
    from markdown_it import MarkdownIt

    lines = markdown.splitlines()
    out = []
    for tok in MarkdownIt("commonmark").parse(markdown):
        if tok.type == "fence":
            assert tok.map is not None
            out.append((tok.info.strip(), tok.content, lines[tok.map[1] - 1] if tok.map[1] <= len(lines) else ""))
    return out


@pytest.mark.parametrize("opts", VARIANTS, ids=[v.variant for v in VARIANTS])
def test_readme_is_valid_markdown_with_closed_fences(tmp_path: Path, opts: ProjectOptions) -> None:
    """Each fence closes on its own line (a closing fence glued to the JSON line leaves the block open to
    the next fence, and the rest of the README renders inside out); the JSON block is a query that parses."""
    text = (_new(tmp_path, opts) / "README.md").read_text()
    fences = _fences(text)
    assert [info for info, _, _ in fences] == ["bash", "json", "bash", "bash"]
    for info, content, closing in fences:
        assert closing.strip() == "```", (info, closing)
        assert "```" not in content
    query = json.loads(fences[1][1])
    assert query["steps"][0]["udf" if opts.kind == "udf" else "udm"] == opts.name


# -- a generated project, end to end --------------------------------------------------------------

def _registered(root: Path, site_dir: Path) -> dict[str, str]:
    """The environment of a process in which the project is importable and its entry point registered, as
    ``pip install`` would register it (a ``.dist-info`` with ``entry_points.txt``, which is all
    `importlib.metadata` reads), without building and installing a wheel."""
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    info = site_dir / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    eps = "".join(f"{k} = {v}\n" for k, v in meta["entry-points"]["udm"].items())
    (info / "entry_points.txt").write_text(f"[udm]\n{eps}")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site_dir), str(root / "src")])}


_PRICES = [(1, 1), (2, 6), (3, 2)]  # (le, price) of point events of group A; CTI 10 after them


def _events(tmp_path: Path, payloads: list[Any]) -> Path:
    p = tmp_path / f"in{len(list(tmp_path.glob('in*.jsonl')))}.jsonl"
    lines = [json.dumps({"kind": "insert", "id": f"e{i}", "le": i + 1, "re": i + 2, "payload": pl})  # ticks 1, 2..
             for i, pl in enumerate(payloads)]
    p.write_text("\n".join([*lines, json.dumps({"kind": "cti", "t": 10})]) + "\n")
    return p


def _query(opts: ProjectOptions, mapped: bool) -> dict[str, Any]:
    if opts.span:
        return {"steps": [{"op": "flat_map", "udm": opts.name}]}
    if opts.kind == "udf":
        return {"steps": [{"op": "map", "udf": opts.name, "args": {"value": "price"}, "as": "scaled"}]}
    step: dict[str, Any] = {"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["sym"],
                            "udm": opts.name, **({"input": "price"} if mapped else {})}
    return {"steps": [{**step, "as": "out"} if opts.kind == "uda" else step]}


#: what each variant's docstring promises for the prices 1, 6, 2 (at ticks 1, 2, 3) of group A, mapped with
#: ``input: price``, computed by hand: (le, re, payload) of the output CHT
_EXPECTED: dict[str, list[tuple[int, int, dict[str, Any]]]] = {
    "udf": [(t, t + 1, {"sym": "A", "price": p, "scaled": 2.0 * p}) for t, p in _PRICES],  # factor 2
    "uda": [(0, 10, {"sym": "A", "out": 5})],  # spread: 6 - 1
    "uda-incremental": [(0, 10, {"sym": "A", "out": 3.0})],  # mean of 1, 6, 2
    **{f"uda{v}-time_sensitive": [(0, 10, {"sym": "A", "out": 2})] for v in ("", "-incremental")},  # last: le 3
    **{f"udo{v}": [(0, 10, {"sym": "A", "value": 6, "mean": 3.0})] for v in ("", "-incremental")},  # above mean
    **{f"udo{v}-time_sensitive": [(0, 10, {"sym": "A", "value": p, "start": t}) for t, p in _PRICES]
       for v in ("", "-incremental")},  # a point at each start, stamped with the window (output "window")
    # span UDOs, per event: a sample at the start of each (point) event, `at` 0 ticks after its start
    "udo-span-time_sensitive": [(t, t + 1, {"sym": "A", "price": p, "at": 0}) for t, p in _PRICES],
    # one event per word of `text` (the events of `_WORDS`), the word in `word`
    "udo-span": [(1, 2, {"sym": "A", "word": "buy"}), (1, 2, {"sym": "A", "word": "sell"}),
                 (2, 3, {"sym": "A", "word": "hold"})],
}
#: the time-insensitive span UDO's events: texts at ticks 1, 2 and one without a text (a dead letter)
_WORDS = [{"sym": "A", "text": "buy sell"}, {"sym": "A", "text": "hold"}, {"sym": "A", "price": 2}]


def _run(tmp_path: Path, env: dict[str, str], query: dict[str, Any], events: Path) -> tuple[int, dict[str, Any],
                                                                                         list[Any], str]:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(query))
    out, dl = tmp_path / "out.jsonl", tmp_path / "dl.jsonl"
    proc = subprocess.run([*CLI, "run", str(q), "-i", str(events), "-o", str(out), "--dead-letter", str(dl),
                           "--json"], capture_output=True, text=True, timeout=300, env=env, check=False)
    if proc.returncode:
        return proc.returncode, {}, [], proc.stderr
    from udm.host.io.jsonl import read_jsonl_elements
    from udm.host.testing.cht import cht

    rows = cht([e for _, e in read_jsonl_elements(out)]).events()
    return 0, json.loads(proc.stdout), [(le, re, p) for le, re, p in rows], dl.read_text()


def _same(got: list[Any], want: list[Any]) -> bool:
    """Equal as multisets of (le, re, payload)."""
    def key(r: Any) -> tuple[int, int, str]:
        return r[0], r[1], json.dumps(r[2], sort_keys=True)
    return sorted(got, key=key) == sorted(want, key=key)


@pytest.mark.slow
@pytest.mark.parametrize("opts", VARIANTS, ids=[v.variant for v in VARIANTS])
def test_udm_new_project_runs_its_own_tests_and_keeps_its_docstrings_promises(tmp_path: Path,
                                                                             opts: ProjectOptions) -> None:
    """``udm new`` for every kind and flag: the generated tests really run (each ``def test_`` passes, none
    skipped), then the UDM, registered by its entry point, runs in ``udm run`` and does what its docstrings
    say: a float-typed UDM sees numbers (a string, or a whole payload without ``input``, is a dead letter
    of the step, "wrong type"); an untyped one takes a payload's ``value`` field without ``input``."""
    flags = [*(["--incremental"] if opts.incremental else []), *(["--time-sensitive"] if opts.time_sensitive
                                                                 else []), *(["--span"] if opts.span else [])]
    proc = _udm("new", opts.name, "--kind", opts.kind, *flags, "--dir", str(tmp_path / "p"))
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "p"
    tests = re.findall(r"^def (test_\w+)", (root / "tests" / f"test_{opts.name}.py").read_text(), re.MULTILINE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(rf"\b{len(tests)} passed\b", proc.stdout) and "skipped" not in proc.stdout, proc.stdout

    env = _registered(root, tmp_path / "site")
    listed = subprocess.run([*CLI, "list", "--json"], capture_output=True, text=True, timeout=300, env=env,
                            check=False)
    rows = {r["name"]: r for r in json.loads(listed.stdout)["udms"]}
    assert rows[opts.name]["status"] == "ok", rows.get(opts.name)
    if opts.span:  # a flat_map step: each event becomes its outputs; an event it cannot read is a dead letter
        words = opts.variant == "udo-span"
        src = _events(tmp_path, _WORDS if words else [{"sym": "A", "price": p} for _, p in _PRICES])
        code, summary, got, dead = _run(tmp_path, env, _query(opts, mapped=False), src)
        assert code == 0, dead
        assert summary["dead_lettered"] == (1 if words else 0) and _same(got, _EXPECTED[opts.variant]), (got, dead)
        assert not words or "'text' is missing" in dead, dead
        return
    priced = _events(tmp_path, [{"sym": "A", "price": p} for _, p in _PRICES])
    code, summary, got, err = _run(tmp_path, env, _query(opts, mapped=True), priced)
    assert code == 0, err
    assert summary["dead_lettered"] == 0 and _same(got, _EXPECTED[opts.variant])
    typed = opts.kind == "udf" or (opts.kind == "uda" and not opts.time_sensitive)
    if typed:  # declared float: a string price, or none, is the step's dead letter; the rest as before
        bad = _events(tmp_path, [*({"sym": "A", "price": p} for _, p in _PRICES), {"sym": "A", "price": "n/a"},
                                 {"sym": "A"}])
        code, summary, got, dead = _run(tmp_path, env, _query(opts, mapped=True), bad)
        assert code == 0 and summary["dead_lettered"] == 2, dead
        assert "wrong type" in dead and "missing field 'price'" in dead, dead
        assert _same(got, _EXPECTED[opts.variant])
    elif opts.kind == "uda" or not opts.time_sensitive:  # untyped, reads numbers (`_value`): anything else
        bad = _events(tmp_path, [{"sym": "A", "price": "n/a"}])  # stops the run with an error naming the UDM
        code, _, _, err = _run(tmp_path, env, _query(opts, mapped=True), bad)
        assert code == 1 and f"UDM {opts.name} 0.1.0" in err and "Traceback" not in err, err
    if opts.kind != "udf":  # no input: whole payloads, each with a numeric "value"
        whole = _events(tmp_path, [{"sym": "A", "value": p} for _, p in _PRICES])
        code, summary, got, dead = _run(tmp_path, env, _query(opts, mapped=False), whole)
        assert code == 0, dead
        if typed:
            assert summary["dead_lettered"] == 3 and dead.count("wrong type") == 3 and got == []
        else:
            want = [(le, re, {k: v for k, v in p.items() if k != "price"}) for le, re, p in _EXPECTED[opts.variant]]
            assert summary["dead_lettered"] == 0 and _same(got, want)


# -- really installing --------------------------------------------------------------------------

@pytest.mark.slow
def test_pip_install_generated_project_then_udm_list_shows_it(tmp_path: Path) -> None:
    root = _new(tmp_path, ProjectOptions("pipped", "udo", time_sensitive=True))
    py = child_venv(tmp_path / "venv")
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
