"""What ``udm`` imports before it does anything: the entry point module is light (typer, the catalog and the
query code come with the command), a command imports only its own module (`udm.host.cli.commands`: the
others come when all commands are listed), and a piped ``udm run`` draws nothing with rich, so does not
import it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import udm
from rich.console import Console
from typer.testing import CliRunner

from udm.host.cli import commands
from udm.host.cli.commands import COMMAND_MODULES, commands_of
from udm.host.run_result import RunResult

_PROBE = """
import sys
from udm.host.cli.app import main
sys.argv = ["udm", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(sorted(m for m in ("typer", "rich", "rich.console", "udm.host.catalog", *OTHERS) if m in sys.modules),
      file=sys.stderr)
"""

#: what a ``udm run`` does not import: the other commands' modules and what they alone bring
_NOT_FOR_RUN = ("udm.host.cli.catalog_cmds", "udm.host.cli.new_cmd", "udm.host.cli.registry_cmd",
                "udm.host.cli.demo_cmd", "udm.host.local_plugins", "udm.host.demo.export")


#: what only a query with a window step needs (`udm.host.engine.build` loads it with the first window op)
_WINDOWS = ("udm.host.engine.window", "udm.host.engine.aggregation")

#: the window families a tumbling query does not use (`make_window_op` imports a query's family only)
_OTHER_FAMILIES = tuple(f"udm.host.engine.window.{m}" for m in ("rows", "session", "count", "snapshot"))

#: the operators of steps neither query below has (`udm.host.engine.build` imports each with its first step)
_OTHER_STEPS = tuple(f"udm.host.engine.ops.{m}" for m in ("join", "flat_map", "align", "union", "finalize"))


def _loaded(*args: str) -> tuple[list[str], str]:
    env = {**os.environ, "UDM_FAST_EXIT": "0"}  # else a successful run ends the process inside main()
    probe = _PROBE.replace("*OTHERS", ", ".join(map(repr, (*_NOT_FOR_RUN, *_WINDOWS, *_OTHER_STEPS, *_OTHER_FAMILIES,
                                                        "udm.host.engine.window.grid", "packaging"))))
    res = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120, env=env)
    *lines, last = res.stderr.strip().splitlines()
    return json.loads(last.replace("'", '"')), "\n".join(lines)


def test_importing_the_entry_point_imports_no_typer() -> None:
    code = "import sys, udm.host.cli.app as a; print('typer' in sys.modules, hasattr(a.app, 'command'))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.split() == ["False", "True"]  # and `app` is still there on first use


def test_a_piped_run_imports_no_rich_and_prints_its_summary(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10},
                                        "udm": "sum", "input": "price", "as": "total"}]}))
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"kind":"insert","id":"a","le":1,"re":2,"payload":{"price":3}}\n{"kind":"cti","t":20}\n')
    loaded, err = _loaded("run", str(q), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"))
    assert "rich" not in loaded and "typer" in loaded and "udm.host.catalog" in loaded
    assert not set(_NOT_FOR_RUN) & set(loaded)
    assert set(_WINDOWS) <= set(loaded)
    assert not set(_OTHER_STEPS) & set(loaded), loaded
    assert "udm.host.engine.window.grid" in loaded and not set(_OTHER_FAMILIES) & set(loaded), loaded
    assert err.startswith("2 elements in, 3 out, 0 dead-lettered (local, ")  # 1 window + CTI 20 + CTI inf


def test_a_run_without_a_window_step_imports_no_window_family(tmp_path: Path) -> None:
    """Issue #26: a filter/map/project run (Nexmark q0, q1, q2, q14) starts without the window families."""
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "filter", "udf": "in_range", "args": {"field": "price"},
                                        "params": {"lo": 2}},
                                       {"op": "project", "keep": ["price"]}]}))
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"kind":"insert","id":"a","le":1,"re":2,"payload":{"price":3}}\n{"kind":"cti","t":20}\n')
    loaded, err = _loaded("run", str(q), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"))
    assert not set(_WINDOWS + _OTHER_STEPS) & set(loaded), loaded
    assert err.startswith("2 elements in, 3 out, 0 dead-lettered (local, "), err  # the event, CTI 20, CTI inf


def test_a_hopping_count_run_imports_no_numpy_ma(tmp_path: Path) -> None:
    """Nexmark q5 (bids per auction, hopping windows) over a few batches: pyarrow's masked-array probe
    (``pa.array`` of an ndarray) and numpy's ``unique`` would import numpy.ma (~5-7 ms), which no step uses
    (`udm.host.io.arrow_numpy`)."""
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "window", "window": {"type": "hopping", "size": 100, "hop": 20},
                                        "group_by": ["auction"], "udm": "count", "as": "num"}]}))
    lines = []
    for i in range(300):
        lines.append(json.dumps({"kind": "insert", "id": f"b{i}", "le": 3 * i, "re": 3 * i + 1,
                                 "payload": {"auction": i % 7, "price": i}}))
        if i % 50 == 49:
            lines.append(json.dumps({"kind": "cti", "t": 3 * i}))
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    loaded, err = _loaded("run", str(q), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"),
                          "--batch-size", "64")
    assert "numpy.ma" not in loaded, loaded
    assert err.startswith("306 elements in, "), err


def test_a_run_whose_query_names_no_udm_imports_no_packaging(tmp_path: Path) -> None:
    """Issue #26: version parsing (packaging) comes with the first UDM a query names (its plugin's manifests,
    the catalog's version match); a project/filter-by-field run (Nexmark q0) never needs it."""
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"steps": [{"op": "project", "keep": ["price"]}]}))
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"kind":"insert","id":"a","le":1,"re":2,"payload":{"price":3,"x":1}}\n')
    for _ in range(2):  # (the first run may fill the plugin cache, importing every plugin)
        loaded, err = _loaded("run", str(q), "--input", str(inp), "--output", str(tmp_path / "o.jsonl"))
    assert "packaging" not in loaded, loaded
    assert err.startswith("1 elements in, 2 out, 0 dead-lettered (local, "), err  # the event, CTI inf
    assert (tmp_path / "o.jsonl").read_text().splitlines()[0] == (
        '{"kind": "insert", "id": "o1", "le": 1, "re": 2, "payload": {"price": 3}}')


def test_a_failing_run_still_prints_its_error_with_rich(tmp_path: Path) -> None:
    loaded, err = _loaded("run", str(tmp_path / "missing.json"), "--input", "x.jsonl", "--output", "o.jsonl")
    assert "rich.console" in loaded and err.startswith("error: ") and "missing.json" in err


def test_the_plain_summary_is_what_rich_would_print() -> None:
    result = RunResult(engine="local", elements_in=1234, elements_out=56, dead_lettered=7, seconds=0.5,
                       warnings=["input 'main' sent no CTI: the engine held up to 3 live events until the end"])
    result.reasons.update({"bad json [line 3]": 7})
    buf = io.StringIO()
    Console(file=buf, soft_wrap=True).print(result.summary(), highlight=False, markup=False)
    assert buf.getvalue() == result.summary() + "\n"


def test_each_command_comes_from_the_module_that_registers_it() -> None:
    """`COMMAND_MODULES` names every command of every module, and only those (a command added to a module
    without its row would be missing from the app)."""
    modules = dict.fromkeys(COMMAND_MODULES.values())
    for module in modules:
        assert sorted(commands_of(module)) == sorted(n for n, m in COMMAND_MODULES.items() if m == module)


def test_help_and_a_mistyped_command_see_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = udm(capsys, "--help")
    assert code == 0
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("│ ") and len(line.split()) > 2
              and line.split()[1] in COMMAND_MODULES]
    assert listed == list(COMMAND_MODULES)  # all of them, in the table's order
    code, _, err = udm(capsys, "regsitry")
    assert code == 2 and "Did you mean 'registry'?" in err


def test_a_command_loaded_alone_runs_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh app (its group holds nothing yet) runs ``registry --help`` and ``list`` by loading their
    modules on lookup."""
    runner = CliRunner()
    res = runner.invoke(commands.app, ["registry", "--help"])
    assert res.exit_code == 0 and "publish" in res.output and "install" in res.output
    res = runner.invoke(commands.app, ["list", "--json"])
    assert res.exit_code == 0 and "udms" in json.loads(res.output)


def test_the_query_spec_models_build_without_the_tokenizer() -> None:
    """Issue #26: pydantic reads each default factory's signature; a builtin's (``dict``, ``list``) is parsed
    from its text by `tokenize`, whose first use compiles its regular expressions (~4 ms of every run)."""
    code = "import tokenize, udm.host.model.spec\nprint(tokenize._compile.cache_info().currsize)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert res.stdout.strip() == "0"
