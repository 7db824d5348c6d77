"""Real series from a registry package, turned into imperfect physical streams.

The data comes from ``vega_datasets`` (shipped inside the wheel, no download): hourly Seattle temperatures
for 2010 and monthly closing prices of five stocks, 2000–2010. A real feed is never clean, so the streams
get what the host exists to handle: edge events (open-ended, then shortened by the next sample), late
arrivals, corrections (a glitch value retracted and re-sent) and punctuations.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from udm.host.errors import UdmError
from udm.host.temporal.elements import Cti, Element, Insert, Retract
from udm.sdk import INF

__all__ = ["DAY_MIN", "Series", "load_stocks", "load_temperatures", "stock_stream", "temperature_stream",
           "tick_text", "vega", "window_text"]

#: Temperature ticks are minutes since 2010-01-01; stock ticks are days since 2000-01-01.
DAY_MIN = 24 * 60
_T0 = datetime(2010, 1, 1)
_S0 = datetime(2000, 1, 1)


#: per stream name: (time of tick 0, a tick's length, how to print a time)
_TICKS: dict[str, tuple[datetime, timedelta, str]] = {
    "temperature": (_T0, timedelta(minutes=1), "%Y-%m-%d %H:%M"),
    **{name: (_S0, timedelta(days=1), "%Y-%m-%d") for name in ("stocks", "ibm", "others")},
}


def tick_text(stream: str, tick: int) -> str:
    """A tick of one of the demo's streams as the date (and time) it stands for."""
    t0, size, fmt = _TICKS[stream]
    return (t0 + tick * size).strftime(fmt)


def window_text(stream: str, le: int, re: int) -> str:
    """A window ``[le, re)`` of a stream as times: ``2010-02-19 00:00 – 02-20 00:00`` (the end's year left
    out when it is the start's)."""
    start, end = tick_text(stream, le), tick_text(stream, re)
    if end[:5] == start[:5]:
        end = end[5:]
    return f"{start} – {end}"


@dataclass(frozen=True)
class Series:
    """A clean logical series: (tick, key, value) rows in time order."""

    rows: list[tuple[int, str, float]]
    unit: str


def vega() -> object:
    """The `vega_datasets` module (the demo extra), or an error saying how to install it."""
    try:
        import vega_datasets  # lazy: the demo extra, only when the demo's data is loaded
    except ImportError:
        raise UdmError("the demo needs the 'vega_datasets' package (pip install 'udmkit[demo]')") from None
    return vega_datasets


def load_temperatures() -> Series:
    vd = vega()
    df = vd.local_data.seattle_temps()  # type: ignore[attr-defined]
    rows = [(int((ts.to_pydatetime() - _T0).total_seconds() // 60), "Seattle", float(v))
            for ts, v in zip(df["date"], df["temp"], strict=True)]
    return Series(rows, "minutes since 2010-01-01")


def load_stocks() -> Series:
    vd = vega()
    df = vd.local_data.stocks()  # type: ignore[attr-defined]
    rows = sorted((int((ts.to_pydatetime() - _S0).days), str(sym), float(p))
                  for sym, ts, p in zip(df["symbol"], df["date"], df["price"], strict=True))
    return Series(rows, "days since 2000-01-01")


class _Arrivals:
    """Elements stamped with their arrival time; `deliver` orders them and interleaves trailing CTIs."""

    def __init__(self) -> None:
        self._timed: list[tuple[int, int, Element]] = []

    def send(self, at: int, el: Element) -> None:
        self._timed.append((at, len(self._timed), el))

    def deliver(self, cti_every: int, cti_lag: int, last: int) -> list[Element]:
        out: list[Element] = []
        next_cti = cti_every
        for arrival, _, el in sorted(self._timed, key=lambda x: (x[0], x[1])):
            while arrival - cti_lag >= next_cti:
                out.append(Cti(next_cti))
                next_cti += cti_every
            out.append(el)
        out.append(Cti(last))
        return out


def temperature_stream(series: Series, *, seed: int = 7, late_fraction: float = 0.03,
                       glitch_fraction: float = 0.01, max_late: int = 6 * 60) -> list[Element]:
    """Edge events: each sample lives until the next one, sent as ``[t, INF)`` then shortened.

    A few samples arrive up to ``max_late`` minutes late (the engine speculates, then corrects); a few are
    first sent with a glitch (+45°F) and corrected by a full retraction and a re-insert.
    """
    rng = random.Random(seed)
    rows = series.rows
    feed = _Arrivals()
    send = feed.send
    for i, (t, key, v) in enumerate(rows):
        nxt = rows[i + 1][0] if i + 1 < len(rows) else None
        arrive = t + (rng.randint(1, max_late) if rng.random() < late_fraction else 0)
        payload = {"city": key, "temp": v}
        if rng.random() < glitch_fraction:
            bad = f"g{i}"
            send(arrive, Insert(bad, t, INF, {"city": key, "temp": round(v + 45.0, 1)}))
            send(arrive + 90, Retract(bad, t, INF, t))  # the sensor's correction, 90 minutes later
            arrive += 90
        send(arrive, Insert(f"t{i}", t, INF, payload))
        if nxt is not None:
            send(max(arrive, nxt), Retract(f"t{i}", t, INF, nxt))
    last = rows[-1][0] + 60
    # the feed ends: close the last edge so nothing stays open forever
    send(last, Retract(f"t{len(rows) - 1}", rows[-1][0], INF, last))
    return feed.deliver(cti_every=6 * 60, cti_lag=max_late + 120, last=last)


def stock_stream(series: Series, *, seed: int = 11, late_fraction: float = 0.05,
                 correction_fraction: float = 0.03) -> list[Element]:
    """Point events, one per (symbol, month); some late, some first sent with a wrong price and corrected."""
    rng = random.Random(seed)
    feed = _Arrivals()
    send = feed.send
    for i, (t, sym, price) in enumerate(series.rows):
        arrive = t + (rng.randint(1, 60) if rng.random() < late_fraction else 0)
        if rng.random() < correction_fraction:
            wrong = f"w{i}"
            send(arrive, Insert(wrong, t, t + 1, {"symbol": sym, "price": round(price * 1.5, 2)}))
            send(arrive + 3, Retract(wrong, t, t + 1, t))
            arrive += 3
        send(arrive, Insert(f"s{i}", t, t + 1, {"symbol": sym, "price": price}))
    last = series.rows[-1][0] + 1
    return feed.deliver(cti_every=30, cti_lag=75, last=last)
