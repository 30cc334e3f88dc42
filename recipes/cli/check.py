"""``recipes check DOMAIN PATH``: validate a dataset without training on it.

    python -m recipes check vision data/train
    python -m recipes check detection instances_val2017.json --image-root val2017 --json
    python -m recipes check text train.jsonl --tokenizer tokenizer.json --max-length 512

Prints a summary and every problem with its path and reason (``--json``: the same, machine
readable, plus each image's size, mode and format). Exit status 0 when nothing is wrong, 1 when
problems were found, 2 when PATH or an option is unusable (one line: a COCO image root that does
not exist or holds none of the images is one error, not one per image). What is checked is the
domain's own check, which its entry in :mod:`recipes.domains` names (``check``): image folders
and image tar shards (:mod:`recipes.cli.check_files`), COCO files (:mod:`recipes.cli.check_coco`),
text rows and caption manifests (:mod:`recipes.cli.check_data`), clips (:mod:`recipes.cli.check_audio`);
``recipes check cache DIR`` re-hashes a cache folder instead (:mod:`recipes.cli.check_cache`).
"""

from __future__ import annotations

import argparse
import json

from recipes.cli.datasets import DataOptions
from recipes.cli.report import Report
from recipes.cli.terms import in_cli_terms
from recipes.domains import domain


def check(options: DataOptions, *, workers: int | None = None, progress: bool = True) -> Report:
    """Check the dataset ``options`` describe with its domain's check; returns the report
    (``report.clean`` if all is well)."""
    entry = domain(options.domain)
    if entry.check is None:
        raise ValueError(f"recipes check has no checks for {options.domain} files (its entry in recipes/domains.py "
                         "names none)")
    return entry.load("check")(options, workers=workers, progress=progress)


def run(args: argparse.Namespace, options: DataOptions) -> int:
    report = check(options, workers=args.workers, progress=not args.json)
    print(in_cli_terms(json.dumps(report.to_json(), indent=1) if args.json else report.render()))
    return 0 if report.clean else 1
