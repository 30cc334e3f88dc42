"""The multimodal folder is the unit to copy: `recipes copy` makes a package that runs on its own
files (and on the installed vision and text domains it composes)."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "multimodal"


def test_every_file_imports_only_the_core_its_own_folder_and_what_it_composes():
    for path in sorted(FOLDER.glob("*.py")):
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_dataset_collates_and_writes_and_reads_shards(tmp_path, fixtures):
    tokenizer = fixtures / "text" / "tokenizer.json"
    script = f"""
from pathlib import Path
import subprocess, sys, os
import torch
from torchvision.transforms import v2
from multimodal import ImageTextDataset, ImageTextShards, multimodal_collate
from multimodal.demo import build

F = Path({str(fixtures)!r})
tokenizer = {str(tokenizer)!r}
size = v2.Compose([v2.Resize(32), v2.CenterCrop(32)])
dataset = ImageTextDataset(F / "multimodal/captions.json", tokenizer, transform=size, captions="first")
items = [dataset[0], dataset[1]]
batch = multimodal_collate(items, pad_id=dataset.pad_id)
assert set(batch) == {{"pixel_values", "input_ids", "attention_mask", "lengths", "index"}}, set(batch)
assert batch["pixel_values"].shape == (2, 3, 32, 32) and batch["pixel_values"].dtype == torch.uint8
longest = max(len(item["input_ids"]) for item in items)
assert batch["input_ids"].shape == batch["attention_mask"].shape == (2, longest) and batch["lengths"].shape == (2,)
_, loader = build(F)
assert next(iter(loader))["pixel_values"].shape[0] == 4
# the writer runs as a script from the copy, with the project on the path
env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ["PYTHONPATH"]]))
done = subprocess.run([sys.executable, "-W", "error", "multimodal/shard_writer.py", str(F / "multimodal/captions.json"),
                       "out", "--samples-per-shard", "3"], env=env, capture_output=True, text=True, check=False)
assert done.returncode == 0 and done.stdout == "wrote 3 shards to out\\n", done.stderr
streamed = list(ImageTextShards("out/shard-{{000000..000002}}.tar", tokenizer, captions="first"))
expected = [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]
assert [item["input_ids"].tolist() for item in streamed] == expected
"""
    report = copy_and_run("multimodal", tmp_path, script)
    printed = report["printed"]
    assert f"-> {tmp_path / 'multimodal'}" in printed and "it needs recipes.core: " in printed
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines; "
          f"vision and text imported: {report['composed_modules']} modules, {report['composed_lines']} lines")
