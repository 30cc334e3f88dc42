"""The text folder is the unit to copy: `recipes copy` makes a package that runs on its own files."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "text"


def test_every_file_imports_only_the_core_and_its_own_folder():
    for path in sorted(FOLDER.glob("*.py")):
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_dataset_and_collates_from_its_own_files(tmp_path, fixtures):
    script = f"""
from pathlib import Path
import torch
from text import StreamingTextDataset, TokenizedTextDataset, pack_collate, streaming_loader, text_collate
from text.demo import build

F = Path({str(fixtures)!r})
dataset = TokenizedTextDataset(F / "text/labeled.jsonl", F / "text/tokenizer.json", label_field="label")
items = [dataset[0], dataset[1]]
batch = text_collate(items, pad_id=dataset.pad_id)
assert set(batch) == {{"input_ids", "attention_mask", "lengths", "index", "labels"}}, set(batch)
longest = max(len(item["input_ids"]) for item in items)
assert batch["input_ids"].shape == batch["attention_mask"].shape == (2, longest)
assert batch["lengths"].tolist() == [len(item["input_ids"]) for item in items] and batch["labels"].shape == (2,)
packed = pack_collate(items)
assert packed["input_ids"].shape == (1, sum(batch["lengths"].tolist())) and packed["cu_seqlens"].shape == (3,)
_, loader = build(F)
assert next(iter(loader))["input_ids"].shape[0] == 16
stream = StreamingTextDataset(F / "text/corpus.txt", F / "text/tokenizer.json")
assert next(iter(streaming_loader(stream, 4, device="cpu", num_workers=0)))["input_ids"].shape[0] == 4
"""
    report = copy_and_run("text", tmp_path, script)
    assert f"-> {tmp_path / 'text'}" in report["printed"] and "it needs recipes.core: " in report["printed"]
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines")
