"""What each page of the catalog site shows, computed from the catalog as plain JSON-able dicts.

A page's dict is everything its HTML depends on, so the site build can hash it to know whether the page
changed since the last build (`_site`), and the templates only lay it out. Text stays raw here: the
templates escape it (Jinja autoescape) and `_markdown` renders the docs.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from udm.sdk import API_VERSION, CLIP_POLICIES, OUTPUT_POLICIES

from ._query import UdmHit, versions_by_name
from ._records import RegistryCatalog, UdmRecord
from ._snippet import query_snippet

__all__ = ["KIND_FILTERS", "PROPERTY_FILTERS", "index_model", "kind_label", "udm_models", "udm_page_path"]

#: the index's kind filter, in this order; "span udo" is a UDO that `flat_map` runs once per event
KIND_FILTERS: tuple[str, ...] = ("udf", "uda", "udo", "span udo")
#: (manifest property, label) of the index's property filter
PROPERTY_FILTERS: tuple[tuple[str, str], ...] = (
    ("incremental", "incremental"), ("algebraic", "algebraic"),
    ("time_sensitive", "time-sensitive"), ("time_bound", "time-bound"),
)
_LABELS = dict(PROPERTY_FILTERS)


def udm_page_path(name: str) -> str:
    """Where a UDM's page lives, relative to the registry root (names are identifiers: safe as paths)."""
    return f"udm/{name}.html"


def kind_label(u: UdmRecord) -> str:
    """udf / uda / udo, or "span udo" for a UDO whose manifest marks it span-based (``span: true``)."""
    extra = u.model_extra or {}
    if u.kind in ("span udo", "span_udo") or (u.kind == "udo" and extra.get("span") is True):
        return "span udo"
    return u.kind


def _property_labels(u: UdmRecord) -> list[str]:
    on = [_LABELS.get(k, k.replace("_", "-")) for k, v in u.properties.items() if v and k != "deterministic"]
    return on + ([] if u.properties.get("deterministic", True) else ["nondeterministic"])


def _install_line(u: UdmRecord) -> str:
    return f"udm registry install '{u.name}=={u.version}'"


def index_model(catalog: RegistryCatalog) -> dict[str, Any]:
    """The index page: the latest version of every UDM, and the counts beside each filter."""
    rows: list[dict[str, Any]] = []
    for name, versions in versions_by_name(catalog).items():
        h = versions[-1]
        u, rel = h.udm, h.release
        kind = kind_label(u)
        props = [k for k, _ in PROPERTY_FILTERS if u.properties.get(k)]
        rows.append({
            "name": name, "version": u.version, "kind": kind, "summary": u.summary,
            "prop_keys": props, "props": _property_labels(u),
            "distribution": rel.distribution, "dist_version": rel.version, "host_api": u.host_api,
            "n_versions": len(versions), "href": udm_page_path(name),
            "search": " ".join([name, u.summary, kind, rel.distribution, *_property_labels(u)]).lower(),
        })
    return {
        "udms": rows,
        "kinds": [{"key": k, "count": sum(r["kind"] == k for r in rows)} for k in KIND_FILTERS],
        "props": [{"key": k, "label": label, "count": sum(k in r["prop_keys"] for r in rows)}
                  for k, label in PROPERTY_FILTERS],
        "n_releases": len(catalog.releases),
        "n_distributions": len(catalog.projects()),
        "api_version": API_VERSION,
    }


def _schema_type(prop: dict[str, Any]) -> str:
    """A JSON schema property's type as a reader writes it: ``integer``, ``number | null``, ``array of string``."""
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return f"exactly {json.dumps(prop['const'])}"
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return " | ".join(_schema_type(p) for p in prop[key] if isinstance(p, dict))
    t = prop.get("type", "any")
    if t == "array" and isinstance(prop.get("items"), dict):
        return f"array of {_schema_type(prop['items'])}"
    return " | ".join(map(str, t)) if isinstance(t, list) else str(t)


_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"),
           ("minLength", "length ≥"), ("maxLength", "length ≤"), ("minItems", "items ≥"), ("maxItems", "items ≤"),
           ("pattern", "matches"))


def _param_rows(params: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for pname, prop in (params.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        rows.append({
            "name": pname, "type": _schema_type(prop),
            "default": json.dumps(prop["default"]) if "default" in prop else "",
            "constraints": ", ".join(f"{sym} {prop[k]}" for k, sym in _BOUNDS if k in prop),
            "description": str(prop.get("description", "")),
        })
    return rows


def _checks_of(h: UdmHit) -> dict[str, Any]:
    mine = [c for c in h.release.checks if c.get("udm") == h.udm.name]
    skipped = [c for c in mine if c.get("skipped")]
    failed = [c for c in mine if not c.get("passed")]
    seeds = sorted({str(c.get("seed")) for c in mine if c.get("seed") is not None})
    return {
        "passed": len(mine) - len(failed) - len(skipped), "skipped": len(skipped), "failed": len(failed),
        "seed": ", ".join(seeds),
        "items": [{"name": str(c.get("name", "?")),
                   "result": "failed" if not c.get("passed") else "not applicable" if c.get("skipped") else "passed",
                   "detail": str(c.get("detail", "") or "")} for c in mine],
    }


def _version_row(h: UdmHit, latest: bool) -> dict[str, Any]:
    rel = h.release
    return {
        "version": h.udm.version, "distribution": rel.distribution, "dist_version": rel.version,
        "published": rel.published, "date": rel.published[:10], "checks": _checks_of(h),
        "filename": rel.filename, "href": "../files/" + quote(rel.filename), "sha256": rel.sha256,
        "host_api": h.udm.host_api, "requires_python": rel.requires_python, "latest": latest,
    }


def _manifest_json(u: UdmRecord) -> str:
    return json.dumps(u.model_dump(mode="json"), indent=2, ensure_ascii=False)


def _udm_model(versions: list[UdmHit]) -> dict[str, Any]:
    h = versions[-1]
    u, rel = h.udm, h.release
    kind = kind_label(u)
    return {
        "name": u.name, "version": u.version, "kind": kind, "summary": u.summary,
        "properties": [{"label": label, "on": bool(u.properties.get(k))} for k, label in PROPERTY_FILTERS],
        "deterministic": bool(u.properties.get("deterministic", True)),
        "params": _param_rows(u.params), "input_type": u.input_type, "output_type": u.output_type,
        "clip": [{"name": c, "allowed": c in u.allowed_clip} for c in CLIP_POLICIES],
        "output": [{"name": c, "allowed": c in u.allowed_output} for c in OUTPUT_POLICIES],
        "host_api": u.host_api, "docs": u.docs, "readme": rel.readme, "readme_type": rel.readme_type,
        "distribution": rel.distribution, "dist_version": rel.version, "project": rel.project,
        "requires_python": rel.requires_python, "requires_dist": list(rel.requires_dist),
        "siblings": [{"name": s.name, "href": f"{s.name}.html"} for s in rel.udms if s.name != u.name],
        "install": _install_line(u), "pip_pin": f"{rel.distribution}=={rel.version}",
        "snippet": query_snippet(u, kind),
        "manifest_json": _manifest_json(u),
        "versions": [_version_row(v, v is h) for v in reversed(versions)],
    }


def udm_models(catalog: RegistryCatalog) -> dict[str, dict[str, Any]]:
    """One page per UDM name: its latest manifest and every published version, newest first."""
    return {name: _udm_model(versions) for name, versions in versions_by_name(catalog).items()}
