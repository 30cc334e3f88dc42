"""Run under torchrun: each rank writes what its samplers and loader yield to OUT/rank<r>.json."""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from recipes.core.loading.loader import build_loader
from recipes.core.sampling.plans import ByGroup, ByLength, TokenBudget
from recipes.core.sampling.samplers import GroupedBatchSampler
from tests.core.toy import IterableSeedProbe, NoisyRange, as_list, collate


def main(out: Path, size: int) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    lengths = [(i * 37) % 50 + 1 for i in range(size)]
    groups = [i % 3 == 0 for i in range(size)]
    report = {"seeds": None, "samplers": {}, "loader": None}
    for name, options in {
        "plain-train": {"shuffle": True, "drop_last": True},
        "grouped-train": {"shuffle": True, "drop_last": True, "groups": groups},
        "sorted-train": {"shuffle": True, "lengths": lengths},
        "budget-train": {"shuffle": True, "lengths": lengths, "max_tokens": 64, "batch_size": None},
        "plain-eval": {"shuffle": False},
        "budget-eval": {"shuffle": False, "lengths": lengths, "max_tokens": 64, "batch_size": None},
    }.items():
        options = {"batch_size": 4, **options}
        lengths_of, budget = options.pop("lengths", None), options.pop("max_tokens", None)
        plan = ByGroup(options.pop("groups")) if "groups" in options else None
        if lengths_of is not None:
            plan = ByLength(lengths_of) if budget is None else TokenBudget(lengths_of, budget)
        sampler = GroupedBatchSampler(size, options.pop("batch_size"), seed=None, plan=plan, **options)  # seed shared by broadcast
        report["samplers"][name] = {"seed": sampler.seed, "epochs": [list(sampler), list(sampler)]}
    loader = build_loader(NoisyRange(size), collate, batch_size=4, train=True, device="cpu", seed=5, num_workers=0)
    report["loader"] = [{"index": b["index"].tolist(), "noise": b["noise"].tolist()} for b in loader]
    # a checkpoint per rank: a fresh loader given this rank's state continues this rank's batches
    def resumable():
        return build_loader(NoisyRange(size), collate, batch_size=4, train=True, device="cpu", seed=5, stateful=True,
                            num_workers=0)

    interrupted = resumable()
    iterator = iter(interrupted)
    taken = [next(iterator)["index"].tolist() for _ in range(3)]
    state = interrupted.state_dict()
    resumed = resumable()
    resumed.load_state_dict(state)
    report["resume"] = {
        "taken": taken,
        "continuation": [b["index"].tolist() for b in iterator],
        "resumed": [b["index"].tolist() for b in resumed],
    }
    torch.manual_seed(0)  # as every rank of a typical script does: it must not make workers alike
    report["worker_draws"] = {
        str(seed): [
            item for item in build_loader(IterableSeedProbe(), as_list, batch_size=None, train=False, device="cpu",
                                          seed=seed, num_workers=2)
        ]
        for seed in (5, None)
    }
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(Path(sys.argv[1]), int(sys.argv[2]))
