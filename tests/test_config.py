"""Config validation: one line per problem with file, line and key path; CLI exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kiosk.cli import main
from kiosk.config import ConfigError, KioskConfig, dump_config, load_config, parse_config
from kiosk.config.schema import DisplayConfig

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["default.yaml", "demo.yaml"])
def test_shipped_configs_are_valid(name):
    cfg = load_config(ROOT / "configs" / name)
    assert isinstance(cfg, KioskConfig)


def test_demo_is_the_bundled_visitor_windowed_and_default_is_booth():
    demo = load_config(ROOT / "configs/demo.yaml")
    booth = load_config(ROOT / "configs/default.yaml")
    assert demo.source.kind == "demo" and not demo.display.fullscreen  # no camera unless --camera
    assert demo.models.swapper == "auto" and booth.models.swapper == "classic"  # licence-clean booth
    assert not demo.models.accept_noncommercial_licence and not booth.models.accept_noncommercial_licence
    assert booth.source.kind == "camera" and booth.source.camera.device == 0 and booth.display.fullscreen


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "k.yaml")
    return info.value.problems


def test_unknown_key_names_path_and_line():
    (line,) = _problems("display:\n  fullscreen: true\n  colour: red\n")
    assert line.startswith("k.yaml:3: display.colour: unknown key")


def test_unknown_key_names_the_valid_keys_and_a_command_that_lists_them(capsys):
    (line,) = _problems("display:\n  fulscreen: true\n")
    assert "(did you mean fullscreen?)" in line
    valid = line.split("valid keys of display: ", 1)[1].split(" (", 1)[0].split(", ")
    assert set(valid) == set(DisplayConfig.model_fields)
    (top,) = _problems("dispaly:\n  fullscreen: true\n")
    assert "(did you mean display?)" in top and "valid sections: source, display," in top
    # the command the hint names exists without a file and describes each of those keys
    command = line.split("`")[1]
    assert command == "kiosk config doc"
    assert main(command.split()[1:]) == 0
    doc = capsys.readouterr().out
    assert all(f"| `display.{key}` |" in doc for key in valid)


def test_wrong_type():
    (line,) = _problems("source:\n  camera:\n    width: wide\n")
    assert line.startswith("k.yaml:3: source.camera.width:")
    assert "integer" in line


def test_out_of_range():
    (line,) = _problems("processing:\n  det_threshold: 1.5\n")
    assert line.startswith("k.yaml:2: processing.det_threshold:")
    assert "0.99" in line


def test_enum_lists_choices():
    (line,) = _problems("display:\n  fit: stretch\n")
    assert line == "k.yaml:2: display.fit: must be one of fit, fill"


def test_several_problems_one_line_each_in_file_order():
    lines = _problems("display:\n  fit: stretch\n  width: 3\nnonsense: 1\n")
    assert [ln.split(":")[1] for ln in lines] == ["2", "3", "4"]


def test_yaml_syntax_error_has_line():
    (line,) = _problems("display:\n  fit: [fit\nsource: {}\n")
    assert line.startswith("k.yaml:")
    assert "YAML syntax error" in line
    assert int(line.split(":")[1]) >= 2


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert "not found" in info.value.problems[0]


def test_empty_file_gives_defaults():
    cfg = parse_config("", "k.yaml")
    assert cfg.display.fit == "fit"


def test_relative_paths_resolve_against_the_config_folder(tmp_path):
    (tmp_path / "k.yaml").write_text("models:\n  dir: weights\n")
    cfg = load_config(tmp_path / "k.yaml")
    assert cfg.resolve(cfg.models.dir) == tmp_path / "weights"


def test_show_round_trips():
    cfg = load_config(ROOT / "configs/demo.yaml")
    again = parse_config(dump_config(cfg), "shown.yaml")
    assert again.model_dump() == cfg.model_dump()
    assert "base_dir" not in yaml.safe_load(dump_config(cfg))


@pytest.mark.parametrize(
    "text",
    [
        "display:\n  colour: red\n",  # unknown key
        "display:\n  width: wide\n",  # wrong type
        "display:\n  width: 99999\n",  # out of range
        "display: [\n",  # YAML syntax
    ],
)
def test_cli_check_rejects(tmp_path, capsys, text):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    assert main(["config", "check", str(f)]) != 0
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_check_missing_file(tmp_path, capsys):
    assert main(["config", "check", str(tmp_path / "missing.yaml")]) != 0
    assert "not found" in capsys.readouterr().err


def test_cli_check_and_show_accept_valid(capsys):
    assert main(["config", "check", str(ROOT / "configs/demo.yaml")]) == 0
    assert main(["config", "show", str(ROOT / "configs/demo.yaml")]) == 0
    shown = yaml.safe_load(capsys.readouterr().out.split("\n", 1)[1])
    assert shown["display"]["fit"] == "fit"
    assert shown["source"]["camera"]["fourcc"] == "MJPG"  # a default filled in
