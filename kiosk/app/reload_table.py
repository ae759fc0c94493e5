"""Live reload as a declared table: which part of a running kiosk each config key rebuilds.

:data:`RELOAD_TABLE` names every key of :class:`kiosk.config.KioskConfig` as ``section.key`` (a
nested section such as ``source.camera`` or ``models.providers`` is one key). :func:`plan_reload`
compares two configs and returns the parts to rebuild; :meth:`kiosk.app.reload.ConfigReload.apply`
rebuilds exactly those. A key that maps to no part is read where it is used (``ui.*``, the
snapshot settings, the status line), so the new value shows at the next frame without anything
being rebuilt. ``tests/test_reload_table.py`` fails when a config key is added without a row here.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Part(str, Enum):
    """What :meth:`~kiosk.app.reload.ConfigReload.apply` can rebuild in a running kiosk."""

    CAPTURE = "capture"  # the capture thread (and the live feed it drives), restarted
    LIBRARY = "library"  # the face library, rescanned from the new folder
    STAGE = "stage"  # the processing stage, rebuilt in the background (the old one runs until then)
    WINDOW = "window"  # the window/surface and the renderer, reopened
    LOOP = "loop"  # the render loop's options (frame pacing, stall and recovery bounds)
    INPUT = "input"  # key bindings and gamepad polling
    TOGGLES = "toggles"  # the staff toggles set from config (debug overlay, enhancer) reset to it
    MONITOR = "monitor"  # the Prometheus textfile writer
    LOG_LEVEL = "log_level"  # the root logger's level
    RESTART = "restart"  # not applied live: takes effect at the next start (a warning says so)


def _rows(section: str, keys: str, *parts: Part) -> dict[str, frozenset[Part]]:
    return {f"{section}.{k}": frozenset(parts) for k in keys.split()}


C, L, S, W, P = Part.CAPTURE, Part.LIBRARY, Part.STAGE, Part.WINDOW, Part.LOOP

#: ``section.key`` → the parts of a running kiosk rebuilt when that key changes.
RELOAD_TABLE: dict[str, frozenset[Part]] = {
    **_rows("source", "kind camera path synthetic image_fps mirror rotate", C),
    **_rows("source", "reconnect_initial_s reconnect_max_s", C),
    **_rows("display", "fullscreen monitor width height fit rotate vsync title text_scale", W),
    **_rows("display", "max_fps", P),
    # where faces are pasted: the stage pastes on the CPU or hands crops to the shader
    **_rows("display", "composite", S),
    # live mode: the capture thread runs the tracker, the stage always composites on the GPU, the
    # loop shows the newest camera frame; auto: the tracker runs too and the loop picks synced or
    # live per frame (kiosk/display_mode.py)
    **_rows("display", "mode", C, S, P),
    **_rows("display", "live_max_age_s live_track_px live_ring_mb", C),
    **_rows("processing", "enabled det_size det_threshold max_faces enhance_blend swap_resolution", S),
    **_rows("processing", "tracking detect_every roi_det_size smoothing_min_cutoff smoothing_beta", S),
    **_rows("processing", "hold_frames face_policy color_correction color_strength pipelined assign", S),
    **_rows("processing", "rebuild_after_errors load_stall_s", S),
    **_rows("processing", "stall_s", S, P),  # the stage's hang bound and the watchdog's gate
    **_rows("processing", "recovery_s", P),
    **_rows("processing", "enhance", S, Part.TOGGLES),
    **_rows("processing", "source_face", L, S),
    **_rows("mask", "shape padding feather mouth occlusion", S),
    **_rows(
        "models",
        "dir detector embedder swapper mesh accept_noncommercial_licence enhancer parser providers",
        S,
    ),
    **_rows("faces", "dir cache_dir rescan_s similar_size_ratio thumb_px", L, S),
    **_rows("ui", "carousel banner attract_after_s attract_title attract_lines attract_cycle_s"),
    **_rows("snapshots", "enabled dir retention_hours max_files"),
    **_rows("controls", "keyboard gamepad gamepad_enabled repeat_delay_s repeat_interval_s", Part.INPUT),
    **_rows("controls", "debounce_s", Part.INPUT),
    **_rows("controls", "allow_quit"),
    **_rows("overlay", "debug", Part.TOGGLES),
    **_rows("overlay", "status_line"),
    **_rows("logging", "level", Part.LOG_LEVEL),
    **_rows("logging", "file", Part.RESTART),
    **_rows("monitoring", "textfile interval_s", Part.MONITOR),
    # the on-screen flow, the photo page, the store's limits and printing read these where used
    **_rows("keepsake", "countdown_s show_s confirm event_name ttl_s max_photos max_mb keep_on_disk"),
    **_rows("keepsake", "cooldown_s takes_per_visitor"),
    **_rows("keepsake", "print_command print_timeout_s print_copies print_qr"),
    **_rows("keepsake", "frame frame_text consent clip"),
    # the web server, its address and the systemd unit's network rules (a drop-in from the config)
    **_rows("keepsake", "enabled listen url_base tls_cert tls_key allow", Part.RESTART),
    # the staff console's server, its PIN and the unit's network rules, like the keepsake server's
    **_rows("console", "enabled listen pin pin_file allow", Part.RESTART),
}


def changed_keys(old: Any, new: Any) -> list[str]:
    """The ``section.key`` names whose values differ between two configs, in table order."""
    out = []
    for key in RELOAD_TABLE:
        section, name = key.split(".", 1)
        if getattr(getattr(old, section), name) != getattr(getattr(new, section), name):
            out.append(key)
    return out


def plan_reload(old: Any, new: Any) -> frozenset[Part]:
    """The parts to rebuild when a running kiosk goes from config ``old`` to ``new``."""
    parts: set[Part] = set()
    for key in changed_keys(old, new):
        parts |= RELOAD_TABLE[key]
    return frozenset(parts)


#: How README and ``kiosk config`` name each part.
PART_TEXT: dict[Part, str] = {
    Part.CAPTURE: "capture thread",
    Part.LIBRARY: "face library",
    Part.STAGE: "processing stage",
    Part.WINDOW: "window and renderer",
    Part.LOOP: "render loop options",
    Part.INPUT: "key bindings and gamepads",
    Part.TOGGLES: "the staff toggle, set to the new value",
    Part.MONITOR: "metrics textfile writer",
    Part.LOG_LEVEL: "log level",
    Part.RESTART: "not live: applies at the next start",
}


def table_rows() -> list[tuple[str, str, str]]:
    """(section, keys, what is rebuilt) per section and distinct set of parts, in table order."""
    groups: dict[tuple[str, frozenset[Part]], list[str]] = {}
    for key, parts in RELOAD_TABLE.items():
        section, name = key.split(".", 1)
        groups.setdefault((section, parts), []).append(name)
    sections = [k[0] for k in groups]
    rows = []
    for (section, parts), names in groups.items():
        if sections.count(section) == 1:
            keys = "all"
        elif len(names) > 10:  # the section's bulk: the exceptions have their own rows
            keys = "all others"
        else:
            keys = ", ".join(names)
        what = (
            "; ".join(PART_TEXT[p] for p in Part if p in parts)
            or "nothing (read where used, at the next frame)"
        )
        rows.append((section, keys, what))
    return rows


def table_markdown() -> str:
    """The live-reload table of README.md (tests/test_reload_table.py keeps them in step)."""
    lines = ["| section | keys | what a change restarts or rebuilds |", "|---|---|---|"]
    lines += [f"| `{section}` | {keys} | {what} |" for section, keys, what in table_rows()]
    return "\n".join(lines) + "\n"
