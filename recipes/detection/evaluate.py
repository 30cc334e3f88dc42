"""COCO box evaluation: model outputs -> COCO result rows -> pycocotools COCOeval's 12 numbers.

    from recipes.detection import evaluate, to_coco_results

    model.eval()
    results = []
    for images, targets in detection_loader(dataset, 8, train=False):
        outputs = model([image.float() / 255 for image in images])
        results += to_coco_results(outputs, [t["image_id"] for t in targets],
                                   label_to_category=dataset.label_to_category)  # if labels are 1..K
    metrics = evaluate(dataset, results)    # {"AP": 0.372, "AP50": ..., "ARl": ...}

The ground truth is the dataset's own index (``dataset.ground_truth()``, crowd regions
included), so the file is not parsed again and the images scored are exactly the dataset's
(after ``remove_empty`` or a skipped ``file_name``). Boxes the dataset dropped as degenerate are
not in it: the official scorer would count them as objects no detector can match.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: COCOeval.stats, in order: AP at IoU .50:.95 / .50 / .75, AP for small / medium / large
#: objects, AR with 1 / 10 / 100 detections per image, AR for small / medium / large objects.
STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl")


def to_coco_results(
    outputs: Sequence[Mapping[str, Any]],
    image_ids: Sequence[int] | torch.Tensor,
    *,
    label_to_category: Mapping[int, int] | None = None,
) -> list[dict[str, Any]]:
    """Turn detector outputs into COCO result rows.

    Args:
        outputs: one dict per image with ``boxes`` XYXY [N,4], ``labels`` [N], ``scores`` [N]
            (what torchvision detection models return in eval mode).
        image_ids: the COCO image id of each output, e.g. ``[t["image_id"] for t in targets]``.
        label_to_category: map model labels back to COCO category ids
            (``dataset.label_to_category`` for a model trained with contiguous labels).

    Returns:
        ``[{"image_id", "category_id", "bbox": [x, y, width, height], "score"}, ...]``.
    """
    if len(outputs) != len(image_ids):
        raise ValueError(f"got {len(outputs)} outputs for {len(image_ids)} image ids")
    rows = []
    for output, image_id in zip(outputs, image_ids):
        boxes = torch.as_tensor(output["boxes"]).detach().to("cpu", torch.float64).reshape(-1, 4)
        boxes[:, 2:] -= boxes[:, :2].clone()  # XYXY -> XYWH
        labels = torch.as_tensor(output["labels"]).tolist()
        if label_to_category is not None:
            unknown = sorted(set(labels) - set(label_to_category))
            if unknown:
                raise ValueError(f"labels {unknown} are not in label_to_category (known: {sorted(label_to_category)})")
            labels = [label_to_category[label] for label in labels]
        scores = torch.as_tensor(output["scores"]).tolist()
        image_id = int(image_id)
        rows.extend(
            {"image_id": image_id, "category_id": int(label), "bbox": box, "score": float(score)}
            for box, label, score in zip(boxes.tolist(), labels, scores)
        )
    return rows


def evaluate(dataset: Any, results: Sequence[Mapping[str, Any]], *, verbose: bool = False) -> dict[str, float]:
    """Score ``results`` against ``dataset`` with pycocotools' COCOeval (bbox).

    Args:
        dataset: a :class:`CocoDataset` (anything with ``ground_truth()``).
        results: rows from :func:`to_coco_results`; images without rows count as no detections.
        verbose: print COCOeval's summary table.

    Returns:
        The 12 summary numbers by name (:data:`STAT_NAMES`); -1 where the dataset has no object
        of that kind (e.g. ``APl`` without large objects).

    Raises:
        ValueError: a row names an image or a category the dataset does not have.
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth = dataset.ground_truth()
    image_ids = {image["id"] for image in truth["images"]}
    category_ids = {category["id"] for category in truth["categories"]}
    unknown_images = sorted({int(r["image_id"]) for r in results} - image_ids)
    if unknown_images:
        raise ValueError(f"results name images that are not in the dataset: {unknown_images[:10]}")
    unknown_categories = sorted({int(r["category_id"]) for r in results} - category_ids)
    if unknown_categories:
        raise ValueError(
            f"results name category ids {unknown_categories[:10]} that are not in the dataset "
            f"({sorted(category_ids)}); for a model trained on labels 1..K pass "
            "label_to_category=dataset.label_to_category to to_coco_results"
        )
    # What COCO.loadRes builds for boxes, without its crash on an empty list.
    detections = [
        {
            "id": k + 1,
            "image_id": int(r["image_id"]),
            "category_id": int(r["category_id"]),
            "bbox": list(r["bbox"]),
            "score": float(r["score"]),
            "area": r["bbox"][2] * r["bbox"][3],
            "iscrowd": 0,
        }
        for k, r in enumerate(results)
    ]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ground, detected = COCO(), COCO()
        ground.dataset = truth
        detected.dataset = {"images": truth["images"], "categories": truth["categories"], "annotations": detections}
        ground.createIndex()
        detected.createIndex()
        scorer = COCOeval(ground, detected, iouType="bbox")
        scorer.evaluate()
        scorer.accumulate()
        scorer.summarize()
    if verbose:
        print(printed.getvalue(), end="")
    return {name: float(value) for name, value in zip(STAT_NAMES, scorer.stats)}
