"""What a preset loader tells the trainers that take it: it deals the epoch to the ranks itself.

    trainer.fit(model, train_dataloaders=text_loader(...))     # Lightning, devices=N, strategy="ddp"
    model, optimizer, loader = accelerator.prepare(model, optimizer, vision_loader(...))

A preset's batch sampler (or stream) already gives each rank its share of every epoch. A trainer
that shards the loader again loses samples: Lightning re-builds any batch sampler around a
``DistributedSampler`` unless ``loader.sampler`` is one, and Accelerate deals the batches of the
loader's batch sampler to the ranks again unless the loader says it is prepared. :func:`shards_itself`
marks a loader class with both answers, so both trainers take the loader as it is:

- ``loader.sampler`` is a :class:`RankShare`, this rank's samples of the next pass seen as the
  ``DistributedSampler`` they are (Lightning then leaves the loader alone and calls ``set_epoch``);
- ``loader.set_epoch(epoch)`` sets the next pass's epoch (the HF ``Trainer`` calls it);
- ``_is_accelerate_prepared`` is Accelerate's own mark of a loader it must not wrap twice
  (``Accelerator.prepare_data_loader``; the one name of Accelerate's we use, fenced here and
  pinned by tests/text/test_trainers.py), and ``use_stateful_dataloader`` tells its
  ``save_state`` / ``load_state`` to keep the loader's ``state_dict``: a resume is exact.

A loader built before the process group started deals everything to its one rank; iterated on
several ranks, :func:`check_built_for_ranks` stops it at once rather than repeat every sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DistributedSampler, IterableDataset, Sampler

from recipes.core.sampling.distributed import distributed_rank_and_size
from recipes.core.sampling.samplers import GroupedBatchSampler

ACCELERATE_PREPARED = "_is_accelerate_prepared"  # accelerate 1.x: prepare_data_loader returns such a loader as is


class RankShare(DistributedSampler):
    """This rank's samples of the next pass of ``batch_sampler``, in batch order: the
    ``DistributedSampler`` a preset's batch sampler amounts to. Every value is read from the batch
    sampler, which stays the one that deals the batches (``DistributedSampler.__init__`` would
    store copies, so it is not called)."""

    def __init__(self, batch_sampler: GroupedBatchSampler) -> None:
        self.batch_sampler = batch_sampler

    num_replicas = property(lambda self: self.batch_sampler.world_size)
    rank = property(lambda self: self.batch_sampler.rank)
    epoch = property(lambda self: self.batch_sampler.epoch)
    seed = property(lambda self: self.batch_sampler.seed)
    shuffle = property(lambda self: self.batch_sampler.shuffle)
    drop_last = property(lambda self: self.batch_sampler.drop_last)

    def set_epoch(self, epoch: int) -> None:
        """The batch sampler's ``set_epoch``: the next pass is ``epoch``."""
        self.batch_sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        for batch in self.batch_sampler.batches(self.batch_sampler.epoch):
            yield from batch.tolist()

    def __len__(self) -> int:
        return sum(len(batch) for batch in self.batch_sampler.batches(self.batch_sampler.epoch))


def _sampler(loader: Any) -> Sampler:
    if isinstance(loader.batch_sampler, GroupedBatchSampler):
        share = loader.__dict__.get("_rank_share")
        if share is None or share.batch_sampler is not loader.batch_sampler:
            share = loader.__dict__["_rank_share"] = RankShare(loader.batch_sampler)
        return share
    return loader.__dict__["_given_sampler"]


def _set_sampler(loader: Any, sampler: Sampler) -> None:
    loader.__dict__["_given_sampler"] = sampler  # what DataLoader.__init__ made (unused beside a batch sampler)


def shards_itself(cls: type) -> type:
    """Mark a ``DataLoader`` subclass whose batch sampler or stream deals to the ranks itself, for
    Lightning and Accelerate (see the module doc). Its ``sampler`` is a :class:`RankShare` when
    the batch sampler is a :class:`GroupedBatchSampler`, else what ``DataLoader`` made."""
    cls.sampler = property(_sampler, _set_sampler)
    setattr(cls, ACCELERATE_PREPARED, True)
    cls.use_stateful_dataloader = hasattr(cls, "state_dict")
    cls.set_epoch = _set_epoch
    return cls


def _set_epoch(loader: Any, epoch: int) -> None:
    """Use ``epoch`` for the next pass: the HF ``Trainer`` calls it at each epoch, and so at the one it resumes."""
    if isinstance(loader.batch_sampler, GroupedBatchSampler):
        loader.batch_sampler.set_epoch(epoch)
    elif isinstance(loader.dataset, IterableDataset):
        from recipes.core.sources.streams import ResumableStream  # a stream loader has imported it: a map-style one need not

        if isinstance(loader.dataset, ResumableStream):
            loader.dataset.set_epoch(epoch)


def check_built_for_ranks(loader: Any) -> None:
    """Raise a RuntimeError if ``loader`` deals to one process but runs on a process group of more.

    Samplers and streams read the rank and world size when they are built, in the main process;
    built before ``init_process_group`` (a script's loader that Lightning's ``fit`` or the
    launcher starts ranks for later), every rank would read every sample.
    """
    rank, world_size = distributed_rank_and_size()
    if world_size == 1:
        return
    dealer = loader.batch_sampler if isinstance(loader.batch_sampler, GroupedBatchSampler) else None
    if isinstance(loader.dataset, IterableDataset):
        from recipes.core.sources.streams import ResumableStream  # a stream loader has imported it: a map-style one need not

        dealer = loader.dataset if isinstance(loader.dataset, ResumableStream) else None
    if dealer is not None and dealer.world_size == 1:
        raise RuntimeError(
            f"this loader was built before torch.distributed was initialised and deals every sample to each of the "
            f"{world_size} ranks (this is rank {rank}): build it after the process group starts, in Lightning's "
            "LightningDataModule.train_dataloader() / val_dataloader(), or after Accelerator() or "
            "init_process_group()"
        )
