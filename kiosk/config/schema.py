"""The config schema: every section of the YAML file as a frozen pydantic model.

Every section is a frozen pydantic model with ``extra="forbid"``, bounds and a description
per field. :func:`load_config` returns a :class:`KioskConfig` or raises :class:`ConfigError`
whose ``problems`` are one-line messages of the form ``file:line: key.path: message``.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kiosk.bindings import ACTIONS, DEFAULT_GAMEPAD, DEFAULT_KEYBOARD, GAMEPAD_BUTTONS
from kiosk.config.console import ConsoleConfig
from kiosk.config.sections import Section, default_allow, host_port, networks
from kiosk.paths import PACKAGE_PREFIX, package_file

Rotation = Literal[0, 90, 180, 270]
ProviderName = Literal["tensorrt", "cuda", "cpu"]


def _default_providers() -> list[ProviderName]:
    return ["cuda", "cpu"]


_Section = Section


class CameraConfig(_Section):
    device: int | str = Field(0, description="Camera index (0, 1, ...) or device path such as /dev/video0.")
    width: int = Field(1280, ge=160, le=7680, description="Requested capture width in pixels.")
    height: int = Field(720, ge=120, le=4320, description="Requested capture height in pixels.")
    fps: float = Field(30.0, gt=0, le=240, description="Requested capture rate in frames per second.")
    fourcc: str | None = Field(
        "MJPG",
        description="Four-character pixel format to request (MJPG, YUYV, ...); null keeps the driver's.",
    )

    @field_validator("fourcc")
    @classmethod
    def _fourcc_len(cls, v: str | None) -> str | None:
        if v is not None and len(v) != 4:
            raise ValueError("must be exactly four characters, e.g. MJPG")
        return v


class SyntheticConfig(_Section):
    width: int = Field(1280, ge=64, le=7680, description="Width of the generated pattern in pixels.")
    height: int = Field(720, ge=64, le=4320, description="Height of the generated pattern in pixels.")
    fps: float = Field(30.0, gt=0, le=240, description="Rate at which pattern frames are produced.")


class SourceConfig(_Section):
    kind: Literal["camera", "video", "image", "synthetic", "demo"] = Field(
        "camera",
        description="Where frames come from; demo: the bundled public-domain visitor photo, animated "
        "(walks in, turns a little, leaves).",
    )
    camera: CameraConfig = Field(default_factory=CameraConfig)  # type: ignore[arg-type]
    path: str | None = Field(None, description="Video or image file, for kind video/image.")
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)  # type: ignore[arg-type]
    image_fps: float = Field(
        30.0, gt=0, le=240, description="Rate at which a still image (kind image) is delivered."
    )
    mirror: bool = Field(True, description="Flip horizontally, so visitors see themselves as in a mirror.")
    rotate: Rotation = Field(0, description="Rotate captured frames clockwise by this many degrees.")
    reconnect_initial_s: float = Field(
        0.5, gt=0, le=60, description="First retry delay after a source fails."
    )
    reconnect_max_s: float = Field(
        5.0, gt=0, le=600, description="Longest retry delay (exponential back-off)."
    )


class DisplayConfig(_Section):
    fullscreen: bool = Field(False, description="Fullscreen on `monitor` (booth) or a window (desk).")
    monitor: int = Field(0, ge=0, le=16, description="Index of the monitor used in fullscreen.")
    width: int = Field(
        1280, ge=160, le=7680, description="Window width (windowed mode, headless render size)."
    )
    height: int = Field(
        720, ge=120, le=4320, description="Window height (windowed mode, headless render size)."
    )
    fit: Literal["fit", "fill"] = Field(
        "fit", description="fit: letterbox the whole frame; fill: crop to fill."
    )
    rotate: Rotation = Field(0, description="Rotate the picture on screen clockwise (portrait screens).")
    vsync: bool = Field(True, description="Wait for the display's vertical sync when presenting.")
    title: str = Field("faceswap-kiosk", description="Window title.")
    max_fps: float = Field(
        60.0,
        ge=0,
        le=1000,
        description="Cap on the render rate when not paced by vsync (headless); 0: no cap.",
    )
    composite: Literal["gpu", "cpu"] = Field(
        "gpu",
        description="Where swapped faces are pasted onto the camera picture: gpu (composite shader) or cpu.",
    )
    text_scale: float = Field(1.0, gt=0.1, le=10, description="Multiplier for on-screen text size.")
    mode: Literal["auto", "synced", "live"] = Field(
        "synced",
        description="synced: show the frame the faces were computed on (latency = model time); live: show "
        "the newest camera frame, swapped faces carried onto it by a keypoint tracker (always GPU composite); "
        "auto: synced while processing keeps up with the camera, live when it falls behind (docs/live-mode.md).",
    )
    live_max_age_s: float = Field(
        0.0,
        ge=0,
        le=60,
        description="live: a carried swap older than this shows the visitor's real face until the next "
        "result; 0: automatic, a few measured result periods (docs/live-mode.md).",
    )
    live_track_px: int = Field(
        320, ge=96, le=1920, description="live: width of the grey image the keypoint tracker runs on."
    )
    live_ring_mb: float = Field(
        64.0,
        ge=1,
        le=1024,
        description="live: most memory (MB) for the ring of recent grey frames a result is carried "
        "forward through; the ring holds the oldest measured result age x1.5 + 1 s, at least 5 s, "
        "within this (docs/live-mode.md).",
    )


class ProvidersConfig(_Section):
    order: list[ProviderName] = Field(
        default_factory=_default_providers,
        min_length=1,
        description="ONNX Runtime providers in order of preference; unusable ones fall back (logged loudly).",
    )
    device_id: int = Field(0, ge=0, le=15, description="GPU index for CUDA/TensorRT.")
    intra_op_threads: int = Field(
        0, ge=0, le=256, description="Threads per session (0: ONNX Runtime decides)."
    )
    trt_cache_dir: str = Field("models/trt_cache", description="TensorRT engine cache folder.")
    trt_fp16: bool = Field(
        True,
        description="Build TensorRT engines in fp16; set false (fp32 engines) on cards where swapped faces "
        "flicker or show artefacts in fp16.",
    )
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = Field(
        "HEURISTIC", description="cuDNN convolution algorithm search for the CUDA provider."
    )
    iobinding: bool = Field(
        True,
        description="Run models through ONNX Runtime IOBinding with preallocated input/output buffers "
        "(fixed device buffers on a GPU): no per-frame allocation.",
    )
    cuda_graph: bool = Field(
        False,
        description="Capture the fixed-shape swapper in a CUDA graph (cuda/tensorrt providers only; "
        "needs iobinding). Ignored on the CPU.",
    )
    warmup: bool = Field(
        True,
        description="Run every model once on zeros when the models load (builds TensorRT engines, "
        "picks cuDNN algorithms, compiles kernels), so the first visitor sees no stall.",
    )


class ModelsConfig(_Section):
    dir: str = Field("models", description="Folder holding the model files (relative to the config file).")
    detector: str = Field(
        "auto",
        description="Face detector (SCRFD/RetinaFace/YuNet) file or path; auto: det_10g.onnx for the neural "
        "swap, the YuNet bundled in the package (MIT, nothing to download) for the classic swap.",
    )
    embedder: str = Field(
        "w600k_r50.onnx", description="ArcFace embedder file or path (not used by the classic swap)."
    )
    swapper: str = Field(
        "classic",
        description="classic: the library photo's own face, posed by the five keypoints and moved with the visitor's mouth and eyes along the face mesh (models.mesh), no weights (MIT); "
        "an InSwapper file or path (inswapper_128.onnx: non-commercial weights, needs "
        "accept_noncommercial_licence); auto: InSwapper when accept_noncommercial_licence is true and it, "
        "the embedder (and, with detector auto, det_10g.onnx) are in models.dir, else classic.",
    )
    mesh: str | None = Field(
        "package:data/models/face_mesh_468.onnx",
        description="Dense face mesh of the classic swap (the default: package:data/models/face_mesh_468.onnx, "
        "MediaPipe Face Mesh, 468 points, Apache-2.0, bundled): the photo's face keeps its shape and is warped "
        "triangle by triangle so its mouth opens and its eyes close with the visitor's, with the visitor's own "
        "eyes and the inside of its mouth; null: the 5-point swap (the photo's expression, frozen).",
    )
    accept_noncommercial_licence: bool = Field(
        False,
        description="This booth accepts the non-commercial licence of InsightFace's weights (InSwapper, "
        "w600k_r50, det_10g...) and GPEN's: without it a config naming one fails kiosk config check, the "
        "kiosk shows a notice instead of running it, and swapper auto stays classic.",
    )
    enhancer: str | None = Field(
        "GFPGANv1.4.onnx",
        description="Enhancer file or path: GFPGANv1.4.onnx, or GPEN-BFR-256.onnx / GPEN-BFR-512.onnx "
        "(faster, non-commercial weights); null disables it.",
    )
    parser: str = Field(
        "bisenet_resnet_34.onnx",
        description="Face parsing model (BiSeNet, 19 CelebAMask-HQ classes) for mask.occlusion; "
        "bisenet_resnet_18.onnx is ~0.6x the compute. Fetched only when mask.occlusion is on.",
    )
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)  # type: ignore[arg-type]


class ProcessingConfig(_Section):
    enabled: bool = Field(True, description="Run the face pipeline; false shows the camera unchanged.")
    source_face: str | None = Field(
        None, description="Image of the face to swap in (relative to the config file)."
    )
    det_size: int = Field(640, ge=128, le=1920, multiple_of=32, description="Detector input size (square).")
    det_threshold: float = Field(0.5, ge=0.05, le=0.99, description="Minimum face score.")
    max_faces: int = Field(4, ge=1, le=32, description="Most faces swapped per frame.")
    enhance: bool = Field(False, description="Restore swapped faces with GFPGAN.")
    enhance_blend: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Strength of the enhancer: the enhanced crop blended over the swapped one (0..1).",
    )
    swap_resolution: Literal[128, 256, 512] = Field(
        128,
        description="Swapped face crop size: 256/512 run the 128 px swapper on 2x2/4x4 sub-pixel "
        "shifted samplings of a 256/512 aligned face and interleave the outputs (4x/16x the swapper's "
        "cost), so a big face on a big screen is not a 128 px upscale.",
    )
    tracking: bool = Field(
        False,
        description="Follow faces across frames: One-Euro-smoothed keypoints, full-frame detection only "
        "every detect_every frames (small regions around each face in between), faces held through "
        "short misses so they do not flicker.",
    )
    detect_every: int = Field(
        5,
        ge=1,
        le=120,
        description="With tracking: a full-frame detection every this many frames (every processed frame "
        "when processing runs below 10 fps: faces move too far between frames for the regions).",
    )
    roi_det_size: int = Field(
        192,
        ge=64,
        le=640,
        multiple_of=32,
        description="With tracking: detector input size for the region around each tracked face.",
    )
    smoothing_min_cutoff: float = Field(
        0.5,
        gt=0,
        le=30,
        description="With tracking: One-Euro cutoff (Hz) for a still face; lower is steadier.",
    )
    smoothing_beta: float = Field(
        0.07,
        ge=0,
        le=10,
        description="With tracking: One-Euro speed coefficient; higher lags less in motion.",
    )
    hold_frames: int = Field(
        5,
        ge=0,
        le=60,
        description="With tracking: frames a face stays swapped after its detection is lost, and no longer "
        "than that many frames at 30 fps take (when processing is slower, a missed face shows the real one).",
    )
    face_policy: Literal["all", "largest", "central"] = Field(
        "all",
        description="Faces swapped: all (up to max_faces), the largest one, or the one nearest the centre.",
    )
    assign: Literal["selected", "per_visitor"] = Field(
        "selected",
        description="selected: every face gets the face staff selected; per_visitor: each visitor gets "
        "their own face from the library in the order they appear (the selected one first, kept while "
        "they are tracked; next/prev shift everyone's face by one). Follows visitors best with tracking.",
    )
    color_correction: Literal["none", "mean_std"] = Field(
        "none",
        description="Match the swapped face's colour to the visitor's: mean_std moves each BGR channel's "
        "mean and spread inside the mask onto the visitor's (smoothed per tracked face); none: off.",
    )
    color_strength: float = Field(
        1.0, ge=0.0, le=1.0, description="How much of the colour correction is applied (0..1)."
    )
    pipelined: bool = Field(
        False,
        description="Detect the next frame on a second thread (its own detector session) while this "
        "frame's faces are swapped: more frames per second when both stages are slow, one frame more "
        "latency.",
    )

    rebuild_after_errors: int = Field(
        5,
        ge=1,
        le=1000,
        description="Rebuild the processing stage after this many failed frames in a row (or half of the "
        "last 20); a single failure only costs its frame, the screen keeps the last good result.",
    )
    stall_s: float = Field(
        5.0,
        ge=0.2,
        le=600,
        description="A model call running longer than this and than 4x that model's slowest recent call "
        "(or the stage's own work without progress this long) is abandoned: a fresh inference thread "
        "and stage take over; the systemd watchdog is not fed while processing stays stalled. A slow "
        "frame whose calls all return is never abandoned.",
    )
    load_stall_s: float = Field(
        120.0,
        ge=0.2,
        le=3600,
        description="Allowance instead of stall_s while models load, for a new stage's first frames and "
        "each model's first two calls (TensorRT builds its engines then).",
    )
    recovery_s: float = Field(
        30.0,
        ge=1,
        le=3600,
        description="Exit non-zero (systemd restarts the kiosk) when processing has not recovered this "
        "long after a stalled call.",
    )


class MaskConfig(_Section):
    shape: Literal["box", "face"] = Field(
        "box",
        description="How the swapped crop goes back: box (feathered square) or face (a face-shaped "
        "ellipse fitted to the eyes and mouth, forehead to chin).",
    )
    padding: tuple[float, float, float, float] = Field(
        (0.02, 0.02, 0.02, 0.02),
        description="Insets of the box from the crop's edges: top, right, bottom, left, fractions of "
        "the crop (each 0..0.45); the face shape is cut by the same box.",
    )
    feather: float = Field(
        0.10, ge=0.0, le=0.5, description="Width of the soft edge, fraction of the crop; 0: hard edge."
    )
    mouth: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="How much of the visitor's own mouth stays (a feathered region around the mouth "
        "corners): 0 swaps it, 1 keeps the visitor's mouth.",
    )
    occlusion: bool = Field(
        False,
        description="Keep what is in front of the face (a hand, a microphone, a cup) visible: a face "
        "parsing model (models.parser) masks out everything that is not face. Costs one parser run "
        "per face and frame.",
    )

    @field_validator("padding")
    @classmethod
    def _padding_bounds(cls, v: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        if any(not 0.0 <= p <= 0.45 for p in v):
            raise ValueError("each padding value (top, right, bottom, left) must be in 0..0.45")
        return v


class FacesConfig(_Section):
    dir: str | None = Field(
        None,
        description="Folder of source face photos (JPEG/PNG); faces.yaml beside them may set names and order.",
    )
    cache_dir: str = Field(
        "~/.cache/faceswap-kiosk/faces", description="Where per-photo latents and thumbnails are cached."
    )
    rescan_s: float = Field(2.0, ge=0.2, le=600, description="How often the folder is checked for changes.")
    similar_size_ratio: float = Field(
        0.6,
        ge=0.1,
        le=1.0,
        description="Skip a photo whose second face is at least this fraction of the largest.",
    )
    thumb_px: int = Field(160, ge=32, le=512, description="Thumbnail size for the carousel.")


class UiConfig(_Section):
    carousel: bool = Field(True, description="Show the carousel of face thumbnails.")
    banner: str = Field(
        "Live AI face swap. Nothing is recorded.", description="Disclosure banner at the top; empty hides it."
    )
    attract_after_s: float = Field(
        20.0,
        ge=0,
        le=3600,
        description="Attract mode after this long without a detected face; 0 disables it.",
    )
    attract_title: str = Field("Step in front of the camera", description="Big title of the attract screen.")
    attract_lines: list[str] = Field(
        default_factory=lambda: ["See yourself with another face, live.", "Staff can switch faces for you."],
        description="Smaller lines under the attract title.",
    )
    attract_cycle_s: float = Field(3.0, ge=0.5, le=60, description="Time each face is shown in attract mode.")


class SnapshotsConfig(_Section):
    enabled: bool = Field(
        False, description="Allow the snapshot action. Off: no frame is ever written to disk."
    )
    dir: str = Field("snapshots", description="Folder for snapshots (relative to the config file).")
    retention_hours: float = Field(
        24.0, ge=0, le=24 * 365, description="Delete snapshots older than this; 0 keeps them."
    )
    max_files: int = Field(
        500, ge=1, le=1_000_000, description="Keep at most this many snapshots (oldest go)."
    )


class ControlsConfig(_Section):
    keyboard: dict[str, list[str]] = Field(
        default_factory=lambda: dict(DEFAULT_KEYBOARD),
        description="Action → glfw key names (RIGHT, SPACE, F1, 1, CTRL+SHIFT+Q, ...). Merged over the defaults.",
    )
    gamepad: dict[str, list[str]] = Field(
        default_factory=lambda: dict(DEFAULT_GAMEPAD),
        description="Action → gamepad buttons (A, B, X, Y, LEFT_BUMPER, DPAD_RIGHT, ...). Merged over the defaults.",
    )
    gamepad_enabled: bool = Field(True, description="Poll gamepads (glfw standard mappings, hot-plugged).")
    repeat_delay_s: float = Field(
        0.5, ge=0.05, le=5, description="Hold a gamepad button this long to repeat."
    )
    repeat_interval_s: float = Field(0.2, ge=0.02, le=5, description="Repeat period while a button is held.")
    debounce_s: float = Field(
        0.03, ge=0, le=1, description="Ignore a second press of a button within this time."
    )
    allow_quit: bool | None = Field(
        None,
        description="Let the quit binding close the kiosk. null: plain keys quit only in a window; in "
        "fullscreen only a combination with modifiers (CTRL+SHIFT+Q) does.",
    )

    @field_validator("keyboard", "gamepad", mode="before")
    @classmethod
    def _merge_defaults(cls, v: Any, info: Any) -> Any:
        if not isinstance(v, dict):
            return v
        defaults = DEFAULT_KEYBOARD if info.field_name == "keyboard" else DEFAULT_GAMEPAD
        unknown = sorted(set(v) - set(ACTIONS))
        if unknown:
            raise ValueError(f"unknown action(s) {', '.join(map(str, unknown))}; valid: {', '.join(ACTIONS)}")
        merged = {**defaults, **{k: ([x] if isinstance(x, str) else x) for k, x in v.items()}}
        return merged

    @field_validator("gamepad")
    @classmethod
    def _known_buttons(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for action, buttons in v.items():
            bad = [b for b in buttons if b.upper() not in GAMEPAD_BUTTONS]
            if bad:
                raise ValueError(
                    f"{action}: unknown button {bad[0]}; use one of {', '.join(GAMEPAD_BUTTONS)}"
                )
        return v


class OverlayConfig(_Section):
    debug: bool = Field(False, description="Show the debug statistics overlay at start.")
    status_line: bool = Field(
        False,
        description="Show the one-line status (source, stage: technical words, a device path) at the "
        "bottom of the screen, for a bench or staff screen (visitors should not read it).",
    )


class LoggingConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    file: str | None = Field(None, description="Also log to this file (rotated), relative to the config.")


class MonitoringConfig(_Section):
    textfile: str | None = Field(
        None,
        description="Keep Prometheus metrics in this file for node_exporter's textfile collector (a *.prom "
        "file in its --collector.textfile.directory, relative to the config); null: off.",
    )
    interval_s: float = Field(5.0, ge=1, le=300, description="How often the metrics file is rewritten.")

    @field_validator("textfile")
    @classmethod
    def _prom_suffix(cls, v: str | None) -> str | None:
        if v is not None and not v.endswith(".prom"):
            raise ValueError(
                "must end in .prom (node_exporter's textfile collector reads only *.prom files), "
                "e.g. /var/lib/node_exporter/textfile_collector/faceswap_kiosk.prom"
            )
        return v


class KeepsakeConfig(_Section):
    enabled: bool = Field(
        False,
        description="Let visitors take the swapped photo home: the keepsake action, a QR code, a small web "
        "server on the booth's network. Off: no photo is stored, the kiosk has no network at all.",
    )
    countdown_s: int = Field(3, ge=0, le=10, description="Countdown before the photo is taken; 0: at once.")
    show_s: float = Field(
        20.0, ge=2, le=300, description="How long the frozen photo and its QR code stay on screen."
    )
    confirm: bool = Field(
        False,
        description="Ask the visitor to press again to keep the photo; without the second press nothing "
        "is stored.",
    )
    listen: str = Field(
        "0.0.0.0:8088",
        description="Address and port the keepsake web server listens on (0.0.0.0: every interface).",
    )
    url_base: str | None = Field(
        None,
        description="What the QR code encodes before /p/<token>, e.g. http://192.168.1.10:8088 (the "
        "booth's Wi-Fi address); null: the address of the interface that routes to the booth LAN.",
    )
    tls_cert: str | None = Field(
        None, description="PEM certificate for HTTPS (relative to the config file); null: plain HTTP."
    )
    tls_key: str | None = Field(None, description="PEM private key of tls_cert (relative to the config).")
    ttl_s: float = Field(
        900.0,
        ge=30,
        le=7 * 24 * 3600,
        description="A photo is deleted this long after it is taken; its address then answers 410 Gone.",
    )
    max_photos: int = Field(
        50,
        ge=1,
        le=10_000,
        description="Keep at most this many photos; when full, the screen says so and takes none (no "
        "photo is deleted before its ttl_s; a reload lowering it deletes the oldest first).",
    )
    max_mb: float = Field(
        200.0,
        ge=1,
        le=100_000,
        description="Keep at most this many megabytes of photos (full: as max_photos).",
    )
    cooldown_s: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="After a photo is taken, the key takes no other for this long (the screen says "
        "when the next one can be taken); 0: no wait.",
    )
    takes_per_visitor: int = Field(
        5,
        ge=0,
        le=1000,
        description="Photos one visitor may take: counted until the attract screen comes on (nobody at "
        "the booth) or 2 min after their last photo; then the screen thanks them instead; 0: no cap.",
    )
    keep_on_disk: bool = Field(
        False,
        description="Keep the photos when the kiosk starts and exits; false deletes every keepsake at "
        "start-up and at a clean exit.",
    )
    print_command: str | None = Field(
        None,
        description="Print each kept photo with this command, {file} replaced by the JPEG's path "
        "(e.g. lp -d booth -o fit-to-page {file}); run without a shell; null: no printing.",
    )
    print_timeout_s: float = Field(
        60.0, ge=1, le=600, description="A print command running longer than this is stopped."
    )
    print_copies: int = Field(
        1, ge=1, le=10, description="Copies printed of each kept photo (with print_command)."
    )
    print_qr: bool = Field(
        False,
        description="Print the photo's QR code (its download address) in the photo's bottom-right "
        "corner; the stored photo and the phone's copy stay without it.",
    )
    allow: list[str] = Field(
        default_factory=default_allow,
        description="Networks (CIDR) whose phones may fetch photos: the booth LAN. The server closes "
        "connections from any other address (this machine excepted), and the systemd unit's "
        "IPAddressAllow= drops their packets.",
    )
    event_name: str = Field(
        "", max_length=120, description="The event's name on the visitor's photo page; empty: none."
    )
    frame: str | None = Field(
        None,
        description="Brand frame: a PNG with transparency drawn over every keepsake (the QR screen, the "
        "phone, the print), scaled to cover the photo and centred (relative to the config file); null: "
        "none. A missing, damaged or huge file is one log line and photos are made without it.",
    )
    frame_text: str = Field(
        "",
        max_length=80,
        description="One line drawn along the bottom of every keepsake (event name, date); empty: none.",
    )
    consent: str = Field(
        "",
        max_length=300,
        description="Shown when the keepsake key is pressed, before the countdown (the organiser's "
        "wording); the visitor agrees with the same key within show_s, else nothing is taken; empty: "
        "no question. Only counted: what was agreed and when is stored nowhere.",
    )
    clip: bool = Field(
        False,
        description="A moving keepsake too: the last 2.5 s of the swapped screen (12 fps, 480 px wide) "
        "as an H.264 MP4 and a looping boomerang GIF, linked from the photo's page and deleted with it "
        "(same ttl_s and max_mb). Needs PyAV (pip install 'faceswap-kiosk[clip]'); without it, stills only.",
    )

    @field_validator("listen", mode="before")
    @classmethod
    def _listen(cls, v: Any) -> Any:
        host_port(str(v) if isinstance(v, int | str) and not isinstance(v, bool) else "?")
        return v

    @field_validator("url_base")
    @classmethod
    def _url_base(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(:[0-9]{1,5})?/?", v):
            raise ValueError(
                "must be http(s)://host[:port] with nothing after it, e.g. http://192.168.1.10:8088"
            )
        return v.rstrip("/")

    @field_validator("print_command")
    @classmethod
    def _print_command(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            words = shlex.split(v)
        except ValueError as exc:
            raise ValueError(f"cannot be split into words ({exc}); check the quotes") from None
        if not words:
            raise ValueError("is empty; use null to turn printing off")
        if not any("{file}" in w for w in words):
            raise ValueError("must contain {file} (the photo's path), e.g. lp -d booth {file}")
        return v

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        return networks(v, "phone could fetch a photo")

    @model_validator(mode="after")
    def _tls_pair(self) -> KeepsakeConfig:
        if self.enabled and (self.tls_cert is None) != (self.tls_key is None):
            missing = "tls_key" if self.tls_key is None else "tls_cert"
            raise ValueError(f"{missing} is missing: HTTPS needs both tls_cert and tls_key (or neither)")
        return self

    def listen_host_port(self) -> tuple[str, int]:
        """``listen`` split into (host, port)."""
        return host_port(self.listen)


class KioskConfig(_Section):
    source: SourceConfig = Field(default_factory=SourceConfig)  # type: ignore[arg-type]
    display: DisplayConfig = Field(default_factory=DisplayConfig)  # type: ignore[arg-type]
    processing: ProcessingConfig = Field(default_factory=ProcessingConfig)  # type: ignore[arg-type]
    mask: MaskConfig = Field(default_factory=MaskConfig)  # type: ignore[arg-type]
    models: ModelsConfig = Field(default_factory=ModelsConfig)  # type: ignore[arg-type]
    faces: FacesConfig = Field(default_factory=FacesConfig)  # type: ignore[arg-type]
    ui: UiConfig = Field(default_factory=UiConfig)  # type: ignore[arg-type]
    snapshots: SnapshotsConfig = Field(default_factory=SnapshotsConfig)  # type: ignore[arg-type]
    controls: ControlsConfig = Field(default_factory=ControlsConfig)  # type: ignore[arg-type]
    overlay: OverlayConfig = Field(default_factory=OverlayConfig)  # type: ignore[arg-type]
    logging: LoggingConfig = Field(default_factory=LoggingConfig)  # type: ignore[arg-type]
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)  # type: ignore[arg-type]
    keepsake: KeepsakeConfig = Field(default_factory=KeepsakeConfig)  # type: ignore[arg-type]
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)  # type: ignore[arg-type]
    #: Folder of the YAML file; relative paths in the config resolve against it. Not a YAML key.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    def resolve(self, path: str | Path) -> Path:
        """Resolve a path from the config relative to the config file's folder; ``package:REL``
        names a file shipped inside the kiosk package (``package:data/demo/...``)."""
        text = str(path)
        if text.startswith(PACKAGE_PREFIX):
            return package_file(*Path(text[len(PACKAGE_PREFIX) :]).parts)
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(os.path.normpath(self.base_dir / p))
