"""The first-party plugins are built like a third party's: each publishes to the registry (build, manifest
checks, contract checks) and then stands in the catalog with every UDM INTERFACES §6 names."""

from __future__ import annotations

from pathlib import Path

import pytest

from udm.registry import Location, publish, read_catalog, search

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_first_party_plugins_publish_to_a_registry(tmp_path: Path) -> None:
    loc = Location(path=tmp_path / "registry")
    for project in ("udm-stats", "udm-patterns", "udm-sketches"):
        publish(loc, ROOT / "plugins" / project, isolation=False)
    catalog = read_catalog(loc)
    names = {hit.udm.name for hit in search(catalog, "")}
    assert {"count", "sum", "avg", "min", "max", "variance", "median", "twa", "topk", "members", "follows",
            "explode", "approx_distinct", "approx_quantile", "frequent_items"} <= names
    patterns = next(r for r in catalog.releases if r.distribution == "udm-patterns")
    assert next(u for u in patterns.udms if u.name == "explode").model_dump()["span"] is True
    sketches = [r for r in catalog.releases if r.distribution == "udm-sketches"]
    assert sketches and {c["name"] for c in sketches[0].checks} >= {"error_bound", "incremental", "algebraic_merge"}
    bounds = {u.name: u.model_dump().get("error_bound") for u in sketches[0].udms}
    assert bounds["approx_distinct"]["estimates"] == "distinct_count"
    index = (tmp_path / "registry" / "simple" / "udm-stats" / "index.html").read_text()
    assert "#sha256=" in index
