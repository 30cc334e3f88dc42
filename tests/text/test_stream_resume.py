"""streaming_loader(stateful=True): a fresh loader given the state yields exactly the batches an
uninterrupted run would have, at every stop, with 0 and 2 workers, local files and URLs."""

import json

import pytest

from recipes.text import StreamingTextDataset, streaming_loader
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import STOPS, assert_same_batches, check_resume, mutated_state, mutation_cases
from tests.servers import FaultyHTTPServer


@pytest.fixture(scope="module")
def files(tmp_path_factory, fixtures):
    """300 lines over a .txt and a .jsonl."""
    folder = tmp_path_factory.mktemp("resume")
    corpus = [line for line in (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").split("\n") if line]
    lines = (corpus * 3)[:300]
    (folder / "a.txt").write_text("".join(line + "\n" for line in lines[:140]), encoding="utf-8")
    rows = [json.dumps({"text": line, "label": k % 4}) + "\n" for k, line in enumerate(lines[140:])]
    (folder / "b.jsonl").write_text("".join(rows), encoding="utf-8")
    return folder



def _make(paths, tokenizer, workers, rank=None, world_size=None):
    order = StreamOrder(shuffle_buffer=16, seed=3, rank=rank, world_size=world_size)
    stream = StreamingTextDataset(paths, tokenizer, order=order)
    return streaming_loader(stream, 8, device="cpu", seed=3, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def references(files, tokenizer):
    """Three uninterrupted epochs per worker count (the workers read different slices)."""
    paths = [files / "a.txt", files / "b.jsonl"]
    loaders = {workers: _make(paths, tokenizer, workers) for workers in (0, 2)}
    return {workers: [list(loader) for _ in range(3)] for workers, loader in loaders.items()}


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
@pytest.mark.parametrize("stop", STOPS)
def test_a_resumed_stream_yields_exactly_the_batches_still_to_come(files, tokenizer, references, workers, stop):
    paths = [files / "a.txt", files / "b.jsonl"]
    reference = references[workers]
    check_resume(lambda: _make(paths, tokenizer, workers), stop, len(reference[0]), reference)


@pytest.mark.usefixtures("quick_retries")
@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_a_stream_over_http_resumes_exactly_through_faults(files, tokenizer, references, workers):
    reference = references[workers]
    with FaultyHTTPServer(files, fail_every=5, cut_every=3) as server:
        urls = [server.url("a.txt"), server.url("b.jsonl")]
        check_resume(lambda: _make(urls, tokenizer, workers), "mid", len(reference[0]), reference)
    assert server.faults["503"] > 0 and server.faults["cut"] > 0


def test_the_state_holds_positions_not_samples(files, tokenizer):
    loader = _make([files / "a.txt", files / "b.jsonl"], tokenizer, 0)
    iterator = iter(loader)
    next(iterator)
    state = json.dumps(loader.state_dict())
    assert len(state) < 2000 and "input_ids" not in state
    resumed = _make([files / "a.txt", files / "b.jsonl"], tokenizer, 0, rank=1, world_size=2)  # another job size
    with pytest.raises(ValueError, match=r"read by 1 readers \(ranks x workers\), it cannot resume on 2 ranks"):
        resumed.load_state_dict(json.loads(state))  # refused when loaded, not at iter()


def test_another_worker_count_resumes_from_the_end_of_a_pass_and_refuses_mid_pass(files, tokenizer, references):
    paths = [files / "a.txt", files / "b.jsonl"]
    loader = _make(paths, tokenizer, 2)
    list(loader)
    ended = loader.state_dict()  # after the first pass: the next is epoch 1, whatever reads it
    resumed = _make(paths, tokenizer, 0)
    resumed.load_state_dict(json.loads(json.dumps(ended)))
    assert list(resumed) == []  # the rest of pass 0
    assert_same_batches(list(resumed), references[0][1])  # then epoch 1, as 0 workers read it
    iterator = iter(loader)
    next(iterator)
    middle = loader.state_dict()
    with pytest.raises(ValueError, match="saved with num_workers=2 in the middle of a pass"):
        _make(paths, tokenizer, 0).load_state_dict(middle)


STREAM_FIELDS = ["seed", "epoch", "slots", "position", "position.0", "position.1", "position.2", "source", "turns"]
# valid: a seed may be any integer, an epoch any large one; a state without a source is one 0.1.0 saved, and
# one without turns one saved before passes turned
ANY_SEED_OR_EPOCH = {("seed", "negative"), ("seed", "too-large"), ("epoch", "too-large"), ("source", "missing"),
                     ("turns", "missing")}


@pytest.fixture(scope="module")
def mid_pass(files, tokenizer):
    """A stream's state 40 lines into its pass, and the items that followed."""
    stream = _stream(files, tokenizer)
    items = iter(stream)
    for _ in range(40):
        next(items)
    return stream.state_dict(), [(item["index"], item["input_ids"].tolist()) for item in items]


def _stream(files, tokenizer):
    return StreamingTextDataset([files / "a.txt", files / "b.jsonl"], tokenizer,
                                order=StreamOrder(shuffle_buffer=16, seed=3))


def test_a_checked_state_still_resumes_exactly(files, tokenizer, mid_pass):
    state, rest = mid_pass
    resumed = _stream(files, tokenizer)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert [(item["index"], item["input_ids"].tolist()) for item in resumed] == rest


def test_a_state_saved_without_its_source_still_resumes_exactly(files, tokenizer, mid_pass):
    state, rest = mid_pass
    resumed = _stream(files, tokenizer)
    resumed.load_state_dict({name: value for name, value in state.items() if name != "source"})  # as 0.1.0 saved it
    assert [(item["index"], item["input_ids"].tolist()) for item in resumed] == rest


@pytest.mark.parametrize(("field", "kind"), mutation_cases(STREAM_FIELDS, ANY_SEED_OR_EPOCH))
def test_every_field_of_a_loaded_stream_state_is_checked(files, tokenizer, mid_pass, field, kind):
    state = mutated_state(mid_pass[0], field, kind)
    with pytest.raises(ValueError, match="StreamingTextDataset state"):
        stream = _stream(files, tokenizer)
        stream.load_state_dict(state)
        next(iter(stream))


def test_a_resume_offset_inside_a_line_or_another_readers_share_is_refused(files, tokenizer, mid_pass):
    state = mid_pass[0]
    inside = {**state, "position": [0, state["position"][1] + 1, 0]}
    with pytest.raises(ValueError, match=r"position\[1\] \(offset\) = \d+ is not where a line of .*a.txt starts"):
        stream = _stream(files, tokenizer)
        stream.load_state_dict(inside)
        list(stream)
    two = StreamingTextDataset([files / "a.txt", files / "b.jsonl"], tokenizer,
                               order=StreamOrder(shuffle_buffer=16, seed=3, rank=1, world_size=2))
    with pytest.raises(ValueError, match=r"position\[1\] \(offset\) = \d+ is not an integer in \[\d"):
        two.load_state_dict({**state, "slots": 2})  # rank 0's offset, loaded by rank 1


def test_a_state_of_other_files_is_refused(files, tokenizer, mid_pass):
    other = StreamingTextDataset([files / "b.jsonl", files / "a.txt", files / "a.txt"], tokenizer,
                                 order=StreamOrder(shuffle_buffer=16))
    with pytest.raises(ValueError, match=r"StreamingTextDataset state: source = '2 files, \d+ bytes' is not this one's '3 files"):
        other.load_state_dict(mid_pass[0])
