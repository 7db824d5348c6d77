"""Screenshots of a registry's catalog site for the docs: ``make screenshots`` (the demo registry), or
``python tests/marketplace_screenshots.py REGISTRY_DIR OUT_DIR [--udm NAME]``.

Writes ``marketplace-index-1280.png``, ``marketplace-index-390.png``, ``marketplace-udm-1280.png`` and
``marketplace-udm-390.png``: full pages, served by `udm registry serve`'s server, in the same headless
Chromium as the browser tests (tests/browser.py).
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from browser import chromium

from udm.registry import Location, make_server, refresh_site

WIDTHS = (1280, 390)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("registry", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--udm", default="topk", help="the UDM whose page is shot (default: topk)")
    args = ap.parse_args(argv)
    loc = Location(path=args.registry.resolve())
    refresh_site(loc)
    server = make_server(loc, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with chromium() as browser:
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, path in (("index", "index.html"), ("udm", f"udm/{args.udm}.html")):
                    page.goto(url + path)
                    page.wait_for_load_state("networkidle")
                    dest = args.out / f"marketplace-{name}-{width}.png"
                    page.screenshot(path=str(dest), full_page=True)
                    print(f"wrote {dest}")
                page.close()
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
