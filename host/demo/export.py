"""``udm demo --data DIR``: the demo's real series as a user's table, for the README quickstart.

Writes ``stocks.parquet`` (``date`` timestamp, ``symbol``, ``price``: monthly closing prices of five
stocks, 2000–2010, from vega_datasets), the same rows as element JSON Lines (``stocks.jsonl``: point
events ``[date, date + 1µs)`` in microsecond ticks, ids ``r1, r2, ...`` in row order — what
``udm run --time date`` makes of the Parquet file) and a query over them (``yearly_median.yaml``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .data import vega

__all__ = ["OFFSET_US", "YEAR_US", "export_data"]

# lazy imports: pyarrow — the Parquet writer loads only for `udm demo --data`

#: 365 days in microsecond ticks (timestamps are read as µs ticks).
YEAR_US = 365 * 86_400 * 1_000_000
#: windows start on 2000-01-01 (not at the epoch's alignment): its tick modulo the window size
OFFSET_US = 946_684_800 * 1_000_000 % YEAR_US

QUERY = f"""# Yearly median closing price per symbol (365-day tumbling windows from 2000-01-01; µs ticks)
steps:
  - op: window
    window: {{type: tumbling, size: {YEAR_US}, offset: {OFFSET_US}}}
    group_by: [symbol]
    udm: median
    input: price
    as: median
"""


def export_data(out_dir: Path) -> list[Path]:
    """Write the stock series as Parquet + element JSON Lines, and the example query; return the paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = vega().local_data.stocks()  # type: ignore[attr-defined]
    df = df.sort_values(["date", "symbol"], kind="stable").reset_index(drop=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = pa.table({"date": pa.Array.from_pandas(df["date"]).cast(pa.timestamp("us")),
                      "symbol": pa.array(df["symbol"].astype(str), pa.string()),
                      "price": pa.array(df["price"].astype(float), pa.float64())})
    parquet = out_dir / "stocks.parquet"
    pq.write_table(table, parquet)
    jsonl = out_dir / "stocks.jsonl"
    ticks = table.column("date").cast(pa.int64()).to_pylist()
    with jsonl.open("w", encoding="utf-8") as f:
        for i, (t, sym, price) in enumerate(zip(ticks, table.column("symbol").to_pylist(),
                                                table.column("price").to_pylist(), strict=True), 1):
            f.write(json.dumps({"kind": "insert", "id": f"r{i}", "le": t, "re": t + 1,
                                "payload": {"symbol": sym, "price": price}}) + "\n")
    query = out_dir / "yearly_median.yaml"
    query.write_text(QUERY, encoding="utf-8")
    return [parquet, jsonl, query]
