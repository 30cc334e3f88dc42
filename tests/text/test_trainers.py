"""The text presets and a text stream under Lightning's own DDP launcher and Accelerate under
torchrun, two CPU ranks: every sample once per epoch, as under plain torchrun, and an exact resume
through each trainer's own checkpoint (tests/trainer_runs.py runs them)."""

from __future__ import annotations

import json

import pytest

from recipes.core import SeededBatchSampler
from recipes.text import TokenizedTextDataset, text_loader
from tests.text.trainer_loaders import DATA, TOKENIZER
from tests.trainer_runs import launch

pytest.importorskip("lightning")
pytest.importorskip("accelerate")

LINES = "tests.text.trainer_loaders:lines"
WORLD, EPOCHS, BATCH, SAMPLES = 2, 2, 8, 120
STREAM_STEPS = 6  # a training stream's steps a rank in one pass (tests.text.trainer_loaders:stream)


def torchrun_batches(epoch: int, rank: int, max_length: int | None = None, world: int = WORLD) -> list[list[int]]:
    """What rank ``rank`` of ``world`` trains on in ``epoch`` under plain torchrun: the oracle."""
    dataset = TokenizedTextDataset(DATA, TOKENIZER, max_length=max_length)
    plan = text_loader(dataset, BATCH, device="cpu", seed=0, num_workers=0).batch_sampler.plan
    sampler = SeededBatchSampler(SAMPLES, BATCH, shuffle=True, drop_last=True, seed=0, plan=plan, rank=rank,
                                 world_size=world)
    return [batch.tolist() for batch in sampler.batches(epoch)]


def resumed_run(mode: str, tmp_path, config: dict, checkpoint: str, **resume) -> list[dict]:
    """Each rank's steps and evaluations of a run stopped after 10 steps (in epoch 1) and resumed
    from ``checkpoint`` (a path under ``tmp_path``), one after the other."""
    stopped = launch(mode, tmp_path, {**config, "run": "stopped", "stop_after": 10})
    resumed = launch(mode, tmp_path, {**config, "run": "resumed", "resume": str(tmp_path / checkpoint), **resume})
    assert [len(report["steps"]) for report in stopped] == [10] * WORLD
    return [{"steps": a["steps"] + b["steps"], "evaluated": a["evaluated"] + b["evaluated"]}
            for a, b in zip(stopped, resumed)]


def check_every_sample_once(reports: list[dict], evaluated: bool = True) -> None:
    for rank, report in enumerate(reports):
        for epoch in range(EPOCHS):
            got = [step[1:] for step in report["steps"] if step[0] == epoch]
            assert got == torchrun_batches(epoch, rank), (rank, epoch)
    for epoch in range(EPOCHS):
        seen = [i for report in reports for step in report["steps"] if step[0] == epoch for i in step[1:]]
        # equal steps: 15 global batches, 7 a rank, one left over; no sample twice
        assert len(seen) == len(set(seen)) == (SAMPLES // BATCH // WORLD) * WORLD * BATCH
    firsts = [[step for step in reports[0]["steps"] if step[0] == epoch][0] for epoch in range(EPOCHS)]
    assert firsts[0][1:] != firsts[1][1:]  # a new order each epoch
    if evaluated:
        seen = sorted(i for report in reports for i in report["evaluated"])
        assert seen == sorted(list(range(SAMPLES)) * EPOCHS)  # each sample once per evaluation


@pytest.mark.slow
def test_lightning_ddp_takes_the_preset_and_resumes_mid_epoch_exactly(tmp_path):
    # the batches of an uninterrupted run under plain torchrun, from a run stopped mid-epoch and resumed
    config = {"factory": LINES, "epochs": EPOCHS, "workers": 1}
    check_every_sample_once(resumed_run("lightning", tmp_path, config, "checkpoints/mid.ckpt", predict=True))
    # then trainer.predict on the evaluation preset: Lightning rebuilds its batch sampler from its sampler
    predicted = [json.loads((tmp_path / f"resumed-predicted-rank{rank}.json").read_text()) for rank in range(WORLD)]
    assert sorted(i for batches in predicted for batch in batches for i in batch) == list(range(SAMPLES))


@pytest.mark.slow
def test_lightning_ddp_takes_a_stream(tmp_path):
    reports = launch("lightning", tmp_path, {"run": "stream", "factory": "tests.text.trainer_loaders:stream",
                                             "epochs": EPOCHS, "workers": 2})
    for epoch in range(EPOCHS):
        seen = [i for report in reports for step in report["steps"] if step[0] == epoch for i in step[1:]]
        assert len(seen) == len(set(seen)) > SAMPLES - WORLD * 2 * BATCH  # 2 workers: at most their partial batches left out
        assert len({len([s for s in report["steps"] if s[0] == epoch]) for report in reports}) == 1  # equal steps
    offsets = [i for report in reports for i in report["evaluated"]]
    assert len(offsets) == len(set(offsets)) * EPOCHS and len(set(offsets)) == SAMPLES  # every line once an evaluation


@pytest.mark.slow
def test_lightning_refuses_a_loader_built_before_its_ranks_by_name(tmp_path):
    # built before fit starts the process group, the sampler deals all 120 samples to each rank
    stderr = launch("lightning", tmp_path, {"run": "early", "factory": LINES, "epochs": 1, "built_before_fit": True},
                    fails=True)
    assert "this loader was built before torch.distributed was initialised" in stderr
    assert "LightningDataModule.train_dataloader()" in stderr


@pytest.mark.slow
def test_accelerate_prepare_keeps_the_preset_and_a_stream_and_save_state_resumes_both_exactly(tmp_path):
    # one launch stops the preset at step 10 and saves, then runs a stream whole, saving at its step 10;
    # a second resumes both. prepare(stream loader) on 2 ranks is EqualSteps: kept, its state saved
    lines = {"factory": LINES, "epochs": EPOCHS, "workers": 1}
    stream = {"factory": "tests.text.trainer_loaders:stream", "epochs": EPOCHS, "workers": 2, "state": "stream-state"}
    stopped = launch("accelerate", tmp_path, {**lines, "run": "stopped", "stop_after": 10,
                                              "then": [{**stream, "run": "whole", "stop_after": 10, "go_on": True}]})
    resumed = launch("accelerate", tmp_path, {**lines, "run": "resumed", "start_epoch": 1,
                                              "resume": str(tmp_path / "accelerate-state"),
                                              "then": [{**stream, "run": "rest", "start_epoch": 1,
                                                        "resume": str(tmp_path / "stream-state")}]})
    assert [len(report["steps"]) for report in stopped] == [10] * WORLD
    check_every_sample_once([{"steps": a["steps"] + b["steps"], "evaluated": a["evaluated"] + b["evaluated"]}
                             for a, b in zip(stopped, resumed)])
    whole, rest = (_reports(tmp_path, run) for run in ("whole", "rest"))
    assert [report["steps"] for report in rest] == [report["steps"][10:] for report in whole]
    assert whole[0]["steps"][9][0] == 1  # saved mid-epoch 1
    for epoch in range(EPOCHS):
        seen = [i for report in whole for step in report["steps"] if step[0] == epoch for i in step[1:]]
        assert len(seen) == len(set(seen)) > SAMPLES - WORLD * 2 * BATCH


def _reports(folder, run: str) -> list[dict]:
    return [json.loads((folder / f"{run}-rank{rank}.json").read_text()) for rank in range(WORLD)]


@pytest.mark.slow
def test_hf_trainer_trains_a_classifier_resumed_exactly_a_causal_lm_length_grouped_and_a_stream(tmp_path):
    pytest.importorskip("transformers")
    config = {"factory": LINES, "epochs": EPOCHS, "workers": 1, "model": "classifier", "max_length": 24}
    lm = {"run": "lm", "factory": "tests.text.trainer_loaders:next_tokens", "epochs": 1, "model": "causal",
          "max_length": 16}
    stopped = launch("hf", tmp_path, {**config, "run": "stopped", "stop_after": 10})
    # a stream has no length, so the HF Trainer asks for max_steps: two passes of 6 equal steps a rank
    # (4 readers of 30 lines, 3 whole batches each; training drops the partial ones)
    stream = {"run": "hf-stream", "factory": "tests.text.trainer_loaders:stream", "workers": 2, "model": "classifier",
              "epochs": EPOCHS, "max_steps": EPOCHS * STREAM_STEPS, "max_length": 24}
    resumed = launch("hf", tmp_path, {**config, "run": "resumed", "resume": str(tmp_path / "hf" / "checkpoint-10"),
                                      "then": [lm, stream]})
    for rank in range(WORLD):
        steps = stopped[rank]["steps"] + resumed[rank]["steps"]
        for epoch in range(EPOCHS):  # length-grouped, dealt to the ranks as under torchrun
            assert [step[1:] for step in steps if step[0] == epoch] == torchrun_batches(epoch, rank, 24)
        for report in (stopped[rank], resumed[rank]):
            # the batch's lengths and index stay out; num_items_in_batch is the Trainer's own
            assert set(report["forward_keys"]) <= {"input_ids", "attention_mask", "labels", "num_items_in_batch"}
            assert report["widest"] <= 24  # the recipe's truncation
    for rank in range(WORLD):  # the causal LM, trained in the same ranks after the classifier
        report = _reports(tmp_path, "lm")[rank]
        assert [step[1:] for step in report["steps"]] == torchrun_batches(0, rank, 16)
        assert set(report["forward_keys"]) <= {"input_ids", "attention_mask", "labels", "num_items_in_batch"}
        assert report["widest"] <= 16 and report["loss"] > 0
    streamed = _reports(tmp_path, "hf-stream")
    assert [len(report["steps"]) for report in streamed] == [EPOCHS * STREAM_STEPS] * WORLD
    for epoch in range(EPOCHS):
        steps = slice(epoch * STREAM_STEPS, (epoch + 1) * STREAM_STEPS)
        seen = [i for report in streamed for step in report["steps"][steps] for i in step[1:]]
        assert len(seen) == len(set(seen)) > SAMPLES - WORLD * 2 * BATCH  # at most the workers' partial batches out



# Where each trainer keeps a checkpoint taken after 10 steps, and how its resumed run is told
ONE_RANK_RESUME = {
    "lightning": ("checkpoints/mid.ckpt", {"strategy": "auto"}),
    "accelerate": ("accelerate-state", {}),
    "hf": ("hf/checkpoint-10", {"model": "classifier", "max_length": 24}),
}


@pytest.mark.slow
@pytest.mark.parametrize("trainer", sorted(ONE_RANK_RESUME))
def test_each_trainer_resumes_mid_epoch_exactly_on_one_rank(tmp_path, trainer):
    # one device, as most fine-tuning runs: stopped after 10 of the epoch's 15 steps, resumed from the trainer's
    # own checkpoint, the steps are those of an uninterrupted run
    if trainer == "hf":
        pytest.importorskip("transformers")
    checkpoint, options = ONE_RANK_RESUME[trainer]
    config = {"factory": LINES, "epochs": EPOCHS, "workers": 1, "devices": 1, **options}
    stopped = launch(trainer, tmp_path, {**config, "run": "stopped", "stop_after": 10})[0]
    resumed = launch(trainer, tmp_path, {**config, "run": "resumed", "resume": str(tmp_path / checkpoint)})[0]
    assert len(stopped["steps"]) == 10
    steps = stopped["steps"] + resumed["steps"]
    max_length = options.get("max_length")
    for epoch in range(EPOCHS):
        assert [step[1:] for step in steps if step[0] == epoch] == torchrun_batches(epoch, 0, max_length, world=1)
    if trainer != "hf":  # PresetTrainer is given no evaluation loader here
        evaluated = stopped["evaluated"] + resumed["evaluated"]
        assert sorted(evaluated) == sorted(list(range(SAMPLES)) * EPOCHS)
