"""Staff actions and their default keyboard and gamepad bindings: plain data.

Both the config schema (:mod:`kiosk.config`, which validates bindings) and the controls
(:mod:`kiosk.booth.controls`, which apply them) read these; this module imports nothing of the kiosk.
"""

from __future__ import annotations

#: Every action a binding may name. ``pick_face_N`` picks the N-th face (1-based).
ACTIONS: tuple[str, ...] = (
    "next_face",
    "prev_face",
    *(f"pick_face_{n}" for n in range(1, 10)),
    "toggle_swap",
    "toggle_enhance",
    "toggle_debug",
    "snapshot",
    "keepsake",
    "print_again",
    "quit",
)

#: Actions that repeat while a gamepad button is held.
REPEATING = frozenset({"next_face", "prev_face"})

#: glfw's standard gamepad button order (GLFW_GAMEPAD_BUTTON_*).
GAMEPAD_BUTTONS: tuple[str, ...] = (
    "A", "B", "X", "Y", "LEFT_BUMPER", "RIGHT_BUMPER", "BACK", "START", "GUIDE",
    "LEFT_THUMB", "RIGHT_THUMB", "DPAD_UP", "DPAD_RIGHT", "DPAD_DOWN", "DPAD_LEFT",
)  # fmt: skip

DEFAULT_KEYBOARD: dict[str, list[str]] = {
    "next_face": ["RIGHT", "PAGE_DOWN", "N"],
    "prev_face": ["LEFT", "PAGE_UP", "P"],
    **{f"pick_face_{n}": [str(n)] for n in range(1, 10)},
    "toggle_swap": ["SPACE", "S"],
    "toggle_enhance": ["E"],
    "toggle_debug": ["D", "F1"],
    "snapshot": ["F12"],
    # The visitor's own button: a photo to take home (keepsake.enabled; nothing happens when off).
    "keepsake": ["ENTER", "KP_ENTER"],
    # Staff: print the last kept photo once more (keepsake.print_command).
    "print_again": ["CTRL+P"],
    "quit": ["ESCAPE", "CTRL+SHIFT+Q"],
}

DEFAULT_GAMEPAD: dict[str, list[str]] = {
    "next_face": ["RIGHT_BUMPER", "DPAD_RIGHT"],
    "prev_face": ["LEFT_BUMPER", "DPAD_LEFT"],
    "toggle_swap": ["A"],
    "toggle_enhance": ["X"],
    "toggle_debug": ["BACK"],
    "snapshot": ["Y"],
    "keepsake": ["START"],
}
