"""The `recipes` command line: help that matches the behaviour, the demo, the console-script entry."""

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from recipes.__main__ import build_parser, main
from recipes.domains import domain
from recipes.fixtures import fixtures_dir

ROOT = Path(__file__).resolve().parents[2]

HELP = {
    # command -> phrases its --help must contain, beyond its option names
    "demo": ["bundled fixtures", "shapes and dtypes", "one epoch took", "recipes bench"],
    "bench": ["num_workers", "prefetch_factor", "pin_memory", "data-wait", "Python dict", "5%"],
    "check": ["exit status: 0", "1 problems found", "Decode every image", "--json"],
    "show": ["draw_bounding_boxes", "padding", "Evaluation mode"],
    "copy": ["DEST/DOMAIN/", "never overwritten", "usage examples in its docstrings", "recipes.core modules"],
}


def _options(command):
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    return [s for action in subparsers.choices[command]._actions for s in action.option_strings]


@pytest.mark.parametrize("command", sorted(HELP), ids=sorted(HELP))
def test_each_command_help_exits_0_and_names_its_options(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in _options(command):
        assert option in text, option
    for phrase in HELP[command]:
        assert phrase in " ".join(text.split()), phrase  # argparse wraps lines


def test_top_level_help_lists_the_five_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and all(command in out for command in ("demo", "bench", "check", "show", "copy"))


def test_unknown_domain_or_missing_output_is_refused_by_argparse(capsys):
    for argv in (["check", "sounds", "x"], ["show", "vision", "x"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    assert "invalid choice: 'sounds'" in capsys.readouterr().err


def test_console_script_points_at_main():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, name = scripts["recipes"].split(":")
    assert getattr(importlib.import_module(module), name) is main


def test_demo_of_one_domain_prints_size_batch_structure_and_epoch_time(capsys):
    assert main(["demo", "text"]) == 0
    out = capsys.readouterr().out
    assert "TokenizedTextDataset, 120 samples" in out
    assert "['input_ids']: Tensor [16, " in out and "int64" in out
    assert "batches/s" not in out and "samples/s" not in out  # a rate on 120 samples would time start-up
    workers = domain("text").load("demo")(fixtures_dir())[1].num_workers
    said = "in the main process (num_workers=0)" if workers == 0 else f"with {workers} worker process"
    assert said in out
    # 120 lines in batches of 16: training keeps 7 batches, and the demo says where the 8 went
    assert "7 batches, 112 samples" in out and "8 of 120 samples left out: training drops incomplete batches" in out


def test_python_dash_m_returns_the_check_exit_status(fixtures):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    hostile = subprocess.run([sys.executable, "-m", "recipes", "check", "text", str(fixtures / "hostile/text/bad_utf8.txt")],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    clean = subprocess.run([sys.executable, "-m", "recipes", "check", "text", str(fixtures / "text/corpus.txt")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (hostile.returncode, clean.returncode) == (1, 0), hostile.stderr + clean.stderr
    assert "line 3: not valid UTF-8" in hostile.stdout and "no problems found" in clean.stdout


# (domain, PATH under fixtures, options): every command that takes a dataset, every domain
DATASETS = [
    pytest.param("vision", "vision", [], id="images"),
    pytest.param("text", "text/labeled.jsonl", ["--tokenizer", "text/tokenizer.json"], id="tokens"),
    pytest.param("detection", "detection/instances.json", [], id="boxes"),
    pytest.param("multimodal", "multimodal/manifest.jsonl", ["--tokenizer", "text/tokenizer.json"], id="captions"),
    pytest.param("audio", "audio/speech/manifest.jsonl", [], id="clips"),
]
COMMANDS = {"bench": ["--seconds", "1", "--device", "cpu"], "check": [], "show": ["-o", "{tmp}/x.png"]}


def _refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1, (out, err)
    return err


def _argv(command, domain, path, options, fixtures, tmp_path):
    options = [str(fixtures / o) if o.startswith("text/") else o for o in options]
    extra = [o.format(tmp=tmp_path) for o in COMMANDS[command]]
    return [command, domain, str(path), *options, *extra]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("domain, relative, options", DATASETS)
def test_a_missing_dataset_is_one_line_and_exit_status_2(command, domain, relative, options, fixtures, tmp_path, capsys):
    err = _refused(_argv(command, domain, tmp_path / "nowhere" / relative, options, fixtures, tmp_path), capsys)
    assert f"recipes {command}: error: {tmp_path / 'nowhere' / relative} does not exist" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("domain, relative, options", [p for p in DATASETS if p.id in ("boxes", "captions")])
def test_a_missing_image_root_is_one_line_and_exit_status_2(command, domain, relative, options, fixtures, tmp_path, capsys):
    argv = _argv(command, domain, fixtures / relative, options, fixtures, tmp_path)
    err = _refused([*argv, "--image-root", str(tmp_path / "nowhere")], capsys)
    assert f"image root {tmp_path / 'nowhere'} does not exist" in err and "--image-root" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("domain, relative, options", [p for p in DATASETS if p.id in ("tokens", "captions", "clips")])
def test_a_missing_tokenizer_is_one_line_and_exit_status_2(command, domain, relative, options, fixtures, tmp_path, capsys):
    argv = _argv(command, domain, fixtures / relative, [], fixtures, tmp_path)
    err = _refused([*argv, "--tokenizer", str(tmp_path / "tokenizer.json")], capsys)
    assert f"tokenizer file {tmp_path / 'tokenizer.json'} does not exist" in err


def test_hints_name_the_flags_and_warnings_are_one_line_each(fixtures, tmp_path, capsys):
    from recipes.cli.terms import in_cli_terms
    from recipes.core.contracts.errors import SkippedSampleWarning

    assert in_cli_terms("pass text_field=... to name another, or pass on_error='skip' to drop the line") == (
        "pass --text-field NAME to name another, or pass --on-error skip to drop the line")
    assert in_cli_terms("pass pad_id=... explicitly") == "pass pad_id=... explicitly"  # no flag sets it
    with pytest.raises(SystemExit) as exit_info:
        main(["show", "text", str(fixtures / "text/labeled.jsonl"), "--text-field", "txt", "-o", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "pass --text-field NAME to name another" in err and "text_field=" not in err
    # --on-error skip: each bad image is one warning line naming it, and the picture holds the rest
    (tmp_path / "data/bad").mkdir(parents=True)
    (tmp_path / "data/good").mkdir()
    (tmp_path / "data/bad/empty.jpg").write_bytes(b"")
    (tmp_path / "data/bad/text.jpg").write_bytes(b"not an image")
    for source in sorted((fixtures / "vision/cat").iterdir())[:3]:
        (tmp_path / "data/good" / source.name).write_bytes(source.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("always", SkippedSampleWarning)  # shown, as outside the test suite
        assert main(["show", "vision", str(tmp_path / "data"), "--on-error", "skip", "-o", str(tmp_path / "x.png")]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"recipes show: warning: skipped: {tmp_path / 'data/bad/empty.jpg'}: empty file (0 bytes)",
        f"recipes show: warning: skipped: {tmp_path / 'data/bad/text.jpg'}: not an image file (unknown format, 12 bytes)",
    ]
    assert "batch size 8, 3 drawn" in captured.out and "nothing left out" in captured.out
