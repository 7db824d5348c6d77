"""What a new user sees first: `udm demo` at 80 columns (no table cell wrapped letter by letter) and a
Spark start with none of Spark's own log lines."""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from udm.host.demo.job import QUERIES, run_demo


def test_demo_output_fits_80_columns_without_wrapped_cells(tmp_path: Path) -> None:
    buf = io.StringIO()
    results = run_demo(out_dir=tmp_path, engine="local", console=Console(file=buf, width=80, force_terminal=False))
    text = buf.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    # every query's title, what it shows and its UDM stay whole on one line
    for q in QUERIES:
        assert any(q.title in line for line in lines), q.title
        assert any(q.shows in line for line in lines), q.shows
        assert any(line.strip() == f"UDM {q.udm}" for line in lines), q.udm
    # figures are whole: the input count of each query appears as one token
    for r in results:
        assert f"in {r.elements_in:,} ·" in text
    # table cells: the window column of the corrections table is never split, and it shows times, not ticks
    # (the first corrected day-window starts 70,560 minutes after 2010-01-01 00:00)
    start = datetime(2010, 1, 1) + timedelta(minutes=70560)
    assert any(r.corrections for r in results)
    assert f"{start:%Y-%m-%d %H:%M} – {start + timedelta(days=1):%m-%d %H:%M}" in text
    assert "70560" not in text
    # "CHT" is explained where the table first shows it
    assert "CHT: canonical history table" in " ".join(text.split())


@pytest.mark.spark
@pytest.mark.slow
def test_spark_start_prints_no_spark_log_lines(tmp_path: Path) -> None:
    """A fresh process (a JVM's logging is set when it starts, so not the test session's Spark)."""
    code = ("from udm.host.spark import get_spark\n"
            "s = get_spark('local[1]')\n"
            "print(s.createDataFrame([(i, 'x' * 3000) for i in range(3000)], 'a int, b string').count())\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3000"
    assert res.stderr.strip() == "", res.stderr  # no WARN lines, no "Setting default log level", no JVM notes
