"""recipes.text vs the transformers data path, on real prose with a long-tailed length.

    python benchmarks/text.py            # 7 rounds, the corpus x8 for build time
    python benchmarks/text.py --quick    # a smoke run
    python benchmarks/text.py --build    # only the build figures
    python benchmarks/text.py --padding  # only the padding figures
    python benchmarks/text.py --cached   # only the cached-open figures

Data: CPython's ``pydoc_data.topics`` split into paragraphs (~2,600 paragraphs of the language
reference, 3 to ~2,600 tokens), tokenised with the fixture tokenizer, written to a temporary
JSONL / TXT file. Three figures; timed pairs run side by side in alternating rounds (medians):

1. Collate: batches/s of ``text_collate`` on dataset items vs ``DataCollatorWithPadding`` on the
   same samples as lists of ids (its native input, what ``datasets`` hands it), in one thread as
   in a DataLoader worker. Goal >= 20x.
2. Padding waste, the fraction of padding tokens in a training epoch: random batches; the floor
   (all lengths sorted, cut into consecutive batches); ``text_loader`` (jittered sort, ``ByLength``'s
   default ``jitter``); for context the sampler with ``ByLength(noise=0)`` (sorted every epoch, ties
   shuffled), ``0.05`` and ``0.1`` on log-length, and transformers' ``LengthGroupedSampler``
   (50-batch megabatches).
   "kept" is the mean fraction of a sample's batchmates that were already its batchmates the
   epoch before (random batching: ~0): low = the epoch is really reshuffled.
   Goals: text_loader <= 1.5x the floor; with ``max_tokens=2048``, <= 6%.
3. Build: ``TokenizedTextDataset(file)`` (read, parse, tokenise, store) vs a bare
   ``tokenizer.encode_batch(texts)`` over the same texts already in memory. Goal >= 0.8x its speed.
   3b: with ``max_length=512`` against the tokenizer's own truncating ``encode_batch``
   (``enable_truncation(512)``), for the fixture tokenizer and a BERT-sized vocabulary. Goal >= 0.9x.
4. Hand-over: a ``text_loader`` pass with 2 workers, batches of 32, its batches leaving the
   workers packed into one shared buffer (``recipes.core.workers.packing``, the preset) against the
   plain collate, which hands each of the batch's five tensors over on its own (no goal).
5. Cached: ``TokenizedTextDataset(file, cache_dir=...)`` opened from its token cache (the paragraphs
   x8), then every item read once, in each round from a fresh open: the default open serves the
   cached ids checked against the vocabulary, a block's maximum the first time it is read (no goal;
   run the script on a checkout without the check to compare).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.core.loading.loader import RecipeLoader, preset_kwargs
from recipes.core.sampling.plans import ByLength
from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler
from recipes.core.sampling.seeding import SeededDataset
from recipes.fixtures import fixtures_dir
from recipes.text import TextCollate, TokenizedTextDataset, text_collate, text_loader


def paragraphs() -> list[str]:
    from pydoc_data.topics import topics

    return [p.strip() for topic in topics.values() for p in re.split(r"\n\s*\n", topic) if p.strip()]


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def collate_speed(dataset: TokenizedTextDataset, tokenizer, rounds: int, batches: int, batch_size: int = 32) -> None:
    from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast

    hf = DataCollatorWithPadding(PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]"))
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(dataset), batch_size, replace=False) for _ in range(batches)]
    ours_in = [[dataset[int(i)] for i in pick] for pick in picks]
    hf_in = [[{"input_ids": dataset.tokens[int(i)].tolist()} for i in pick] for pick in picks]
    assert all(torch.equal(text_collate(a)["input_ids"], hf(b)["input_ids"]) for a, b in zip(ours_in[:5], hf_in[:5]))
    ours, theirs = [], []
    # As in a DataLoader worker: one torch thread, and the long-lived inputs out of the garbage
    # collector's sight (a worker's dataset is too), so neither side pays for the other's objects.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    gc.collect()
    gc.freeze()
    for batch in ours_in[:10]:  # warm-up: first calls pay for lazy initialisation
        text_collate(batch), hf(hf_in[0])
    for _ in range(rounds):
        ours.append(batches / timed(lambda: [text_collate(batch, pad_id=0) for batch in ours_in]))
        theirs.append(batches / timed(lambda: [hf(batch) for batch in hf_in]))
    gc.unfreeze()
    torch.set_num_threads(threads)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"\n1. collate, batch {batch_size}, max_length 512, 1 thread (median of {rounds} rounds x {batches} batches)")
    print(f"   text_collate            {a:10.0f} batches/s")
    print(f"   DataCollatorWithPadding {b:10.0f} batches/s")
    print(f"   ratio {a / b:.1f}x   (goal >= 20x: {'met' if a / b >= 20 else 'NOT met'})")


def waste(batches: list[np.ndarray], lengths: np.ndarray) -> float:
    return 1 - sum(int(lengths[b].sum()) for b in batches) / sum(len(b) * int(lengths[b].max()) for b in batches)


def kept(before: list[np.ndarray], after: list[np.ndarray], n: int) -> float:
    """Mean fraction of a sample's batchmates in ``after`` that were its batchmates in ``before``."""
    batch_of = np.full(n, -1)
    for number, batch in enumerate(before):
        batch_of[batch] = number
    shares = [(np.sum(batch_of[b] == batch_of[i]) - 1) / (len(b) - 1) for b in after if len(b) > 1 for i in b]
    return float(np.mean(shares))


def loader_epochs(loader, epochs: int = 3) -> list[list[np.ndarray]]:
    return [[batch["index"].numpy() for batch in loader] for _ in range(epochs)]


def sampler_epochs(sampler, epochs: int = 3) -> list[list[np.ndarray]]:
    return [[np.asarray(batch) for batch in sampler] for _ in range(epochs)]


def padding_waste(dataset: TokenizedTextDataset, batch_sizes: tuple[int, ...]) -> None:
    from transformers.trainer_pt_utils import LengthGroupedSampler

    lengths, n = dataset.lengths, len(dataset)
    print(f"\n2. padding waste per training epoch ({n} paragraphs, mean of 3 epochs; kept = batchmates kept)")
    for size in batch_sizes:
        ordered = np.argsort(-lengths, kind="stable")
        floor = waste([ordered[i : i + size] for i in range(0, n - n % size, size)], lengths)
        hf = LengthGroupedSampler(size, lengths=lengths.tolist(), generator=torch.Generator().manual_seed(0))
        hf_epochs = []
        for _ in range(3):
            order = np.fromiter(iter(hf), dtype=np.int64)
            hf_epochs.append([order[i : i + size] for i in range(0, n - n % size, size)])
        rows = {
            "random batches": sampler_epochs(GroupedBatchSampler(n, size, drop_last=True, seed=0)),
            "text_loader (ours)": loader_epochs(text_loader(dataset, size, device="cpu", seed=0, num_workers=0)),
            **{
                f"core ByLength noise={noise}": sampler_epochs(
                    GroupedBatchSampler(n, size, drop_last=True, seed=0, plan=ByLength(lengths, noise=noise))
                )
                for noise in (0, 0.05, 0.1)
            },
            "HF LengthGroupedSampler": hf_epochs,
        }
        print(f"   batch {size}: sorted floor {floor:6.1%}")
        for name, epochs in rows.items():
            mean = float(np.mean([waste(batches, lengths) for batches in epochs]))
            mixing = np.mean([kept(a, b, n) for a, b in pairwise(epochs)])
            verdict = f"  (goal <= 1.5x: {'met' if mean <= 1.5 * floor else 'NOT met'})" if "ours" in name else ""
            print(f"     {name:24s} {mean:6.1%} = {mean / floor:5.2f}x floor   kept {mixing:5.1%}{verdict}")
    budget = loader_epochs(text_loader(dataset, max_tokens=2048, device="cpu", seed=0, num_workers=0))
    mean = float(np.mean([waste(batches, lengths) for batches in budget]))
    print(f"   max_tokens=2048 (ours): {mean:6.1%}   kept {np.mean([kept(a, b, n) for a, b in pairwise(budget)]):5.1%}"
          f"   (goal <= 6%: {'met' if mean <= 0.06 else 'NOT met'})")


def build_time(texts: list[str], tokenizer, folder: Path, rounds: int) -> None:
    files = {
        "jsonl": folder / "build.jsonl",
        "txt": folder / "build.txt",
    }
    files["jsonl"].write_text("\n".join(json.dumps({"text": t}) for t in texts), encoding="utf-8")
    files["txt"].write_text("\n".join(t.replace("\n", " ") for t in texts), encoding="utf-8")
    flat = [t.replace("\n", " ") for t in texts]
    times: dict[str, list[float]] = {"bare": [], "jsonl": [], "txt": []}
    for _ in range(rounds):
        times["bare"].append(timed(lambda: tokenizer.encode_batch(flat)))
        times["jsonl"].append(timed(lambda: TokenizedTextDataset(files["jsonl"], tokenizer)))
        times["txt"].append(timed(lambda: TokenizedTextDataset(files["txt"], tokenizer)))
    bare = statistics.median(times["bare"])
    print(f"\n3. build, {len(texts)} texts, {sum(map(len, texts)) / 1e6:.1f} MB (median of {rounds} rounds)")
    print(f"   bare encode_batch(texts)            {bare:6.2f}s")
    for kind in ("txt", "jsonl"):
        ours = statistics.median(times[kind])
        print(f"   TokenizedTextDataset(.{kind:5s})      {ours:6.2f}s   speed {bare / ours:.2f}x of bare"
              f"   (goal >= 0.8x: {'met' if bare / ours >= 0.8 else 'NOT met'})")


def cached_open(texts: list[str], tokenizer, folder: Path, rounds: int) -> None:
    path, cache = folder / "cached.jsonl", folder / "cache"
    path.write_text("\n".join(json.dumps({"text": t}) for t in texts), encoding="utf-8")
    TokenizedTextDataset(path, tokenizer, cache_dir=cache)  # writes the entry
    opens, reads = [], []
    for _ in range(rounds):
        opened: list[TokenizedTextDataset] = []
        opens.append(timed(lambda: opened.append(TokenizedTextDataset(path, tokenizer, cache_dir=cache))))
        dataset = opened[0]
        reads.append(timed(lambda: [dataset[i] for i in range(len(dataset))]) / len(dataset) * 1e6)
    ids = len(dataset.tokens.ids)
    print(f"\n5. cached: {len(texts)} texts, {ids:,} ids (median of {rounds} rounds, each from a fresh open)")
    print(f"   open from the cache                 {statistics.median(opens) * 1e3:7.2f} ms")
    print(f"   every item once                     {statistics.median(reads):7.2f} us an item")


def truncated_builds(texts: list[str], tokenizer, folder: Path, rounds: int) -> None:
    print(f"\n3b. build with max_length=512, {len(texts)} texts (median of {rounds} rounds)")
    truncated_build_time(texts, tokenizer, folder, rounds, "fixture BPE (800)")
    truncated_build_time(texts, bert_sized(texts), folder, rounds, "BERT-sized WordPiece (30,522)")


def bert_sized(texts: list[str]):
    """A BERT-style WordPiece tokenizer (BertNormalizer, ``[CLS] $A [SEP]``) trained on ``texts``, its
    vocabulary filled up with ``[unusedN]`` entries to bert-base's 30,522, as BERT's own holds such
    entries: the vocabulary's size is what copying a tokenizer costs."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=30522, special_tokens=specials,
                                                                   show_progress=False))
    vocab = tokenizer.get_vocab()
    vocab.update({f"[unused{k}]": len(vocab) + k for k in range(30522 - len(vocab))})
    tokenizer.model = models.WordPiece(vocab, unk_token="[UNK]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tokenizer


def truncated_build_time(texts: list[str], tokenizer, folder: Path, rounds: int, name: str) -> None:
    """``TokenizedTextDataset(file, max_length=512)`` vs the tokenizer's own truncating ``encode_batch``."""
    from tokenizers import Tokenizer

    path = folder / "truncated.jsonl"
    path.write_text("\n".join(json.dumps({"text": t}) for t in texts), encoding="utf-8")
    flat = [t.replace("\n", " ") for t in texts]
    truncating = Tokenizer.from_str(tokenizer.to_str())
    truncating.enable_truncation(512)
    bare, ours = [], []
    for _ in range(rounds):
        bare.append(timed(lambda: truncating.encode_batch(flat)))
        ours.append(timed(lambda: TokenizedTextDataset(path, tokenizer, max_length=512)))
    speed = statistics.median(bare) / statistics.median(ours)
    print(f"   {name}: encode_batch, enable_truncation(512) {statistics.median(bare):6.2f}s   "
          f"TokenizedTextDataset(.jsonl, max_length=512) {statistics.median(ours):6.2f}s   speed {speed:.2f}x"
          f"   (goal >= 0.9x: {'met' if speed >= 0.9 else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--build", action="store_true", help="only the build figures (3 and 3b)")
    parser.add_argument("--padding", action="store_true", help="only the padding figures (2)")
    parser.add_argument("--cached", action="store_true", help="only the cached figures (5)")
    args = parser.parse_args()
    rounds = 2 if args.quick else 7
    torch.manual_seed(0)
    texts = paragraphs()
    tokenizer_path = fixtures_dir() / "text" / "tokenizer.json"
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "paragraphs.jsonl"
        path.write_text("\n".join(json.dumps({"text": t}) for t in texts), encoding="utf-8")
        print(f"data: {len(texts)} pydoc paragraphs; torch {torch.__version__}, {torch.get_num_threads()} threads")
        if args.padding:
            padding_waste(TokenizedTextDataset(path, tokenizer), (16, 32))
            return
        if args.cached:
            cached_open(texts * 8, tokenizer, folder, rounds)
            return
        if args.build:
            build_time(texts * (1 if args.quick else 8), tokenizer, folder, rounds)
            truncated_builds(texts, tokenizer, folder, rounds)
            return
        collate_speed(TokenizedTextDataset(path, tokenizer, max_length=512), tokenizer, rounds, 50 if args.quick else 200)
        padding_waste(TokenizedTextDataset(path, tokenizer), (16,) if args.quick else (16, 32))
        build_time(texts * (1 if args.quick else 8), tokenizer, folder, rounds)
        truncated_builds(texts, tokenizer, folder, rounds)
        hand_over(TokenizedTextDataset(path, tokenizer, max_length=512), rounds)
        cached_open(texts * (1 if args.quick else 8), tokenizer, folder, rounds)


def hand_over(dataset: TokenizedTextDataset, rounds: int) -> None:
    # text_loader's composition (recipes.core.loading.loader.build_loader) written out, without packing
    kwargs = preset_kwargs("cpu", train=True, seed=0, num_workers=2)
    shuffle, drop_last = kwargs.pop("shuffle"), kwargs.pop("drop_last")
    sampler = SeededBatchSampler(len(dataset), 32, shuffle=shuffle, drop_last=drop_last, seed=0,
                                 plan=ByLength(dataset.lengths))
    plain = RecipeLoader(SeededDataset(dataset), batch_sampler=sampler, collate_fn=TextCollate(dataset.pad_id), **kwargs)
    loaders = {  # the same preset and sampler; only the hand-over differs
        "packed (text_loader)": text_loader(dataset, 32, device="cpu", seed=0, num_workers=2),
        "one transfer a tensor": plain,
    }
    times: dict[str, list[float]] = {name: [] for name in loaders}
    for loader in loaders.values():
        sum(1 for _ in loader)  # warm-up: workers started
    for round_ in range(rounds):
        for name in list(loaders) if round_ % 2 == 0 else list(loaders)[::-1]:
            batches = 0
            start = time.perf_counter()
            for _ in loaders[name]:
                batches += 1
            times[name].append((time.perf_counter() - start) / batches * 1e6)
    print("4. hand-over from 2 workers, batch 32 (median us a batch)")
    for name, values in times.items():
        print(f"   {name:24s} {statistics.median(values):7.0f} us")
    ratio = statistics.median(b / a for a, b in zip(times["packed (text_loader)"], times["one transfer a tensor"]))
    print(f"   packed is {ratio:.2f}x faster")


if __name__ == "__main__":
    main()
