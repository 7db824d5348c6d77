"""The registry's derived files (catalog site, PEP 503 pages, catalog.json) for a registry of 1,000 UDMs.

``python -m bench.bench_registry_site [--udms N] [--quick]``. The catalog is made up (`bench.registry_gen`:
500 distributions of 2 UDMs, each published in 2 versions, so 1,000 releases and 1,000 UDM pages with two
version rows each): the site is derived from the catalog alone, so no wheel needs building. Reported:

- **full rebuild** into an empty directory (what a registry written by an older udmkit, or a template
  change, costs once) — the baseline of this run, and the target: under 10 s for 1,000 UDMs;
- **publish one release** (a new version of one distribution, the files publish rewrites after its checks):
  reading catalog.json back as publish does, then `write_index`; the files it wrote, and its time as a
  fraction of the full rebuild;
- **nothing changed**: `write_index` again.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.registry_gen import fake_catalog, fake_release
from udm.registry import Location, read_catalog
from udm.registry._index import write_index

TARGET_S = 10.0


def _count_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--udms", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="200 UDMs")
    args = ap.parse_args(argv)
    n = 200 if args.quick else args.udms
    catalog = fake_catalog(n, per_release=2, versions=2)
    print(f"{n} UDMs, {len(catalog.releases)} releases, {len(catalog.projects())} distributions; "
          f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus", flush=True)
    with tempfile.TemporaryDirectory(prefix="udm-bench-site-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        full = write_index(root, catalog)
        t_full = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        print(f"full rebuild:      {t_full:6.2f} s  {len(full.written)} files written, {size / 1e6:.1f} MB "
              f"({t_full / n * 1e3:.2f} ms per UDM)", flush=True)

        t0 = time.perf_counter()
        again = read_catalog(Location(path=root))
        again.releases.append(fake_release("udm-fake-00007", "9.0.0", ["fake_udm_00014", "fake_udm_00015"]))
        one = write_index(root, again)
        t_one = time.perf_counter() - t0
        print(f"publish one:       {t_one:6.2f} s  {len(one.written)} of {_count_files(root)} files written "
              f"({', '.join(sorted(one.written))}); {t_one / t_full:.3f}x the full rebuild", flush=True)

        t0 = time.perf_counter()
        none = write_index(root, again)
        t_none = time.perf_counter() - t0
        print(f"nothing changed:   {t_none:6.2f} s  {len(none.written)} files written; "
              f"{t_none / t_full:.3f}x the full rebuild", flush=True)
    verdict = "met" if t_full < TARGET_S * n / 1000 else "MISSED"
    print(f"target (full rebuild of 1,000 UDMs under {TARGET_S:.0f} s, scaled to {n}): {verdict}")
    return 0 if verdict == "met" else 1


if __name__ == "__main__":
    raise SystemExit(main())
