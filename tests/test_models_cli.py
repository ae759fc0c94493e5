"""`kiosk models list|fetch|verify`, `kiosk detect`, `kiosk swap`: fetching from a folder and from a
local HTTP server (resume, SHA-256, atomic), and one-line errors without tracebacks. No internet."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import cv2
import pytest
import standins
from inference_fixtures import *  # noqa: F403

from kiosk.cli import build_parser, main
from kiosk.cli import models as inference_cli
from kiosk.inference import specs
from kiosk.inference.fetch import FetchError, fetch_model

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _write_cfg(tmp_path: Path, models_dir: Path, extra: str = "") -> Path:
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(
        f"models:\n  dir: {models_dir}\n  swapper: inswapper_128.onnx\n  accept_noncommercial_licence: true\n"
        f"  providers: {{order: [cpu]}}\nprocessing:\n  max_faces: 8\n{extra}",
        encoding="utf-8",
    )
    return cfg


@pytest.fixture
def standin_specs(standin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the CLI's specs carry the stand-ins' hashes, as if they were the published files."""
    real = specs.spec_for_file

    def fake(role, path):  # type: ignore[no-untyped-def]
        spec = real(role, path)
        f = standin_dir / spec.file
        return replace(spec, sha256=_sha(f), also_sha256=()) if f.is_file() else spec

    monkeypatch.setattr(inference_cli, "spec_for_file", fake)


@pytest.fixture
def http_root(tmp_path: Path, standin_dir: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "mirror"
    shutil.copytree(standin_dir, root)
    handler = functools.partial(_RangeHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", root
    finally:
        server.shutdown()
        server.server_close()


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler plus single-range ``Range: bytes=N-`` support."""

    ranges_seen: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        rng = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not rng or not path.is_file():
            return super().send_head()
        _RangeHandler.ranges_seen.append(rng)
        start = int(rng.split("=")[1].rstrip("-"))
        data = path.read_bytes()
        if start >= len(data):
            self.send_error(416)
            return None
        f = open(path, "rb")  # noqa: SIM115
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        return f


# -- fetch_model -----------------------------------------------------------------------------------
def test_fetch_from_folder(tmp_path: Path, standin_dir: Path) -> None:
    src = standin_dir / "w600k_r50.onnx"
    spec = replace(specs.W600K_R50, sha256=_sha(src))
    dest = tmp_path / "models" / "w600k_r50.onnx"
    assert fetch_model(spec, dest, source=str(standin_dir), show_progress=False) == "fetched"
    assert _sha(dest) == spec.sha256 and not dest.with_name(dest.name + ".part").exists()
    assert fetch_model(spec, dest, source=str(standin_dir), show_progress=False) == "present"


def test_fetch_http_resumes_a_partial_download(tmp_path: Path, http_root: tuple[str, Path]) -> None:
    url, root = http_root
    src = root / "inswapper_128.onnx"
    spec = replace(specs.INSWAPPER_128, sha256=_sha(src), urls=(url + "inswapper_128.onnx",))
    dest = tmp_path / "inswapper_128.onnx"
    part = tmp_path / "inswapper_128.onnx.part"
    data = src.read_bytes()
    part.write_bytes(data[: len(data) // 3])
    _RangeHandler.ranges_seen.clear()
    assert fetch_model(spec, dest, show_progress=True) == "fetched"
    assert _RangeHandler.ranges_seen == [f"bytes={len(data) // 3}-"]
    assert dest.read_bytes() == data and not part.exists()


def test_fetch_rejects_a_wrong_hash(tmp_path: Path, http_root: tuple[str, Path]) -> None:
    url, _ = http_root
    dest = tmp_path / "w600k_r50.onnx"
    with pytest.raises(FetchError, match="sha256 mismatch"):
        fetch_model(specs.W600K_R50, dest, source=url, show_progress=False)  # real hash, stand-in bytes
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()


def test_fetch_unreachable_mirror(tmp_path: Path) -> None:
    mirror = f"http://127.0.0.1:{_closed_port()}/"
    with pytest.raises(FetchError, match="cannot connect") as info:
        fetch_model(specs.W600K_R50, tmp_path / "w.onnx", source=mirror, show_progress=False)
    assert info.value.no_network


def _closed_port() -> int:
    """A local TCP port nobody listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def public_urls(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Point every spec's public URLs at ``base`` (instead of the internet)."""

    def point(base: str) -> None:
        real = specs.spec_for_file
        monkeypatch.setattr(
            inference_cli,
            "spec_for_file",
            lambda role, path: replace(real(role, path), urls=(base + real(role, path).file,)),
        )

    return point


def test_fetch_without_network_says_how_to_fetch_from_a_mirror_or_usb_stick(
    tmp_path: Path, public_urls: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    public_urls(f"http://127.0.0.1:{_closed_port()}/")
    cfg = _write_cfg(tmp_path, tmp_path / "models")
    assert main(["models", "fetch", "--config", str(cfg), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect" in err and "Traceback" not in err
    hints = [line for line in err.splitlines() if "--from" in line]
    assert len(hints) == 1, err  # one line, after the per-file errors
    assert err.splitlines()[-1] == hints[0]
    assert "kiosk models fetch --from URL_OR_DIR" in hints[0]
    # the command it names parses: --from takes a mirror URL or a folder
    args = build_parser().parse_args(["models", "fetch", "--from", "/media/usb/models"])
    assert args.source == "/media/usb/models"


def test_fetch_from_a_reachable_server_without_the_file_gives_no_network_hint(
    tmp_path: Path,
    http_root: tuple[str, Path],
    public_urls: Callable[[str], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ = http_root
    public_urls(url + "not-here/")
    cfg = _write_cfg(tmp_path, tmp_path / "models")
    assert main(["models", "fetch", "--config", str(cfg), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "no network" not in err


def test_fetch_from_an_unreachable_mirror_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = f"http://127.0.0.1:{_closed_port()}/models/"
    cfg = _write_cfg(tmp_path, tmp_path / "models")
    assert main(["models", "fetch", "--config", str(cfg), "--from", mirror, "--quiet"]) == 1
    assert f"cannot reach {mirror}" in capsys.readouterr().err.splitlines()[-1]


# -- kiosk models ----------------------------------------------------------------------------------
def test_models_fetch_list_verify(
    tmp_path: Path, http_root: tuple[str, Path], standin_specs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = http_root
    models = tmp_path / "models"
    cfg = _write_cfg(tmp_path, models)
    assert main(["models", "verify", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "det_10g.onnx (missing)" in err and "kiosk models fetch" in err and "Traceback" not in err

    assert main(["models", "fetch", "--config", str(cfg), "--from", url, "--quiet"]) == 0
    assert sorted(p.name for p in models.iterdir()) == sorted(standins.STANDIN_FILES)

    assert main(["models", "list", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "inswapper_128.onnx" in out and "non-commercial" in out and "Apache-2.0" in out

    assert main(["models", "verify", "--config", str(cfg)]) == 0
    (models / "w600k_r50.onnx").write_bytes(b"corrupt")
    assert main(["models", "verify", "--config", str(cfg)]) == 1
    assert "w600k_r50.onnx (CORRUPT" in capsys.readouterr().err


def test_models_verify_real_hashes_flag_standins(
    tmp_path: Path, standin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write_cfg(tmp_path, standin_dir)
    assert main(["models", "verify", "--config", str(cfg)]) == 1
    assert "sha256 mismatch" in capsys.readouterr().err


# -- kiosk detect / swap ---------------------------------------------------------------------------
def test_detect_json(tmp_path: Path, standin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    img = tmp_path / "frame.png"
    cv2.imwrite(str(img), standins.white_square_frame(squares=((64, 64, 64), (384, 160, 64))))
    cfg = _write_cfg(tmp_path, standin_dir)
    assert main(["detect", str(img), "--config", str(cfg), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["faces"]) == 2 and len(data["faces"][0]["kps"]) == 5
    assert main(["detect", str(img), "--config", str(cfg)]) == 0
    assert "2 face(s)" in capsys.readouterr().out


def test_swap_cli(tmp_path: Path, standin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, inp, out = tmp_path / "src.png", tmp_path / "in.png", tmp_path / "out" / "result.jpg"
    cv2.imwrite(str(src), standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),)))
    cv2.imwrite(str(inp), standins.white_square_frame(squares=((64, 64, 64),)))
    cfg = _write_cfg(tmp_path, standin_dir)
    args = ["swap", "--source", str(src), "--input", str(inp), "--output", str(out), "--config", str(cfg)]
    assert main([*args, "--enhance"]) == 0
    assert cv2.imread(str(out)).shape == (360, 640, 3)
    assert "swapped 1 face(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no_face", "no face found"),
        ("unreadable", "cannot decode"),
        ("missing_model", "model file not found"),
        ("bad_config", "kiosk.yaml"),
    ],
)
def test_cli_errors_are_one_line(
    case: str, needle: str, tmp_path: Path, standin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, inp = tmp_path / "src.png", tmp_path / "in.png"
    cv2.imwrite(str(src), standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),)))
    cv2.imwrite(str(inp), standins.white_square_frame())
    models = standin_dir
    if case == "no_face":
        cv2.imwrite(str(src), cv2.imread(str(src)) * 0 + 80)
    elif case == "unreadable":
        src.write_bytes(b"nope")
    elif case == "missing_model":
        models = tmp_path / "empty"
    cfg = _write_cfg(tmp_path, models, "bogus_key: 1\n" if case == "bad_config" else "")
    rc = main(
        [
            "swap",
            "--source",
            str(src),
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "o.png"),
            "--config",
            str(cfg),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and needle in err and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("kiosk swap: error: ")
