"""Tokenizers with special-token templates, and the truncation oracle (not a test module itself).

    tokenizer = bert_style(texts)          # "[CLS] $A [SEP]", WordPiece, as MiniLM / BERT
    tokenizer = clip_style(texts)          # "<|startoftext|> $A <|endoftext|>", byte-level BPE, as CLIP
    tokenizer = llama_style(texts)         # "<s> $A </s>", BPE over the whole line (no pre-tokenizer)
    tokenizer = t5_style(texts)            # "$A </s>", Unigram over Metaspace words, as T5
    truncated(tokenizer, text, 16)         # the ids Tokenizer.enable_truncation(16) gives

Both are trained here on the given texts, so a test needs no download.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers


def truncated(tokenizer: Tokenizer, text: str, max_length: int | None) -> list[int]:
    """``text``'s ids from a copy of ``tokenizer`` with ``enable_truncation(max_length)``: the oracle."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    if max_length is not None:
        copy.enable_truncation(max_length)
    return copy.encode(text).ids


def bert_style(texts: Sequence[str]) -> Tokenizer:
    """WordPiece with BERT's normalizer and pre-tokenizer, ``[CLS] $A [SEP]``, ``[PAD]`` = 0."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=special, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def clip_style(texts: Sequence[str]) -> Tokenizer:
    """Byte-level BPE with CLIP's normalizer (NFC, whitespace runs to one space, lower case) and
    ``<|startoftext|> $A <|endoftext|>``."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    special = ["<|startoftext|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    bos, eot = tokenizer.token_to_id("<|startoftext|>"), tokenizer.token_to_id("<|endoftext|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>", special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eot)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def llama_style(texts: Sequence[str]) -> Tokenizer:
    """BPE without a pre-tokenizer, as Llama's: the whole line is one word, spaces become ``▁``;
    ``<s> $A </s>``."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    special = ["<unk>", "<s>", "</s>"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special, max_token_length=12, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    return tokenizer


def t5_style(texts: Sequence[str]) -> Tokenizer:
    """Unigram over Metaspace words with NFKC, as T5's; ``$A </s>`` (an end token only)."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    special = ["<pad>", "</s>", "<unk>"]
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=special, unk_token="<unk>", show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    eos = tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", eos)])
    return tokenizer
