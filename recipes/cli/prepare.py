"""``recipes prepare DOMAIN SOURCE DEST``: the domain's ``prepare``, its summary printed, and how to read the copy."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    common = {"max_side": args.max_side, "quality": args.quality, "samples_per_shard": args.samples_per_shard,
              "workers": args.workers, "on_error": args.on_error, "overwrite": args.overwrite}
    if args.domain == "detection":
        from recipes.detection import prepare

        if args.image_root is None:
            raise ValueError("detection reads its images from --image-root DIR (the folder of the file's file_names)")
        summary = prepare(args.image_root, args.source, args.dest, **common)
        reader = f"recipes.detection.CocoShards({str(args.dest)!r}, categories={str(args.dest / 'categories.json')!r})"
    else:
        from recipes.vision import prepare

        summary = prepare(args.source, args.dest, image_root=args.image_root, **common)
        reader = f"recipes.vision.ImageShards({str(args.dest)!r}, classes={str(args.dest / 'classes.txt')!r})"
    print(summary)
    print(f"read it with {reader}")
    return 0
