"""The HF ``Trainer`` fed by a preset loader: its batching, its ranks, its seeds, a model's own keys.

    trainer = PresetTrainer(model, TrainingArguments("out", num_train_epochs=3),
                            train_loader=text_loader(dataset, 16, seed=0, device="cuda"))
    trainer.train()                                   # or train(resume_from_checkpoint=True)

``Trainer`` builds its own loader from a dataset: a ``RandomSampler`` (or its length-grouped one),
its collator, and a column removal that strips the keys a recipe's collate needs (``index``).
:class:`PresetTrainer` takes the preset instead, so the batches stay what the recipe makes
(length-grouped, truncated, dealt to the ranks with equal steps, seeded by ``(seed, epoch, index)``),
and hands the model's ``forward`` only the batch keys it names (a recipe's batch also holds
``lengths`` and ``index``). Resuming from a checkpoint is exact: ``Trainer`` sets the epoch through
the loader's ``set_epoch`` and skips the batches already trained with Accelerate's
``skip_first_batches``, which skips indices, so pass the preset a ``seed``: a drawn one differs
between the run and its resume. Needs ``pip install transformers``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch
from transformers import Trainer


class PresetTrainer(Trainer):
    """A ``transformers.Trainer`` whose batches come from recipe loaders.

    Args:
        model, args: as for ``Trainer``; the other keyword arguments go to ``Trainer`` too
            (``callbacks``, ``optimizers``, ``compute_metrics``, ...), except the datasets and collator,
            which the loaders replace.
        train_loader: the training preset (``text_loader(..., seed=...)``, ``vision_loader``, ...).
        eval_loader: the evaluation preset (``train=False``), for ``evaluate()``.
    """

    def __init__(self, model: Any, args: Any, *, train_loader: Iterable[Any], eval_loader: Iterable[Any] | None = None,
                 **kwargs: Any) -> None:
        taken = sorted({"train_dataset", "eval_dataset", "data_collator"} & set(kwargs))
        if taken:
            raise ValueError(f"PresetTrainer takes loaders, not {', '.join(taken)}: the loaders batch their datasets")
        self.train_loader, self.eval_loader = train_loader, eval_loader
        super().__init__(model, args, train_dataset=getattr(train_loader, "dataset", None), **kwargs)
        parameters = inspect.signature(self.model.forward).parameters.values()
        self.forward_keys = {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}

    def get_train_dataloader(self) -> Iterable[Any]:
        return self.train_loader

    def get_eval_dataloader(self, eval_dataset: Any = None) -> Iterable[Any]:
        if eval_dataset is not None or self.eval_loader is None:
            raise ValueError("PresetTrainer evaluates its eval_loader: pass eval_loader=<an evaluation preset>")
        return self.eval_loader

    def model_inputs(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The keys of ``batch`` that the model's ``forward`` names (``lengths``, ``index`` stay out)."""
        return {key: value for key, value in batch.items() if key in self.forward_keys}

    def training_step(self, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> torch.Tensor:
        return super().training_step(model, self.model_inputs(inputs), *args, **kwargs)

    def prediction_step(self, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return super().prediction_step(model, self.model_inputs(inputs), *args, **kwargs)
