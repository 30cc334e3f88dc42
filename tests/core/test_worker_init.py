"""Every preset freezes the objects a forked worker inherits, and still runs the user's worker_init_fn."""

import gc
import os
import pickle

from torch.utils.data import Dataset

from recipes.core.loading.loader import build_loader, freeze_inherited_objects, loader_kwargs


class FreezeCounts(Dataset):
    """Item i: ``(i, objects frozen in this process, what the user's init recorded)``."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int):
        return index, gc.get_freeze_count(), os.environ.get("RECIPES_TEST_INIT", "")


def record_init(worker_id: int) -> None:
    # runs after the freeze: it sees the frozen count, and leaves its mark for the items
    os.environ["RECIPES_TEST_INIT"] = f"{worker_id}:{gc.get_freeze_count() > 0}"


def keep(batch):
    return batch


def test_worker_presets_freeze_and_the_main_process_preset_does_not():
    assert loader_kwargs("cpu", train=True, num_workers=2)["worker_init_fn"] is freeze_inherited_objects
    assert loader_kwargs("cuda", train=True, num_workers=2)["worker_init_fn"] is freeze_inherited_objects
    assert "worker_init_fn" not in loader_kwargs("cpu", train=True, num_workers=0)
    loader = build_loader(FreezeCounts(), keep, batch_size=2, train=False, device="cpu", num_workers=0)
    assert loader.worker_init_fn is None


def test_workers_start_frozen_and_then_run_the_users_init():
    here = gc.get_freeze_count()  # 0 on Python 3.11; 3.12 starts with a few hundred
    loader = build_loader(
        FreezeCounts(), keep, batch_size=1, train=False, device="cpu", num_workers=2, worker_init_fn=record_init
    )
    pickle.dumps(loader.worker_init_fn)  # travels to spawned workers too
    items = [item for batch in loader for item in batch]
    assert [index for index, _, _ in items] == [0, 1, 2, 3]
    assert all(frozen > here + 1000 for _, frozen, _ in items)  # torch's modules, at least
    assert {mark for _, _, mark in items} == {"0:True", "1:True"}
    assert gc.get_freeze_count() == here and "RECIPES_TEST_INIT" not in os.environ  # this process is not frozen

