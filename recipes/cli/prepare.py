"""``recipes prepare DOMAIN SOURCE DEST``: the domain's ``prepare`` (its entry's ``prepare`` piece in
:mod:`recipes.domains`), its summary printed, and how to read the copy.

The options every domain takes (``--samples-per-shard``, ``--workers``, ``--on-error``,
``--overwrite``) are always passed; of the others (:data:`OPTIONS`) only those given, and one the
domain's ``prepare_path`` has no parameter for is refused by name."""

from __future__ import annotations

import argparse
import inspect

from recipes.domains import domain

# prepare_path's keyword -> its flag: what some domains read (a domain's prepare_path names those it takes)
OPTIONS = {
    "max_side": "--max-side", "quality": "--quality", "image_root": "--image-root",
    "sample_rate": "--sample-rate", "keep_channels": "--keep-channels", "format": "--format",
    "audio_root": "--audio-root", "tokenizer": "--tokenizer", "max_length": "--max-length",
    "text_field": "--text-field", "label_field": "--label-field", "short_side": "--short-side",
    "frames_per_clip": "--frames-per-clip", "frame_step": "--frame-step", "keyframe_every": "--keyframe-every",
    "fps": "--fps", "crf": "--crf",
}


def run(args: argparse.Namespace) -> int:
    entry = domain(args.domain)
    if entry.prepare is None:
        raise ValueError(f"recipes prepare has no prepare for {args.domain} yet (its entry in recipes/domains.py "
                         "names none)")
    prepare_path = entry.load("prepare")
    given = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) not in (None, False)}
    takes = inspect.signature(prepare_path).parameters
    refused = [OPTIONS[name] for name in given if name not in takes]
    if refused:
        accepted = [flag for name, flag in OPTIONS.items() if name in takes]
        raise ValueError(f"recipes prepare {args.domain} takes no {', '.join(refused)} (it takes "
                         f"{', '.join(accepted) or 'none of the domain options'})")
    summary, reader = prepare_path(args.source, args.dest, **given, samples_per_shard=args.samples_per_shard,
                                   workers=args.workers, on_error=args.on_error, overwrite=args.overwrite)
    print(summary)
    print(f"read it with {reader}")
    return 0
