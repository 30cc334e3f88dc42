"""`recipes bench` prints one row per setting and a dict that the loader accepts; it tells apart
a decode-heavy image folder (workers pay) from an in-memory token set (they do not)."""

import ast
import json
import re

import pytest

from recipes.__main__ import main
from recipes.cli.bench import format_trials
from recipes.core.loading.tuning import Trial
from tests.photos import photo


def _bench(argv, capsys):
    assert main(["bench", *map(str, argv)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*\*?\d+\s+(-|\d+)\s+(yes|no)\s", line)]
    kwargs = ast.literal_eval(out.split("loader_kwargs = ", 1)[1].splitlines()[0])
    return out, rows, kwargs


def test_bench_prints_a_row_per_setting_and_a_usable_dict(fixtures, capsys):
    from recipes.text import TokenizedTextDataset, text_loader

    out, rows, kwargs = _bench(["text", fixtures / "text/labeled.jsonl", "--batch-size", 16, "--seconds", 2,
                                "--max-workers", 1, "--device", "cpu"], capsys)
    assert out.splitlines()[2].split() == ["workers", "prefetch", "pin", "batches/s", "samples/s", "data-wait", "startup", "s"]
    assert [row[:3] for row in rows] in (
        [["*0", "-", "no"], ["1", "2", "no"], ["1", "4", "no"]],
        [["0", "-", "no"], ["*1", "2", "no"], ["1", "4", "no"]],
        [["0", "-", "no"], ["1", "2", "no"], ["*1", "4", "no"]],
    )
    for row in rows:
        batches, samples = float(row[3]), float(row[4])
        assert samples == pytest.approx(16 * batches, rel=0.02, abs=1)  # every batch holds 16 samples
    dataset = TokenizedTextDataset(fixtures / "text/labeled.jsonl", fixtures / "text/tokenizer.json")
    batch = next(iter(text_loader(dataset, 16, device="cpu", seed=0, **kwargs)))  # pasteable as is
    assert batch["input_ids"].shape[0] == 16


def test_the_table_marks_the_recommended_row():
    trials = [Trial(0, None, False, 50, 10.0, 800, 9.0, 0.01), Trial(2, 2, False, 100, 10.0, 1600, 1.0, 0.3)]
    table = format_trials(trials, trials[1].kwargs()).splitlines()
    assert table[1].split() == ["0", "-", "no", "5.0", "80", "90%", "0.01"]
    assert table[2].split() == ["*2", "2", "no", "10.0", "160", "10%", "0.30"]


@pytest.mark.slow
def test_decode_heavy_images_get_workers_and_in_memory_tokens_get_none(tmp_path, capsys):
    for k in range(64):
        folder = tmp_path / "photos" / f"class_{k % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(800, 600, k).save(folder / f"{k}.jpg", quality=90)
    lines = tmp_path / "tokens.jsonl"
    lines.write_text("".join(json.dumps({"text": f"sample {k} " + "word " * (k % 50)}) + "\n" for k in range(4000)))
    tokenizer = _train_tokenizer(tmp_path, lines)
    # a 200 ms step: loading 16 token rows in the main process (a few ms, even on a busy machine) stays
    # within the 5% tie, decoding and cropping 16 800x600 photos (~50-100 ms) does not
    common = ["--batch-size", 16, "--step-ms", 200, "--max-workers", 2, "--device", "cpu", "--seconds", 8]
    image_out, image_rows, image_kwargs = _bench(["vision", tmp_path / "photos", *common], capsys)
    token_out, token_rows, token_kwargs = _bench(["text", lines, "--tokenizer", tokenizer, *common], capsys)
    assert image_kwargs["num_workers"] >= 1, image_out
    assert token_kwargs == {"num_workers": 0, "pin_memory": False}, token_out
    # decoding in the main process shows as waiting; in-memory tokens barely wait
    image_wait, token_wait = (int(rows[0][5].rstrip("%")) for rows in (image_rows, token_rows))
    assert image_wait > 10 and token_wait < image_wait / 2, image_out + token_out


def _train_tokenizer(tmp_path, lines):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator([json.loads(line)["text"] for line in lines.read_text().splitlines()],
                                  trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]"]))
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path / "tokenizer.json"


def test_data_wait_is_measured_around_a_realistic_step_unless_told_otherwise(fixtures, capsys):
    from recipes.__main__ import STEP_MS, build_parser

    assert build_parser().parse_args(["bench", "text", "x"]).step_ms == STEP_MS == 50
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "default 50: the order of one training step" in " ".join(capsys.readouterr().out.split())
    out, _, _ = _bench(["text", fixtures / "text/labeled.jsonl", "--batch-size", 16, "--seconds", 1,
                        "--max-workers", 0, "--device", "cpu", "--step-ms", 0], capsys)
    assert "nearly 100% by construction with --step-ms 0" in out
