"""Runs the code blocks of a Markdown page the way a reader would, in order, in one scratch directory
(not a test module itself: `tests/test_docs.py` runs it over README.md and docs/*.md).

What a block's fence says decides what happens to it (markdown-it-py finds the fences, as CommonMark does):

- ``bash`` / ``sh`` / ``shell``: run by bash (``-e -o pipefail``) as one shell session per page: the
  working directory and exported variables of a block carry over to the next, as in a terminal.
- ``python``: run in one Python interpreter per page (names defined by a block stay defined, as in a
  notebook), in the shell session's current directory.
- ``text output``: what the shell block just before it printed (stdout, then stderr), compared after
  `normalize` (run times and rates vary; nothing else may).
- any fence with ``file=NAME`` (``json file=events.jsonl``): its text is written to NAME first.
- ``json``, ``yaml``, ``jsonl``: parsed (every line of ``jsonl`` is one strict JSON value); a JSON or
  YAML document with ``steps`` is a query, which must bind (every UDM resolved, parameters checked). An
  event file a page writes (``file=*.jsonl``) is not checked: it may hold bad lines on purpose.
- anything else (``text``, no language): shown only.

A block that cannot run in a test carries, right above its fence, ``<!-- docs-test: skip REASON -->``;
the reason is required, and `tests/test_docs.py` keeps a count of them.

The page's session: ``HOME`` is the scratch directory (``~/udm-registry`` lands there), and the first
``PATH`` entry is a throwaway virtualenv that sees the project's packages through a ``.pth`` file, so a
block that ``pip install``s (``udm registry install``) never touches the project's ``.venv``; its ``udm``
and ``python`` are the ones a reader with the ``.venv`` activated would call.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from venvs import child_venv

__all__ = ["Block", "DocSession", "blocks", "normalize"]

SHELLS = ("bash", "sh", "shell")
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b\s*(.*?)\s*-->", re.DOTALL)


@dataclass
class Block:
    lang: str
    attrs: dict[str, str]
    words: tuple[str, ...]
    code: str
    line: int  # 1-based line of the opening fence
    skip: str | None = None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"line {self.line} ({self.lang or 'no language'})"


def blocks(markdown: str) -> list[Block]:
    """Every fenced block, with its language, its ``key=value`` attributes and the skip marker right above it."""
    from markdown_it import MarkdownIt

    out: list[Block] = []
    before: Any = None
    for tok in MarkdownIt("commonmark").parse(markdown):
        if tok.type == "fence":
            skip = None
            if before is not None and before.type == "html_block" and (m := _SKIP.search(before.content)):
                skip = m.group(1)
                if not skip:
                    raise ValueError(f"line {tok.map[0]}: a docs-test skip marker needs a reason")
            words = tuple(shlex.split(tok.info)) if tok.info.strip() else ()
            assert tok.map is not None
            out.append(Block(words[0] if words else "", dict(w.split("=", 1) for w in words[1:] if "=" in w),
                             tuple(w for w in words[1:] if "=" not in w), tok.content, tok.map[0] + 1, skip))
        if tok.nesting >= 0:  # (a closing tag does not separate a marker from the fence after it)
            before = tok
    return out


_SECONDS = re.compile(r"\b\d+\.\d+s\b|(?<=\"seconds\": )[\d.e-]+")
_RATE = re.compile(r"\b[\d,.]+ el/s\b")


def normalize(text: str) -> str:
    """Output with what varies from run to run replaced: run times (``0.03s``, ``"seconds": 0.03``) and rates
    (``1,234 el/s``)."""
    text = _SECONDS.sub("<secs>", text)
    text = _RATE.sub("<rate> el/s", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


_DRIVER = r"""
import io, json, os, sys, traceback
ns = {"__name__": "__main__"}
for line in sys.stdin:
    req = json.loads(line)
    os.chdir(req["cwd"])
    try:
        exec(compile(req["code"], req["name"], "exec"), ns)
        res = {"ok": True}
    except BaseException:
        res = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush(); sys.stderr.flush()
    print("\x00" + json.dumps(res), flush=True)
"""


@dataclass
class DocSession:
    """One page's scratch directory, shell session and Python interpreter."""

    root: Path
    timeout: float = 900
    cwd: Path = field(init=False)
    env: dict[str, str] = field(init=False)
    last_output: str | None = field(init=False, default=None)
    _py: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.cwd = self.root
        bin_dir = child_venv(self.root.parent / f"{self.root.name}-venv", scripts=True).parent
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("UDM_", "PYTEST_", "COV_"))}
        self.env.update({"HOME": str(self.root), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                         "COLUMNS": "100", "TERM": "dumb", "PYSPARK_PYTHON": str(bin_dir / "python"),
                         "PYSPARK_DRIVER_PYTHON": str(bin_dir / "python"), "VIRTUAL_ENV": str(bin_dir.parent)})
        self.env.pop("PYTHONPATH", None)
        self._state = self.root.parent / f"{self.root.name}-shell"
        self._state.mkdir(exist_ok=True)

    # ------------------------------------------------------------------ blocks
    def run(self, block: Block) -> None:
        """Run (or check) one block; AssertionError naming the block when it fails."""
        if "file" in block.attrs:
            (self.cwd / block.attrs["file"]).write_text(block.code)
        if block.lang in SHELLS:
            self._shell(block)
        elif block.lang == "python":
            self._python(block)
        elif block.lang == "text" and "output" in block.words:
            assert self.last_output is not None, f"{block.where}: an output block with no shell block before it"
            got, want = normalize(self.last_output), normalize(block.code)
            assert got == want, f"{block.where}: the command printed\n{got}\n--- the page shows\n{want}"
        elif block.lang in ("json", "yaml", "jsonl") and not block.attrs.get("file", "").endswith(".jsonl"):
            self._data(block)  # (an event file written for the page may hold bad lines on purpose)

    def _shell(self, block: Block) -> None:
        env_file, cwd_file = self._state / "env", self._state / "cwd"
        script = (f"{'source ' + shlex.quote(str(env_file)) if env_file.exists() else ''}\n"
                  f"trap 'export -p > {shlex.quote(str(env_file))}; pwd > {shlex.quote(str(cwd_file))}' EXIT\n"
                  "set -e -o pipefail\n" + block.code)
        proc = subprocess.run(["bash", "-c", script], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=self.timeout, check=False)
        self.last_output = proc.stdout + proc.stderr
        assert proc.returncode == 0, (f"{block.where} exited with {proc.returncode}:\n{block.code}\n"
                                      f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
        if cwd_file.exists():
            self.cwd = Path(cwd_file.read_text().strip())

    def _python(self, block: Block) -> None:
        if self._py is None:
            self._py = subprocess.Popen([str(Path(self.env["PATH"].split(os.pathsep)[0]) / "python"), "-c", _DRIVER],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=self.env, cwd=self.root)
        proc = self._py
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"code": block.code, "cwd": str(self.cwd), "name": block.where}) + "\n")
        proc.stdin.flush()
        printed = []
        for line in proc.stdout:
            if line.startswith("\x00"):
                res = json.loads(line[1:])
                break
            printed.append(line)
        else:
            raise AssertionError(f"{block.where}: the interpreter died:\n{''.join(printed)[-3000:]}")
        self.last_output = "".join(printed)
        assert res["ok"], (f"{block.where} raised:\n{block.code}\n--- printed\n{self.last_output[-2000:]}\n"
                           f"{res['error']}")

    def _data(self, block: Block) -> None:
        import yaml

        if block.lang == "jsonl":
            for i, line in enumerate(block.code.splitlines()):
                if line.strip():
                    try:
                        json.loads(line, parse_constant=_refuse)
                    except ValueError as exc:
                        raise AssertionError(f"{block.where}, its line {i + 1} is not strict JSON: {exc}") from None
            return
        try:
            doc = json.loads(block.code, parse_constant=_refuse) if block.lang == "json" else yaml.safe_load(block.code)
        except (ValueError, yaml.YAMLError) as exc:
            raise AssertionError(f"{block.where} does not parse: {exc}") from None
        if isinstance(doc, dict) and "steps" in doc:  # a query: read as `udm run` reads a query file
            from udm.host.model.plan import bind
            from udm.host.model.spec import load_query

            spec = self._state / f"query-line-{block.line}.{block.lang}"
            spec.write_text(block.code)
            try:
                bind(load_query(spec))
            except Exception as exc:
                raise AssertionError(f"{block.where} is not a query udm accepts: {exc}") from None

    def close(self) -> None:
        if self._py is not None:
            assert self._py.stdin is not None
            self._py.stdin.close()
            try:
                self._py.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._py.kill()
            self._py = None


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
