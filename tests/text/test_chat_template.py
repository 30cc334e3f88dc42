"""``template=`` takes what a model ships, read as transformers reads it: a model folder, its
``tokenizer_config.json`` or its ``chat_template.jinja``.

The oracle is a folder written by transformers' own ``save_pretrained`` (a tokenizer.json, a
tokenizer_config.json with the special tokens and no template, a chat_template.jinja), built from
the fixture's tokenizer and Llama-3 template, and read back by ``AutoTokenizer.from_pretrained``.
"""

import json
import shutil

import pytest

from recipes.text import InstructionDataset
from recipes.text.chat.chat_template import ChatTemplate

FORMS = {"folder": ".", "config": "tokenizer_config.json", "jinja": "chat_template.jinja"}


@pytest.fixture(scope="module")
def chat(fixtures):
    return fixtures / "text" / "chat"


@pytest.fixture(scope="module")
def saved(chat, tmp_path_factory):
    """A model folder as ``save_pretrained`` writes it, from the fixture's Llama-3 tokenizer_config.json."""
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    config = json.loads((chat / "llama3" / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = config.pop("chat_template")
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(chat / "tokenizer.json"), **config)
    tokenizer.chat_template = template
    folder = tmp_path_factory.mktemp("saved")
    tokenizer.save_pretrained(folder)
    return folder


def _loaded(folder):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _conversations(chat):
    lines = (chat / "chat.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["messages"] for line in lines]


def test_save_pretrained_writes_the_template_as_a_jinja_file_beside_the_config(saved):
    assert (saved / "chat_template.jinja").is_file()
    config = json.loads((saved / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "chat_template" not in config and config["eos_token"] == "<|eot_id|>"


@pytest.mark.parametrize("form", FORMS)
def test_each_form_renders_and_tokenizes_as_apply_chat_template(chat, saved, form):
    tokenizer, conversations = _loaded(saved), _conversations(chat)
    template = ChatTemplate.from_config(saved / FORMS[form])
    assert template.eos_token == "<|eot_id|>" and template.special_tokens["bos_token"] == "<|begin_of_text|>"
    dataset = InstructionDataset(chat / "chat.jsonl", saved / "tokenizer.json", template=str(saved / FORMS[form]))
    assert len(dataset) == len(conversations)
    for index, messages in enumerate(conversations):
        for prompt in (False, True):
            text, _ = template.render(messages, add_generation_prompt=prompt)
            assert text == tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        expected = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert dataset[index]["input_ids"].tolist() == list(expected)


def test_the_jinja_file_wins_over_the_configs_template_as_in_transformers(chat, saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "both")
    other = json.loads((chat / "chatml" / "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"]
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": other}), encoding="utf-8")
    shipped = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    assert _loaded(folder).chat_template == shipped != other
    for form in FORMS.values():
        assert ChatTemplate.from_config(folder / form).source == shipped, form


def test_additional_templates_are_named_by_their_file_and_the_jinja_file_is_the_default(chat, saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "named")
    other = json.loads((chat / "chatml" / "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"]
    (folder / "additional_chat_templates").mkdir()
    (folder / "additional_chat_templates" / "tool_use.jinja").write_text(other, encoding="utf-8")
    tokenizer, messages = _loaded(folder), _conversations(chat)[0]
    for name in ("default", "tool_use"):
        text, _ = ChatTemplate.from_config(folder, name=name).render(messages)
        assert text == tokenizer.apply_chat_template(messages, tokenize=False, chat_template=name), name
    with pytest.raises(ValueError, match=r"no chat template called 'chatml'; it has \['default', 'tool_use'\]"):
        ChatTemplate.from_config(folder / "tokenizer_config.json", name="chatml")


def test_a_folder_or_config_without_a_template_is_refused_by_name(saved, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ChatTemplate.from_config(tmp_path / "missing")
    bare = shutil.copytree(saved, tmp_path / "bare")
    (bare / "chat_template.jinja").unlink()
    for form in (bare, bare / "tokenizer_config.json"):
        with pytest.raises(ValueError, match=r"tokenizer_config\.json: no chat template \(a 'chat_template' string"):
            ChatTemplate.from_config(form)
    (bare / "chat_template.txt").write_text("{{ messages }}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"chat_template\.txt: not a JSON tokenizer config .* ends in \.jinja"):
        ChatTemplate.from_config(bare / "chat_template.txt")
