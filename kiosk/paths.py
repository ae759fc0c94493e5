"""Where the kiosk finds what it ships (shaders, bundled configs) and where it keeps what it makes
(models, faces, caches), for an installed wheel, a systemd service and a source checkout alike.

Shipped files are package data inside ``kiosk/`` found through :mod:`importlib.resources`, so the
kiosk works from any directory with only the installed wheel. Writable places follow the XDG base
directories, or the folders systemd hands a service (``StateDirectory=`` → ``$STATE_DIRECTORY``,
``CacheDirectory=`` → ``$CACHE_DIRECTORY``).

This module imports nothing heavy: :func:`configure_numba_cache` must run before numba is imported.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

#: Folder name under the XDG data/cache homes.
APP_NAME = "faceswap-kiosk"
#: Distribution name (``pip install faceswap-kiosk``), for the version in the package metadata.
DIST_NAME = "faceswap-kiosk"

DATA_DIR_ENV = "KIOSK_DATA_DIR"
CACHE_DIR_ENV = "KIOSK_CACHE_DIR"
MODELS_DIR_ENV = "KIOSK_MODELS_DIR"
KEEPSAKE_DIR_ENV = "KIOSK_KEEPSAKE_DIR"

_PACKAGE_DIR = Path(__file__).resolve().parent
#: A config path starting with this names a file inside the kiosk package (``package:data/...``).
PACKAGE_PREFIX = "package:"


def package_file(*parts: str) -> Path:
    """A file shipped inside the ``kiosk`` package (``package_file("shaders", "frame.vert")``).

    The kiosk is installed as a plain folder (a wheel unpacked into site-packages, an editable
    install or a checkout on ``PYTHONPATH``), so the resource is a real path."""
    return Path(str(resources.files("kiosk").joinpath(*parts)))


def bundled_configs_dir() -> Path:
    """The folder of the configs shipped in the wheel (``kiosk/configs/``)."""
    return package_file("configs")


def bundled_config(name: str) -> Path:
    """``demo`` or ``default`` (the booth): the YAML file shipped in the wheel."""
    return bundled_configs_dir() / f"{name}.yaml"


def is_bundled_config(path: Path) -> bool:
    """True for a file in ``kiosk/configs/`` (also when reached through the ``configs/`` symlink)."""
    try:
        return path.resolve().parent == bundled_configs_dir().resolve()
    except OSError:
        return False


def checkout_root() -> Path | None:
    """The source checkout the kiosk runs from (editable install or ``PYTHONPATH``), else None."""
    root = _PACKAGE_DIR.parent
    pyproject = root / "pyproject.toml"
    try:
        if pyproject.is_file() and f'name = "{DIST_NAME}"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        pass
    return None


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var, "")
    base = Path(value) if value and Path(value).is_absolute() else Path.home() / fallback
    return base / APP_NAME


def data_dir() -> Path:
    """Where models and faces live for the bundled configs: ``$KIOSK_DATA_DIR``; the service's
    ``$STATE_DIRECTORY``; the checkout root when running from a source tree (its ``models/`` and
    ``faces/``); else ``$XDG_DATA_HOME/faceswap-kiosk`` (``~/.local/share/faceswap-kiosk``)."""
    for var in (DATA_DIR_ENV, "STATE_DIRECTORY"):
        value = os.environ.get(var, "").split(":")[0]
        if value:
            return Path(value).expanduser()
    root = checkout_root()
    if root is not None:
        return root
    return _xdg("XDG_DATA_HOME", ".local/share")


def keepsake_dir() -> Path:
    """Where visitors' keepsake photos are kept while they live: ``$KIOSK_KEEPSAKE_DIR`` (a tmpfs,
    for example), else ``keepsakes/`` in the state folder (:func:`data_dir`; the service's
    ``$STATE_DIRECTORY``, /var/lib/faceswap-kiosk)."""
    value = os.environ.get(KEEPSAKE_DIR_ENV, "")
    if value:
        return Path(value).expanduser()
    return data_dir() / "keepsakes"


def cache_dir() -> Path:
    """Where the kiosk may write caches: ``$KIOSK_CACHE_DIR``; the service's ``$CACHE_DIRECTORY``
    (``CacheDirectory=faceswap-kiosk`` → /var/cache/faceswap-kiosk); else
    ``$XDG_CACHE_HOME/faceswap-kiosk`` (``~/.cache/faceswap-kiosk``)."""
    for var in (CACHE_DIR_ENV, "CACHE_DIRECTORY"):
        value = os.environ.get(var, "").split(":")[0]
        if value:
            return Path(value).expanduser()
    return _xdg("XDG_CACHE_HOME", ".cache")


def configure_numba_cache() -> None:
    """Point numba's on-disk kernel cache at ``<cache_dir>/numba`` unless ``NUMBA_CACHE_DIR`` is set.

    numba caches next to the source (``__pycache__``) only where that is writable; an installed
    wheel's site-packages is root-owned at a booth, and the service's home may be read-only, so
    every start would compile the kernels again (seconds). Called when ``kiosk`` is imported,
    before anything imports numba (numba reads the variable once, at import)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    try:
        folder = str(cache_dir() / "numba")
    except (KeyError, RuntimeError, OSError):  # no home folder to derive it from: numba's own default
        return
    os.environ["NUMBA_CACHE_DIR"] = folder
    numba = sys.modules.get("numba")
    if numba is not None:  # imported before kiosk: its config already read the environment
        numba.config.CACHE_DIR = folder
