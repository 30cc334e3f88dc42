"""``recipes prepare DOMAIN SOURCE DEST``: the domain's ``prepare``, its summary printed, and how to read the copy."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from recipes.vision.prepare_shards import prepare

    summary = prepare(args.source, args.dest, max_side=args.max_side, quality=args.quality,
                      samples_per_shard=args.samples_per_shard, image_root=args.image_root, workers=args.workers,
                      on_error=args.on_error, overwrite=args.overwrite)
    print(summary)
    print(f"read it with recipes.vision.ImageShards({str(args.dest)!r}, classes={str(args.dest / 'classes.txt')!r})")
    return 0
