"""``recipes check DOMAIN PATH``: validate a dataset without training on it.

    python -m recipes check vision data/train
    python -m recipes check detection instances_val2017.json --image-root val2017 --json
    python -m recipes check text train.jsonl --tokenizer tokenizer.json --max-length 512
    python -m recipes check audio train_manifest.jsonl --max-seconds 30

Prints a summary and every problem with its path and reason (``--json``: the same, machine
readable, plus each image's size, mode and format). Exit status 0 when nothing is wrong, 1 when
problems were found, 2 when PATH or an option is unusable (one line: a COCO image root that does
not exist or holds none of the images is one error, not one per image). What is checked, per domain: :mod:`recipes.cli.check_files` (images, folder
layout), :mod:`recipes.cli.check_coco` (COCO files), :mod:`recipes.cli.check_data` (text rows, caption manifests) and
:mod:`recipes.cli.check_audio` (clips: headers against decoded lengths);
``recipes check cache DIR`` re-hashes a cache folder instead (:mod:`recipes.cli.check_cache`).
"""

from __future__ import annotations

import argparse
import json

from recipes.cli.check_coco import check_coco
from recipes.cli.check_data import check_captions, check_rows
from recipes.cli.check_files import check_image_folder
from recipes.cli.datasets import DataOptions
from recipes.cli.report import Report
from recipes.cli.terms import in_cli_terms


def check(options: DataOptions, *, workers: int | None = None, progress: bool = True) -> Report:
    """Check the dataset ``options`` describe; returns the report (``report.clean`` if all is well)."""
    if options.domain == "vision":
        return check_image_folder(options.path, workers=workers, progress=progress)
    if options.domain == "audio":
        from recipes.cli.check_audio import check_audio  # here: TorchCodec loads only for audio

        return check_audio(options.path, text_field=options.text_field, max_seconds=options.max_seconds,
                           workers=workers, progress=progress)
    if options.domain == "video":
        from recipes.video.check import check_videos  # here: TorchCodec loads only for video

        return check_videos(options.path, Report("video", str(options.path)))
    if options.domain == "detection":
        from recipes.detection.demo import image_root

        return check_coco(options.path, image_root(options), workers=workers, progress=progress)
    if options.domain not in ("text", "multimodal"):
        raise ValueError(f"recipes check has no checks for {options.domain} files (recipes/cli/check.py)")
    tokenizer = _optional_tokenizer(options)
    if options.domain == "text":
        return check_rows(options.path, tokenizer, text_field=options.text_field,
                          label_field=options.label_field, max_length=options.max_length)
    return check_captions(options.path, tokenizer, image_root=options.image_root,
                          max_length=77 if options.max_length is None else options.max_length,
                          workers=workers, progress=progress, image_field=options.image_field,
                          caption_field=options.caption_field)


def _optional_tokenizer(options: DataOptions):
    from recipes.core.tokens import load_tokenizer

    try:
        return load_tokenizer(options.tokenizer_path())
    except ValueError:
        return None  # lengths are then counted in words


def run(args: argparse.Namespace, options: DataOptions) -> int:
    report = check(options, workers=args.workers, progress=not args.json)
    print(in_cli_terms(json.dumps(report.to_json(), indent=1) if args.json else report.render()))
    return 0 if report.clean else 1
