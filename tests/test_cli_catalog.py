"""`udm list`, `udm info`, `udm validate` (INTERFACES §3): human and --json output, errors as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_harness import udm
from typer.testing import CliRunner

from udm.host.cli.app import app

runner = CliRunner()

FIRST_PARTY = {"avg", "count", "max", "median", "min", "sum", "twa", "variance", "in_range", "topk", "follows",
               "members"}


def test_list_human() -> None:
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0, res.output
    assert "Installed UDMs" in res.output
    for name in ("median", "topk", "in_range", "udm-stats"):
        assert name in res.output


def test_list_json() -> None:
    res = runner.invoke(app, ["list", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    names = {u["name"] for u in data["udms"]}
    assert names >= FIRST_PARTY
    med = next(u for u in data["udms"] if u["name"] == "median")
    assert med["version"] == "1.0.0" and med["kind"] == "uda"
    assert isinstance(data["load_errors"], list)


def test_info_human_and_json() -> None:
    res = runner.invoke(app, ["info", "topk"])
    assert res.exit_code == 0, res.output
    assert "topk 1.0.0" in res.output and "udo" in res.output and "parameters" in res.output
    res = runner.invoke(app, ["info", "median", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["name"] == "median" and data["kind"] == "uda"
    assert data["distribution"].startswith("udm-stats")
    assert "window" in json.dumps(data)


def test_info_names_every_declared_property() -> None:
    """`count` declares value_blind (it reads no member value): `udm info` says so, `median` does not."""
    assert "value_blind" in runner.invoke(app, ["info", "count"], terminal_width=200).output
    assert "value_blind" not in runner.invoke(app, ["info", "median"], terminal_width=200).output


def test_info_shows_an_estimators_error_bound_and_bracketed_types() -> None:
    res = runner.invoke(app, ["info", "approx_quantile"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "float → float | list[float]" in res.output  # (not eaten as rich markup)
    assert "rank error of each quantile <= 0.01329 at 0.99 confidence" in res.output
    data = json.loads(runner.invoke(app, ["info", "approx_distinct", "--json"]).stdout)
    assert data["error_bound"] == {"estimates": "distinct_count", "bound": data["error_bound"]["bound"],
                                   "confidence": 0.997} and 0.04 < data["error_bound"]["bound"] < 0.05
    assert "error bound" not in runner.invoke(app, ["info", "median"]).output  # exact


def test_info_version_specifier() -> None:
    res = runner.invoke(app, ["info", "median", "--version", ">=1,<2", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["version"] == "1.0.0"


@pytest.mark.parametrize("args", [["info", "nope"], ["info", "median", "--version", ">=9"]])
def test_info_unknown_is_one_line(capsys: Any, args: list[str]) -> None:
    code, out, err = udm(capsys, *args)
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "Traceback" not in err
    if args[1] == "nope":
        assert "no UDM named 'nope'; available: " in err and "median" in err


def test_validate_installed() -> None:
    res = runner.invoke(app, ["validate", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["passed"] is True
    assert {r["udm"] for r in data["results"]} >= FIRST_PARTY
    res = runner.invoke(app, ["validate"])
    footer = res.output.strip().splitlines()[-1]
    assert res.exit_code == 0 and "manifests accepted; contract checks: " in footer and "failed" not in footer


LYING = '''
from collections.abc import Sequence
from udm.sdk import UDA, hookimpl, udm

@udm(name="liar", version="1.0.0", incremental=True)
class Liar(UDA):
    """Says it is incremental; has no add/remove."""
    def compute(self, payloads: Sequence[float]) -> float:
        return 0.0

@hookimpl
def register_udms(register):
    register(Liar)
'''

GOOD = LYING.replace(", incremental=True", "").replace("liar", "honest").replace(
    "Liar", "Honest")


def test_validate_path_reports_lies(tmp_path: Path) -> None:
    bad = tmp_path / "liar_mod.py"
    bad.write_text(LYING)
    res = runner.invoke(app, ["validate", str(bad), "--json"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["passed"] is False
    (row,) = [r for r in data["results"] if r["udm"] == "liar"]
    assert row["passed"] is False and "incremental" in row["detail"]
    res = runner.invoke(app, ["validate", str(bad)])
    assert res.exit_code == 1 and "FAIL" in res.output


def test_validate_path_good(tmp_path: Path) -> None:
    good = tmp_path / "honest_mod.py"
    good.write_text(GOOD)
    res = runner.invoke(app, ["validate", str(good), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] is True


def test_validate_not_a_project(capsys: Any, tmp_path: Path) -> None:
    code, _, err = udm(capsys, "validate", str(tmp_path))
    assert code == 1 and "no pyproject.toml" in err and len(err.strip().splitlines()) == 1


def test_subprocess_udm_list_json() -> None:
    udm_bin = Path(sys.executable).with_name("udm")
    cmd = [str(udm_bin)] if udm_bin.exists() else [sys.executable, "-m", "udm.host.cli.app"]
    res = subprocess.run([*cmd, "list", "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert {u["name"] for u in json.loads(res.stdout)["udms"]} >= FIRST_PARTY
    res = subprocess.run([*cmd, "info", "no_such_udm"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
