"""The screen: a reachable X11/Wayland display, or at least offscreen (EGL) rendering.

Opening a GL context can hang or crash a process, so each probe runs in a subprocess with a timeout.
"""

from __future__ import annotations

import os
import subprocess

from kiosk.appliance.doctor.core import CheckResult, DoctorContext, Severity


def _run_python(ctx: DoctorContext, code: str, timeout_s: float = 15.0) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [ctx.python, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s:.0f} s"
    out = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return proc.returncode == 0, (out[-1] if out else f"exit code {proc.returncode}")


_GLFW_PROBE = """
import glfw, sys
errors = []
glfw.set_error_callback(lambda code, text: errors.append(text.decode() if isinstance(text, bytes) else str(text)))
if not glfw.init():
    print("glfw.init() failed: " + ("; ".join(errors) or "unknown error")); sys.exit(1)
m = glfw.get_primary_monitor()
mode = glfw.get_video_mode(m) if m else None
print(f"{mode.size.width}x{mode.size.height} @ {mode.refresh_rate} Hz" if mode else "no monitor reported")
glfw.terminate()
"""

_EGL_PROBE = """
import moderngl
ctx = moderngl.create_standalone_context(backend="egl")
print(ctx.info["GL_RENDERER"])
"""


def check_display(ctx: DoctorContext) -> list[CheckResult]:
    x11, wayland = os.environ.get("DISPLAY"), os.environ.get("WAYLAND_DISPLAY")
    if x11 or wayland:
        where = f"DISPLAY={x11}" if x11 else f"WAYLAND_DISPLAY={wayland}"
        ok, text = _run_python(ctx, _GLFW_PROBE)
        if ok:
            return [CheckResult("display", True, f"{where} reachable, primary monitor {text}")]
        return [
            CheckResult(
                "display",
                False,
                f"{where} is set but a window cannot be opened: {text}",
                "check the session is running (`systemctl status getty@tty1`, ~/.xsession.log of the kiosk user) "
                "and that this user may use it (same user as the session, or `xhost +SI:localuser:kiosk`)",
            )
        ]
    egl_ok, egl_text = _run_python(ctx, _EGL_PROBE)
    detail = "no display: neither DISPLAY nor WAYLAND_DISPLAY is set, so no window can open"
    if egl_ok:
        detail += f"; headless (EGL) rendering works ({egl_text}), so `kiosk run --headless` can run"
    else:
        detail += f"; headless (EGL) rendering fails too ({egl_text})"
    fix = (
        "on the booth, start the kiosk session (deploy/README.md: autologin + X on tty1), or run over SSH with "
        "DISPLAY=:0; for an offscreen run use `kiosk run --headless`"
    )
    if not egl_ok:
        fix += "; for headless rendering install Mesa's EGL: `sudo apt-get install libegl1 libgl1-mesa-dri`"
    # A booth needs a screen; --headless accepts an offscreen-only machine (CI, soak runs).
    severity: Severity = "warning" if (ctx.headless and egl_ok) else "error"
    return [CheckResult("display", False, detail, fix, severity)]
