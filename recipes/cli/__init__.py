"""The command line behind ``python -m recipes`` (also installed as ``recipes``).

One module per command, each with a ``run(args)`` that the argparse entry point in
``recipes/__main__.py`` calls:

- ``demo``: every domain's recipe on the bundled fixtures: size, one batch, one epoch's time.
- ``bench``: sweep DataLoader settings on your own data through the recipe's loader
  (:func:`recipes.core.loading.tuning.tune_loader`) and print the recommended ``loader_kwargs``.
- ``check``: validate a dataset without training on it (``check_files`` decodes every image
  in worker processes; ``check_coco`` reads COCO annotations, ``check_data`` text rows and
  caption manifests; ``check.check_cache`` re-hashes a cache folder, ``recipes check cache DIR``).
- ``show``: render one batch to a PNG to catch a wrong label map or a flipped box.
  ``drawing`` (font, enlarging, labels kept inside the image), ``token_text`` (ids back to
  readable text) and ``token_rows`` (the text picture) draw it.
- ``copy``: a domain's folder into your project, its own imports pointed at the copy.
- ``prepare``: a training-ready copy of a dataset, in the shards its loaders read (``recipes.vision.prepare``).

``datasets`` turns the command-line description of a dataset (domain, path, tokenizer, image
root, size) into the domain's dataset and loader, for ``bench`` and ``show``.
"""
