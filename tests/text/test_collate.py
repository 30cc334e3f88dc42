"""text_collate and pack_collate against HF's collators, HF models, an LSTM and SDPA attention."""

import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import nn

from recipes.text import StreamCollate, TextCollate, TokenizedTextDataset, pack_collate, stream_collate, text_collate


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def items(fixtures, tok):
    dataset = TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", tok, label_field="label", max_length=40)
    picked = [dataset[i] for i in (5, 0, 17, 3, 42, 9)]
    assert len({len(item["input_ids"]) for item in picked}) > 3  # genuinely ragged
    return picked


def test_the_collate_objects_batch_as_their_functions_and_pickle_with_their_options(items):
    import pickle

    for made, function in [
        (TextCollate(pad_id=3, pad_to_multiple_of=8, padding_side="left"),
         lambda b: text_collate(b, pad_id=3, pad_to_multiple_of=8, padding_side="left")),
        (StreamCollate(pad_id=3), lambda b: stream_collate(b, pad_id=3)),
    ]:
        again = pickle.loads(pickle.dumps(made))
        assert again == made and repr(again) == repr(made) and "pad_id=3" in repr(made)
        ours, expected = again(items), function(items)
        assert ours.keys() == expected.keys() and all(torch.equal(ours[k], expected[k]) for k in ours)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("multiple", [None, 8], ids=["longest", "multiple8"])
def test_text_collate_equals_hf_data_collator_with_padding(tok, items, side, multiple):
    pytest.importorskip("transformers")
    from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast

    hf_tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", padding_side=side)
    hf = DataCollatorWithPadding(hf_tokenizer, pad_to_multiple_of=multiple)
    expected = hf([{"input_ids": item["input_ids"].tolist(), "label": item["label"]} for item in items])
    ours = text_collate(items, pad_id=0, pad_to_multiple_of=multiple, padding_side=side)
    assert torch.equal(ours["input_ids"], expected["input_ids"])
    assert torch.equal(ours["attention_mask"], expected["attention_mask"])
    assert torch.equal(ours["labels"], expected["labels"])
    assert ours["lengths"].tolist() == [len(item["input_ids"]) for item in items]
    assert ours["index"].tolist() == [item["index"] for item in items]
    assert all(value.dtype == torch.int64 for value in ours.values())


def test_collates_drop_skipped_items_and_pad_with_the_given_id(items):
    batch = text_collate([items[0], None, items[1]], pad_id=-7)
    assert batch["index"].tolist() == [items[0]["index"], items[1]["index"]]
    assert (batch["input_ids"][batch["attention_mask"] == 0] == -7).all()
    assert pack_collate([None, items[2]])["cu_seqlens"].tolist() == [0, len(items[2]["input_ids"])]
    with pytest.raises(ValueError, match="'right' or 'left'"):
        text_collate(items, padding_side="center")


def _tiny(kind):
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "bert":
        from transformers import BertConfig, BertModel

        config = BertConfig(vocab_size=800, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
        return BertModel(config).eval()
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(vocab_size=800, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_hf_model_outputs_on_the_padded_batch_equal_each_unpadded_sample(items, kind):
    model = _tiny(kind)
    batch = text_collate(items, pad_id=0)
    with torch.no_grad():
        padded = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        for row, length in enumerate(batch["lengths"].tolist()):
            alone = model(input_ids=batch["input_ids"][row : row + 1, :length]).last_hidden_state[0]
            torch.testing.assert_close(padded[row, :length], alone, atol=1e-5, rtol=1e-5)


def test_lstm_over_pack_padded_sequence_equals_each_unpadded_sample(items):
    torch.manual_seed(0)
    embed, lstm = nn.Embedding(800, 16), nn.LSTM(16, 24, batch_first=True)
    batch = text_collate(items, pad_id=0)
    with torch.no_grad():
        packed = nn.utils.rnn.pack_padded_sequence(embed(batch["input_ids"]), batch["lengths"], batch_first=True, enforce_sorted=False)
        output, (last, _) = lstm(packed)
        padded_output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
        for row, item in enumerate(items):
            alone, (alone_last, _) = lstm(embed(item["input_ids"])[None])
            torch.testing.assert_close(last[0, row], alone_last[0, 0], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(padded_output[row, : len(item["input_ids"])], alone[0], atol=1e-6, rtol=1e-6)


def test_pack_collate_equals_hf_data_collator_with_flattening(items):
    pytest.importorskip("transformers")
    from transformers import DataCollatorWithFlattening

    hf = DataCollatorWithFlattening(return_position_ids=True, return_flash_attn_kwargs=True)
    expected = hf([{"input_ids": item["input_ids"].tolist()} for item in items])
    ours = pack_collate(items)
    assert torch.equal(ours["input_ids"], expected["input_ids"])
    assert torch.equal(ours["position_ids"], expected["position_ids"])
    assert ours["cu_seqlens"].tolist() == expected["cu_seq_lens_q"].tolist() and ours["cu_seqlens"].dtype == torch.int32
    assert ours["max_seqlen"] == int(expected["max_length_q"]) == max(len(item["input_ids"]) for item in items)
    assert ours["labels"].tolist() == [item["label"] for item in items]


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_block_diagonal_attention_over_the_packed_row_equals_unpacked_sequences(items, causal):
    torch.manual_seed(0)
    heads, dim = 2, 16
    embed, positions, qkv = nn.Embedding(800, dim), nn.Embedding(64, dim), nn.Linear(dim, 3 * dim)

    def attend(input_ids, position_ids, mask):  # [1,N] -> [N, dim]
        x = embed(input_ids) + positions(position_ids)
        q, k, v = (t.view(1, -1, heads, dim // heads).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(-1, dim)

    batch = pack_collate(items)
    cu = batch["cu_seqlens"].long()
    total = int(cu[-1])
    segment = torch.repeat_interleave(torch.arange(len(items)), cu.diff())
    mask = segment[:, None] == segment[None, :]
    if causal:
        mask &= torch.ones(total, total, dtype=torch.bool).tril()
    with torch.no_grad():
        packed = attend(batch["input_ids"], batch["position_ids"], mask)
        for b, item in enumerate(items):
            n = len(item["input_ids"])
            own = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
            alone = attend(item["input_ids"][None], torch.arange(n)[None], own)
            torch.testing.assert_close(packed[cu[b] : cu[b + 1]], alone, atol=1e-6, rtol=1e-6)


class _WithTokenCount(TokenizedTextDataset):
    """A copied recipe that adds keys to its items: a number, a ragged tensor and a string."""

    def __getitem__(self, index):
        item = super().__getitem__(index)
        ids = item["input_ids"]
        return {**item, "n_tokens": len(ids), "first_two": ids[:2].clone(), "tail": ids[-(index % 3 + 1):].clone(),
                "source": f"line {index}"}


def test_keys_a_user_adds_to_items_reach_the_batch_in_every_collate(fixtures, tok):
    from recipes.text import text_loader
    from recipes.text.streaming import stream_collate

    dataset = _WithTokenCount(fixtures / "text" / "labeled.jsonl", tok, label_field="label", max_length=40)
    batch = next(iter(text_loader(dataset, 6, train=False, device="cpu", num_workers=0)))
    items = [dataset[int(i)] for i in batch["index"]]
    assert torch.equal(batch["n_tokens"], batch["lengths"])          # numbers -> an int64 tensor
    assert torch.equal(batch["first_two"], torch.stack([item["first_two"] for item in items]))  # one shape: stacked
    assert [t.tolist() for t in batch["tail"]] == [item["tail"].tolist() for item in items]      # ragged: a list
    assert batch["source"] == [f"line {int(i)}" for i in batch["index"]]
    packed = pack_collate(items)
    assert torch.equal(packed["n_tokens"], batch["lengths"]) and packed["source"] == batch["source"]
    assert stream_collate(items)["source"] == batch["source"]


def test_an_item_key_that_would_overwrite_a_batch_key_is_refused_by_name(fixtures, tok):
    dataset = TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", tok, label_field="label")
    items = [{**dataset[i], "attention_mask": torch.ones(3)} for i in range(2)]
    with pytest.raises(ValueError, match=r"text_collate: the items' key 'attention_mask' would overwrite"):
        text_collate(items)
    with pytest.raises(ValueError, match=r"item 0 has the key 'extra' but item 1 of the batch has not"):
        text_collate([{**dataset[0], "extra": 1}, dataset[1]])


def test_stream_collate_batches_as_text_collate_and_names_itself_when_a_key_clashes(fixtures, tok):
    dataset = TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", tok, label_field="label")
    items = [dataset[i] for i in range(5)]
    ours, padded = stream_collate(items, pad_id=3), text_collate(items, pad_id=3)
    assert ours.keys() == padded.keys() == {"input_ids", "attention_mask", "lengths", "index", "labels"}
    assert all(torch.equal(ours[key], padded[key]) for key in ours)
    with pytest.raises(ValueError, match=r"^stream_collate: the items' key 'lengths' would overwrite"):
        stream_collate([{**item, "lengths": 1} for item in items])
