"""Loading a wheel's UDMs and running the host's checks on them, in a separate interpreter.

Run as ``python -m udm.registry._inspect WHEEL SEED``; prints one JSON document. A separate process
because the wheel's modules may share names with installed (or already imported) ones — republishing a
new version of an installed plugin is the normal case — and because importing it runs its code: neither
should leak into the process doing the publishing. The wheel goes first on ``sys.path`` (zipimport), so
its modules win over installed copies.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from udm.host.catalog import Catalog
from udm.host.plugins import PluginHost

from ._errors import RegistryError

__all__ = ["inspect_wheel"]

# lazy imports: udm.host.testing — the kit (numpy) loads only when a wheel's UDMs are checked

_TIMEOUT_S = 600


def inspect_wheel(wheel: Path, entry_points: dict[str, str], *, seed: int = 0) -> dict[str, Any]:
    """``{"udms": [{"manifest", "problems", "checks"}], "load_errors": [...], "kit_error": str|None}``."""
    cmd = [sys.executable, "-m", "udm.registry._inspect", str(wheel), str(seed), json.dumps(entry_points)]
    env = {**os.environ, "UDM_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{wheel.name}: loading and checking its UDMs took more than {_TIMEOUT_S}s") from None
    try:
        data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RegistryError(f"{wheel.name}: checking its UDMs failed: {tail[0]}") from None
    return data


def _import_attr(spec: str) -> Any:
    """The object an entry point names: ``module`` or ``module:attr.path``."""
    mod_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(mod_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def _check_one(cls: Any, plugin: str, seed: int) -> dict[str, Any]:
    entry = Catalog().add(cls, plugin=plugin, distribution="(wheel)")
    row: dict[str, Any] = {"plugin": plugin, "name": entry.name, "problems": list(entry.problems),
                           "manifest": None, "checks": []}
    if entry.valid:
        row["manifest"] = entry.manifest.to_json_dict()
        if entry.manifest.kind == "udf":
            row["manifest"]["udf_args"] = _udf_args(cls)
    return row


def _udf_args(cls: Any) -> list[str]:
    """The argument names a query's ``args`` maps payload fields to (the catalog site's query snippet
    shows them); empty for ``compute(**fields)``."""
    params = [p for p in inspect.signature(cls.compute).parameters.values() if p.name != "self"]
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _run_contracts(rows: list[dict[str, Any]], classes: list[Any], seed: int) -> str | None:
    try:
        from udm.host.testing import run_contract_checks
    except ImportError as exc:
        return f"the conformance kit (udm.host.testing.run_contract_checks) is not available: {exc}"
    for row, cls in zip(rows, classes, strict=True):
        if row["problems"]:
            continue
        try:
            results = run_contract_checks(cls, seed=seed)
        except Exception as exc:
            row["checks"] = [{"name": "conformance kit", "passed": False,
                              "detail": f"crashed: {type(exc).__name__}: {exc}", "seed": seed, "reproducer": ""}]
            continue
        row["checks"] = [{"name": r.name, "passed": bool(r.passed), "skipped": bool(getattr(r, "skipped", False)),
                          "detail": str(r.detail or ""), "seed": r.seed, "reproducer": str(r.reproducer or "")}
                         for r in results]
    return None


def _main(argv: list[str]) -> dict[str, Any]:
    wheel, seed, eps = Path(argv[0]), int(argv[1]), json.loads(argv[2])
    sys.path.insert(0, str(wheel))

    host = PluginHost()
    load_errors: list[str] = []
    for name, target in eps.items():
        try:
            obj = _import_attr(target)
        except Exception as exc:
            load_errors.append(f"entry point {name} = {target!r}: import failed: {type(exc).__name__}: {exc}")
            continue
        host.add_plugin(obj, name=name, distribution="(wheel)")
    load_errors += [str(e) for e in host.errors]
    classes = [reg.cls for reg in host.registrations]
    rows = [_check_one(reg.cls, reg.plugin, seed) for reg in host.registrations]
    kit_error = _run_contracts(rows, classes, seed)
    return {"udms": rows, "load_errors": load_errors, "kit_error": kit_error}


if __name__ == "__main__":
    try:
        result = _main(sys.argv[1:])
    except Exception as exc:  # reported as data: the parent turns it into a one-line error
        result = {"udms": [], "load_errors": [f"inspection crashed: {type(exc).__name__}: {exc}"],
                  "kit_error": None}
    sys.stdout.write("\n" + json.dumps(result, default=str) + "\n")
