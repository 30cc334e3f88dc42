"""A long caption keeps CLIP's end-of-text token, as enable_truncation does, in pairs and in shards."""

import json
import random

import pytest

from recipes.multimodal import ImageTextDataset, ImageTextShards, write_shards
from recipes.core.contracts.read_options import ReadOptions
from tests.special_tokens import clip_style, truncated


@pytest.fixture(scope="module")
def captions(fixtures):
    lines = (fixtures / "multimodal" / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    short = [caption for row in rows for caption in (row["captions"] if "captions" in row else [row["caption"]])]
    words, rng = " ".join(short).split(), random.Random(0)
    long = [
        " ".join(rng.choice(words) for _ in range(300)),
        " ".join(rng.choice(words) for _ in range(20_000)),
        "".join(rng.choice("abcdeéñ漢字😀") for _ in range(80_000)),
        "A  photo\tof\n" * 7_000,
    ]
    return short, long


@pytest.fixture(scope="module")
def clip(captions):
    return clip_style(captions[0])


@pytest.fixture
def manifest(tmp_path, fixtures, captions):
    images = sorted(p.name for p in (fixtures / "multimodal" / "images").iterdir())
    short, long = captions
    rows = [{"image": f"images/{images[0]}", "captions": short[:3] + long}]
    rows += [{"image": f"images/{name}", "caption": caption} for name, caption in zip(images[1:], short[3:])]
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path, [caption for row in rows for caption in row.get("captions", [row.get("caption")])]


def test_long_captions_end_in_eot_as_enable_truncation_gives(fixtures, clip, manifest):
    path, all_captions = manifest
    dataset = ImageTextDataset(path, clip, image_root=fixtures / "multimodal", captions="all")
    expected = [truncated(clip, caption, 77) for caption in all_captions]
    assert [dataset.caption_tokens[i].tolist() for i in range(len(dataset))] == expected
    eot = clip.token_to_id("<|endoftext|>")
    assert all(ids[-1] == eot for ids in expected) and sum(len(ids) == 77 for ids in expected) == 4
    sliced = ImageTextDataset(path, clip, image_root=fixtures / "multimodal", captions="all",
                              read_options=ReadOptions(truncation="slice"))
    cut = [clip.encode(caption).ids[:77] for caption in all_captions]
    assert [sliced.caption_tokens[i].tolist() for i in range(len(sliced))] == cut
    assert clip.truncation is None


def test_shards_give_the_same_truncated_caption_ids(tmp_path, fixtures, clip, manifest):
    path, all_captions = manifest
    shards = write_shards(path, tmp_path / "shards", samples_per_shard=4, image_root=fixtures / "multimodal")
    items = list(ImageTextShards(shards, clip, captions="all"))
    expected = sorted(truncated(clip, caption, 77) for caption in all_captions)
    assert sorted(item["input_ids"].tolist() for item in items) == expected
