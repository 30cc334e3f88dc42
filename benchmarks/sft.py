"""recipes.text's instruction data vs TRL's SFTTrainer preparation, on the same generated conversations.

    python benchmarks/sft.py              # 20,000 conversations, 1 round
    python benchmarks/sft.py --quick      # 2,000 conversations, 1 round

Data: conversations of 1 to 4 user/assistant turns (every fifth with a system turn) drawn from the
words of CPython's ``pydoc_data.topics``, rendered with the ChatML (Qwen2) template of
fixtures/text/chat, with a 32,000-entry byte-level BPE trained on them (and the fixture's special
tokens) at the start. Both sides learn the assistant turns only: TRL
(``assistant_only_loss=True``) reads them from the template's ``{% generation %}`` copy, ours from
the plain template; ``tests/text/test_chat_oracles.py`` checks the labels are equal.

1. Build: ``InstructionDataset(file.jsonl)`` (read, render, tokenise, label) vs ``SFTTrainer``'s
   dataset preparation of a ``datasets.Dataset`` already in memory (one process, as its default).
   Goal >= 3x.
2. Collate: batches of 32 per second, ``instruction_collate`` on dataset items vs TRL's own
   collator (``trainer.data_collator``) on its prepared rows, in one thread. Goal >= 10x.
3. Padding waste of an epoch of batches of 32: the sorted floor, ``text_loader`` (length-grouped),
   the ``ByLength(noise=0)`` plan (sorted each epoch), and the random batches of the Trainer's
   default sampler. Goal: ours <= 1.2x the floor.
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

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.core.plans import ByLength
from recipes.core.samplers import GroupedBatchSampler
from recipes.fixtures import fixtures_dir
from recipes.text import InstructionDataset, instruction_collate, text_loader


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

    from recipes.fixtures_chat import SPECIALS

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
        seconds, trainer = timed(lambda: SFTTrainer(model=model, args=args, train_dataset=table, processing_class=tokenizer))
    return seconds, trainer


def waste(batches: list[np.ndarray], lengths: np.ndarray) -> float:
    padded = sum(len(batch) * int(lengths[batch].max()) for batch in batches)
    return 1 - sum(int(lengths[batch].sum()) for batch in batches) / padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    count, rounds = (2_000, 1) if args.quick else (20_000, 1)
    chat = fixtures_dir() / "text" / "chat"
    rows = conversations(count)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chat.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        template, tokenizer = chat / "chatml" / "tokenizer_config.json", train_tokenizer(rows, Path(folder))
        ours_times, peer_times = [], []
        for _ in range(rounds):
            seconds, dataset = timed(lambda: InstructionDataset(path, tokenizer, template=template))
            ours_times.append(seconds)
            seconds, trainer = trl_prepare(rows, chat, tokenizer)
            peer_times.append(seconds)
    ours, peer = statistics.median(ours_times), statistics.median(peer_times)
    tokens = int(dataset.lengths.sum())
    print(f"data: {count} conversations, {tokens} tokens (ChatML template, a 32k byte-level BPE)")
    print(f"\n1. build (median of {rounds} rounds)")
    print(f"   InstructionDataset(.jsonl)        {ours:7.2f}s")
    print(f"   SFTTrainer preparation (TRL)      {peer:7.2f}s")
    print(f"   ratio {peer / ours:.1f}x   (goal >= 3x: {'met' if peer / ours >= 3 else 'NOT met'})")

    prepared = trainer.train_dataset
    assert prepared["labels"][5] == dataset[5]["labels"].tolist()  # the same samples, the same labels
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(dataset), 32, replace=False) for _ in range(200)]
    ours_items = [[dataset[int(i)] for i in pick] for pick in picks]
    peer_items = [[{"input_ids": prepared[int(i)]["input_ids"], "labels": prepared[int(i)]["labels"]} for i in pick]
                  for pick in picks]
    collator = trainer.data_collator
    ours_rate = len(picks) / timed(lambda: [instruction_collate(b, pad_id=dataset.pad_id) for b in ours_items])[0]
    peer_rate = len(picks) / timed(lambda: [collator(b) for b in peer_items])[0]
    print("\n2. collate, batch 32, 1 thread (200 batches)")
    print(f"   instruction_collate               {ours_rate:7.0f} batches/s")
    print(f"   TRL's collator                    {peer_rate:7.0f} batches/s")
    print(f"   ratio {ours_rate / peer_rate:.1f}x   (goal >= 10x: {'met' if ours_rate / peer_rate >= 10 else 'NOT met'})")

    lengths = dataset.lengths
    order = np.argsort(lengths, kind="stable")
    floor = waste([order[k : k + 32] for k in range(0, len(order) - 31, 32)], lengths)
    loader = text_loader(dataset, 32, device="cpu", seed=0, num_workers=0)
    grouped = waste([batch["index"].numpy() for batch in loader], lengths)
    exact = GroupedBatchSampler(len(lengths), 32, drop_last=True, seed=0, plan=ByLength(lengths, noise=0))
    sorted_plan = waste([np.asarray(batch) for batch in exact], lengths)
    shuffled = rng.permutation(len(lengths))
    random = waste([shuffled[k : k + 32] for k in range(0, len(shuffled) - 31, 32)], lengths)
    print("\n3. padding waste, batch 32, one epoch")
    print(f"   sorted floor                      {floor:6.1%}")
    print(f"   text_loader (ours)                {grouped:6.1%} = {grouped / floor:.2f}x floor   "
          f"(goal <= 1.2x: {'met' if grouped / floor <= 1.2 else 'NOT met'})")
    print(f"   ByLength(noise=0) plan            {sorted_plan:6.1%} = {sorted_plan / floor:.2f}x floor")
    print(f"   random batches (Trainer default)  {random:6.1%} = {random / floor:.2f}x floor")


if __name__ == "__main__":
    main()
