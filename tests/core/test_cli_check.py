"""`recipes check` finds every hostile case, nothing in the clean fixtures, and reports what PIL sees."""

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps
from tokenizers import Tokenizer

from recipes.__main__ import main
from recipes.cli.check import check
from recipes.cli.check_files import inspect_images
from recipes.cli.datasets import DataOptions
from recipes.core.contracts.arrays import TokenArray
from recipes.core.sources.disk_cache import DiskCache
from recipes.text.token_cache import cache_prefix, load_cache, save_cache
from recipes.core.contracts.read_options import ReadOptions
from tests.photos import jpeg_bytes, overwrite_scan_data, photo
from tests.servers import FaultyHTTPServer

HOSTILE = [
    # (domain, path under fixtures/hostile, extra options, problem path suffix, where, words in the reason)
    pytest.param("vision", "images", {}, "images/truncated.jpg", "", "truncated", id="truncated-jpeg"),
    pytest.param("vision", "images", {}, "images/empty.jpg", "", "empty file", id="empty-file"),
    pytest.param("vision", "images", {}, "images/not_an_image.jpg", "", "not an image", id="not-an-image"),
    pytest.param("vision", "images", {}, "images/bomb.png", "", "decompression bomb", id="bomb"),
    pytest.param("detection", "coco/escape.json", {}, "coco/escape.json", "image 2", "escapes", id="escaping-path"),
    pytest.param("detection", "coco/unknown_category.json", {}, "coco/unknown_category.json", "annotation 2",
                 "category_id 99", id="unknown-category"),
    pytest.param("detection", "coco/negative_box.json", {}, "coco/negative_box.json", "annotation 3",
                 "non-positive width", id="negative-box"),
    pytest.param("text", "text/bad_utf8.txt", {}, "text/bad_utf8.txt", "line 3", "UTF-8", id="bad-utf8"),
    pytest.param("text", "text/missing_field.jsonl", {}, "text/missing_field.jsonl", "line 2", "no 'text' field",
                 id="missing-field"),
]

CLEAN = [
    pytest.param("vision", "vision", {}, id="images"),
    pytest.param("text", "text/corpus.txt", {}, id="tokens-txt"),
    pytest.param("text", "text/labeled.jsonl", {"label_field": "label"}, id="tokens-jsonl"),
    pytest.param("text", "text/labeled.csv", {"label_field": "label"}, id="tokens-csv"),
    pytest.param("detection", "detection/instances.json", {}, id="boxes"),
    pytest.param("multimodal", "multimodal/captions.json", {}, id="captions-coco"),
    pytest.param("multimodal", "multimodal/manifest.jsonl", {}, id="captions-jsonl"),
    pytest.param("multimodal", "multimodal/manifest.csv", {}, id="captions-csv"),
]


@pytest.mark.parametrize("domain, relative, extra, culprit, where, reason", HOSTILE)
def test_every_hostile_case_is_reported_with_its_path_and_reason(fixtures, domain, relative, extra, culprit, where, reason):
    report = check(DataOptions(domain, fixtures / "hostile" / relative, **extra), workers=1, progress=False)
    matching = [p for p in report.problems if p.path.endswith(culprit) and p.where == where]
    assert matching, [str(p) for p in report.problems]
    assert any(reason in p.reason for p in matching), [str(p) for p in matching]
    assert not report.clean


def test_the_escaping_image_is_never_opened(fixtures):
    report = check(DataOptions("detection", fixtures / "hostile/coco/escape.json"), workers=1, progress=False)
    assert [f["path"] for f in report.files] == [str(fixtures / "hostile/coco/images/a.jpg")]


@pytest.mark.parametrize("domain, relative, extra", CLEAN)
def test_clean_fixtures_have_no_problem(fixtures, domain, relative, extra):
    tokenizer = fixtures / "text/tokenizer.json"
    report = check(DataOptions(domain, fixtures / relative, tokenizer=tokenizer, **extra), workers=1, progress=False)
    assert report.problems == []
    assert report.clean


def test_each_image_is_reported_with_the_size_and_mode_pil_gives(fixtures):
    report = check(DataOptions("vision", fixtures / "vision"), workers=1, progress=False)
    assert len(report.files) == 14 and report.summary["classes"] == {"bird": 5, "cat": 5, "dog": 4}
    for entry in report.files:
        with Image.open(entry["path"]) as image:
            upright = ImageOps.exif_transpose(image)
            assert (entry["width"], entry["height"]) == upright.size, entry
            assert (entry["mode"], entry["format"]) == (image.mode, image.format), entry
    assert report.summary["modes"]["CMYK"] == 1 and "notes.txt" in report.summary["ignored"]


def test_a_pool_of_workers_gives_what_one_process_gives(tmp_path, fixtures):
    files = []
    for k in range(90):  # above the inline threshold, so the pool runs
        source = sorted((fixtures / "vision").rglob("*.*"))[k % 15]
        files.append(shutil.copy(source, tmp_path / f"{k}{source.suffix}"))
    items = [(str(path), None) for path in files]
    assert inspect_images(items, workers=2, progress=False) == inspect_images(items, workers=1, progress=False)


def _coco(tmp_path, annotations, images=None):
    (tmp_path / "images").mkdir(exist_ok=True)
    Image.new("RGB", (40, 30), "gray").save(tmp_path / "images/a.png")
    Image.new("RGB", (30, 40), "gray").save(tmp_path / "images/b.png")
    images = images or [{"id": 1, "file_name": "a.png", "width": 40, "height": 30},
                        {"id": 2, "file_name": "b.png", "width": 30, "height": 40}]
    path = tmp_path / "instances.json"
    # json.dumps writes NaN, as Python tools that produce COCO files do
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 1, "name": "ball"}, {"id": 1, "name": "again"}]}))
    return path


def test_every_annotation_problem_is_reported_not_only_the_first(tmp_path):
    good = {"image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10]}
    annotations = [
        {"id": 1, **good},
        {"id": 1, **good},                                          # duplicate id
        {"id": 2, **good, "image_id": 9},                           # no such image
        {"id": 3, **good, "bbox": [1, 1, math.nan, 10]},            # NaN
        {"id": 4, **good, "bbox": [1, 1, 10, 0]},                   # zero height
        {"id": 5, **good, "bbox": [35, 1, 10, 10]},                 # past the right edge (40 wide)
        {"id": 6, **good, "bbox": [1, 2, 3]},                       # not 4 numbers
    ]
    images = [{"id": 1, "file_name": "a.png", "width": 40, "height": 30},
              {"id": 2, "file_name": "b.png", "width": 40, "height": 30},      # the file is 30x40
              {"id": 3, "file_name": "gone.png", "width": 40, "height": 30},   # missing file
              {"id": 3, "file_name": "a.png", "width": 40, "height": 30}]      # duplicate id
    report = check(DataOptions("detection", _coco(tmp_path, annotations, images)), workers=1, progress=False)
    found = {(p.where, reason) for p in report.problems for reason in [p.reason]}
    expected = {
        ("category 1", "appears more than once"), ("annotation 1", "appears more than once"),
        ("annotation 2", "image_id 9 is not in 'images'"), ("annotation 3", "NaN"),
        ("annotation 4", "non-positive"), ("annotation 5", "outside its 40x30 image"),
        ("annotation 6", "not 4 numbers"), ("image 2", "decoded image is 30x40"),
        ("image 3", "does not exist"), ("image 3", "appears more than once"),
    }
    for where, words in expected:
        assert any(w == where and words in r for w, r in found), (where, words, sorted(found))
    assert len(report.problems) == len(expected)


def test_lengths_and_truncation_match_the_tokenizer(fixtures):
    path, tokenizer = fixtures / "text/corpus.txt", fixtures / "text/tokenizer.json"
    report = check(DataOptions("text", path, tokenizer=tokenizer, max_length=32), workers=1, progress=False)
    encoder = Tokenizer.from_file(str(tokenizer))
    lengths = [len(encoder.encode(line).ids) for line in path.read_text(encoding="utf-8").splitlines()]
    stats = report.summary["lengths"]
    assert (stats["count"], stats["min"], stats["max"]) == (len(lengths), min(lengths), max(lengths))
    assert sum(count for _, _, count in stats["histogram"]) == len(lengths)
    cut = sum(n > 32 for n in lengths)
    lost = sum(n - 32 for n in lengths if n > 32) / sum(lengths)
    (row,) = report.summary["truncation"]
    assert row["max_length"] == 32 and row["samples cut"].startswith(f"{cut} (")
    assert row["tokens lost"] == f"{100 * lost:.1f}%"


def test_json_output_and_exit_status(fixtures, capsys):
    assert main(["check", "text", str(fixtures / "hostile/text/bad_utf8.txt"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["clean"] is False and report["problems"] == [
        {"path": str(fixtures / "hostile/text/bad_utf8.txt"), "where": "line 3", "reason": report["problems"][0]["reason"]}
    ]
    assert report["summary"]["samples"] == 3
    assert main(["check", "detection", str(fixtures / "detection/instances.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clean"] is True


def test_plain_output_lists_the_summary_and_each_problem(fixtures, capsys):
    assert main(["check", "vision", str(fixtures / "hostile/images"), "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "5 problem(s):" in out and "no class folder" in out
    for name in ("truncated.jpg", "empty.jpg", "not_an_image.jpg", "bomb.png"):
        assert f"hostile/images/{name}: " in out


def test_a_missing_path_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "vision", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_caption_manifest_problems_name_their_line(tmp_path):
    (tmp_path / "images").mkdir()
    Image.new("RGB", (20, 10), "red").save(tmp_path / "images/ok.jpg")
    (tmp_path / "images/broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    Image.new("RGB", (20, 10), "blue").save(tmp_path / "outside.jpg")
    rows = [{"image": "images/ok.jpg", "caption": "a red box"},
            {"image": "../outside.jpg", "caption": "climbs out"},
            {"image": "images/gone.jpg", "caption": "no such file"},
            {"image": "images/ok.jpg", "caption": "   "},
            {"image": "images/broken.jpg", "caption": "cannot decode"}]
    manifest = tmp_path / "data" / "pairs.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = check(DataOptions("multimodal", manifest, image_root=tmp_path), workers=1, progress=False)
    found = sorted((p.where, p.reason.split(" (")[0][:30]) for p in report.problems)
    assert [where for where, _ in found] == ["line 2", "line 3", "line 4", "line 5"], found
    reasons = " | ".join(p.reason for p in report.problems)
    assert "escapes the dataset root" in reasons and "does not exist" in reasons and "empty caption" in reasons
    assert any(p.path.endswith("broken.jpg") for p in report.problems)
    assert report.summary["rows"] == 3 and report.summary["decoded"] == "1 of 2 images"  # usable rows


@pytest.mark.parametrize("root", ["nowhere", "default", "empty"])
def test_an_image_root_without_the_images_is_one_usage_error_not_one_per_image(fixtures, tmp_path, capsys, root):
    ann_file = tmp_path / "instances.json"  # no images/ beside it: the default root is tmp_path
    shutil.copy(fixtures / "detection/instances.json", ann_file)
    (tmp_path / "empty").mkdir()
    extra = [] if root == "default" else ["--image-root", str(tmp_path / root)]
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "detection", str(ann_file), "--workers", "1", *extra])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    expected = "does not exist" if root == "nowhere" else "none of the 10 image files"
    assert "image root" in err and expected in err and "--image-root" in err


def test_a_misspelled_key_is_named_and_an_image_info_file_is_clean(fixtures, tmp_path):
    doc = json.loads((fixtures / "detection/instances.json").read_text())
    doc["annotation"] = doc.pop("annotations")
    misspelled = tmp_path / "misspelled.json"
    misspelled.write_text(json.dumps(doc))
    options = {"image_root": fixtures / "detection/images"}
    report = check(DataOptions("detection", misspelled, **options), workers=1, progress=False)
    assert [p.reason for p in report.problems] == [
        "no 'annotations' key at the top level; did you mean 'annotation'? (COCO spells it 'annotations')"
    ]
    del doc["annotation"]  # a test-dev image_info file: images and categories only
    del doc["categories"][0]["name"]
    info = tmp_path / "image_info.json"
    info.write_text(json.dumps(doc))
    report = check(DataOptions("detection", info, **options), workers=1, progress=False)
    assert [(p.where, p.reason) for p in report.problems] == [(f"category {doc['categories'][0]['id']}", "no 'name'")]
    assert report.summary["annotations"].startswith("0 (0 crowd)") and report.summary["decoded"] == "10 of 10 images"


def test_repeated_problems_of_one_kind_are_capped_with_a_count(tmp_path, capsys):
    rows = [{"body": f"no text {k}"} for k in range(1234)] + [{"text": "fine"}, "not an object"]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["check", "text", str(path)]) == 1
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if "no 'text' field" in line]
    assert "1,235 problem(s):" in out and len(listed) == 20 and "line 1:" in listed[0]
    assert "  ... and 1,214 more of this kind (--json lists every one)" in out
    assert "line 1236:" in out  # the other kind is still listed
    assert main(["check", "text", str(path), "--json"]) == 1
    assert len(json.loads(capsys.readouterr().out)["problems"]) == 1235


def test_a_parquet_file_of_lines_is_checked_row_by_row_as_its_jsonl_twin(fixtures, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (fixtures / "text/labeled.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = [row["text"] for row in rows] + [None, "  "]  # a null and an empty text: rows 120 and 121
    pq.write_table(pa.table({"text": texts, "label": [row["label"] for row in rows] + [1, 1]}),
                   tmp_path / "labeled.parquet", row_group_size=50)
    options = {"tokenizer": fixtures / "text/tokenizer.json", "label_field": "label"}
    report = check(DataOptions("text", tmp_path / "labeled.parquet", **options), workers=1, progress=False)
    twin = check(DataOptions("text", fixtures / "text/labeled.jsonl", **options), workers=1, progress=False)
    assert [(problem.where, problem.reason.split(";")[0]) for problem in report.problems] == [
        ("row 120", "column 'text' is null"), ("row 121", "field 'text' is empty")]
    assert report.summary["samples"] == 120 and report.summary["columns"] == ["text", "label"]
    for key in ("labels", "lengths", "truncation"):
        assert report.summary[key] == twin.summary[key], key
    wrong = check(DataOptions("text", tmp_path / "labeled.parquet", tokenizer=options["tokenizer"], text_field="body"),
                  workers=1, progress=False)
    assert len(wrong.problems) == 1 and "'body'" in wrong.problems[0].reason and "'label'" in wrong.problems[0].reason


def test_a_parquet_caption_file_is_checked_with_its_held_images_and_named_columns(fixtures, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = fixtures / "multimodal"
    rows = [json.loads(line) for line in (folder / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    shutil.copytree(folder / "images", tmp_path / "images")
    images = [row["image"] for row in rows[:4]] + [(folder / row["image"]).read_bytes() for row in rows[4:]]
    images[-1] = images[-1][:200]  # a cut JPEG held in the file: row 7
    texts = [row.get("captions", [row.get("caption")]) for row in rows]
    texts[1] = []  # no caption: row 1
    table = pa.table({"jpg": [{"bytes": i, "path": None} if isinstance(i, bytes) else {"bytes": None, "path": i}
                              for i in images], "txt": texts})
    pq.write_table(table, tmp_path / "pairs.parquet", row_group_size=3)
    options = DataOptions("multimodal", tmp_path / "pairs.parquet", tokenizer=fixtures / "text/tokenizer.json",
                          image_field="jpg", caption_field="txt")
    report = check(options, workers=1, progress=False)
    assert report.summary["columns"] == ["jpg", "txt"] and report.summary["rows"] == 7
    assert report.summary["decoded"] == "6 of 7 images"
    assert [problem.where for problem in report.problems] == ["row 1", "row 7"]
    assert "column 'txt' holds an empty" in report.problems[0].reason and "image" in report.problems[1].reason
    assert main(["check", "multimodal", str(tmp_path / "pairs.parquet"), "--tokenizer",
                 str(fixtures / "text/tokenizer.json"), "--image-field", "jpg", "--caption-field", "txt"]) == 1
    assert "row 7" in capsys.readouterr().out


def test_jpegs_with_overwritten_scan_data_are_each_named_with_libjpeg_reason(tmp_path, capfd):
    damaged = set()
    for seed in range(4):
        (tmp_path / f"class_{seed % 2}").mkdir(exist_ok=True)
        data = jpeg_bytes(photo(640, 480, seed), quality=90, progressive=seed == 3)
        (tmp_path / f"class_{seed % 2}/clean_{seed}.jpg").write_bytes(data)
        for fraction in (0.1, 0.5, 0.9):
            path = tmp_path / f"class_{seed % 2}/damaged_{seed}_{fraction}.jpg"
            path.write_bytes(overwrite_scan_data(data, fraction, seed=seed * 10 + int(fraction * 10)))
            damaged.add(str(path))
    assert main(["check", "vision", str(tmp_path), "--workers", "1", "--json"]) == 1
    out, err = capfd.readouterr()
    problems = json.loads(out)["problems"]
    assert {problem["path"] for problem in problems} == damaged  # every damaged file, no clean one
    assert all(problem["reason"].startswith("cannot decode image (Corrupt JPEG data") for problem in problems), problems
    assert "Corrupt JPEG" not in err  # no unattributed libjpeg line on stderr


def test_check_cache_rehashes_every_entry_and_removes_the_damaged_ones_by_name(tmp_path, fixtures, capsys):
    (tmp_path / "remote").mkdir()
    for name in ("good.tar", "bad.tar"):
        (tmp_path / "remote" / name).write_bytes(os.urandom(300_000))
    folder = tmp_path / "cache"
    shards = DiskCache(folder)
    with FaultyHTTPServer(tmp_path / "remote") as server:
        for name in ("good.tar", "bad.tar"):
            with shards.open(server.url(name)) as file:
                file.read()
        bad_shard = shards.entry(server.url("bad.tar"))
    tokenizer = Tokenizer.from_file(str(fixtures / "text/tokenizer.json"))
    prefixes = [cache_prefix(folder, f"{name}.jsonl", name.encode(), tokenizer, []) for name in ("good", "bad")]
    for prefix in prefixes:
        save_cache(prefix, TokenArray(np.arange(6, dtype=np.uint16), np.array([0, 2, 6])), {}, label_names=None)
    bad_ids = prefixes[1].with_name(prefixes[1].name + ".ids.npy")
    for spoiled in (bad_shard, bad_ids):  # bytes changed, size and modification time kept: only a full read sees it
        stat, data = spoiled.stat(), bytearray(spoiled.read_bytes())
        data[-1] ^= 0xFF
        spoiled.write_bytes(bytes(data))
        os.utime(spoiled, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (folder / (shards.entry("s3://b/x.tar").name + ".77.0a0b.tmp")).write_bytes(b"half")  # a killed download
    kept = sorted(path.name for path in folder.iterdir() if "good" in path.name)

    assert main(["check", "cache", str(folder), "--json"]) == 1
    problems = {Path(p["path"]).name: p["reason"] for p in json.loads(capsys.readouterr().out)["problems"]}
    orphan = shards.entry("s3://b/x.tar").name + ".77.0a0b.tmp"
    assert set(problems) == {bad_shard.name, prefixes[1].name + ".json", orphan}
    assert "CRC-32" in problems[bad_shard.name] and problems[prefixes[1].name + ".json"].startswith(bad_ids.name)
    assert all(reason.endswith("removed, to be fetched or rebuilt on next use") for reason in problems.values())
    assert sorted(path.name for path in folder.iterdir()) == kept
    assert load_cache(prefixes[0], verify=True)[0][1].tolist() == [2, 3, 4, 5]
    assert main(["check", "cache", str(folder)]) == 0 and "no problems found" in capsys.readouterr().out


def test_the_cli_lists_the_formats_the_datasets_read_and_says_a_folder_is_one(fixtures, tmp_path, capsys):
    from recipes.text.corpus_files import TEXT_FORMATS

    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert " / ".join(TEXT_FORMATS) in capsys.readouterr().out
    (tmp_path / "rows.tsv").write_text("a\tb\n", encoding="utf-8")
    for path, reason in ((tmp_path / "rows.tsv", "unsupported file type '.tsv'"), (fixtures / "text", "is a folder")):
        with pytest.raises(SystemExit) as exit_info:
            main(["check", "text", str(path)])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and reason in err and "'.parquet'" in err, err


# -- one set of rules for COCO files: the check's first problem is the error the dataset raises -----


def _said(problem):
    """A problem as the dataset's DataError words it: ``"<file>, <where>: <reason>"``."""
    return f"{problem.path}, {problem.where}: {problem.reason}" if problem.where else f"{problem.path}: {problem.reason}"


def _broken(doc, case):
    """Break the fixture instances file one way; returns what the file holds instead of JSON, if anything."""
    images, annotations, categories = doc["images"], doc["annotations"], doc["categories"]
    edits = {
        "duplicate-image-id": lambda: images.append(dict(images[1])),
        "duplicate-annotation-id": lambda: annotations.append(dict(annotations[4])),
        "duplicate-category-id": lambda: categories.append(dict(categories[0])),
        "annotation-of-no-image": lambda: annotations[2].update(image_id=12345),
        "unknown-category": lambda: annotations[1].update(category_id=999),
        "zero-width-image": lambda: images[0].update(width=0),
        "no-file-name": lambda: images[1].pop("file_name"),
        "empty-file-name": lambda: images[1].update(file_name=""),
        "absolute-file-name": lambda: images[2].update(file_name="/etc/hostname"),
        "climbing-file-name": lambda: images[2].update(file_name="../instances.json"),
        "string-annotation-id": lambda: annotations[0].update(id="one"),
        "id-past-int64": lambda: images[1].update(id=2**63),
        "three-number-bbox": lambda: annotations[0].update(bbox=[1, 2, 3]),
        "boolean-width": lambda: images[0].update(width=True),
        "category-without-name": lambda: categories[1].pop("name"),
        "entry-not-an-object": lambda: annotations.__setitem__(3, [1, 2]),
        "nan-box": lambda: annotations[0]["bbox"].__setitem__(2, math.nan),  # json.dumps writes NaN
        "zero-height-box": lambda: annotations[5]["bbox"].__setitem__(3, 0),
        "misspelled-key": lambda: doc.__setitem__("annotation", doc.pop("annotations")),
        "images-not-an-array": lambda: doc.__setitem__("images", {"1": images[0]}),
    }
    edits[case]()


BROKEN = ["duplicate-image-id", "duplicate-annotation-id", "duplicate-category-id", "annotation-of-no-image",
          "unknown-category", "zero-width-image", "no-file-name", "empty-file-name", "absolute-file-name",
          "climbing-file-name", "string-annotation-id", "id-past-int64", "three-number-bbox", "boolean-width",
          "category-without-name", "entry-not-an-object", "nan-box", "zero-height-box", "misspelled-key",
          "images-not-an-array", "not-json", "top-level-array"]


def _dataset_error(root, path, parser, monkeypatch):
    from recipes.core.contracts.errors import DataError
    from recipes.detection import CocoDataset, coco_files

    with monkeypatch.context() as patch:
        if parser == "stdlib":
            patch.setattr(coco_files, "msgspec", None)
        with pytest.raises(DataError) as raised:
            # strict: a degenerate box is an error, not a dropped box
            CocoDataset(root, path, read_options=ReadOptions(strict_annotations=True))
    return raised.value


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
@pytest.mark.parametrize("case", BROKEN)
def test_the_first_coco_problem_listed_is_the_error_the_dataset_raises(fixtures, tmp_path, monkeypatch, case, parser):
    doc = json.loads((fixtures / "detection/instances.json").read_text())
    path, root = tmp_path / "instances.json", fixtures / "detection/images"
    if case == "not-json":
        path.write_text('{"images": [')
    elif case == "top-level-array":
        path.write_text(json.dumps([doc]))
    else:
        _broken(doc, case)
        path.write_text(json.dumps(doc))
    report = check(DataOptions("detection", path, image_root=root), workers=1, progress=False)
    error = _dataset_error(root, path, parser, monkeypatch)
    assert error.reason == _said(report.problems[0])
    assert str(error).startswith(error.reason)  # strict=True adds what to do about the box
    assert not report.clean


HOSTILE_FILES = [
    pytest.param("escape.json", "image 2", id="escaping-path"),
    pytest.param("unknown_category.json", "annotation 2", id="unknown-category"),
    pytest.param("negative_box.json", "annotation 3", id="negative-box"),
]


@pytest.mark.parametrize("name, where", HOSTILE_FILES)
def test_each_hostile_coco_file_gets_the_same_words_from_the_check_and_the_dataset(fixtures, monkeypatch, name, where):
    folder = fixtures / "hostile/coco"
    report = check(DataOptions("detection", folder / name, image_root=folder / "images"), workers=1, progress=False)
    assert [problem.where for problem in report.problems] == [where]
    for parser in ("msgspec", "stdlib"):
        assert _dataset_error(folder / "images", folder / name, parser, monkeypatch).reason == _said(report.problems[0])


def test_a_coco_file_with_several_problems_the_dataset_names_the_first_and_the_check_all(fixtures, tmp_path, monkeypatch):
    doc = json.loads((fixtures / "detection/instances.json").read_text())
    images, annotations = doc["images"], doc["annotations"]
    width = images[3].pop("width")                        # entry: a field missing
    annotations[6]["bbox"] = "wide"                       # entry: a field of the wrong type
    images[1]["file_name"] = "../escape.jpg"              # the columns: a name that climbs out
    annotations[1]["category_id"] = 999                   # an unknown category
    annotations[2]["image_id"] = 12345                    # an annotation of no image
    annotations[3]["bbox"][2] = -4                        # a degenerate box
    path, root = tmp_path / "instances.json", fixtures / "detection/images"
    path.write_text(json.dumps(doc))
    report = check(DataOptions("detection", path, image_root=root), workers=1, progress=False)
    expected = [
        (f"image {images[3]['id']}", "no 'width'"),
        (f"annotation {annotations[6]['id']}", "bbox 'wide' is not 4 numbers"),
        (f"image {images[1]['id']}", "path '../escape.jpg' escapes the dataset root"),
        (f"annotation {annotations[2]['id']}", "image_id 12345 is not in 'images'"),
        (f"annotation {annotations[1]['id']}", "category_id 999 is not in 'categories'"),
        (f"annotation {annotations[3]['id']}", "has a non-positive width or height"),
    ]
    assert len(report.problems) == len(expected), [str(problem) for problem in report.problems]
    for problem, (where, words) in zip(report.problems, expected):
        assert problem.where == where and words in problem.reason, (str(problem), where, words)
    for parser in ("msgspec", "stdlib"):
        assert _dataset_error(root, path, parser, monkeypatch).reason == _said(report.problems[0])
    images[3]["width"] = width  # the entry problems mended: the dataset names the first of the columns' problems
    annotations[6]["bbox"] = [1, 1, 2, 2]
    path.write_text(json.dumps(doc))
    report = check(DataOptions("detection", path, image_root=root), workers=1, progress=False)
    assert [problem.where for problem in report.problems] == [where for where, _ in expected[2:]]
    assert _dataset_error(root, path, "msgspec", monkeypatch).reason == _said(report.problems[0])


def test_image_sizes_are_ordered_by_one_stated_key_the_area(tmp_path):
    # 200x20 is the widest and 80x80 the tallest, yet by area 200x20 is the smallest and 80x80 the largest
    for name, size in {"a.png": (96, 64), "b.png": (80, 80), "c.png": (200, 20)}.items():
        (tmp_path / "one").mkdir(exist_ok=True)
        Image.new("RGB", size).save(tmp_path / "one" / name)
    report = check(DataOptions("vision", tmp_path), workers=1, progress=False)
    assert report.summary["sizes by area"] == (
        "smallest 200x20 (4,000 px), median 96x64 (6,144 px), largest 80x80 (6,400 px) (WxH)")
