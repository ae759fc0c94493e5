"""The console's status document, made by the kiosk from the frame's counters snapshot (the same
figures as the stats JSON): what the status page and ``GET /status.json`` show."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiosk.app.counters import staff_warnings

if TYPE_CHECKING:
    from kiosk.app.counters import Counters

#: What to do about a warning, by how its line begins (the first match wins).
_TODO: tuple[tuple[str, str], ...] = (
    ("source:", "Check the camera's cable and power; the kiosk reconnects by itself."),
    ("keepsake:", "Keepsakes need the web server: see the log (journalctl -u faceswap-kiosk)."),
    ("console:", "Check the console.* keys of the config and restart the kiosk."),
    ("processing stalled", "The kiosk shows the camera meanwhile; if it lasts, restart the kiosk."),
    ("processing slow", "The GPU is overloaded or missing: run kiosk doctor."),
    ("not run:", "Accept the models' licence in the config, or use the classic swap."),
    ("models", "Fetch the models: kiosk models fetch (then restart)."),
    ("snapshot", "Free disk space in the snapshot folder."),
    ("config", "Fix the config file (kiosk config check) and reload."),
)
_DEFAULT_TODO = "See kiosk doctor and the log (journalctl -u faceswap-kiosk)."


def plain_warning(line: str) -> dict[str, str]:
    """A staff warning and what to do about it."""
    low = line.lower()
    for start, todo in _TODO:
        if low.startswith(start) or start in low:
            return {"text": line, "todo": todo}
    return {"text": line, "todo": _DEFAULT_TODO}


def disk_figures(folders: dict[str, Path]) -> list[dict[str, Any]]:
    """Free and total space of each folder's file system (nearest existing parent)."""
    out = []
    for what, folder in folders.items():
        path = folder
        while not path.exists() and path != path.parent:
            path = path.parent
        try:
            usage = shutil.disk_usage(path)
        except OSError:
            continue
        out.append({"what": what, "free_gb": usage.free / 1e9, "total_gb": usage.total / 1e9})
    return out


def status_document(
    c: Counters,
    faces: list[dict[str, str]],
    extra: dict[str, Any],
    now_unix: float,
) -> dict[str, Any]:
    """The status from snapshot ``c``; ``faces``: the library's keys and names in carousel order;
    ``extra``: the host's own figures (counters, history, models, disk, keepsakes)."""
    return {
        "updated_unix": now_unix,
        "swapping": c.swap_enabled,
        "face": c.selected_face,
        "selected_index": c.selected_index,
        "faces": faces,
        "mode": c.active_mode,
        "display_mode": c.display_mode,
        "fps": {
            "render": round(c.render.fps_now, 2),
            "processing": round(c.processing.fps_now, 2),
            "capture": round(c.capture.fps_now, 2),
        },
        "swap_share_pct": c.screen.get("swapped_pct") if c.screen else None,
        "camera": {
            "description": c.capture.description,
            "state": c.capture.state,
            "last_error": c.capture.last_error,
        },
        "attract": c.attract,
        "warnings": [plain_warning(w) for w in staff_warnings(c)],
        **extra,
    }
