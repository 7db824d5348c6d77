"""Building a project directory into a wheel with the standard build frontend (``python -m build``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ._errors import RegistryError

__all__ = ["build_wheel"]

#: 1980-01-01, the earliest time a zip can hold. Fixed timestamps make rebuilding the same sources give
#: the same bytes where the backend honours SOURCE_DATE_EPOCH (setuptools' bdist_wheel does).
_EPOCH = "315532800"
_TIMEOUT_S = 900


def build_wheel(project: Path, out_dir: Path, *, isolation: bool = True) -> Path:
    """Build ``project`` (a directory with pyproject.toml) into ``out_dir``; return the wheel's path.

    With ``isolation`` the build backend is installed into a fresh environment by ``build`` (the standard,
    reproducible way; needs the package index); without it the current environment's backend is used,
    which works offline.
    """
    if not (project / "pyproject.toml").is_file():
        raise RegistryError(f"{project} is not a project directory: no pyproject.toml")
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir)]
    if not isolation:
        cmd.append("--no-isolation")
    cmd.append(str(project))
    env = {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", _EPOCH)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise RegistryError(f"building {project} took more than {_TIMEOUT_S}s") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()]
        reason = next((ln.strip() for ln in reversed(lines) if "ERROR" in ln or "Error" in ln),
                      lines[-1].strip() if lines else "no output")
        raise RegistryError(f"building {project} failed: {reason}")
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise RegistryError(f"building {project} produced {len(wheels)} wheels, expected 1")
    return wheels[0]
