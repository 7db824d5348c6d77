"""The engine's layout stays one-way: no import cycle between its modules (counting imports inside
functions and under ``TYPE_CHECKING``, which only hide a cycle), and no private name imported across them."""

from __future__ import annotations

import ast
from pathlib import Path

import udm.host.engine as engine

ROOT = Path(engine.__file__).parent
PACKAGE = "udm.host.engine"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([PACKAGE, *parts])


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) for every import in the file, relative ones resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            # `from . import x` / `from .pkg import mod` may name submodules
            out.append((target, names))
            out.extend((f"{target}.{n}", []) for n in names)
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for target, _ in _imports(path):
            if target in modules and target != mod:
                graph[mod].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
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


def test_no_import_cycle_between_engine_modules() -> None:
    graph = _graph()
    assert len(graph) > 10, "the walk found the engine's modules"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_name_is_imported_across_engine_modules() -> None:
    modules = {_module_name(p) for p in ROOT.rglob("*.py")}
    bad = []
    for path in ROOT.rglob("*.py"):
        for target, names in _imports(path):
            if target in modules:
                bad += [f"{_module_name(path)} imports {target}.{n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
    assert bad == []
