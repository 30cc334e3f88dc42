"""AudioShards: every sample of the tar shards once, as TorchCodec decodes the member; shuffled per
epoch; resumed exactly at every stop with 0 and 2 workers, from local files and over HTTP with
faults; bad members named or skipped."""

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch
from torchcodec.decoders import AudioDecoder

from recipes.audio import AudioShards, audio_loader
from recipes.core.contracts.errors import DataError
from recipes.core.loading.loader import SET_VITAL_WARNING
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import STOPS, check_resume, with_skip_warnings
from tests.servers import FaultyHTTPServer

pytestmark = pytest.mark.filterwarnings(f"ignore:{SET_VITAL_WARNING}:UserWarning")


@pytest.fixture(scope="module")
def shards(fixtures: Path) -> Path:
    return fixtures / "audio" / "speech" / "shards"


@pytest.fixture(scope="module")
def rows(fixtures: Path) -> list[dict]:
    lines = (fixtures / "audio/speech/manifest.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_every_sample_comes_once_as_the_decoder_decodes_its_member(shards, rows, tokenizer, fixtures):
    items = list(AudioShards(shards, tokenizer))
    assert [item["key"] for item in items] == [f"speech-00000{k // 4}.tar/{k:06d}" for k in range(8)]
    for item, row in zip(items, rows):
        data = (fixtures / "audio/speech" / row["audio_filepath"]).read_bytes()
        expected = AudioDecoder(data, sample_rate=16000).get_all_samples().data.mean(0, keepdim=True)
        assert torch.equal(item["audio"], expected.clamp(-1, 1))
        assert item["text"] == row["text"] and item["input_ids"].tolist() == tokenizer.encode(row["text"]).ids


def test_a_shuffle_buffer_reorders_each_epoch_and_keeps_every_sample(shards):
    stream = AudioShards(str(shards / "speech-{000000..000001}.tar"), order=StreamOrder(shuffle_buffer=3, seed=1))
    first, second = [item["key"] for item in stream], [item["key"] for item in stream]
    assert sorted(first) == sorted(second) and len(set(first)) == 8 and first != second


def test_the_shuffle_is_set_by_order_only(shards):
    with pytest.raises(TypeError, match="unexpected keyword argument 'shuffle_buffer'"):
        AudioShards(shards, shuffle_buffer=3, seed=1)  # order=StreamOrder(shuffle_buffer=3, seed=1)


def test_an_order_with_a_rank_reads_that_ranks_share_of_the_shards(shards):
    keys = {rank: [item["key"] for item in AudioShards(shards, order=StreamOrder(rank=rank, world_size=2))] for rank in (0, 1)}
    assert keys[0] and keys[1] and not set(keys[0]) & set(keys[1])
    assert sorted(keys[0] + keys[1]) == sorted(item["key"] for item in AudioShards(shards))


def test_the_loader_pads_stream_batches_and_refuses_a_seconds_budget(shards, tokenizer):
    batches = list(audio_loader(AudioShards(shards, tokenizer), 3, train=False, num_workers=0))
    assert [len(b["key"]) for b in batches] == [3, 3, 2]
    assert batches[0]["input_ids"].shape[0] == 3 and batches[0]["audio_lengths"].max() == batches[0]["audio"].shape[1]
    with pytest.raises(ValueError, match="a stream batches by batch_size"):
        audio_loader(AudioShards(shards), max_seconds=3.0)


def test_every_sample_is_trained_on_within_two_epochs_in_shard_order_too(shards):
    # 8 clips, 2 readers of 4 (2 ranks), batches of 3: a reader drops one clip an epoch, the end of its
    # share in even epochs and one before its middle in odd ones (recipes.core.sources.streams.turning_point)
    def trained_on(epoch):
        keys = set()
        for rank in (0, 1):
            stream = AudioShards(shards, order=StreamOrder(seed=0, rank=rank, world_size=2))
            stream.set_epoch(epoch)
            loader = audio_loader(stream, 3, device="cpu", seed=0, num_workers=0)
            keys |= {key for batch in loader for key in batch["key"]}
        return keys

    first, second = trained_on(0), trained_on(1)
    assert len(first) == len(second) == 6
    assert first != second and first | second == {item["key"] for item in AudioShards(shards)}


def _make(pattern, workers):
    stream = AudioShards(pattern, order=StreamOrder(shuffle_buffer=3, seed=2))
    return audio_loader(stream, 2, device="cpu", seed=2, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def references(shards):
    pattern = str(shards / "speech-{000000..000001}.tar")
    return {workers: _epochs(pattern, workers) for workers in (0, 2)}


def _epochs(pattern, workers):
    loader = _make(pattern, workers)
    return [list(loader) for _ in range(3)]


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
@pytest.mark.parametrize("stop", STOPS)
def test_resumed_shards_yield_exactly_the_batches_still_to_come(shards, references, workers, stop):
    pattern = str(shards / "speech-{000000..000001}.tar")
    reference = references[workers]
    check_resume(lambda: _make(pattern, workers), stop, len(reference[0]), reference)


def test_url_shards_resume_exactly_through_faults(shards, references):
    with FaultyHTTPServer(shards, fail_every=5, cut_every=3) as server:
        pattern = server.url("speech-{000000..000001}.tar")
        check_resume(lambda: _make(pattern, 0), "mid", len(references[0][0]), references[0])
    assert server.faults["503"] > 0 and server.faults["cut"] > 0


def test_the_state_holds_positions_not_samples(shards):
    loader = _make(str(shards), 0)
    iterator = iter(loader)
    next(iterator)
    state = json.dumps(loader.state_dict())
    assert len(state) < 2000


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_bad_members_are_named_by_shard_and_key_or_skipped(fixtures, tmp_path):
    good = (fixtures / "audio/speech/clips/s1.wav").read_bytes()
    hostile = fixtures / "audio/hostile"
    members = {"a.wav": good, "a.txt": b"fine", "b.flac": (hostile / "truncated.flac").read_bytes(), "b.txt": b"cut",
               "c.wav": good, "c.txt": b"bad \xff text", "d.wav": good, "e.wav": good, "e.txt": b"fine too"}
    (tmp_path / "bad.tar").write_bytes(_tar(members))
    with pytest.raises(DataError, match=r"bad\.tar:b\.flac: cannot read audio"):
        list(AudioShards(tmp_path / "bad.tar"))
    items, messages = with_skip_warnings(lambda: list(AudioShards(tmp_path / "bad.tar", on_error="skip")))
    assert [item["key"] for item in items] == ["bad.tar/a", "bad.tar/e"]
    assert len(messages) == 3
    assert "bad.tar:c: unreadable transcript" in messages[1] and "bad.tar:d: no transcript" in messages[2]


def test_an_escaping_member_name_is_refused(fixtures, tmp_path):
    (tmp_path / "escape.tar").write_bytes(_tar({"../x.wav": b"", "../x.txt": b"x"}))
    with pytest.raises(DataError, match="escapes the dataset root"):
        list(AudioShards(tmp_path / "escape.tar"))


def test_more_readers_than_shards_each_read_an_equal_share_of_the_samples(shards):
    # 4 samples in one shard, 2 workers: each reads a run of 2, starting mid-shard for the second
    loader = audio_loader(AudioShards(shards / "speech-000000.tar"), 2, train=False, device="cpu", num_workers=2)
    assert [list(batch["key"]) for batch in loader] == [[f"speech-000000.tar/{k:06d}" for k in pair] for pair in ((0, 1), (2, 3))]


def test_compressed_shards_give_what_the_plain_ones_give_and_resume_exactly(shards, tmp_path):
    import gzip
    import lzma

    for shard in sorted(shards.glob("*.tar")):
        (tmp_path / f"{shard.name}.gz").write_bytes(gzip.compress(shard.read_bytes(), mtime=0))
    plain = [(item["key"].split("/")[1], item["audio"]) for item in AudioShards(shards)]
    zipped = [(item["key"].split("/")[1], item["audio"]) for item in AudioShards(sorted(map(str, tmp_path.glob("*.gz"))))]
    assert [key for key, _ in zipped] == [key for key, _ in plain]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(zipped, plain))
    (tmp_path / "one.tar.xz").write_bytes(lzma.compress(sorted(shards.glob("*.tar"))[0].read_bytes()))
    assert len(list(AudioShards([str(tmp_path / "one.tar.xz")]))) == 4
    gz = sorted(map(str, tmp_path.glob("*.gz")))
    reference = [b["key"] for b in _make(gz, 0)]
    for stop in (1, 3):
        loader = _make(gz, 0)
        taken = [batch["key"] for _, batch in zip(range(stop), loader)]
        state = loader.state_dict()
        resumed = _make(gz, 0)
        resumed.load_state_dict(state)
        assert taken + [batch["key"] for batch in resumed] == reference


def test_a_key_with_two_clips_or_a_key_that_comes_back_is_refused(fixtures, tmp_path):
    clip = (fixtures / "audio/speech/clips/s1.wav").read_bytes()
    for name, members, reason, left in (
        ("twice.tar", [("a.wav", clip), ("a.txt", b"hot"), ("a.wav", clip)], "key 'a' has two 'wav' members", []),
        ("back.tar", [("a.wav", clip), ("a.txt", b"x"), ("b.wav", clip), ("b.txt", b"y"), ("a.json", b"{}")],
         "key 'a' comes back", ["a", "b"]),
    ):
        with tarfile.open(tmp_path / name, "w") as tar:
            for member, data in members:
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        with pytest.raises(DataError, match=reason):
            list(AudioShards(str(tmp_path / name)))
        items, messages = with_skip_warnings(lambda: list(AudioShards(str(tmp_path / name), on_error="skip")))
        assert [reason in message for message in messages] == [True], messages
        assert [item["key"] for item in items] == [f"{name}/{key}" for key in left]  # nothing doubled or overwritten
