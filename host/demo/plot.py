"""The demo's picture: raw series against windowed results, so a person can see what the UDMs did."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from udm.host.demo.data import DAY_MIN, Series

__all__ = ["plot"]

# lazy imports: matplotlib — the demo extra, only when a picture is drawn


Rows = list[tuple[int, int, dict[str, Any]]]


def _steps(rows: Rows, field: str, scale: float) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for le, re, p in sorted(rows, key=lambda r: r[0]):
        xs += [le / scale, re / scale]
        ys += [p[field], p[field]]
    return xs, ys


def plot(temps: Series, stocks: Series, by_udm: Mapping[str, Rows], path: Path) -> Path:
    """The picture of the raw series and each UDM's result rows (by UDM name), written to ``path``."""
    # lazy: matplotlib (the demo extra) loads only when a picture is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(13, 9), constrained_layout=True)

    ax1.plot([t / DAY_MIN for t, _, _ in temps.rows], [v for _, _, v in temps.rows], lw=0.4, color="0.65",
             label="hourly samples (raw)")
    if "max" in by_udm:
        xs, ys = _steps(by_udm["max"], "high", DAY_MIN)
        ax1.plot(xs, ys, lw=0.8, color="tab:red", label="rolling 24 h high, every 6 h (max, panes)")
    if "twa" in by_udm:
        xs, ys = _steps(by_udm["twa"], "twa", DAY_MIN)
        ax1.plot(xs, ys, lw=1.0, color="tab:blue", label="daily time-weighted mean (twa)")
    ax1.set_title("Seattle temperature, 2010 — edge events with late samples and corrected glitches")
    ax1.set_xlabel("day of 2010")
    ax1.set_ylabel("°F")
    ax1.legend(loc="lower center")

    colors = dict(zip(sorted({k for _, k, _ in stocks.rows}), plt.rcParams["axes.prop_cycle"].by_key()["color"],
                      strict=False))
    for sym, color in colors.items():
        pts = [(t, v) for t, k, v in stocks.rows if k == sym]
        ax2.plot([t / 365.25 + 2000 for t, _ in pts], [v for _, v in pts], lw=0.6, color=color, alpha=0.45)
        if "median" in by_udm:
            rows = [r for r in by_udm["median"] if r[2]["symbol"] == sym]
            xs, ys = _steps(rows, "median", 365.25)
            ax2.plot([x + 2000 for x in xs], ys, lw=1.8, color=color, label=f"{sym} median per 365 days")
    ax2.set_title("Monthly stock prices (thin) and windowed median per symbol (thick) — group & apply")
    ax2.set_xlabel("year")
    ax2.set_ylabel("price (USD)")
    ax2.legend(loc="upper left", ncol=3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
