"""Truncation keeps the tokenizer's special tokens and reads a long string from a bounded prefix."""

import json
import random

import pytest
from tokenizers import Tokenizer

from recipes.core.tokens.encoding import WHOLE_TEXT_CHARS, TruncatingEncoder, encode_texts
from tests.special_tokens import bert_style, clip_style, llama_style, t5_style, truncated


def _fixture_strings(fixtures) -> list[str]:
    lines = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    out = [line for line in lines if line.strip()]
    for line in (fixtures / "multimodal" / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out += row["captions"] if "captions" in row else [row["caption"]]
    return out


def _long_strings(words: list[str]) -> dict[str, str]:
    """Long lines of every hard kind, each over WHOLE_TEXT_CHARS: words, no spaces at all, unicode,
    whitespace runs, emoji, combining accents (NFC joins them with the letter before), special
    tokens written out."""
    rng = random.Random(0)
    return {
        "words": " ".join(rng.choice(words) for _ in range(16_000)),
        "unicode_without_spaces": "".join(rng.choice("abcdeéñ漢字") for _ in range(80_000)),
        "unicode_and_whitespace": "".join(rng.choice("ab cdé漢\t\n") for _ in range(80_000)),
        "one_letter": "x" * 80_000,
        "one_letter_words": "a b " * 20_000,
        "space_run_then_words": "   " * 16_000 + "word " * 6_000,
        "emoji": "😀" * 80_000,
        "combining_accents": "e\u0301" * 40_000,
        "special_tokens_written_out": "[SEP] <|endoftext|> " * 4_000,
        "punctuation_run": ", ".join(rng.choice(words) for _ in range(10_000)) + "!" * 20_000,
    }


@pytest.fixture(scope="module")
def strings(fixtures):
    short = _fixture_strings(fixtures)
    long = list(_long_strings(" ".join(short).split()).values())
    assert min(map(len, long)) > WHOLE_TEXT_CHARS  # read from a prefix
    return short + long


@pytest.fixture(scope="module", params=["bert", "clip", "llama", "t5", "fixture"])
def template(request, fixtures):
    texts = _fixture_strings(fixtures)
    if request.param == "bert":
        return bert_style(texts), "[SEP]"
    if request.param == "clip":
        return clip_style(texts), "<|endoftext|>"
    if request.param == "llama":
        return llama_style(texts), "</s>"
    if request.param == "t5":
        return t5_style(texts), "</s>"
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json")), "[SEP]"


@pytest.mark.parametrize("max_length", [2, 3, 16, 77, 128])
def test_ids_equal_enable_truncation_and_end_in_the_closing_token(template, strings, max_length):
    tokenizer, closing = template
    before = tokenizer.to_str()
    tokens = encode_texts(tokenizer, strings, max_length=max_length)
    for index, string in enumerate(strings):
        assert tokens[index].tolist() == truncated(tokenizer, string, max_length), index
        assert tokens[index][-1] == tokenizer.token_to_id(closing)
    assert tokenizer.to_str() == before and tokenizer.truncation is None  # the caller's tokenizer is untouched


class Recording:
    """A tokenizer stand-in that records the length of every string it is asked to encode."""

    def __init__(self, tokenizer: Tokenizer, chars: list[int]) -> None:
        self.tokenizer, self.chars = tokenizer, chars

    def __getattr__(self, name):
        method = getattr(self.tokenizer, name)
        if not name.startswith("encode"):
            return method

        def encode(strings, *args, **kwargs):
            self.chars.extend(len(s) for s in ([strings] if isinstance(strings, str) else strings))
            return method(strings, *args, **kwargs)

        return encode


# One token for a line-long run (WordPiece's [UNK] for a word over 100 characters, Unigram's fused
# unknown characters): no prefix holds more tokens than the cut keeps, so the line is read whole
WHOLE_WORD_LINES = {("bert", "one_letter"), ("bert", "emoji"), ("bert", "combining_accents"), ("t5", "emoji")}


@pytest.mark.parametrize("kind", list(_long_strings(["w"])))
def test_a_long_line_is_encoded_from_a_bounded_prefix(template, strings, kind, request):
    whole = (request.node.callspec.id.split("-")[0], kind) in WHOLE_WORD_LINES
    tokenizer, _ = template
    line = _long_strings(" ".join(strings[:50]).split())[kind] * 5  # 0.4 to 0.5 million characters
    encoder, chars = TruncatingEncoder(tokenizer, 128), []
    encoder.raw, encoder.tokenizer = Recording(encoder.raw, chars), Recording(encoder.tokenizer, chars)
    oracle = Tokenizer.from_str(tokenizer.to_str())
    oracle.enable_truncation(128)
    expected = oracle.encode(line)
    assert encoder([line])[0] == expected.ids
    if whole:  # the known limit: still the right ids, from the whole line
        assert max(chars) == len(line)
        return
    kept_span = max(end for _, end in expected.offsets)  # where the kept tokens end in the line
    assert max(chars) <= 4 * max(encoder.prefix_chars, kept_span) and 2 * max(chars) < len(line)


def test_a_truncation_config_of_the_tokenizer_is_kept_with_the_smaller_length(fixtures):
    tokenizer = bert_style(_fixture_strings(fixtures))
    tokenizer.enable_truncation(6, stride=2)
    text = " ".join(_fixture_strings(fixtures)[:20])
    assert encode_texts(tokenizer, [text], max_length=64)[0].tolist() == tokenizer.encode(text).ids
    assert encode_texts(tokenizer, [text], max_length=4)[0].tolist() == truncated(tokenizer, text, 4)
    assert tokenizer.truncation == {"max_length": 6, "stride": 2, "strategy": "longest_first", "direction": "right"}


def test_fixed_length_padding_never_goes_past_max_length(fixtures):
    tokenizer = bert_style(_fixture_strings(fixtures))
    tokenizer.enable_padding(length=20, pad_id=0, pad_token="[PAD]")
    text, short = " ".join(_fixture_strings(fixtures)[:20]), "a cat"
    cut = encode_texts(tokenizer, [text, short], max_length=8)
    assert cut[0].tolist() == truncated(tokenizer, text, 8)[:8] and cut[0][-1] == tokenizer.token_to_id("[SEP]")
    assert cut[1].tolist() == tokenizer.encode(short).ids[:8]  # [CLS] a cat [SEP] and pads up to 8
    padded = encode_texts(tokenizer, [short], max_length=64)
    assert padded[0].tolist() == tokenizer.encode(short).ids and len(padded[0]) == 20
    assert tokenizer.padding["length"] == 20


def test_left_truncation_keeps_the_end_of_a_long_line(fixtures):
    tokenizer = bert_style(_fixture_strings(fixtures))
    tokenizer.enable_truncation(512, direction="left")
    line = " ".join(_fixture_strings(fixtures)) * 20
    expected = Tokenizer.from_str(tokenizer.to_str())
    expected.enable_truncation(10, direction="left")
    assert encode_texts(tokenizer, [line], max_length=10)[0].tolist() == expected.encode(line).ids


def test_slice_truncation_gives_encode_ids_cut_and_options_are_checked(fixtures, strings):
    tokenizer = clip_style(_fixture_strings(fixtures))
    tokens = encode_texts(tokenizer, strings, max_length=16, truncation="slice")
    assert [tokens[i].tolist() for i in range(len(strings))] == [tokenizer.encode(s).ids[:16] for s in strings]
    with pytest.raises(ValueError, match=r"truncation must be one of \('tokenizer', 'slice'\)"):
        encode_texts(tokenizer, strings, max_length=16, truncation="cut")
    with pytest.raises(ValueError, match="max_length=1 leaves no room for the 2 special tokens"):
        encode_texts(tokenizer, strings, max_length=1)
    sliced = encode_texts(tokenizer, ["a b c"], max_length=1, truncation="slice")
    assert sliced[0].tolist() == tokenizer.encode("a").ids[:1]


def test_an_encoder_refuses_a_tokenizer_whose_padding_changed_after_it_was_made(fixtures):
    tokenizer = bert_style(_fixture_strings(fixtures))
    text = " ".join(_fixture_strings(fixtures)[:20])
    encoder = TruncatingEncoder(tokenizer, 6)
    assert encoder([text])[0] == truncated(tokenizer, text, 6)  # the tokenizer's own cut, done on its ids
    tokenizer.enable_padding(length=10)
    with pytest.raises(ValueError, match="truncation or padding changed since; pass a copy"):
        encoder([text])
