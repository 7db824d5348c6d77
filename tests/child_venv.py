"""A throwaway virtualenv for tests that really install something with pip."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

__all__ = ["make_venv"]


def make_venv(where: Path) -> Path:
    """A venv that sees this environment's packages (udmkit, pip, pydantic...) through a .pth file, so
    installing into it needs no network and leaves the project's .venv untouched; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    py = where / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = site.getsitepackages()[0]
    Path(purelib, "_udmkit_parent_env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return py
