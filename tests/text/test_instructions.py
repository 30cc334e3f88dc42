"""InstructionDataset: sources and formats, learned labels, truncation, bad rows, and its collates.

The oracles for rendering and masks (transformers, TRL) are in test_chat_oracles.py; these tests
check the rules the dataset states, against the rows' own text.
"""

import json
import warnings

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.loading.mixing import MixedDataset
from recipes.text import InstructionDataset, instruction_collate, pack_collate, text_loader
from recipes.text.chat.chat_template import ChatTemplate
from tests.harness import resume_suite


@pytest.fixture(scope="module")
def chat(fixtures):
    return fixtures / "text" / "chat"


@pytest.fixture(scope="module")
def tok(chat):
    return Tokenizer.from_file(str(chat / "tokenizer.json"))


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _learned_text(tok, item):
    ids = item["input_ids"][item["labels"] != -100].tolist()
    return tok.decode(ids, skip_special_tokens=False)


def test_chat_labels_hold_only_the_assistant_turns_with_their_end_of_turn(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "chatml" / "tokenizer_config.json")
    rows = [json.loads(line) for line in (chat / "chat.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(dataset) == len(rows) == 36
    for index in (0, 1, 2, 3):
        item = dataset[index]
        assert item["input_ids"].dtype == item["labels"].dtype == torch.int64 and item["index"] == index
        answers = [m["content"] for m in rows[index]["messages"] if m["role"] == "assistant"]
        learned = _learned_text(tok, item)
        # each answer is learned followed by <|im_end|>, nothing of the user's or system's words
        assert learned.count("<|im_end|>") == len(answers)
        for message in rows[index]["messages"]:
            assert (message["content"].strip() in learned) == (message["role"] == "assistant")
    assert dataset.lengths.tolist() == [len(dataset[i]["input_ids"]) for i in range(len(dataset))]


def test_completion_only_false_learns_every_token(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "llama3" / "tokenizer_config.json",
                                 completion_only=False)
    for index in range(5):
        assert torch.equal(dataset[index]["labels"], dataset[index]["input_ids"])


def test_plain_pairs_learn_the_completion_and_the_eos_and_a_token_merged_across_the_boundary(chat, tok):
    dataset = InstructionDataset(chat / "pairs.jsonl", tok, template=chat / "mistral" / "tokenizer_config.json")
    item = dataset[0]  # "The answer is th" + "e end.": "▁the" holds characters of both
    tokens = [tok.id_to_token(i) for i in item["input_ids"].tolist()]
    assert tokens == ["<s>", "▁The", "▁answer", "▁is", "▁the", "▁end", ".", "</s>"]
    learned = [token for token, label in zip(tokens, item["labels"].tolist()) if label != -100]
    assert learned == ["▁the", "▁end", ".", "</s>"]
    csv = InstructionDataset(chat / "pairs.csv", tok, template=chat / "mistral" / "tokenizer_config.json")
    assert len(csv) == 12 and all(torch.equal(csv[i]["labels"], dataset[i]["labels"]) for i in range(12))
    assert csv.describe(1) == f"{chat / 'pairs.csv'} line 3"


def test_parquet_and_hugging_face_datasets_give_the_jsonl_items(chat, tok, tmp_path, quiet_datasets):
    import datasets

    rows = [json.loads(line) for line in (chat / "chat.jsonl").read_text(encoding="utf-8").splitlines()]
    template = chat / "llama3" / "tokenizer_config.json"
    reference = InstructionDataset(chat / "chat.jsonl", tok, template=template)
    table = datasets.Dataset.from_list(rows)
    table.to_parquet(str(tmp_path / "chat.parquet"))
    for source in (table, tmp_path / "chat.parquet"):
        dataset = InstructionDataset(source, tok, template=template)
        assert len(dataset) == len(reference)
        for index in range(len(dataset)):
            assert torch.equal(dataset[index]["input_ids"], reference[index]["input_ids"])
            assert torch.equal(dataset[index]["labels"], reference[index]["labels"])
    assert "row 4" in InstructionDataset(tmp_path / "chat.parquet", tok, template=template).describe(4)


def test_plain_text_rows_learn_everything(tmp_path, tok):
    dataset = InstructionDataset(_jsonl(tmp_path / "t.jsonl", [{"text": "a dog and the sea"}]), tok)
    assert dataset[0]["input_ids"].tolist() == tok.encode("a dog and the sea").ids
    assert torch.equal(dataset[0]["labels"], dataset[0]["input_ids"])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"messages": [{"role": "bot", "content": "hi"}]}, "unknown role 'bot'"),
        ({"messages": [{"role": "user"}]}, "has no 'content'"),
        ({"messages": []}, "empty conversation"),
        ({"messages": [{"role": "user", "content": "a"}]}, "nothing to learn"),
        ({"prompt": "a", "completion": 3}, "both be strings"),
        ({"question": "a"}, "no instruction fields"),
        ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                       {"role": "assistant", "content": "a"}]}, "the chat template raised: Conversation roles"),
    ],
    ids=["unknown-role", "no-content", "empty", "no-answer", "bad-pair", "no-fields", "template-raises"],
)
def test_bad_rows_name_file_and_line_and_skip_drops_them_with_a_warning(chat, tok, tmp_path, row, message):
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    path = _jsonl(tmp_path / "bad.jsonl", [good, row, good])
    template = chat / "mistral" / "tokenizer_config.json"
    with pytest.raises(DataError, match=f"bad.jsonl line 2: .*{message}"):
        InstructionDataset(path, tok, template=template)
    with pytest.warns(SkippedSampleWarning, match=f"bad.jsonl line 2: .*{message}"):
        dataset = InstructionDataset(path, tok, template=template, on_error="skip")
    assert len(dataset) == 2 and dataset.line_numbers.tolist() == [1, 3]


def test_conversations_without_a_template_are_refused_with_the_fix(chat, tok):
    with pytest.raises(ValueError, match="need a chat template: pass template="):
        InstructionDataset(chat / "chat.jsonl", tok)


def test_truncation_cuts_the_end_keeps_closing_specials_and_does_not_learn_them_after_a_cut_answer(tmp_path, fixtures):
    tok = Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))  # "[CLS] $A [SEP]"
    pair = {"prompt": "the sea and the", "completion": " dog was in the house at night"}
    path = _jsonl(tmp_path / "p.jsonl", [pair])
    whole = InstructionDataset(path, tok)[0]
    assert whole["labels"][-1] == whole["input_ids"][-1] == tok.token_to_id("[SEP]")  # learned when whole
    cut = InstructionDataset(path, tok, max_length=8)[0]
    assert cut["input_ids"].tolist() == whole["input_ids"][:7].tolist() + [tok.token_to_id("[SEP]")]
    assert cut["labels"][-1] == -100 and (cut["labels"][:7] == whole["labels"][:7]).all()
    with pytest.raises(DataError, match="p.jsonl line 1: the answer lies wholly past max_length=3"):
        InstructionDataset(path, tok, max_length=3)
    with pytest.raises(DataError, match=r"p.jsonl line 1: \d+ tokens, over max_length=8 \(overlong='refuse'\)"):
        InstructionDataset(path, tok, max_length=8, overlong="refuse")
    two = _jsonl(tmp_path / "two.jsonl", [pair, {"prompt": "a", "completion": " b"}])
    with pytest.warns(SkippedSampleWarning, match="overlong='refuse'"):
        assert len(InstructionDataset(two, tok, max_length=8, overlong="refuse", on_error="skip")) == 1


def test_chat_truncation_cuts_from_the_end(chat, tok):
    template = chat / "chatml" / "tokenizer_config.json"
    whole = InstructionDataset(chat / "chat.jsonl", tok, template=template)
    with pytest.warns(SkippedSampleWarning, match="the answer lies wholly past max_length=64"):
        cut = InstructionDataset(chat / "chat.jsonl", tok, template=template, max_length=64, on_error="skip")
    assert 0 < len(cut) < len(whole)
    kept = {int(line): i for i, line in enumerate(cut.line_numbers)}
    for index in range(len(whole)):
        line = int(whole.line_numbers[index])
        if line in kept:
            got, expected = cut[kept[line]], whole[index]
            assert torch.equal(got["input_ids"], expected["input_ids"][:64])
            assert torch.equal(got["labels"], expected["labels"][:64])
        else:  # dropped only when nothing learned survives the cut
            assert (whole[index]["labels"][:64] == -100).all()


def test_a_template_given_as_text_renders_as_its_config_does(chat, tok):
    config = json.loads((chat / "llama3" / "tokenizer_config.json").read_text(encoding="utf-8"))
    text = ChatTemplate(config["chat_template"], {"bos_token": config["bos_token"], "eos_token": config["eos_token"]})
    a = InstructionDataset(chat / "chat.jsonl", tok, template=text)
    b = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "llama3" / "tokenizer_config.json")
    assert all(torch.equal(a[i]["labels"], b[i]["labels"]) for i in range(len(a)))


def test_instruction_collate_pads_labels_with_minus_100(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "chatml" / "tokenizer_config.json")
    items = [dataset[i] for i in (0, 1, 2)]
    batch = instruction_collate([items[0], None, items[1], items[2]], pad_id=dataset.pad_id, pad_to_multiple_of=8)
    lengths = [len(item["input_ids"]) for item in items]
    assert batch["lengths"].tolist() == lengths and batch["index"].tolist() == [0, 1, 2]
    assert batch["input_ids"].shape[1] % 8 == 0 and batch["input_ids"].shape[1] >= max(lengths)
    for row, item in enumerate(items):
        n = len(item["input_ids"])
        assert torch.equal(batch["input_ids"][row, :n], item["input_ids"]) and (batch["input_ids"][row, n:] == 0).all()
        assert torch.equal(batch["labels"][row, :n], item["labels"]) and (batch["labels"][row, n:] == -100).all()
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (batch["input_ids"].shape[1] - n)


def test_pack_collate_masks_each_samples_first_label(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "chatml" / "tokenizer_config.json",
                                 completion_only=False)
    items = [dataset[i] for i in (0, 1, 2)]
    batch = pack_collate(items)
    starts = batch["cu_seqlens"][:-1].tolist()
    assert batch["labels"].shape == batch["input_ids"].shape == (1, sum(len(i["input_ids"]) for i in items))
    expected = torch.cat([item["labels"] for item in items])
    expected[starts] = -100
    assert torch.equal(batch["labels"][0], expected)
    assert batch["position_ids"][0, starts].tolist() == [0, 0, 0] and batch["cu_seqlens"].dtype == torch.int32


def test_text_loader_pads_with_instruction_collate_and_mixes(chat, tok):
    llama = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "llama3" / "tokenizer_config.json")
    pairs = InstructionDataset(chat / "pairs.jsonl", tok, template=chat / "llama3" / "tokenizer_config.json")
    for dataset in (llama, MixedDataset([llama, pairs], weights=[1, 1], samples_per_epoch=40)):
        batches = list(text_loader(dataset, 4, device="cpu", seed=0, num_workers=0))
        for batch in batches:
            assert set(batch) == {"input_ids", "attention_mask", "labels", "lengths", "index"}
            assert batch["labels"].shape == batch["input_ids"].shape
            for row, index in enumerate(batch["index"].tolist()):
                item = dataset[index]
                assert torch.equal(batch["labels"][row, : len(item["labels"])], item["labels"])


def test_pad_id_is_the_tokenizers_pad_token_or_the_one_given(chat):
    plain = Tokenizer.from_file(str(chat / "tokenizer.json"))
    assert InstructionDataset(chat / "pairs.jsonl", plain).pad_id == plain.token_to_id("<pad>")
    assert InstructionDataset(chat / "pairs.jsonl", plain, pad_id=7).pad_id == 7


# resume: 36 conversations, batch 4, drop_last: 9 batches an epoch
resume_reference, test_instruction_loader_resumes_exactly_the_batches_still_to_come = resume_suite(9)


@pytest.fixture(scope="module")
def make_loader(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "llama3" / "tokenizer_config.json")
    return lambda workers: text_loader(dataset, 4, device="cpu", seed=5, stateful=True, num_workers=workers)


def test_items_share_the_flat_arrays(chat, tok):
    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "chatml" / "tokenizer_config.json")
    assert dataset.tokens.ids.dtype == np.uint16 and dataset.learned.dtype == bool
    assert len(dataset.learned) == len(dataset.tokens.ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dataset[-1]["index"] == len(dataset) - 1


@pytest.fixture(scope="module")
def written(chat, tok, tmp_path_factory, quiet_datasets):
    """The fixture chats tokenised, written as pre-tokenised Parquet: labels, and TRL's mask columns."""
    import datasets

    dataset = InstructionDataset(chat / "chat.jsonl", tok, template=chat / "chatml" / "tokenizer_config.json")
    items = [dataset[i] for i in range(len(dataset))]
    folder = tmp_path_factory.mktemp("ids")
    rows = [{"input_ids": item["input_ids"].tolist(), "labels": item["labels"].tolist()} for item in items]
    datasets.Dataset.from_list(rows).to_parquet(str(folder / "labels.parquet"))
    masks = [{"input_ids": row["input_ids"], "assistant_masks": [int(x != -100) for x in row["labels"]]} for row in rows]
    datasets.Dataset.from_list(masks).to_parquet(str(folder / "masks.parquet"))
    return dataset, folder


@pytest.mark.parametrize("file", ["labels.parquet", "masks.parquet"])
def test_pre_tokenised_ids_with_labels_or_a_mask_give_the_tokenised_items(written, file):
    dataset, folder = written
    stored = InstructionDataset.from_ids(folder / file)
    assert len(stored) == len(dataset) and stored.lengths.tolist() == dataset.lengths.tolist()
    for index in range(len(dataset)):
        assert torch.equal(stored[index]["input_ids"], dataset[index]["input_ids"])
        assert torch.equal(stored[index]["labels"], dataset[index]["labels"])
    assert stored.describe(3).endswith("row 3")


def test_stored_ids_are_read_by_from_ids_only(written):
    _, folder = written
    with pytest.raises(TypeError, match="unexpected keyword argument 'ids_field'"):
        InstructionDataset(folder / "labels.parquet", None, ids_field="input_ids")
    assert len(InstructionDataset.from_ids(folder / "labels.parquet", ids_field="input_ids")) > 0


def test_pre_tokenised_rows_are_checked_and_cut(written, tok, tmp_path, quiet_datasets):
    import datasets

    dataset, folder = written
    with pytest.warns(SkippedSampleWarning, match="the answer lies wholly past max_length=40"):
        cut = InstructionDataset.from_ids(folder / "labels.parquet", tok, max_length=40, on_error="skip")
    assert all(len(cut[i]["input_ids"]) <= 40 for i in range(len(cut))) and cut.pad_id == tok.token_to_id("<pad>")
    first = dataset[0]
    bad = [{"input_ids": first["input_ids"].tolist(), "labels": [7] * len(first["input_ids"])},
           {"input_ids": [5, 6], "labels": [-100]}]
    datasets.Dataset.from_list(bad).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(DataError, match="bad.parquet row 0 .*label 7 at position 0 is neither -100 nor its id"):
        InstructionDataset.from_ids(tmp_path / "bad.parquet")
    datasets.Dataset.from_list([{"input_ids": [5, 6]}]).to_parquet(str(tmp_path / "bare.parquet"))
    with pytest.raises(DataError, match="no labels column .*completion_only=False"):
        InstructionDataset.from_ids(tmp_path / "bare.parquet")
    assert InstructionDataset.from_ids(tmp_path / "bare.parquet", completion_only=False)[0][
        "labels"].tolist() == [5, 6]


def test_tokenize_instructions_writes_what_the_dataset_reads_back(chat, tok, tmp_path):
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    from recipes.text import TokenizeInstructions

    template = chat / "chatml" / "tokenizer_config.json"
    rows = [json.loads(line) for line in (chat / "chat.jsonl").read_text(encoding="utf-8").splitlines()]
    call = pickle.loads(pickle.dumps(TokenizeInstructions(chat / "tokenizer.json", template=template, max_length=96)))
    out = call(pa.Table.from_pylist(rows))  # what a Ray task gets: a pickled copy and an Arrow block
    assert out.column_names == ["messages", "input_ids", "labels"]
    assert out.schema.field("labels").type == pa.list_(pa.int32())
    pq.write_table(out, tmp_path / "tokens.parquet")
    stored = InstructionDataset.from_ids(tmp_path / "tokens.parquet")
    direct = InstructionDataset(chat / "chat.jsonl", tok, template=template, max_length=96)
    assert len(stored) == len(direct) == len(rows)
    for index in range(len(rows)):
        assert torch.equal(stored[index]["input_ids"], direct[index]["input_ids"])
        assert torch.equal(stored[index]["labels"], direct[index]["labels"])
    with pytest.raises(DataError, match="TokenizeInstructions: row 1 of the batch: .*unknown role 'bot'"):
        call(pa.Table.from_pylist([rows[0], {"messages": [{"role": "bot", "content": "x"}]}]))


def test_a_csv_without_instruction_columns_is_refused_by_its_header(tmp_path, tok):
    (tmp_path / "q.csv").write_text("question,answer\nq,a\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"q.csv: the header has neither .* \(columns: \['question', 'answer'\]\)"):
        InstructionDataset(tmp_path / "q.csv", tok)
