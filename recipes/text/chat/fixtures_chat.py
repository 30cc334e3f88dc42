"""Instruction-tuning fixtures: conversations, prompt/completion pairs, three model chat templates.

The templates are the ones the models ship in their ``tokenizer_config.json`` (Meta-Llama-3-8B-Instruct,
Qwen2-7B-Instruct's ChatML, Mistral-7B-Instruct-v0.1's ``[INST]``), each also written with
``{% generation %}`` markers around the assistant's text, the form transformers' and TRL's
assistant masks read. One small BPE tokenizer holds every template's special tokens.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from recipes.fixtures_files import tokenizer_json

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}"
)
# the same templates with the assistant's text (and its end of turn) inside {% generation %} blocks
LLAMA3_MARKED = (
    "{% for message in messages %}{% set header = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' %}"
    "{% if loop.index0 == 0 %}{% set header = bos_token + header %}{% endif %}{{ header }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}"
    "{% endgeneration %}{% else %}{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
CHATML_MARKED = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' + '\n' }}"
    "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' + '\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MISTRAL_MARKED = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{% generation %}{{ message['content'] + eos_token}}{% endgeneration %}{% else %}"
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
TEMPLATES = {  # folder: (template, marked template, special tokens of its config)
    "llama3": (LLAMA3, LLAMA3_MARKED, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "chatml": (CHATML, CHATML_MARKED, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "mistral": (MISTRAL, MISTRAL_MARKED, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
}
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[INST]", "[/INST]"]


def chat_files(words: list[str], sentence: object) -> dict[str, str]:
    """The files of ``fixtures/text/chat/`` by name; ``sentence(rng, n)`` makes an n-word sentence."""
    rng = np.random.default_rng(6)

    def say(low: int = 3, high: int = 25) -> str:
        return sentence(rng, int(rng.integers(low, high)))

    chats = []
    for k in range(36):
        turns = 1 + k % 3
        messages = [{"role": "system", "content": say(4, 10)}] if k % 4 == 3 else []
        for _ in range(turns):
            messages += [{"role": "user", "content": say()}, {"role": "assistant", "content": say(2, 40)}]
        chats.append({"messages": messages})
    chats[5]["messages"][1]["content"] += "  "  # trailing spaces: Llama 3's template trims them
    pairs = [{"prompt": say(), "completion": " " + say(2, 30)} for _ in range(24)]
    pairs[0] = {"prompt": "The answer is th", "completion": "e end."}  # "▁the" merges across the boundary
    chat_pairs = [{"prompt": [{"role": "user", "content": say()}], "completion": [{"role": "assistant", "content": say()}]}
                  for _ in range(12)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["prompt", "completion"])
    writer.writerows([[pair["prompt"], pair["completion"]] for pair in pairs[:12]])
    files = {
        "chat.jsonl": _jsonl(chats),
        "pairs.jsonl": _jsonl(pairs),
        "pairs.csv": buffer.getvalue(),
        "chat_pairs.jsonl": _jsonl(chat_pairs),
    }
    texts = [message["content"] for chat in chats for message in chat["messages"]]
    texts += [pair["prompt"] + pair["completion"] for pair in pairs] + words
    files["tokenizer.json"] = _train_tokenizer(texts)
    for name, (template, marked, tokens) in TEMPLATES.items():
        files[f"{name}/tokenizer_config.json"] = _json({"chat_template": template, **tokens})
        files[f"{name}_marked/tokenizer_config.json"] = _json({"chat_template": marked, **tokens})
    return files


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)


def _json(obj: dict) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _train_tokenizer(texts: list[str]) -> str:
    """BPE over Metaspace words, every template's special tokens, a ``<s> $A`` post-processor (Llama's BOS)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=900, min_frequency=2, special_tokens=SPECIALS,
                                                             show_progress=False))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    return tokenizer_json(tokenizer)
