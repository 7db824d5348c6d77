"""What the import-linter contracts (``make lint``, pyproject's ``[tool.importlinter]``) cannot see: imports
inside functions. Each one hid a cycle or a layer break once (issue 30); now one stays inside a function
only to keep a heavy or optional third-party module (`HEAVY`) off a start-up path, and says why in a
``# lazy:`` comment. Also: no private name is imported across modules, and no module cycle, counting the
imports inside functions and under ``TYPE_CHECKING`` (they only hide one)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import udm.host as host
import udm.registry as registry
import udm.sdk as sdk
import udm.templates as templates

#: Third-party modules worth keeping off a start-up path: optional extras (pyspark, pandas, matplotlib,
#: vega_datasets, playwright) or imports that cost tens of milliseconds (pyarrow and its readers, numpy,
#: pydantic, typer, rich, yaml, jinja2, markdown_it); and packaging (~5 ms: version parsing, which a
#: ``udm run`` whose query names no UDM never does — issue #26).
HEAVY = ("pyspark", "pandas", "pyarrow", "numpy", "pydantic", "matplotlib", "vega_datasets", "typer", "rich", "yaml",
         "jinja2", "markdown_it", "playwright", "packaging")

#: the packages checked, as (import name, folder); templates' sub-folders are project templates (data)
ROOTS = [("udm.sdk", Path(sdk.__file__).parent), ("udm.host", Path(host.__file__).parent),
         ("udm.registry", Path(registry.__file__).parent), ("udm.templates", Path(templates.__file__).parent)]

#: ``# lazy: <why>`` on the import's line, or above the run of import lines it stands in
_REASON = re.compile(r"#\s*lazy:\s*\S")
#: a line of an import statement (or a name of a parenthesized list of names it imports)
_IMPORT_LINE = re.compile(r"^\s*(from\s|import\s|\)|\w+(\s+as\s+\w+)?,\s*$)")
#: ``# lazy imports: pyspark, pandas — <why>`` once in a module, for every lazy import of those modules
_MODULE_REASON = re.compile(r"^#\s*lazy imports:\s*(?P<mods>[\w., ]+?)\s*(?:—|--|:)\s*\S", re.M)


@dataclass(frozen=True)
class Imp:
    module: str  # the importing module
    target: str  # what it imports (relative imports resolved)
    names: tuple[str, ...]
    line: int
    in_function: bool
    type_checking: bool


def _files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, folder in ROOTS:
        paths = folder.glob("*.py") if pkg == "udm.templates" else folder.rglob("*.py")
        for p in paths:
            parts = [x for x in p.relative_to(folder).with_suffix("").parts if x != "__init__"]
            out[".".join([pkg, *parts])] = p
    return out


def _imports(module: str, path: Path, text: str | None = None) -> list[Imp]:
    """Every import of ``module`` (its file ``path``, or ``text`` read as that file)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[Imp] = []

    def walk(node: ast.AST, in_function: bool, tc: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                walk(child, True, tc)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for c in child.body:
                    walk(ast.Module(body=[c], type_ignores=[]), in_function, True)
                for c in child.orelse:
                    walk(ast.Module(body=[c], type_ignores=[]), in_function, tc)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                out.append(Imp(module, target, tuple(a.name for a in child.names), child.lineno, in_function, tc))
            elif isinstance(child, ast.Import):
                out.extend(Imp(module, a.name, (), child.lineno, in_function, tc) for a in child.names)
            else:
                walk(child, in_function, tc)

    walk(ast.parse(path.read_text(encoding="utf-8") if text is None else text), False, False)
    return out


FILES = _files()
IMPORTS = {m: _imports(m, p) for m, p in FILES.items()}


def _first_party(imp: Imp) -> list[str]:
    """The checked modules ``imp`` depends on: for ``from package import name``, the submodule ``name``,
    or the package itself for a name it defines; else the target (or its longest module prefix)."""
    subs = [f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in FILES]
    cands = subs + ([imp.target] if len(subs) < len(imp.names) or not imp.names else [])
    found = []
    for cand in cands:
        while cand and cand not in FILES:
            cand = cand.rpartition(".")[0]
        if cand and cand != imp.module:
            found.append(cand)
    return found


def _heavy(target: str) -> bool:
    return any(target == h or target.startswith(h + ".") for h in HEAVY)


def _loads_heavy(module: str, seen: set[str] | None = None) -> bool:
    """Whether importing ``module`` imports a `HEAVY` module (through module-level imports)."""
    seen = set() if seen is None else seen
    if module in seen:
        return False
    seen.add(module)
    for imp in IMPORTS[module]:
        if imp.in_function or imp.type_checking:
            continue
        if _heavy(imp.target) or any(_loads_heavy(m, seen) for m in _first_party(imp)):
            return True
    return False


def _graph() -> dict[str, set[str]]:
    return {m: {t for imp in imps for t in _first_party(imp)} for m, imps in IMPORTS.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*stack[stack.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def _lazy_problems(module: str, text: str, imports: list[Imp]) -> list[tuple[int, str]]:
    """``(line, why)`` for each import inside a function of ``module`` (source ``text``) that is not allowed."""
    lines = text.splitlines()
    declared = {m.strip() for x in _MODULE_REASON.finditer(text) for m in x["mods"].split(",")}
    top_level = {i.target for i in imports if not i.in_function and not i.type_checking}
    return [(imp.line, why) for imp in imports
            if imp.in_function and (why := _lazy_problem(imp, lines, declared, top_level))]


def _lazy_problem(imp: Imp, lines: list[str], module_reasons: set[str], top_level: set[str]) -> str | None:
    """Why this import inside a function is not allowed (None: it is)."""
    k = imp.line - 1
    reason = bool(_REASON.search(lines[k]))
    while not reason and k > 0 and _IMPORT_LINE.match(lines[k]):
        k -= 1
        reason = bool(_REASON.search(lines[k]))
    declared = any(imp.target == m or imp.target.startswith(m + ".") for m in module_reasons)
    targets = _first_party(imp)
    if targets or imp.target.startswith("udm"):
        if not any(_loads_heavy(t) for t in targets):
            return f"imports {imp.target} inside a function, which loads nothing heavy: import it at module level"
        return None if reason or declared else f"imports {imp.target} inside a function without a '# lazy:' reason"
    if not _heavy(imp.target):
        return f"imports {imp.target} inside a function: only a heavy or optional module (HEAVY) may wait"
    if imp.target in top_level:
        return f"imports {imp.target} inside a function though the module imports it at module level"
    return None if reason or declared else f"imports {imp.target} lazily without a '# lazy: <why>' comment"


def test_the_walk_finds_every_package() -> None:
    for pkg, _ in ROOTS:
        assert sum(m == pkg or m.startswith(pkg + ".") for m in FILES) >= (3 if pkg != "udm.sdk" else 5), pkg
    assert "udm.host.engine.runner" in FILES and "udm.host.spark.stream_wire" in FILES


def test_no_import_cycle_between_modules() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_an_import_waits_inside_a_function_only_for_a_heavy_module_and_says_why() -> None:
    bad = [f"{module}:{line}: {why}" for module, path in FILES.items()
           for line, why in _lazy_problems(module, path.read_text(encoding="utf-8"), IMPORTS[module])]
    assert bad == []


@pytest.mark.parametrize(("source", "allowed"), [
    ("def f():\n    import json\n", False),  # light: belongs at module level
    ("def f():\n    import pyarrow.parquet as pq\n", False),  # heavy, but no reason given
    ("def f():\n    import pyarrow.parquet as pq  # lazy: parquet only when a Parquet file is read\n", True),
    ("# lazy imports: pyspark — Spark loads only when a job runs\ndef f():\n    from pyspark.sql import functions\n",
     True),
    ("import numpy as np\ndef f():\n    import numpy as np  # lazy: no\n", False),  # already at module level
    ("def f():\n    from udm.host.errors import UdmError  # lazy: no\n", False),  # first-party and light
    ("def f():\n    # lazy: the readers load pyarrow\n    from udm.host.io.jsonl import JsonlReader\n", True),
    ("def f():\n    from udm.host.io.jsonl import JsonlReader\n", False),  # heavy, but no reason given
    ("def f():\n    # lazy: the readers load pyarrow\n    from udm.host.io.jsonl import JsonlReader\n"
     "    from udm.host.io.tables import open_reader\n", True),  # one reason for a run of imports
    ("def f():\n    # lazy: the readers load pyarrow\n    from udm.host.io.jsonl import JsonlReader\n    x = 1\n"
     "    from udm.host.io.tables import open_reader\n", False),  # ... and only for that run
])
def test_the_lazy_rule_on_examples(source: str, allowed: bool) -> None:
    module = "udm.host.demo.example"  # (a module that does not exist: nothing imports it)
    problems = _lazy_problems(module, source, _imports(module, Path("example.py"), source))
    assert (problems == []) is allowed, problems


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [f"{imp.module}:{imp.line} imports {imp.target}.{n}" for imps in IMPORTS.values() for imp in imps
           if _first_party(imp) for n in imp.names if n.startswith("_") and not n.startswith("__")]
    assert bad == []


def test_the_architecture_page_pictures_the_contracts_layers_and_names_every_part() -> None:
    """docs/architecture.md's picture is the layers contract of pyproject.toml, line for line, and the page
    names every package and top-level module of udm.host."""
    import tomllib

    repo = Path(host.__file__).parent.parent
    contracts = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c["layers"] for c in contracts["contracts"] if c["type"] == "layers")
    page = (repo / "docs" / "architecture.md").read_text(encoding="utf-8")
    picture = page.split("## Layers", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert [re.split(r"\s{2,}", line)[0] for line in picture.splitlines()] == layers
    folder = Path(host.__file__).parent
    parts = [f"host/{p.name}" for p in folder.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()]
    assert len(parts) > 10
    assert [p for p in parts if f"`{p}" not in page] == []
