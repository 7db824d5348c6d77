"""`udm demo`: the end-to-end main job on the embedded default engine (local Spark)."""

from __future__ import annotations

from pathlib import Path

import typer

from udm.host.cli._common import out as console
from udm.host.demo.export import export_data
from udm.host.errors import UdmError

__all__ = ["register"]


def cmd_demo(
    engine: str = typer.Option("spark", "--engine", help="spark (local Spark, the default) or local."),
    out: Path = typer.Option(Path("udm-demo-out"), "--out", help="Where the plot goes."),
    data: Path = typer.Option(None, "--data", help="Only write the demo's stock series to this directory "
                              "(stocks.parquet, stocks.jsonl, yearly_median.yaml) for the README quickstart."),
) -> None:
    """Real series → imperfect streams → UDM queries by name → a table and a PNG plot."""
    if data is not None:
        for p in export_data(data):
            console.print(f"wrote {p}", highlight=False)
        return
    from udm.host.demo.job import run_demo  # lazy: the engine and the demo's extras only for `udm demo`

    if engine not in {"spark", "local"}:
        raise UdmError(f"unknown engine {engine!r} for the demo; choose spark or local")
    results = run_demo(out_dir=out, engine=engine)
    if not all(r.agrees_with_local for r in results):
        raise UdmError("the engines disagree on at least one query (see the table)")


def register(app: typer.Typer) -> None:
    app.command("demo")(cmd_demo)
