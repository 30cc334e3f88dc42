"""The text fixtures: a long-tailed corpus, labeled rows, a BPE tokenizer, the instruction data.

    write_text(Path("fixtures/text"))             # called by recipes.fixtures.generate (recipes/domains.py names it)
    sentence(np.random.default_rng(0), 12)        # a seeded sentence of 12 words, as the corpora hold

Sentences draw from ``WORDS`` with Zipf-like weights (accented words among them); the tokenizer
is trained single-threaded on every text written, so the same library versions give the same
bytes. The instruction data is :mod:`recipes.text.chat.fixtures_chat`'s; ``LAYOUT`` is what
``fixtures/README.md`` says of them.
"""

import csv
import io
from pathlib import Path

import numpy as np

from recipes.fixtures_files import tokenizer_json, write, write_jsonl
from recipes.text.chat.fixtures_chat import chat_files

LAYOUT = """\
    text/
      corpus.txt       200 lines, one sample a line, long-tailed lengths (3..~300 words), UTF-8
                       with accents and one emoji line, no empty lines
      labeled.jsonl    120 rows {"label": 0..2, "text": ...}
      labeled.csv      header text,label; 80 rows, some texts hold commas and double quotes
      tokenizer.json   BPE, NFKC, Metaspace + Punctuation pre-tokenizer with the Metaspace decoder
                       (decode gives the text back), [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3,
                       "[CLS] $A [SEP]" template, no padding/truncation
      chat/            instruction data (recipes/text/chat/fixtures_chat.py)
        chat.jsonl       36 {"messages"} conversations, 1-3 user/assistant turns, every 4th with a system turn
        pairs.jsonl      24 {"prompt", "completion"} strings; row 1 splits a word across the two
        pairs.csv        header prompt,completion; the first 12 pairs
        chat_pairs.jsonl 12 conversational pairs (a user message, an assistant message)
        tokenizer.json   BPE, Metaspace, every template's special tokens (<pad>=0), "<s> $A" template
        llama3/ chatml/ mistral/   tokenizer_config.json: the models' chat_template, bos/eos tokens
        llama3_marked/ chatml_marked/ mistral_marked/   the same with {% generation %} markers
"""

# ~300 common words, most frequent first; accented words sit mid-list so they do occur.
WORDS = """the of and to a in is it you that he was for on are with as his they be at one have
this from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so these
her long make thing see him two has look more day could go come did number sound no most people
my over know water than call first who may down side been now find any new work part take get
place made live where after back little only round man year came show every good me give our
under name very through just form sentence great think café say help low line differ turn cause
much mean before move right boy old too same tell does set three want air well also play small
end put home read hand port large spell add even land here must big high such follow act why ask
naïve men change went light kind off need house picture try us again animal point mother world
near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run don't while press close night
real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book carry
took science eat room friend began idea fish mountain stop once base hear horse cut sure watch
colour face wood main enough plain girl usual young ready above ever red list though feel talk
bird soon body dog family direct pose leave song measure door product black short numeral class
wind question happen complete ship area half rock order fire south problem piece told knew pass
since top whole king space heard best hour better true during hundred five remember step early
hold west ground interest reach fast verb sing listen six table travel less morning résumé
façade jalapeño""".split()
EMOJI_LINE = "The cat 🐱 sat by the window in the sun 🌞 and the dog said nothing 🐶."


def write_text(root: Path) -> str:
    """The text fixtures under ``root``: text corpora and their tokenizer; returns ``LAYOUT``."""
    rng = np.random.default_rng(2)
    corpus = [sentence(rng, n) for n in long_tailed_lengths(rng, 200, n_long=5)]
    corpus[17] = EMOJI_LINE
    corpus[42] = "A naïve café owner wrote a résumé about the façade and a jalapeño."
    write(root / "corpus.txt", "\n".join(corpus) + "\n")

    labeled = [{"text": sentence(rng, n), "label": int(rng.integers(0, 3))}
               for n in long_tailed_lengths(rng, 120, n_long=3)]
    write_jsonl(root / "labeled.jsonl", labeled)

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["text", "label"])
    for i, n in enumerate(long_tailed_lengths(rng, 80, n_long=2)):
        text = sentence(rng, n)
        if i % 5 == 0:  # commas and double quotes that the csv module must quote
            text = f'She said "{text[:-1]}", then "{WORDS[i]}", and left.'
        writer.writerow([text, int(rng.integers(0, 3))])
    write(root / "labeled.csv", buf.getvalue())
    texts = corpus + [r["text"] for r in labeled] + buf.getvalue().splitlines()[1:]
    write(root / "tokenizer.json", _train_tokenizer(texts))
    for name, data in chat_files(WORDS, sentence).items():  # what they are: recipes/text/chat/fixtures_chat.py
        write(root / "chat" / name, data)
    return LAYOUT


def _train_tokenizer(texts: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFKC()  # keeps accents: "café" != "cafe"
    # "▁" marks a word's first piece, so the decoder knows where the spaces were (a bare
    # Whitespace pre-tokenizer drops them: "Ready" would decode as "Re ad y"); punctuation is its own piece
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=800, min_frequency=2, special_tokens=specials, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tokenizer_json(tok)


def sentence(rng: np.random.Generator, n_words: int) -> str:
    """A sentence of ``n_words`` from ``WORDS``, frequent words more often, a comma now and then."""
    weights = np.arange(1, len(WORDS) + 1) ** -0.7  # Zipf-like: frequent words first
    words = rng.choice(WORDS, size=n_words, p=weights / weights.sum()).tolist()
    for i in range(int(rng.integers(2, 6)), n_words - 1, int(rng.integers(5, 12))):
        words[i] += ","  # a comma now and then
    words[0] = words[0].capitalize()
    return " ".join(words) + str(rng.choice([".", ".", ".", "?", "!"]))


def long_tailed_lengths(rng: np.random.Generator, n: int, n_long: int) -> list[int]:
    """Mostly 3-15 words (lognormal), plus n_long samples of 100-300 words."""
    lengths = np.clip(np.rint(rng.lognormal(2.0, 0.6, n)), 3, 60).astype(int)
    lengths[rng.choice(n, n_long, replace=False)] = rng.integers(100, 301, n_long)
    return lengths.tolist()
