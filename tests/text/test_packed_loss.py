"""pack_collate on instruction data is exact: a packed row trains as its samples one by one.

The oracle is a tiny random ``LlamaForCausalLM`` (transformers): given ``position_ids`` that restart
at each sample, it attends within each sample only, so the loss of a packed batch equals the
token-weighted mean of the samples' losses run alone, and no label token's loss depends on another
sample (transformers reads packing from ``position_ids`` only without a KV cache: ``use_cache=False``,
which training needs too). The first label of each packed sample is -100, so the last token of one sample is never
asked to predict the first of the next.
"""

import pytest
import torch

from recipes.text import InstructionDataset, instruction_collate, pack_collate


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("transformers")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(config).double().eval()  # float64: the comparison is about masking, not rounding


@pytest.fixture(scope="module")
def items(fixtures):
    chat = fixtures / "text" / "chat"
    dataset = InstructionDataset(chat / "chat.jsonl", chat / "tokenizer.json", template=chat / "chatml" / "tokenizer_config.json")
    return [dataset[i] for i in (0, 4, 7, 11)]


def _token_losses(model, input_ids, labels, **inputs):
    """Per-position cross-entropy of the next-token prediction, -100 positions as 0 (HF's shift)."""
    with torch.no_grad():
        logits = model(input_ids=input_ids, use_cache=False, **inputs).logits[0, :-1]
    return torch.nn.functional.cross_entropy(logits, labels[0, 1:], ignore_index=-100, reduction="none")


def test_packed_loss_equals_the_mean_over_the_samples_run_one_by_one(model, items):
    batch = pack_collate(items)
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], labels=batch["labels"],
                       use_cache=False).loss
    total, count = 0.0, 0
    for item in items:
        with torch.no_grad():
            alone = model(input_ids=item["input_ids"][None], labels=item["labels"][None]).loss
        learned = int((item["labels"][1:] != -100).sum())
        total, count = total + float(alone) * learned, count + learned
    assert abs(float(packed) - total / count) < 1e-5
    padded = instruction_collate(items, pad_id=0)  # the padded batch agrees too
    with torch.no_grad():
        loss = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"], labels=padded["labels"]).loss
    assert abs(float(loss) - total / count) < 1e-5


def test_no_label_token_loss_depends_on_another_packed_sample(model, items):
    batch = pack_collate(items)
    before = _token_losses(model, batch["input_ids"], batch["labels"], position_ids=batch["position_ids"])
    changed = [dict(item) for item in items]
    changed[1]["input_ids"] = torch.flip(items[1]["input_ids"], dims=[0])  # another sample 1, same length
    after_batch = pack_collate(changed)
    after = _token_losses(model, after_batch["input_ids"], after_batch["labels"], position_ids=after_batch["position_ids"])
    bounds = batch["cu_seqlens"].tolist()
    for k in range(len(items)):
        # loss at position t predicts label t + 1: sample k's labels are positions bounds[k]-1 .. bounds[k+1]-2
        piece = slice(max(bounds[k] - 1, 0), bounds[k + 1] - 1)
        if k == 1:
            assert not torch.allclose(before[piece], after[piece])
        else:
            assert torch.allclose(before[piece], after[piece], rtol=0, atol=1e-10)
    assert before[bounds[1] - 1] == before[bounds[2] - 1] == 0  # a sample's first label is masked
