"""The text presets and a text stream under Lightning's own DDP launcher and Accelerate under
torchrun, two CPU ranks: every sample once per epoch, as under plain torchrun, and an exact resume
through each trainer's own checkpoint (tests/trainer_runs.py runs them)."""

from __future__ import annotations

import pytest

from recipes.core import SeededBatchSampler
from recipes.text import TokenizedTextDataset, text_loader
from tests.text.trainer_loaders import DATA, TOKENIZER
from tests.trainer_runs import launch

pytest.importorskip("lightning")
pytest.importorskip("accelerate")

LINES = "tests.text.trainer_loaders:lines"
WORLD, EPOCHS, BATCH, SAMPLES = 2, 2, 8, 120


def torchrun_batches(epoch: int, rank: int, max_length: int | None = None) -> list[list[int]]:
    """What rank ``rank`` of 2 trains on in ``epoch`` under plain torchrun: the oracle."""
    dataset = TokenizedTextDataset(DATA, TOKENIZER, max_length=max_length)
    plan = text_loader(dataset, BATCH, device="cpu", seed=0, num_workers=0).batch_sampler.plan
    sampler = SeededBatchSampler(SAMPLES, BATCH, shuffle=True, drop_last=True, seed=0, plan=plan, rank=rank,
                                 world_size=WORLD)
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
    check_every_sample_once(resumed_run("lightning", tmp_path, config, "checkpoints/mid.ckpt"))


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
def test_accelerate_prepare_keeps_the_preset_and_save_state_resumes_exactly(tmp_path):
    config = {"factory": LINES, "epochs": EPOCHS, "workers": 1}
    check_every_sample_once(resumed_run("accelerate", tmp_path, config, "accelerate-state", start_epoch=1))


@pytest.mark.slow
def test_accelerate_save_state_resumes_a_training_stream_exactly(tmp_path):
    # prepare(stream loader) on 2 ranks is EqualSteps: kept by prepare, its state saved by save_state
    config = {"factory": "tests.text.trainer_loaders:stream", "epochs": EPOCHS, "workers": 2}
    whole = launch("accelerate", tmp_path, {**config, "run": "whole"})
    resumed = resumed_run("accelerate", tmp_path, config, "accelerate-state", start_epoch=1)
    assert [report["steps"] for report in resumed] == [report["steps"] for report in whole]
    for epoch in range(EPOCHS):
        seen = [i for report in whole for step in report["steps"] if step[0] == epoch for i in step[1:]]
        assert len(seen) == len(set(seen)) > SAMPLES - WORLD * 2 * BATCH


@pytest.mark.slow
def test_hf_trainer_trains_a_classifier_on_the_preset_and_resumes_exactly(tmp_path):
    pytest.importorskip("transformers")
    config = {"factory": LINES, "epochs": EPOCHS, "workers": 1, "model": "classifier", "max_length": 24}
    stopped = launch("hf", tmp_path, {**config, "run": "stopped", "stop_after": 10})
    resumed = launch("hf", tmp_path, {**config, "run": "resumed", "resume": str(tmp_path / "hf" / "checkpoint-10")})
    for rank in range(WORLD):
        steps = stopped[rank]["steps"] + resumed[rank]["steps"]
        for epoch in range(EPOCHS):  # length-grouped, dealt to the ranks as under torchrun
            assert [step[1:] for step in steps if step[0] == epoch] == torchrun_batches(epoch, rank, 24)
        for report in (stopped[rank], resumed[rank]):
            # the batch's lengths and index stay out; num_items_in_batch is the Trainer's own
            assert set(report["forward_keys"]) <= {"input_ids", "attention_mask", "labels", "num_items_in_batch"}
            assert report["widest"] <= 24  # the recipe's truncation


@pytest.mark.slow
def test_hf_trainer_trains_a_causal_lm_on_length_grouped_batches(tmp_path):
    pytest.importorskip("transformers")
    reports = launch("hf", tmp_path, {"run": "lm", "factory": "tests.text.trainer_loaders:next_tokens", "epochs": 1,
                                      "model": "causal", "max_length": 16})
    for rank, report in enumerate(reports):
        assert [step[1:] for step in report["steps"]] == torchrun_batches(0, rank, 16)
        assert set(report["forward_keys"]) <= {"input_ids", "attention_mask", "labels", "num_items_in_batch"}
        assert report["widest"] <= 16 and report["loss"] > 0


def test_lightning_predict_takes_the_preset_and_predicts_every_sample_once():
    # predict rebuilds the batch sampler as BatchSampler(sampler, batch_size, drop_last=False): the
    # preset's sampler (its rank's share) gives the same batches back
    import lightning as L

    class Indices(L.LightningModule):
        def predict_step(self, batch, index):
            return batch["index"]

    dataset = TokenizedTextDataset(DATA, TOKENIZER, label_field="label")
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False)
    for train in (False, True):
        loader = text_loader(dataset, BATCH, train=train, device="cpu", seed=0, stateful=True, num_workers=0)
        predicted = [batch.tolist() for batch in trainer.predict(Indices(), dataloaders=loader)]
        assert predicted == [batch["index"].tolist() for batch in loader]  # the preset's own batches
    assert sorted(sum(predicted, [])) == list(range(SAMPLES // BATCH * BATCH))  # train: length-grouped, full batches
