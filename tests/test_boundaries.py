"""Package boundaries: which parts of the kiosk may import which.

- ``kiosk/config/`` (the schema, its loading and reference) depends on no feature module: only the plain modules
  ``kiosk.bindings``, ``kiosk.util.options`` and ``kiosk.paths`` (and the standard library and third-party packages).
- No module of ``kiosk/inference/`` or ``kiosk/render/`` imports ``kiosk.config`` or ``kiosk.booth``:
  they take plain option records (``ProviderOptions``, ``DisplayOptions``, ...).

Imports are read from the source (every ``import``/``from`` statement, also inside functions and
``TYPE_CHECKING`` blocks), so a lazy import cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

KIOSK = Path(__file__).resolve().parents[1] / "kiosk"

CONFIG_MAY_IMPORT = {"kiosk.bindings", "kiosk.util.options", "kiosk.util.files", "kiosk.paths"}
#: The package itself (``kiosk/__init__.py``: the version and the project root) is neutral.
NEUTRAL = {"kiosk"}
FORBIDDEN_FOR_FEATURES = ("kiosk.config", "kiosk.booth")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(KIOSK.parent).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            # ``from kiosk import config`` imports the module kiosk.config (a name that is a module)
            out.update(f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}"))
    return out


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (KIOSK.parent / rel.with_suffix(".py")).is_file() or (KIOSK.parent / rel / "__init__.py").is_file()


def _is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_imported_modules_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    pkg = KIOSK / "render"
    probe = pkg / "_probe_boundaries.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kiosk.config import DisplayConfig\n"
        "def f():\n    from ..booth import faces\n    import kiosk.config\n"
        "from kiosk import config\n",
        encoding="utf-8",
    )
    try:
        mods = imported_modules(probe)
    finally:
        probe.unlink()
    assert {"kiosk.config", "kiosk.booth", "kiosk.booth.faces"} <= mods


def test_config_imports_no_feature_module() -> None:
    kiosk_imports = {
        m
        for path in (KIOSK / "config").rglob("*.py")
        for m in imported_modules(path)
        if _is_under(m, "kiosk") and not _is_under(m, "kiosk.config")
    }
    allowed = CONFIG_MAY_IMPORT | NEUTRAL
    assert kiosk_imports <= allowed, sorted(kiosk_imports - allowed)


def test_inference_and_render_do_not_import_config_or_booth() -> None:
    offenders = []
    for sub in ("inference", "render"):
        for path in sorted((KIOSK / sub).rglob("*.py")):
            for mod in imported_modules(path):
                if any(_is_under(mod, bad) for bad in FORBIDDEN_FOR_FEATURES):
                    offenders.append(f"{path.relative_to(KIOSK.parent)} imports {mod}")
    assert not offenders, "\n".join(offenders)


def test_plain_data_modules_import_nothing_of_the_kiosk() -> None:
    for name in CONFIG_MAY_IMPORT:
        path = KIOSK.parent / (name.replace(".", "/") + ".py")
        assert not {m for m in imported_modules(path) if _is_under(m, "kiosk")} - NEUTRAL, name


def test_the_running_kiosk_does_not_import_the_tools() -> None:
    """``kiosk/tools/`` (bench, stand-in generators, README pictures) is not part of the running
    kiosk: nothing outside it imports it (the CLI registers ``kiosk bench`` by module name, loaded
    only when that command is parsed)."""
    offenders = []
    for path in sorted(KIOSK.rglob("*.py")):
        if "tools" in path.relative_to(KIOSK).parts:
            continue
        offenders += [
            f"{path.relative_to(KIOSK.parent)} imports {m}"
            for m in imported_modules(path)
            if _is_under(m, "kiosk.tools")
        ]
    assert not offenders, "\n".join(offenders)


def test_benchmarks_import_no_test_module() -> None:
    """``benchmarks/`` runs from the package (``kiosk.tools.motion_videos``, ``kiosk.tools.standins``),
    never from a module of ``tests/`` put on ``sys.path``."""
    repo = KIOSK.parent
    test_modules = {p.stem for p in (repo / "tests").glob("*.py")}
    offenders = []
    for path in sorted((repo / "benchmarks").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "tests":
                offenders.append(f"{path.name}:{node.lineno}: puts tests/ on the path")
        offenders += [
            f"{path.name} imports {m} (tests/{m.split('.')[0]}.py)"
            for m in imported_modules(path)
            if m.split(".")[0] in test_modules
        ]
    assert not offenders, "\n".join(offenders)
