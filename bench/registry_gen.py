"""Fake registry catalogs: many releases and UDM manifests without building a wheel or running a check.

The site is derived from the catalog alone (`udm.registry._index.write_index`), so a catalog of made-up but
well-formed releases exercises exactly what a real registry of that size would: the bench
(`bench_registry_site`) times rebuilding 1,000 UDMs, and tests/test_registry_site.py checks which files a
publish rewrites.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from udm.registry import RegistryCatalog, Release, UdmRecord

__all__ = ["fake_catalog", "fake_release"]

_KINDS = ("uda", "uda", "uda", "udo", "udf")
_WORDS = ("window", "median", "quantile", "pattern", "session", "rate", "spread", "trend", "alert", "score")
_CHECKS = ("manifest", "params_roundtrip", "deterministic", "oracle", "incremental", "algebraic", "batch_forms")


def _manifest(name: str, version: str, seed: int) -> dict[str, Any]:
    rng = random.Random(f"{name}-{seed}")  # a UDM keeps its kind and properties from version to version
    kind = rng.choice(_KINDS)
    incremental = kind != "udf" and rng.random() < 0.6
    word = rng.choice(_WORDS)
    return {
        "name": name, "version": version, "kind": kind,
        "summary": f"The {word} of the window's `value` field ({name}).",
        "properties": {"incremental": incremental, "algebraic": incremental and rng.random() < 0.6,
                       "time_sensitive": kind != "udf" and rng.random() < 0.3, "time_bound": False,
                       "deterministic": True},
        "host_api": ">=1.0,<2",
        "params": {"type": "object", "title": "Params", "additionalProperties": False, "properties": {
            "k": {"type": "integer", "default": rng.randint(1, 9), "minimum": 1, "title": "K",
                  "description": "how many to keep"},
            "field": {"type": "string", "default": "value", "title": "Field", "description": "payload field"},
        }},
        "input_type": "float", "output_type": "float",
        "allowed_clip": ["none", "left", "right", "full"] if kind != "udf" else [],
        "allowed_output": ["window"] if kind != "udf" else [],
        "docs": f"The {word} of the window's `value` field.\n\n" + "Longer explanation, with *emphasis*. " * 8
                + "\n\n```python\nresult = compute(payloads)\n```\n",
    }


def fake_release(distribution: str, version: str, udm_names: list[str], seed: int = 0) -> Release:
    """A release of ``distribution`` carrying the UDMs ``udm_names``, each at ``version``."""
    udms = [UdmRecord.model_validate(_manifest(n, version, seed)) for n in udm_names]
    sha = hashlib.sha256(f"{distribution}{version}{seed}".encode()).hexdigest()
    filename = f"{distribution.replace('-', '_')}-{version}-py3-none-any.whl"
    checks = [{"udm": n, "name": c, "passed": True, "seed": 0} for n in udm_names for c in _CHECKS]
    return Release(distribution=distribution, version=version, filename=filename, sha256=sha,
                   content_digest=sha[::-1], requires_python=">=3.11", requires_dist=["udmkit>=0.1"],
                   summary=f"{distribution}: fake UDMs for benchmarks", published="2026-01-01T00:00:00+00:00",
                   udms=udms, checks=checks, readme=f"# {distribution}\n\nSome UDMs.\n",
                   readme_type="text/markdown")


def fake_catalog(n_udms: int, per_release: int = 2, versions: int = 2, seed: int = 0) -> RegistryCatalog:
    """``n_udms`` UDMs, ``per_release`` to a distribution, each distribution published in ``versions``
    versions (so every UDM page has that many rows)."""
    releases = []
    names = [f"fake_udm_{i:05d}" for i in range(n_udms)]
    for d, start in enumerate(range(0, n_udms, per_release)):
        group = names[start:start + per_release]
        for v in range(versions):
            releases.append(fake_release(f"udm-fake-{d:05d}", f"1.{v}.0", group, seed))
    return RegistryCatalog(releases=releases)
