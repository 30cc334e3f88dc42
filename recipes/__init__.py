"""recipes: PyTorch data-loading recipes for vision, text, detection and multimodal work.

Each domain ships a ready ``Dataset``, the ``collate_fn`` that matches it and a loader preset
tuned for CUDA: ``recipes.vision`` (image folders), ``recipes.text`` (tokenized text with
padding, packing and length-grouped batches), ``recipes.detection`` (COCO boxes and masks as
tv_tensors, aspect-ratio batches, COCO evaluation) and ``recipes.multimodal`` (image-caption
pairs and tar shards). ``recipes.core`` holds what they share: decoding, seeding, resumable
rank-aware samplers, device prefetching. A domain's folder imports only itself and
``recipes.core`` (multimodal also the vision and text it composes), so ``python -m recipes copy
DOMAIN DEST`` copies it into a project to edit.
``python -m recipes demo`` runs them all on tiny bundled fixtures.
"""

__version__ = "0.1.0"
