"""Chat templates are untrusted code: each row renders within a time and an output budget, any error a
template raises is a DataError naming the row, and a malformed tokenizer config names its file and field.

The oracles that the metered sandbox still renders as transformers does are in test_chat_oracles.py.
"""

import json
import time

import pytest
from tokenizers import Tokenizer

from recipes.core import ReadOptions
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.text import InstructionDataset
from recipes.text.chat.chat_template import ChatTemplate
from recipes.text.chat.template_budget import RenderBudget
from tests.memory_cap import address_space_cap

CHAT = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
ROWS = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
        {"messages": [{"role": "user", "content": "boom"}, {"role": "assistant", "content": "yes"}]},
        {"messages": [{"role": "user", "content": "bye"}, {"role": "assistant", "content": "ciao"}]}]


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "chat" / "tokenizer.json"))


@pytest.fixture
def chats(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    return path


def _on_boom(code):
    """A template that runs ``code`` on the row whose user says "boom" and renders the others plainly."""
    return "{% if messages[0]['content'] == 'boom' %}" + code + "{% endif %}" + CHAT


def test_a_repetition_past_the_output_budget_is_a_data_error_naming_the_file_row_and_budget(chats, tok):
    with address_space_cap(2 * 2**30), pytest.raises(DataError) as caught:
        InstructionDataset(chats, tok, template=_on_boom("{{ 'x' * 10**9 }}"))
    assert "chats.jsonl line 2: the chat template went over its output budget" in str(caught.value)
    assert "a repetition of 1,000,000,000 characters" in str(caught.value)


def test_nested_range_loops_stop_at_the_time_budget(chats, tok):
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    template = ChatTemplate(_on_boom(loops), budget=RenderBudget(seconds=0.3))
    start = time.monotonic()
    with pytest.raises(DataError, match=r"chats.jsonl line 2: the chat template ran past its time budget \(0.3 s a row"):
        InstructionDataset(chats, tok, template=template)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("code", [
    "{{ 'y' * 40000 ~ 'y' * 40000 }}",                                     # ~ counts too
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "{% set s %}{% for i in range(10000) %}{{ 'z' * 1000 }}{% endfor %}{% endset %}",  # output kept in a variable
    "{{ 'x'|center(10**9) }}", "{{ 'x'.ljust(10**9) }}", "{{ '%0900000000d' % 1 }}", "{{ '{:>900000000}'.format(1) }}",
    "{{ ([('x' * 60000)] * 60000)|join }}", "{{ ('ab' * 1000)|replace('', 'x' * 1000) }}",
], ids=["tilde", "doubling", "set_block", "center", "ljust", "printf", "format", "join", "replace"])
def test_every_way_to_grow_a_value_meets_the_output_budget(chats, tok, code):
    with address_space_cap(2 * 2**30), pytest.raises(DataError, match="line 2: the chat template went over its output"):
        InstructionDataset(chats, tok, template=_on_boom(code))


def test_both_budgets_are_options(chats, tok):
    big = _on_boom("{{ 'x' * 70000 }}")
    with pytest.raises(DataError, match="output budget"):
        InstructionDataset(chats, tok, template=big)
    dataset = InstructionDataset(chats, tok, template=ChatTemplate(big, budget=RenderBudget(output_chars=100_000)))
    assert len(dataset) == 3 and len(dataset[1]["input_ids"]) > 1000
    factor = ChatTemplate(big, budget=RenderBudget(output_chars=1000, output_factor=10_000))  # 10,000 a character
    assert len(InstructionDataset(chats, tok, template=factor)) == 3
    assert 1 <= RenderBudget().seconds <= 10 and RenderBudget().chars(1000) >= 10 * 1000
    for bad in ({"seconds": float("nan")}, {"seconds": 0}, {"output_chars": -1}, {"output_factor": float("inf")}):
        with pytest.raises(ValueError, match=f"RenderBudget.{next(iter(bad))} must be a finite number > 0"):
            RenderBudget(**bad)


@pytest.mark.parametrize("code, raised", [("{{ 1/0 }}", "raised ZeroDivisionError: division by zero"),
                                          ("{{ 'a' + 1 }}", "raised TypeError: can only concatenate str"),
                                          ("{{ raise_exception('no boom here') }}", "raised: no boom here"),
                                          ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "raised RecursionError")],
                         ids=["by_zero", "type_error", "raise_exception", "recursion"])
def test_any_error_a_template_raises_names_the_row_and_skip_drops_only_it(chats, tok, code, raised):
    with pytest.raises(DataError, match=f"chats.jsonl line 2: the chat template {raised}"):
        InstructionDataset(chats, tok, template=_on_boom(code))
    with pytest.warns(SkippedSampleWarning, match="chats.jsonl line 2: the chat template"):
        dataset = InstructionDataset(chats, tok, template=_on_boom(code), on_error="skip")
    assert dataset.line_numbers.tolist() == [1, 3]


@pytest.mark.parametrize("escape", ["{{ ''.__class__.__mro__[1].__subclasses__() }}",
                                    "{{ namespace.__init__.__globals__ }}",
                                    "{% set ns = namespace() %}{% set ns.__class__ = 1 %}",
                                    "{{ dict.fromkeys.__self__ }}"])
def test_the_metered_sandbox_still_refuses_escapes(chats, tok, escape):
    try:
        dataset = InstructionDataset(chats, tok, template=_on_boom(escape), on_error="raise")
    except DataError as error:
        assert "line 2: the chat template" in str(error)
    else:  # an unsafe attribute reads as undefined: nothing reached
        assert "class" not in tok.decode(dataset[1]["input_ids"].tolist())


def _config(tmp_path, text):
    path = tmp_path / "tokenizer_config.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "a tokenizer config is a JSON object, got a list"),
    (json.dumps({"chat_template": CHAT, "eos_token": {"x": 1}}), "field 'eos_token' is {\"x\": 1}, not a token"),
    (json.dumps({"chat_template": CHAT, "bos_token": ["<s>"]}), "field 'bos_token' is"),
    ("[" * 100_000 + "]" * 100_000, "not a JSON tokenizer config (RecursionError"),
    (json.dumps({"chat_template": 42}), "field 'chat_template' is a int, not a template string"),
    (json.dumps({"chat_template": [{"name": "default", "template": CHAT}, "tool_use"]}), "field 'chat_template'[1] is not"),
    (json.dumps({"chat_template": [{"name": "other", "template": CHAT}]}), "no chat template called 'default'"),
], ids=["list", "token_object", "token_list", "deep", "number", "entry", "unnamed"])
def test_a_malformed_tokenizer_config_names_its_file_and_field(tmp_path, text, message):
    with pytest.raises(ValueError) as caught:
        ChatTemplate.from_config(_config(tmp_path, text))
    assert str(caught.value).startswith(f"{tmp_path / 'tokenizer_config.json'}: ") and message in str(caught.value)


@pytest.mark.parametrize("field", ["eos_token", "bos_token", "pad_token"])
def test_a_special_token_missing_from_the_vocabulary_names_the_config_and_field(chats, tok, tmp_path, field):
    config = _config(tmp_path, json.dumps({"chat_template": CHAT, field: "<|not_in_vocab|>"}))
    with pytest.raises(ValueError, match=f"tokenizer_config.json: field '{field}' is '<|not_in_vocab|>', which is not in"):
        InstructionDataset(chats, tok, template=config)


def test_a_row_over_the_size_bound_is_refused_before_rendering_whatever_max_length(chats, tok, tmp_path):
    big = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a" * 1_000_001}]}
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(big) + "\n", encoding="utf-8")
    with address_space_cap(2 * 2**30), pytest.raises(DataError, match=r"big.jsonl line 2: the row's texts hold 1,00\d,\d+ "
                                                                      "characters, over read_options.max_line_chars"):
        InstructionDataset(path, tok, template=CHAT, max_length=64)
    assert ReadOptions().max_line_chars == 1_000_000  # TokenizedTextDataset's bound and default
    with pytest.warns(SkippedSampleWarning, match="line 2: the row's texts hold"):
        assert len(InstructionDataset(path, tok, template=CHAT, on_error="skip")) == 1
    with pytest.raises(DataError, match="chats.jsonl line 1: the row's texts hold .* over read_options.max_line_chars=10"):
        InstructionDataset(chats, tok, template=CHAT, read_options=ReadOptions(max_line_chars=10))


def test_a_source_whose_every_row_was_skipped_is_an_error_saying_how_many_and_why(chats, tok):
    with pytest.warns(SkippedSampleWarning), pytest.raises(DataError) as caught:
        InstructionDataset(chats, tok, template="{{ raise_exception('not this one') }}", on_error="skip")
    assert "chats.jsonl: every row was skipped (3 read, on_error='skip'); the first: " in str(caught.value)
    assert "chats.jsonl line 1: the chat template raised: not this one" in str(caught.value)
