"""The main job: real series, imperfect streams, several UDM queries on local Spark, a table and a plot.

Each query names its UDM by registered name, exactly as a query writer would. The same query also runs on
the in-process engine, and the demo checks that both produce one canonical history table: the Spark path
must agree with the local one, whatever the physical output looks like.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from udm.host.demo.data import (
    DAY_MIN,
    Series,
    load_stocks,
    load_temperatures,
    stock_stream,
    temperature_stream,
    window_text,
)
from udm.host.demo.plot import plot
from udm.host.io.interleave import interleave
from udm.host.model.spec import QuerySpec, parse_query
from udm.host.query.runners import make_runner
from udm.host.spark import get_spark
from udm.host.spark.batch import run_batch
from udm.host.spark.convert import collect_elements, elements_df
from udm.host.temporal.elements import Element, Insert, Retract, canonical_json

__all__ = ["QUERIES", "DemoQuery", "DemoResult", "demo_streams", "run_demo"]


@dataclass(frozen=True)
class DemoQuery:
    title: str
    #: the series it reads: "temperature" | "stocks" | "ibm" | "others", or one per input of a query graph
    stream: str | dict[str, str]
    spec: dict[str, Any]
    shows: str

    def inputs(self, streams: dict[str, list[Element]]) -> list[Element] | dict[str, list[Element]]:
        """Its input elements: one stream, or ``{input name: stream}``."""
        if isinstance(self.stream, str):
            return streams[self.stream]
        return {name: streams[key] for name, key in self.stream.items()}

    @property
    def udm(self) -> str:
        """The UDM (or, for a graph without one, the operators) it shows."""
        steps = self.spec["steps"]
        return next((st["udm"] for st in steps if "udm" in st), " + ".join(st["op"] for st in steps))


QUERIES: tuple[DemoQuery, ...] = (
    DemoQuery("Daily time-weighted mean temperature", "temperature", {"steps": [{
        "op": "window", "window": {"type": "tumbling", "size": DAY_MIN}, "group_by": ["city"],
        "udm": "twa", "input": "temp", "as": "twa", "clip": "full"}]},
        "time-sensitive UDA over edge events"),
    DemoQuery("Rolling 24 h high, every 6 h", "temperature", {"steps": [{
        "op": "window", "window": {"type": "hopping", "size": DAY_MIN, "hop": 6 * 60}, "group_by": ["city"],
        "udm": "max", "input": "temp", "as": "high"}]},
        "incremental, algebraic UDA on hopping windows (panes)"),
    DemoQuery("Yearly median price per symbol", "stocks", {"steps": [{
        "op": "window", "window": {"type": "tumbling", "size": 365}, "group_by": ["symbol"],
        "udm": "median", "input": "price", "as": "median"}]},
        "holistic UDA, group & apply"),
    DemoQuery("Top 3 symbol-months by price, per year", "stocks", {"steps": [{
        "op": "window", "window": {"type": "tumbling", "size": 365},
        "udm": "topk", "params": {"k": 3, "by": "price"}}]},
        "time-insensitive UDO"),
    DemoQuery("Monthly price beside IBM's (join of two feeds)", {"others": "others", "ibm": "ibm"}, {
        "inputs": {"others": {}, "ibm": {}},
        "steps": [
            {"id": "market", "from": "others", "op": "project", "set": {"market": "US"}},
            {"id": "benchmark", "from": "ibm", "op": "project", "keep": ["price"], "rename": {"price": "ibm"},
             "set": {"market": "US"}},
            {"id": "beside", "op": "join", "from": ["market", "benchmark"], "on": "market"},
            {"id": "out", "op": "project", "keep": ["symbol", "price", "ibm"]}],
        "output": "out"},
        "query graph: project, temporal join of two feeds"),
)


@dataclass
class DemoResult:
    query: DemoQuery
    elements_in: int
    inserts_out: int
    retractions_out: int
    dead_lettered: int
    rows: list[tuple[int, int, dict[str, Any]]]
    agrees_with_local: bool
    seconds: float
    corrections: list[tuple[str, int, int, Any, Any]] = field(default_factory=list)


def _cht(elements: list[Element]) -> Counter[tuple[int, int, str]]:
    """Canonical history table of a physical output stream (ids resolved, zero-length lifetimes gone)."""
    return Counter((le, re, canonical_json(p)) for le, re, p in _rows(elements))


def _corrections(elements: list[Element], field_name: str) -> list[tuple[str, int, int, Any, Any]]:
    """Results whose speculative value was later corrected: (group, le, re, first value, final value).

    A result is identified by its window and its other payload fields (the group key), so that a group's
    revision is never confused with another group's result for the same window.
    """
    first: dict[tuple[str, int, int], Any] = {}
    final: dict[tuple[str, int, int], Any] = {}
    live: dict[str, tuple[str, int, int]] = {}
    for el in elements:
        if isinstance(el, Insert) and field_name in el.payload:
            group = ", ".join(str(v) for k, v in sorted(el.payload.items()) if k != field_name)
            key = (group, el.le, el.re)
            first.setdefault(key, el.payload[field_name])
            final[key] = el.payload[field_name]
            live[el.id] = key
        elif isinstance(el, Retract) and el.re_new == el.le and el.id in live:
            final.pop(live.pop(el.id), None)
    return [(g, le, re, first[(g, le, re)], v) for (g, le, re), v in sorted(final.items())
            if v != first[(g, le, re)]]


def _run_local(spec: QuerySpec, elements: list[Element] | dict[str, list[Element]]) -> tuple[list[Element], int]:
    """The in-process engine fed as a live feed is: one arrival at a time, so its speculative output (and the
    corrections late data forces) shows; a whole file in one call would be one batch with nothing to revise."""
    runner = make_runner(spec)
    out: list[Element] = []
    if isinstance(elements, dict):
        arrivals = interleave([(n, enumerate(elements[n], 1)) for n in runner.inputs if n in elements])
        for name, line, el in arrivals:
            out.extend(runner.process(el, line, name))
    else:
        for line, el in enumerate(elements, 1):
            out.extend(runner.process(el, line))
    out.extend(runner.finish())
    return out, runner.stats.dead_lettered


def _run_spark(spark: Any, spec: QuerySpec, elements: list[Element] | dict[str, list[Element]]
               ) -> tuple[list[Element], int]:
    frames: Any = ({name: elements_df(spark, els) for name, els in elements.items()} if isinstance(elements, dict)
                   else elements_df(spark, elements))
    run = run_batch(spec, frames)
    try:
        return collect_elements(run.output), run.dead_letters.count()
    finally:
        run.unpersist()


def run_demo(*, out_dir: Path, engine: str = "spark", console: Console | None = None) -> list[DemoResult]:
    """Run every demo query; print a table; write ``demo.png`` and the outputs to ``out_dir``."""
    console = console or Console()
    out_dir.mkdir(parents=True, exist_ok=True)
    console.print("[bold]udmkit demo[/] — real series from vega_datasets, imperfect streams, UDMs by name")
    temps, stocks = load_temperatures(), load_stocks()
    streams = demo_streams(temps, stocks)
    for name, els in streams.items():
        kinds = Counter(type(e).__name__.lower() for e in els)
        console.print(f"  {name}: {len(els):,} elements ({', '.join(f'{v:,} {k}' for k, v in kinds.items())})")
    spark = None
    if engine == "spark":
        with console.status("starting local Spark"):
            spark = get_spark()
        console.print(f"  engine: Spark {spark.version} ({spark.sparkContext.master})")
    else:
        console.print("  engine: local (in-process)")

    results = []
    for q in QUERIES:
        spec = parse_query(q.spec)
        elements = q.inputs(streams)
        t0 = time.perf_counter()
        if spark is not None:
            out, dead = _run_spark(spark, spec, elements)
        else:
            out, dead = _run_local(spec, elements)
        secs = time.perf_counter() - t0
        local, _ = _run_local(spec, elements)
        table = _cht(out)
        alias = spec.steps[0].alias if hasattr(spec.steps[0], "alias") else ""
        rows = sorted(((le, re, p) for le, re, p in _rows(out)), key=lambda r: (r[0], canonical_json(r[2])))
        count = sum(map(len, elements.values())) if isinstance(elements, dict) else len(elements)
        results.append(DemoResult(
            q, count, sum(isinstance(e, Insert) for e in out), sum(isinstance(e, Retract) for e in out),
            dead, rows, table == _cht(local), secs, _corrections(out, alias)))
    _print(console, results)
    png = plot(temps, stocks, {r.query.udm: r.rows for r in results}, out_dir / "demo.png")
    console.print(f"plot written to [bold]{png}[/]")
    return results


def demo_streams(temps: Series, stocks: Series) -> dict[str, list[Element]]:
    """The demo's physical streams by name: the temperatures, all stock prices, and the stock prices split
    into two feeds (IBM, the others) for the join."""
    ibm = Series([r for r in stocks.rows if r[1] == "IBM"], stocks.unit)
    others = Series([r for r in stocks.rows if r[1] != "IBM"], stocks.unit)
    return {"temperature": temperature_stream(temps), "stocks": stock_stream(stocks),
            "ibm": stock_stream(ibm, seed=12), "others": stock_stream(others, seed=13)}


def _rows(out: list[Element]) -> list[tuple[int, int, dict[str, Any]]]:
    live: dict[str, tuple[int, int, dict[str, Any]]] = {}
    for el in out:
        if isinstance(el, Insert):
            live[el.id] = (el.le, el.re, el.payload)
        elif isinstance(el, Retract) and el.id in live:
            le, _, p = live[el.id]
            if el.re_new > le:
                live[el.id] = (le, el.re_new, p)
            else:
                del live[el.id]
    return list(live.values())


#: what the "CHT = local engine" column means, printed under the query table
CHT_NOTE = ("CHT: canonical history table, the result once every retraction is applied (ids aside). \"yes\": "
            "this run's output means exactly what the in-process engine's output means, however differently the "
            "two got there.")

#: Below this console width the query table becomes one block of text per query (a nine-column table
#: squeezed into 80 columns wraps its cells letter by letter).
WIDE = 120


def _print(console: Console, results: list[DemoResult]) -> None:
    if console.width >= WIDE:
        _query_table(console, results)
    else:
        _query_blocks(console, results)
    _print_details(console, results)


def _query_table(console: Console, results: list[DemoResult]) -> None:
    t = Table(title="Queries (each UDM invoked by registered name)", title_justify="left", caption=CHT_NOTE,
              caption_justify="left")
    for col in ("query", "UDM", "in", "inserts out", "retractions out", "dead-lettered", "result rows",
                "CHT = local engine", "seconds"):
        t.add_column(col)
    for r in results:
        t.add_row(f"{r.query.title}\n[dim]{r.query.shows}[/]", r.query.udm, f"{r.elements_in:,}", f"{r.inserts_out:,}",
                  f"{r.retractions_out:,}", f"{r.dead_lettered:,}", f"{len(r.rows):,}",
                  "[green]yes[/]" if r.agrees_with_local else "[red]NO[/]", f"{r.seconds:.1f}")
    console.print(t)


def _query_blocks(console: Console, results: list[DemoResult]) -> None:
    """One block per query: its title, what it shows, then its figures as short ``name value`` pairs
    (wrapped between pairs, never inside one)."""
    console.print("[bold]Queries[/] (each UDM invoked by registered name)")
    for i, r in enumerate(results, 1):
        agree = "[green]yes[/]" if r.agrees_with_local else "[red]NO[/]"
        console.print(f"[bold]{i}. {r.query.title}[/]")
        console.print(f"   [dim]{r.query.shows}[/]")
        console.print(f"   UDM {r.query.udm}")
        console.print(f"   in {r.elements_in:,} · out {r.inserts_out:,} inserts + {r.retractions_out:,} "
                      f"retractions · dead {r.dead_lettered:,} · rows {len(r.rows):,}")
        console.print(f"   CHT = local engine: {agree} · {r.seconds:.1f} s")
    console.print(f"[dim]{CHT_NOTE}[/]")


def _print_details(console: Console, results: list[DemoResult]) -> None:
    for r in results:
        if not r.corrections:
            continue
        c = Table(title=f"Speculation corrected — {r.query.title} (first 5 of {len(r.corrections)})",
                  title_justify="left")
        for col in ("group", "window", "speculative value", "final value"):
            c.add_column(col)
        stream = r.query.stream if isinstance(r.query.stream, str) else next(iter(r.query.stream.values()))
        for group, le, re, first, final in r.corrections[:5]:
            c.add_row(group or "-", window_text(stream, le, re), f"{first:.2f}", f"{final:.2f}")
        console.print(c)
    medians = next((r for r in results if r.query.udm == "median"), None)
    if medians:
        m = Table(title="Median price per symbol, per 365-day window from 2000-01-01", title_justify="left")
        symbols = sorted({p["symbol"] for _, _, p in medians.rows})
        m.add_column("window starting")
        for s in symbols:
            m.add_column(s, justify="right")
        years = sorted({le // 365 for le, _, _ in medians.rows})
        by = {(le // 365, p["symbol"]): p["median"] for le, _, p in medians.rows}
        for y in years:
            m.add_row(str(2000 + y), *[f"{by[(y, s)]:.2f}" if (y, s) in by else "-" for s in symbols])
        console.print(m)


