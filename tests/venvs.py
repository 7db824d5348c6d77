"""Throwaway virtualenvs for tests that install something (not a test module itself).

A child venv has no pip or packages of its own: a ``.pth`` file adds this environment's site-packages
(udmkit, pip, pydantic, ...), so ``pip install`` into it needs no network and what it installs stays out of
the project's ``.venv``.
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

__all__ = ["child_venv"]


def child_venv(where: Path, scripts: bool = False) -> Path:
    """Make the venv; return its ``python``. ``scripts``: also ``udm`` and ``pytest`` commands in its ``bin``
    (a reader's activated venv has them), run by its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    py = where / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_udmkit_parent_env.pth").write_text(f"import site; site.addsitedir({site.getsitepackages()[0]!r})\n")
    if scripts:
        for name, entry in (("udm", "from udm.host.cli.app import main"),
                            ("pytest", "from pytest import console_main as main")):
            script = where / "bin" / name
            script.write_text(f"#!{py}\nimport sys\n{entry}\nsys.exit(main())\n")
            script.chmod(0o755)
    return py
