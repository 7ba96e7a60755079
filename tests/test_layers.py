"""The layout is the architecture, checked: ``record`` at the bottom (standard library only),
then ``engine`` (torch, never a UI library), ``viz`` (plotly, never torch or the engine), ``ui``
and ``app.py`` on top; no package imports one above it, and no module import cycle anywhere."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("record", "engine", "viz", "ui", "bench")
# What each package may import from this repository (its own modules aside).
MAY_IMPORT = {"record": set(), "engine": {"record"}, "viz": {"record"},
              "ui": {"record", "engine", "viz"}, "bench": {"record", "engine"}}
FORBIDDEN = {"record": {"torch", "numpy", "gradio", "plotly", "transformers"},
             "engine": {"gradio", "plotly"}, "viz": {"torch", "gradio", "transformers"}}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, module: str, known: set[str] | frozenset = frozenset()) -> set[str]:
    """Every module ``path`` imports (at any depth: a lazy import is an import too). ``from
    package import submodule`` imports the submodule, not the package's other names."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            subs = {f"{base}.{alias.name}" for alias in node.names}
            names.update(subs & known if subs <= known else subs | {base})
    return names


def test_no_package_imports_a_layer_above_it_or_a_library_it_must_not():
    problems = []
    for module, path in _modules().items():
        top = module.split(".")[0]
        for name in _imports(path, module):
            first = name.split(".")[0]
            if first in PACKAGES and first != top and first not in MAY_IMPORT[top]:
                problems.append(f"{module} imports {name}")
            if first in FORBIDDEN.get(top, ()):
                problems.append(f"{module} imports {first}")
    assert not problems, problems


def test_the_modules_import_no_cycle():
    modules = _modules()
    known = set(modules)
    graph = {m: {n for n in _imports(p, m, known) if n in modules and n != m}
             for m, p in modules.items()}
    seen: dict[str, int] = {}               # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in graph[node]:
            if seen.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [node, nxt])}")
            if nxt not in seen:
                visit(nxt, path + [node])
        seen[node] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [])
