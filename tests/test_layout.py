"""The package's shape (issue 17's bounds), measured on the source so a regrowth is caught here:

- no module of ``kiosk/`` over 700 lines and no class over 300 (a class's lines from its
  ``class`` line to its last);
- at most 10 modules at the top of ``kiosk/`` (the rest lives in the packages that name their part);
- no import circle between the kiosk's modules, counting every import: lazy ones inside functions
  and ``TYPE_CHECKING`` ones as well (a circle there is still a circle for whoever reads the code).
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_boundaries import KIOSK, imported_modules

MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 300
MAX_TOP_LEVEL_MODULES = 10


def _module_name(path: Path) -> str:
    parts = path.relative_to(KIOSK.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(KIOSK.rglob("*.py"))}


def test_no_module_over_700_lines_and_no_class_over_300() -> None:
    too_long = []
    for name, path in _sources().items():
        text = path.read_text(encoding="utf-8")
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {n} lines (module bound {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(f"{name}.{node.name}: {lines} lines (class bound {MAX_CLASS_LINES})")
    assert not too_long, "split by responsibility:\n" + "\n".join(too_long)


def test_few_modules_at_the_top_of_the_package() -> None:
    top = sorted(p.name for p in KIOSK.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def _resolve(name: str, modules: set[str]) -> str | None:
    """The kiosk module an imported name lives in (``kiosk.a.b.Name`` → ``kiosk.a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    circles.append(sorted(part))
    return circles


def kiosk_import_graph() -> dict[str, set[str]]:
    sources = _sources()
    modules = set(sources)
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        found = {
            _resolve(m, modules) for m in imported_modules(path) if m == "kiosk" or m.startswith("kiosk.")
        }
        graph[name] = {m for m in found if m is not None and m != name}
    return graph


def test_import_circles_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_no_import_circle_between_kiosk_modules() -> None:
    circles = import_circles(kiosk_import_graph())
    assert not circles, "import circles:\n" + "\n".join(" ↔ ".join(c) for c in circles)
