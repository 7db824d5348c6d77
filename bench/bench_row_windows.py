"""Row windows against seeds/004 (Stream Mill ESL) Fig. 4 and Fig. 6–7, on the local engine.

Input: in-order point events ``{"v"}`` (one per tick), a CTI every 100 elements right behind the data, fed
element by element through `QueryRunner.process` (the streaming path). Every configuration's output CHT
is checked equal to its baseline's, measured in the same run.

- **Fig. 4, incremental vs recompute as the window grows**: ``rows{n, slide=1}`` with ``sum`` for growing
  ``n``. *Incremental*: the engine slides the UDA state (remove the row that left, add the new one);
  *recompute* (the baseline): every window's state rebuilt from its ``n`` rows. The paper's shape: the
  incremental per-tuple cost stays flat while recompute grows with ``n``.
- **Fig. 6–7, panes vs no panes as the slide grows**: ``rows{n=4000, slide}`` with ``sum``. *Panes*:
  ``gcd(n, slide)``-row pane states merged per window, frozen rows folded away; *no panes* (the baseline):
  every window recomputed from its buffered rows. Reported: elements/s and the largest state held (pane
  states, kept once folded and once as a merge cache, and rows not yet frozen — about one CTI interval;
  sampled every 1000 elements). The paper's shape: pane memory falls as the slide grows
  (``n / slide`` states), no-pane memory stays at a window of rows; pane throughput stays high while the
  no-pane cost per element falls only as ``n / slide``.

``python -m bench.bench_row_windows [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from udm.host.engine import QueryRunner
from udm.host.engine import window as window_pkg
from udm.host.engine.window.rows import RowsStep
from udm.host.query.plan import bind
from udm.host.query.spec import parse_query
from udm.host.temporal.elements import Cti, Element, Insert
from udm.host.testing.cht import CHT, cht


def _query(n: int, slide: int) -> Any:
    return bind(parse_query({"steps": [{"op": "window", "window": {"type": "rows", "n": n, "slide": slide},
                                        "udm": "sum", "input": "v"}]}))


def _stream(count: int) -> Iterator[Element]:
    for i in range(count):
        yield Insert(f"e{i}", i, i + 1, {"v": (i * 7919) % 101})
        if i % 100 == 99:
            yield Cti(i + 1)


@contextlib.contextmanager
def _mode(panes: bool = True, slides: bool = True) -> Iterator[None]:
    """Switch the engine's row-pane plan and incremental sliding off for a baseline run."""
    saved = (window_pkg.row_pane_step, RowsStep.slides)
    if not panes:
        window_pkg.row_pane_step = lambda *a, **k: None  # type: ignore[assignment]
    RowsStep.slides = slides
    try:
        yield
    finally:
        window_pkg.row_pane_step, RowsStep.slides = saved


def _run(n: int, slide: int, count: int) -> tuple[float, tuple[int, int], CHT, str]:
    """(seconds, largest (rows, pane states) held, output CHT, step family) of one run."""
    r = QueryRunner(_query(n, slide))
    op = r.ops[0]
    out: list[Any] = []
    peak = (0, 0)
    t0 = time.perf_counter()
    for j, el in enumerate(_stream(count)):
        out += r.process(el)
        if j % 1000 == 0:
            size = op.state_size()
            peak = (max(peak[0], size.get("rows", 0)), max(peak[1], size.get("panes", 0)))
    secs = time.perf_counter() - t0
    out += r.finish()
    return secs, peak, cht(out), type(op).__name__


def fig4(quick: bool) -> None:
    count = 2000 if quick else 4000
    sizes = (100, 400) if quick else (100, 400, 1600)
    print(f"Fig. 4 — rows{{n, slide=1}} sum, {count:,} in-order elements: µs per element")
    print(f"{'n':>6} {'incremental':>12} {'recompute':>10} {'ratio':>7}")
    for n in sizes:
        t_inc, _, cht_inc, _ = _run(n, 1, count)
        with _mode(slides=False):
            t_rec, _, cht_rec, _ = _run(n, 1, count)
        assert cht_inc == cht_rec, f"n={n}: incremental and recompute outputs differ"
        print(f"{n:>6} {t_inc / count * 1e6:>12.1f} {t_rec / count * 1e6:>10.1f} {t_rec / t_inc:>6.1f}x")


def fig67(quick: bool) -> None:
    n = 4000
    count = 12_000 if quick else 40_000
    slides = (200, 1000, 2000) if quick else (100, 400, 1000, 2000)
    print(f"\nFig. 6–7 — rows{{n={n}, slide}} sum, {count:,} in-order elements: panes vs no panes (recompute)")
    print(f"{'slide':>6} {'panes el/s':>11} {'no-pane el/s':>13} {'speed-up':>9} {'pane states':>12} "
          f"{'+ rows':>7} {'no-pane rows':>13}")
    for slide in slides:
        t_p, m_p, cht_p, fam = _run(n, slide, count)
        assert fam == "RowPaneStep", fam
        with _mode(panes=False, slides=False):
            t_b, m_b, cht_b, _ = _run(n, slide, count)
        assert cht_p == cht_b, f"slide={slide}: panes and no-pane outputs differ"
        print(f"{slide:>6} {count / t_p:>11,.0f} {count / t_b:>13,.0f} {t_b / t_p:>8.1f}x {m_p[1]:>12,} "
              f"{m_p[0]:>7,} {m_b[0]:>13,}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_row_windows", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs")
    args = ap.parse_args(argv)
    fig4(args.quick)
    fig67(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
