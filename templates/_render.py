"""Rendering the project template (jinja2) into a new directory.

jinja2 rather than copier: the template has one variable axis (kind × two flags) that the CLI validates
itself, so copier's questionnaire, git integration and its dozen dependencies buy nothing at run time;
jinja2 is one small, ubiquitous dependency. What copier's ``update`` needs — the template version and the
answers — is still recorded in ``.udm-template.json``, so re-rendering a project over a newer template
stays possible.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import jinja2

from udm.sdk import API_VERSION

from ._options import NewProjectError, ProjectOptions

__all__ = ["TEMPLATE_VERSION", "render_project", "template_context"]

#: Bumped whenever the generated project changes shape; recorded in every project's answers file.
TEMPLATE_VERSION = "2"

_ROOT = Path(__file__).resolve().parent
_PROJECT = "project"
_SUFFIX = ".jinja"

_SUMMARIES = {
    ("udf", False): "Multiplies a numeric field by a factor",
    ("uda", False): "Spread (largest minus smallest) of the input values",
    ("uda", True): "Value of the window member that started last",
    ("udo", False): "The window members whose value is above the window's mean",
    ("udo", True): "A point event at the start of each window member",
    ("span_udo", False): "One event per word of a text field",
    ("span_udo", True): "Point events sampling each event's lifetime",
}
_KIND_LABELS = {"udf": "function (UDF)", "uda": "aggregate (UDA)", "udo": "operator (UDO)",
                "span_udo": "span operator (span UDO)"}


def _udmkit_version() -> str:
    try:
        return dist_version("udmkit")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.1.0"


def _sdk_requirement(v: str) -> str:
    """``udmkit>=X.Y,<X+1``: the SDK this project was generated against, up to the next major."""
    parts = [*v.split("."), "0"][:2]
    major, minor = int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    return f"udmkit>={major}.{minor},<{major + 1}"


def _host_api_range() -> str:
    major = int(API_VERSION.split(".")[0])
    return f">={API_VERSION},<{major + 1}"


def template_context(opts: ProjectOptions, *, version: str = "0.1.0") -> dict[str, Any]:
    """Every variable the templates use (StrictUndefined makes a missing one an error, not a blank)."""
    if opts.kind == "uda" and opts.incremental and not opts.time_sensitive:
        summary = "Arithmetic mean of the input values (incremental, algebraic)"
    else:
        summary = _SUMMARIES[(opts.example, opts.time_sensitive)]
    props = [p for p, on in (("incremental", opts.incremental), ("algebraic", opts.kind == "uda" and
             opts.incremental and not opts.time_sensitive), ("time_sensitive", opts.time_sensitive),
             ("time_bound", opts.span and opts.time_sensitive)) if on]
    udmkit = _udmkit_version()
    answers = {"template": "udm.templates/project", "template_version": TEMPLATE_VERSION,
               "udmkit_version": udmkit, "name": opts.name, "kind": opts.kind,
               "incremental": opts.incremental, "time_sensitive": opts.time_sensitive, "span": opts.span}
    return {
        "name": opts.name,
        "kind": opts.kind,
        "kind_label": _KIND_LABELS[opts.example],
        "span": opts.span,
        "example": opts.example,
        "incremental": opts.incremental,
        "time_sensitive": opts.time_sensitive,
        "package": opts.package,
        "distribution": opts.distribution,
        "class_name": opts.class_name,
        "base": opts.base,
        "version": version,
        "host_api": _host_api_range(),
        "sdk_requirement": _sdk_requirement(udmkit),
        "udmkit_version": udmkit,
        "summary": summary,
        "properties_label": ", ".join(props) or "time-insensitive",
        "answers_json": json.dumps(answers, indent=2),
    }


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_ROOT)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def _template_files() -> list[Path]:
    root = _ROOT / _PROJECT
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def render_project(opts: ProjectOptions, dest: Path, *, version: str = "0.1.0") -> list[Path]:
    """Render the project into ``dest`` (which must not exist or be empty); return the files written.

    The project is rendered into a temporary sibling directory and moved into place at the end, so a
    failure never leaves a half-written project behind.
    """
    dest = dest.resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise NewProjectError(f"{dest} already exists and is not an empty directory; choose another --dir")
    env = _environment()
    ctx = template_context(opts, version=version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix=".udm-new-", dir=dest.parent) as tmp:
        stage = Path(tmp) / "project"
        for src in _template_files():
            rel = src.relative_to(_ROOT / _PROJECT).as_posix()
            target_rel = env.from_string(rel).render(ctx)
            if target_rel.endswith(_SUFFIX):
                target_rel = target_rel[: -len(_SUFFIX)]
                text = env.get_template(f"{_PROJECT}/{rel}").render(ctx)
                data = text.encode("utf-8")
            else:
                data = src.read_bytes()
            out = stage / target_rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            written.append(Path(target_rel))
        if dest.exists():
            dest.rmdir()
        shutil.move(str(stage), str(dest))
    return [dest / p for p in written]
