"""What tests/conftest.py promises every test, each checked by running an inner pytest with it:

- a test using the ``ctx`` fixture fails when it leaves a GL error pending;
- the contract tests compare against insightface, which the ``test`` extra cannot install (it must
  go in with --no-deps: scripts/setup.sh). Where CI=true a test that skips for want of it fails, so
  a set-up without it can never pass CI by skipping them; elsewhere it skips saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import INSIGHTFACE_MISSING

HERE = Path(__file__).resolve().parent

GL_INNER = """
def test_leaves_a_gl_error(ctx):
    ctx.enable_direct(0xFFFF)  # glEnable(an invalid enum): GL_INVALID_ENUM, nothing raised

def test_clean(ctx):
    ctx.finish()

def test_without_ctx():
    pass
"""


@pytest.mark.gl
def test_a_gl_error_left_by_a_test_using_ctx_fails_it(ctx: object, tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(GL_INNER)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "3 passed, 1 error" in out, out
    assert "ERROR test_inner.py::test_leaves_a_gl_error" in out and "left the GL error GL_INVALID_ENUM" in out


INNER = """
import sys
import pytest
sys.modules["insightface"] = None  # as if it were not installed

def test_contract():
    pytest.importorskip("insightface.model_zoo.scrfd")

@pytest.fixture
def t1_photo():
    pytest.skip("insightface (test-only dependency) is not installed")

def test_uses_its_photo(t1_photo):
    pass

def test_unrelated_skip():
    pytest.skip("no camera here")
"""

INNER_MODULE = """
import pytest
import sys
sys.modules["insightface"] = None
pytest.importorskip("insightface.app.common")

def test_never_runs():
    pass
"""


def _run(tmp_path: Path, ci: str | None, text: str) -> str:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(text)
    env = {"PATH": "/usr/bin:/bin", **({"CI": ci} if ci is not None else {})}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    return proc.stdout + proc.stderr


def test_a_skip_for_want_of_insightface_fails_in_ci(tmp_path: Path) -> None:
    out = _run(tmp_path, "true", INNER)
    assert "1 failed, 1 skipped, 1 error" in out, out  # the fixture's skip is an error at set-up
    assert out.count(f"{INSIGHTFACE_MISSING} (CI=true") >= 2 and "test_inner.py:17: no camera here" in out
    out = _run(tmp_path, "true", INNER_MODULE)
    assert "ERROR collecting test_inner.py" in out and f"{INSIGHTFACE_MISSING} (CI=true" in out, out


def test_elsewhere_it_skips_saying_how_to_install_it(tmp_path: Path) -> None:
    out = _run(tmp_path, None, INNER)
    assert "3 skipped" in out and "failed" not in out, out
    assert out.count(f"{INSIGHTFACE_MISSING} (") == 2 and "no camera here" in out, out
    out = _run(tmp_path, "false", INNER_MODULE)
    assert "1 skipped" in out and f"{INSIGHTFACE_MISSING} (" in out, out
