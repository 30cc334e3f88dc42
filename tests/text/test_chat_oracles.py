"""InstructionDataset against the tools people train with: transformers' apply_chat_template and TRL.

Three real templates (Llama 3, ChatML/Qwen2, Mistral [INST]; fixtures/text/chat/) over the fixture
conversations: the rendered text and the ids equal ``apply_chat_template``'s on a
``PreTrainedTokenizerFast`` wrapping the same tokenizer.json; the learned-token masks equal
transformers' ``return_assistant_tokens_mask`` and TRL's ``SFTTrainer`` labels (TRL reads the
masks from ``{% generation %}`` markers, so it gets the marked copy of each template while ours
reads the plain one) for chats, and TRL's labels for plain and conversational prompt/completion.
"""

import json
import warnings

import pytest
import torch
from tokenizers import Tokenizer

from recipes.text import InstructionDataset
from recipes.text.chat.chat_template import ChatTemplate

TEMPLATES = ("llama3", "chatml", "mistral")


@pytest.fixture(scope="module")
def chat(fixtures):
    return fixtures / "text" / "chat"


def _rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _wrapped(chat, name):
    """A transformers tokenizer over the fixture's tokenizer.json, with the config's template and tokens."""
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    config = json.loads((chat / name / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = config.pop("chat_template")
    wrapped = PreTrainedTokenizerFast(tokenizer_file=str(chat / "tokenizer.json"), **config)
    wrapped.chat_template = template
    return wrapped


def _dataset(chat, name, file="chat.jsonl", **options):
    # Mistral's template refuses system turns: those rows are skipped, with a warning each
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "skipped: .*Conversation roles must alternate")
        return InstructionDataset(chat / file, chat / "tokenizer.json", template=chat / name / "tokenizer_config.json",
                                  on_error="skip", **options)


def _ids(output):
    return list(output["input_ids"] if hasattr(output, "keys") else output)


@pytest.mark.parametrize("name", TEMPLATES)
def test_rendered_text_and_ids_equal_apply_chat_template(chat, name):
    wrapped, rows = _wrapped(chat, name), _rows(chat / "chat.jsonl")
    template = ChatTemplate.from_config(chat / name / "tokenizer_config.json")
    dataset = _dataset(chat, name)
    assert len(dataset) == (27 if name == "mistral" else 36)
    for index in range(len(dataset)):
        messages = rows[dataset.line_numbers[index] - 1]["messages"]
        for prompt in (False, True):
            text, _ = template.render(messages, add_generation_prompt=prompt)
            assert text == wrapped.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        assert dataset[index]["input_ids"].tolist() == _ids(wrapped.apply_chat_template(messages, tokenize=True))


@pytest.mark.parametrize("name", TEMPLATES)
def test_masks_equal_transformers_assistant_masks_on_the_marked_template(chat, name):
    wrapped, rows = _wrapped(chat, f"{name}_marked"), _rows(chat / "chat.jsonl")
    for dataset in (_dataset(chat, name), _dataset(chat, f"{name}_marked")):  # spans by rendering, and by markers
        for index in range(len(dataset)):
            messages = rows[dataset.line_numbers[index] - 1]["messages"]
            out = wrapped.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
            item = dataset[index]
            assert item["input_ids"].tolist() == list(out["input_ids"])
            assert (item["labels"] != -100).long().tolist() == list(out["assistant_masks"])


def _trl_labels(chat, name, rows, **options):
    """TRL's SFTTrainer labels for ``rows``, prepared as its trainer prepares them (one tiny Llama)."""
    pytest.importorskip("trl")
    import datasets
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    datasets.disable_progress_bars()
    wrapped = _wrapped(chat, name)
    config = LlamaConfig(vocab_size=len(wrapped), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)
    with warnings.catch_warnings():
        # TRL's config sets a training option transformers renamed; TRL warns about settings it picks for
        # itself (no eval set...): nothing about the data
        warnings.filterwarnings("ignore", "`gradient_checkpointing` is deprecated", FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="trl")
        args = SFTConfig(output_dir=None, report_to=[], max_length=None, use_cpu=True, **options)
        trainer = SFTTrainer(model=LlamaForCausalLM(config), args=args, train_dataset=datasets.Dataset.from_list(rows),
                             processing_class=wrapped)
    return trainer.train_dataset["input_ids"], trainer.train_dataset["labels"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_chat_labels_equal_trl_assistant_only_loss(chat, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # TRL's output folder
    dataset = _dataset(chat, name)
    rows = [_rows(chat / "chat.jsonl")[line - 1] for line in dataset.line_numbers]
    ids, labels = _trl_labels(chat, f"{name}_marked", rows, assistant_only_loss=True)
    for index in range(len(dataset)):
        assert dataset[index]["input_ids"].tolist() == ids[index]
        assert dataset[index]["labels"].tolist() == labels[index]


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("file", ["pairs.jsonl", "chat_pairs.jsonl"], ids=["plain", "conversational"])
def test_prompt_completion_labels_equal_trl_completion_only_loss(chat, name, file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dataset = _dataset(chat, name, file)
    ids, labels = _trl_labels(chat, name, _rows(chat / file))
    assert len(dataset) == len(ids) > 0
    for index in range(len(dataset)):
        assert dataset[index]["input_ids"].tolist() == ids[index]
        assert dataset[index]["labels"].tolist() == labels[index]


def test_a_token_merged_across_the_prompt_boundary_is_learned_as_trl_learns_it(chat, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tok = Tokenizer.from_file(str(chat / "tokenizer.json"))
    pair = _rows(chat / "pairs.jsonl")[0]
    boundary = len(pair["prompt"])
    encoding = tok.encode(pair["prompt"] + pair["completion"])
    merged = [k for k, (start, end) in enumerate(encoding.offsets) if start < boundary < end]
    assert len(merged) == 1  # the fixture's point: one token holds characters of both
    item = _dataset(chat, "mistral", "pairs.jsonl")[0]
    assert item["labels"][merged[0]] == item["input_ids"][merged[0]]
    assert (item["labels"][: merged[0]] == -100).all()
    _, labels = _trl_labels(chat, "mistral", [pair])
    assert item["labels"].tolist() == labels[0]
    assert torch.equal(item["labels"][merged[0] :], item["input_ids"][merged[0] :])
