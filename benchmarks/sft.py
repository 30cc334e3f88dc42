"""recipes.text's instruction data vs TRL's SFTTrainer preparation, on the same generated conversations.

    python benchmarks/sft.py              # 20,000 conversations, 3 alternating rounds
    python benchmarks/sft.py --quick      # 2,000 conversations, 1 round

Data: conversations of 1 to 4 user/assistant turns (every fifth with a system turn) drawn from the
words of CPython's ``pydoc_data.topics``, rendered with the ChatML (Qwen2) template of
fixtures/text/chat, with a 32,000-entry byte-level BPE trained on them (and the fixture's special
tokens) at the start. Both sides learn the assistant turns only: TRL
(``assistant_only_loss=True``) reads them from the template's ``{% generation %}`` copy, ours from
the plain template; ``tests/text/test_chat_oracles.py`` checks the labels are equal.

1. Build: ``InstructionDataset(file.jsonl)`` (read, render, tokenise, label) vs ``SFTTrainer``'s
   dataset preparation of a ``datasets.Dataset`` already in memory (one process, as its default),
   the two in alternating rounds; the ratio is the median of the rounds' ratios. Goal >= 3x.
2. Collate: batches of 32 per second, ``instruction_collate`` on dataset items vs TRL's own
   collator (``trainer.data_collator``) on its prepared rows, in one thread. Goal >= 10x.
3. Padding waste of batches of 32 (two epochs): the sorted floor, ``text_loader`` (length-grouped,
   ``ByLength``'s default jitter), the ``ByLength(noise=0)`` plan (sorted each epoch), noise 0.05
   on log-length, and the random batches of the Trainer's default sampler; "kept" is the mean
   fraction of a sample's batchmates that were its batchmates the epoch before (random: ~0).
   Goal: ours <= 1.2x the floor.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # recipes and benchmarks.text from this checkout

from benchmarks.text import kept, waste  # the text benchmark's measures, on these lengths
from recipes.core.sampling.plans import ByLength
from recipes.core.sampling.samplers import GroupedBatchSampler
from recipes.fixtures import fixtures_dir
from recipes.text import InstructionCollate, InstructionDataset, text_loader


def conversations(count: int, seed: int = 0) -> list[dict]:
    from pydoc_data.topics import topics

    words = re.findall(r"[A-Za-z]+", " ".join(topics.values()))
    rng = np.random.default_rng(seed)

    def say(low: int, high: int) -> str:
        picked = rng.choice(len(words), size=int(rng.integers(low, high)))
        return " ".join(words[k] for k in picked).capitalize() + "."

    rows = []
    for k in range(count):
        messages = [{"role": "system", "content": say(5, 20)}] if k % 5 == 0 else []
        for _ in range(int(rng.integers(1, 5))):
            messages += [{"role": "user", "content": say(5, 60)}, {"role": "assistant", "content": say(5, 200)}]
        rows.append({"messages": messages})
    return rows


def train_tokenizer(rows: list[dict], folder: Path) -> Path:
    """A byte-level BPE of 32,000 entries trained on ``rows`` (Llama 2's size) with the fixture
    tokenizer's special tokens, ChatML's among them: the fixture's 900-entry vocabulary would cut
    words into letters and make tokenising, common to both sides, most of the time measured."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from recipes.text.chat.fixtures_chat import SPECIALS

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    texts = (message["content"] for row in rows for message in row["messages"])
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=32_000, special_tokens=SPECIALS,
                                                             show_progress=False))
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    out = function()
    return time.perf_counter() - start, out


def cpu_timed(function) -> tuple[tuple[float, float], object]:
    """``((wall seconds, CPU seconds of all the process's threads), result)``: on shared cores the
    CPU seconds are the steadier measure of the work done."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = function()
    return (time.perf_counter() - wall, time.process_time() - cpu), out


def trl_prepare(rows: list[dict], chat: Path, tokenizer_file: Path):
    """SFTTrainer's prepared dataset and collator for ``rows`` (a tiny model: only the data path runs)."""
    import datasets
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import SFTConfig, SFTTrainer

    datasets.disable_progress_bars()
    config = json.loads((chat / "chatml_marked" / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file),
                                        **{k: v for k, v in config.items() if k != "chat_template"})
    tokenizer.chat_template = config["chat_template"]
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    table = datasets.Dataset.from_list(rows)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as out:
        warnings.simplefilter("ignore")
        args = SFTConfig(output_dir=out, report_to=[], max_length=None, assistant_only_loss=True, use_cpu=True)
        seconds, trainer = cpu_timed(lambda: SFTTrainer(model=model, args=args, train_dataset=table,
                                                        processing_class=tokenizer))
    return seconds, trainer


def collate_all(batches: list[list[dict]], collate) -> None:
    for batch in batches:
        collate(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    count, rounds = (2_000, 1) if args.quick else (20_000, 3)
    chat = fixtures_dir() / "text" / "chat"
    rows = conversations(count)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chat.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        template, tokenizer = chat / "chatml" / "tokenizer_config.json", train_tokenizer(rows, Path(folder))
        ours_times, peer_times = [], []
        for _ in range(rounds):
            seconds, dataset = cpu_timed(lambda: InstructionDataset(path, tokenizer, template=template))
            ours_times.append(seconds)
            seconds, trainer = trl_prepare(rows, chat, tokenizer)
            peer_times.append(seconds)
    tokens = int(dataset.lengths.sum())
    print(f"data: {count} conversations, {tokens} tokens (ChatML template, a 32k byte-level BPE)")
    print(f"\n1. build (median of {rounds} alternating rounds; ratio: median of the rounds' ratios)")
    print("                                      wall s    CPU s")
    for name, times in (("InstructionDataset(.jsonl)", ours_times), ("SFTTrainer preparation (TRL)", peer_times)):
        wall, cpu = (statistics.median(t[k] for t in times) for k in (0, 1))
        print(f"   {name:33s} {wall:7.2f}  {cpu:7.2f}")
    for k, measure in enumerate(("wall", "CPU")):
        ratio = statistics.median(b[k] / a[k] for a, b in zip(ours_times, peer_times))
        print(f"   ratio ({measure:4s}) {ratio:.1f}x   (goal >= 3x: {'met' if ratio >= 3 else 'NOT met'})")

    prepared = trainer.train_dataset
    assert prepared["labels"][5] == dataset[5]["labels"].tolist()  # the same samples, the same labels
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(dataset), 32, replace=False) for _ in range(200)]
    ours_items = [[dataset[int(i)] for i in pick] for pick in picks]
    peer_items = [[{"input_ids": prepared[int(i)]["input_ids"], "labels": prepared[int(i)]["labels"]} for i in pick]
                  for pick in picks]
    collator = trainer.data_collator
    ours_rates, peer_rates = [], []
    for _ in range(5):  # alternating rounds; each batch dropped after its call, as a loader drops it
        ours_rates.append(len(picks) / timed(lambda: collate_all(ours_items, InstructionCollate(dataset.pad_id)))[0])
        peer_rates.append(len(picks) / timed(lambda: collate_all(peer_items, collator))[0])
    ours_rate, peer_rate = statistics.median(ours_rates), statistics.median(peer_rates)
    print("\n2. collate, batch 32, 1 thread (200 batches, median of 5 alternating rounds)")
    print(f"   instruction_collate               {ours_rate:7.0f} batches/s")
    print(f"   TRL's collator                    {peer_rate:7.0f} batches/s")
    print(f"   ratio {ours_rate / peer_rate:.1f}x   (goal >= 10x: {'met' if ours_rate / peer_rate >= 10 else 'NOT met'})")

    lengths = dataset.lengths
    order = np.argsort(lengths, kind="stable")
    floor = waste([order[k : k + 32] for k in range(0, len(order) - 31, 32)], lengths)
    loader = text_loader(dataset, 32, device="cpu", seed=0, num_workers=0)
    rows = {"text_loader (ours)": [[batch["index"].numpy() for batch in loader] for _ in range(2)]}
    for name, plan in (("ByLength(noise=0) plan", ByLength(lengths, noise=0)),
                       ("ByLength(noise=0.05) plan", ByLength(lengths, noise=0.05))):
        sampler = GroupedBatchSampler(len(lengths), 32, drop_last=True, seed=0, plan=plan)
        rows[name] = [[np.asarray(batch) for batch in sampler] for _ in range(2)]
    shuffled = [rng.permutation(len(lengths)) for _ in range(2)]
    rows["random batches (Trainer default)"] = [[s[k : k + 32] for k in range(0, len(s) - 31, 32)] for s in shuffled]
    print("\n3. padding waste, batch 32 (mean of 2 epochs; kept = batchmates kept from epoch 1 to 2)")
    print(f"   sorted floor                      {floor:6.1%}")
    for name, epochs in rows.items():
        mean = float(np.mean([waste(batches, lengths) for batches in epochs]))
        goal = f"   (goal <= 1.2x: {'met' if mean / floor <= 1.2 else 'NOT met'})" if "ours" in name else ""
        print(f"   {name:33s} {mean:6.2%} = {mean / floor:6.2f}x floor   kept {kept(*epochs, len(lengths)):5.1%}{goal}")


if __name__ == "__main__":
    main()
