"""The kiosk as an installed package: the wheel carries shaders and configs and runs from any folder;
``--version``, ``run --demo``, ``config init``; bundled configs resolve against the data folder;
numba kernels are cached in the kiosk's cache folder."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from pydantic import BaseModel

from kiosk import paths
from kiosk.cli import main
from kiosk.cli.config_init import PATH_KEYS, PRESETS, commented_config
from kiosk.config import KioskConfig, default_config_path, load_config
from kiosk.inference.sessions import ProviderOptions, provider_options

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------- the wheel


@pytest.mark.slow
def test_wheel_installs_and_runs_from_any_folder(tmp_path: Path) -> None:
    """scripts/check_wheel.sh --offline: sdist → wheel, a fresh venv holding only the wheel (its
    dependencies reused from .venv), then --version, the headless demo, config init/check and
    doctor --json from a folder outside the checkout."""
    work = tmp_path / "w"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check_wheel.sh"), "--offline", "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = work / "run"
    assert (run / "version.txt").read_text().strip() == f"kiosk {_version()}"

    # The demo really rendered: the room, the visitor, the banner, not a black frame (the script
    # itself checks that the face on it is the bundled source's, swapped on most frames).
    img = np.asarray(Image.open(run / "s.png").convert("RGB"), dtype=np.float32)
    assert img.shape == (720, 1280, 3)
    assert img.mean() > 40 and img.std() > 30
    assert len(np.unique(img.reshape(-1, 3)[::97], axis=0)) > 200  # a picture, not a flat fill
    json.loads((run / "doctor.json").read_text())
    assert load_config(run / "x.yaml").source.kind == "demo"

    # Everything the kiosk reads ships in the wheel, and a wheel built straight from the source
    # holds exactly the files of the one built from the sdist.
    from_sdist = next((work / "dist").glob("*.whl"))
    names = _names(from_sdist)
    for folder in ("shaders", "configs", "data/models", "data/demo"):
        for f in (ROOT / "kiosk" / folder).iterdir():
            assert f"kiosk/{folder}/{f.name}" in names
    direct = tmp_path / "direct"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(direct),
         str(work / "src")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert _names(next(direct.glob("*.whl"))) == names


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def _version() -> str:
    try:
        return importlib.metadata.version("faceswap-kiosk")
    except importlib.metadata.PackageNotFoundError:
        from kiosk import __version__

        return __version__


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"kiosk {_version()}"


def test_run_demo_and_config_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--demo", "--config", "x.yaml"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- configs


def test_bundled_configs_resolve_against_the_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.delenv(paths.MODELS_DIR_ENV, raising=False)
    demo = load_config(paths.bundled_config("demo"))
    assert demo.resolve(demo.models.dir) == tmp_path / "data" / "models"
    via_link = load_config(ROOT / "configs" / "demo.yaml")  # the checkout's configs/ is a link
    assert via_link.resolve(via_link.models.dir) == tmp_path / "data" / "models"
    booth = load_config(paths.bundled_config("default"))
    assert booth.faces.dir and booth.resolve(booth.faces.dir) == tmp_path / "data" / "faces"
    # A config of one's own keeps resolving against its own folder.
    own = tmp_path / "own" / "k.yaml"
    own.parent.mkdir()
    own.write_text("models: {dir: weights}\n")
    cfg = load_config(own)
    assert cfg.resolve(cfg.models.dir) == own.parent / "weights"
    monkeypatch.setenv(paths.MODELS_DIR_ENV, str(tmp_path / "m"))
    assert load_config(own).models.dir == str(tmp_path / "m")
    assert load_config(own, env=False).models.dir == "weights"


def test_data_and_cache_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (paths.DATA_DIR_ENV, paths.CACHE_DIR_ENV, "STATE_DIRECTORY", "CACHE_DIRECTORY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    assert paths.cache_dir() == tmp_path / "xc" / "faceswap-kiosk"
    monkeypatch.setenv("CACHE_DIRECTORY", "/var/cache/faceswap-kiosk")  # systemd CacheDirectory=
    assert paths.cache_dir() == Path("/var/cache/faceswap-kiosk")
    assert paths.data_dir() == ROOT  # running from this checkout
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/faceswap-kiosk")  # systemd StateDirectory=
    assert paths.data_dir() == Path("/var/lib/faceswap-kiosk")
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xd"))
    assert paths.data_dir() == tmp_path / "xd" / "faceswap-kiosk"


def test_default_config_is_the_bundled_booth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KIOSK_CONFIG", raising=False)
    if Path("/etc/faceswap-kiosk/kiosk.yaml").exists():
        pytest.skip("an installed booth config takes precedence here")
    assert default_config_path() == paths.bundled_config("default")
    assert default_config_path().is_file()


def _keys(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += _keys(ann, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", field.description or ""))
    return out


@pytest.mark.parametrize("preset", ["booth", "demo"])
def test_config_init_writes_every_key_commented(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(paths.MODELS_DIR_ENV, raising=False)
    target = tmp_path / "sub" / "x.yaml"
    assert main(["config", "init", str(target), f"--{preset}"]) == 0
    assert main(["config", "check", str(target)]) == 0
    text = target.read_text()
    lines = text.splitlines()
    line_of: dict[str, int] = {}
    stack: list[str] = []
    for i, ln in enumerate(lines):
        if not ln.strip() or ln.lstrip().startswith("#") or ":" not in ln:
            continue
        depth = (len(ln) - len(ln.lstrip())) // 2
        stack = [*stack[:depth], ln.strip().split(":", 1)[0]]
        line_of.setdefault(".".join(stack), i)
    for key, description in _keys(KioskConfig):
        assert key in line_of, key
        # The comment block right above the key: its description (first words) and default.
        block = []
        i = line_of[key] - 1
        while i >= 0 and lines[i].strip().startswith("#"):
            block.insert(0, lines[i].strip().lstrip("# "))
            i -= 1
        joined = " ".join(block)
        assert " ".join(description.split()[:4]) in joined and "Default:" in joined, (key, block)
    assert "Allowed: ≥160 ≤7680." in text and "Allowed: fit / fill." in text

    # Same values as the bundled preset, paths included: each resolves to the bundled config's
    # folder (the data folder), set in the preset or not (models.providers.trt_cache_dir).
    written = load_config(target)
    bundled = load_config(paths.bundled_config(PRESETS[preset]))
    for key in sorted(PATH_KEYS):
        mine, theirs = _value(written, key), _value(bundled, key)
        assert (mine is None) == (theirs is None), key
        if mine is not None:
            assert written.resolve(mine) == bundled.resolve(theirs), key
    # ... and where the kiosk puts TensorRT's engines, as ONNX Runtime is told:
    trt = [
        provider_options("tensorrt", ProviderOptions.of(c.models.providers), c.base_dir)
        for c in (written, bundled)
    ]
    assert trt[0]["trt_engine_cache_path"] == trt[1]["trt_engine_cache_path"]
    skip: dict[str, Any] = {}
    for key in PATH_KEYS:
        *sections, name = key.split(".")
        node = skip
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = True
    assert written.model_dump(exclude=skip) == bundled.model_dump(exclude=skip)

    # Never overwrites by accident.
    target.write_text("# mine\n")
    assert main(["config", "init", str(target)]) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert target.read_text() == "# mine\n"
    assert main(["config", "init", str(target), "--force"]) == 0
    assert load_config(target).display.fullscreen


def _value(cfg: BaseModel, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_every_path_key_is_rewritten_by_config_init() -> None:
    """A key named or described like a path (``dir``, ``*_dir``, ``path``, ``file``, "relative to the
    config") is one of config init's PATH_KEYS, so its preset value keeps pointing at the data folder."""
    pathlike = {
        key
        for key, description in _keys(KioskConfig)
        if key.rsplit(".", 1)[-1] in {"dir", "path", "file", "textfile"}
        or key.endswith("_dir")
        or "relative to the config" in description
    }
    assert "models.providers.trt_cache_dir" in pathlike
    assert pathlike == PATH_KEYS


def test_config_init_text_loads_by_itself() -> None:
    assert "kiosk config init --demo" in commented_config("demo")


# ------------------------------------------------------------------------------------- numba cache


@pytest.mark.slow
def test_numba_kernels_are_cached_in_the_kiosk_cache_dir(tmp_path: Path) -> None:
    """Set before numba compiles: the second process loads every kernel from the cache."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_CACHE_DIR", "KIOSK_CACHE_DIR", "CACHE_DIRECTORY")
    }
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = textwrap.dedent(
        """
        import json, os
        from kiosk.inference import kernels
        kernels.warm_up()
        fns = (kernels._hwc_to_planar, kernels._planar_to_bgr, kernels._blend_rgba)
        print(json.dumps({"dir": os.environ["NUMBA_CACHE_DIR"],
                          "hits": sum(sum(f.stats.cache_hits.values()) for f in fns),
                          "misses": sum(sum(f.stats.cache_misses.values()) for f in fns)}))
        """
    )
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    cache = tmp_path / "cache" / "faceswap-kiosk" / "numba"
    assert runs[0]["dir"] == str(cache)
    assert runs[0]["misses"] > 0 and list(cache.rglob("*.nbi"))
    assert runs[1]["misses"] == 0 and runs[1]["hits"] == runs[0]["misses"]


def test_shaders_are_package_data() -> None:
    from kiosk.render.shaders import shaders_dir

    if "KIOSK_SHADERS_DIR" in os.environ:
        pytest.skip("KIOSK_SHADERS_DIR is set")
    assert shaders_dir() == ROOT / "kiosk" / "shaders"
    assert not (ROOT / "shaders").exists()


def test_doctor_checks_the_kernel_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kiosk.appliance.doctor import check_cache, make_context

    cfg = tmp_path / "k.yaml"
    cfg.write_text("models: {dir: models}\n")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "kernels"))
    result = next(r for r in check_cache(make_context(cfg)) if r.name == "kernel-cache-writable")
    assert result.ok and str(tmp_path / "kernels") in result.detail
    blocked = tmp_path / "a-file"  # not a folder: no cache can be made below it, even as root
    blocked.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocked / "kernels"))
    result = next(r for r in check_cache(make_context(cfg)) if r.name == "kernel-cache-writable")
    assert not result.ok and "NUMBA_CACHE_DIR" in result.fix
