"""Python packages: installed, the right versions, and importable (a broken wheel shows up here)."""

from __future__ import annotations

import importlib
import importlib.metadata
import re

from kiosk import PROJECT_ROOT
from kiosk.appliance.doctor.core import CheckResult, DoctorContext, venv_pip
from kiosk.util.errors import one_line

#: Distribution name → module to import, where they differ.
_IMPORT_NAMES = {
    "opencv-python-headless": "cv2",
    "opencv-python": "cv2",
    "onnxruntime-gpu": "onnxruntime",
    "pyyaml": "yaml",
    "pillow": "PIL",
}
#: Used when neither the installed metadata nor pyproject.toml can be read.
_FALLBACK_REQUIREMENTS = (
    "numpy>=1.26",
    "opencv-python-headless>=4.8",
    "onnxruntime-gpu>=1.17",
    "onnx>=1.15",
    "moderngl>=5.10",
    "glfw>=2.6",
    "numba>=0.59",
    "pydantic>=2.6",
    "PyYAML>=6.0",
    "Pillow>=10.1",
    "aiohttp>=3.9",
)


def _requirements() -> list[str]:
    try:
        reqs = importlib.metadata.requires("faceswap-kiosk")
        if reqs:
            return [r for r in reqs if "extra ==" not in r]
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = PROJECT_ROOT / "pyproject.toml"
    try:
        import tomllib

        return list(tomllib.loads(pyproject.read_text())["project"]["dependencies"])
    except (ImportError, OSError, KeyError, ValueError):
        return list(_FALLBACK_REQUIREMENTS)


def _version_ok(installed: str, spec: str) -> bool:
    try:
        from packaging.specifiers import SpecifierSet

        return not spec or SpecifierSet(spec).contains(installed, prereleases=True)
    except ImportError:  # packaging absent: presence is all we can say
        return True
    except Exception:
        return True


def check_packages(ctx: DoctorContext) -> list[CheckResult]:
    problems: list[str] = []
    found: list[str] = []
    pip = venv_pip(ctx)
    to_install: list[str] = []
    for req in _requirements():
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*([^;]*)", req)
        if not m:
            continue
        dist, spec = m.group(1), m.group(2).strip()
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{dist} is not installed")
            to_install.append(req.split(";")[0].strip())
            continue
        if not _version_ok(version, spec):
            problems.append(f"{dist} {version} is too old or too new (needs {spec})")
            to_install.append(req.split(";")[0].strip())
            continue
        module = _IMPORT_NAMES.get(dist.lower(), dist.lower().replace("-", "_"))
        try:
            importlib.import_module(module)
        except Exception as exc:  # installed but broken (missing system library, ABI mismatch)
            problems.append(f"{dist} {version} is installed but `import {module}` fails: {one_line(exc)}")
            to_install.append(req.split(";")[0].strip())
            continue
        found.append(f"{dist} {version}")
    results = []
    if problems:
        results.append(
            CheckResult(
                "python-packages",
                False,
                "; ".join(problems),
                f"{pip} install --upgrade " + " ".join(f"'{r}'" for r in to_install),
            )
        )
    else:
        results.append(CheckResult("python-packages", True, f"{len(found)} required packages import fine"))
    # Both onnxruntime wheels in one environment: the CPU one shadows the GPU providers.
    try:
        importlib.metadata.version("onnxruntime")
        importlib.metadata.version("onnxruntime-gpu")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        results.append(
            CheckResult(
                "onnxruntime-wheels",
                False,
                "both onnxruntime (CPU only) and onnxruntime-gpu are installed; they overwrite each other",
                f"{pip} uninstall -y onnxruntime onnxruntime-gpu && {pip} install onnxruntime-gpu",
                "warning",
            )
        )
    return results
