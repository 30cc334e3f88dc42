"""TokenizeBatch: the ids column Ray Data's map_batches adds, called directly and on a local Ray."""

import pickle
import time

import numpy as np
import pytest
from tokenizers import Tokenizer

from recipes.core.contracts.errors import DataError
from recipes.core.tokens.encoding import WHOLE_TEXT_CHARS, TruncatingEncoder, encode_texts
from recipes.text import TokenizeBatch, TokenizedTextDataset

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# Ray before 2.56 drops a log file and a child process it started to the garbage collector, which
# reports them as unraisable ResourceWarnings inside ray.init: its cause, not a test's
UNRAISABLE = "pytest.PytestUnraisableExceptionWarning"
pytestmark = [
    pytest.mark.filterwarnings(rf"ignore:Exception ignored in. <_io.FileIO \[closed\]>:{UNRAISABLE}"),
    pytest.mark.filterwarnings(rf"ignore:Exception ignored in. <function Popen.__del__:{UNRAISABLE}"),
]

MAX_LENGTH = 12  # shorter than most corpus lines: most rows are cut and must keep [CLS] ... [SEP]


@pytest.fixture(scope="module")
def texts(fixtures):
    lines = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


def _expected(tokenizer, texts, max_length=MAX_LENGTH):
    tokens = encode_texts(tokenizer, texts, max_length=max_length)
    return [tokens[i].tolist() for i in range(len(texts))]


def test_arrow_batch_gains_an_int32_list_column_equal_to_encode_texts(fixtures, tokenizer, texts):
    long_text = " ".join(texts) * (WHOLE_TEXT_CHARS // len(" ".join(texts)) + 1)  # read from a bounded prefix
    batch = pa.table({"text": [*texts, long_text], "row": np.arange(len(texts) + 1)})
    out = TokenizeBatch(fixtures / "text" / "tokenizer.json", max_length=MAX_LENGTH)(batch)
    assert out.column_names == ["text", "row", "input_ids"]
    assert out.schema.field("input_ids").type == pa.list_(pa.int32())
    assert out.select(["text", "row"]).equals(batch)
    ids = out.column("input_ids").to_pylist()
    assert ids == _expected(tokenizer, [*texts, long_text])
    cut = Tokenizer.from_str(tokenizer.to_str())
    cut.enable_truncation(MAX_LENGTH)
    assert ids == [cut.encode(text).ids for text in [*texts, long_text]]  # the tokenizer's own truncation
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    assert all(row[0] == cls and row[-1] == sep for row in ids) and max(map(len, ids)) == MAX_LENGTH


def test_numpy_batch_comes_back_as_the_same_table(fixtures, tokenizer, texts):
    call = TokenizeBatch(fixtures / "text" / "tokenizer.json", max_length=MAX_LENGTH)
    arrow = call(pa.table({"text": texts, "row": np.arange(len(texts))}))
    numpy = call({"text": np.array(texts, dtype=object), "row": np.arange(len(texts))})
    assert numpy.equals(arrow)
    with pytest.raises(TypeError, match="'pixels' is a 2-D array.*batch_format='pyarrow'"):
        call({"text": np.array(texts[:2], dtype=object), "pixels": np.zeros((2, 3))})


def test_pickled_copy_carries_the_json_and_rebuilds_its_encoder_once(fixtures, tokenizer, texts):
    call = TokenizeBatch(tokenizer.to_str(), max_length=MAX_LENGTH, truncation="slice", ids_field="ids")
    copy = pickle.loads(pickle.dumps(call))
    assert copy.encoder is None  # no tokenizer objects travel, only the JSON text
    batch = pa.table({"text": texts})
    first = copy(batch)
    encoder = copy.encoder
    assert copy(batch).equals(first) and copy.encoder is encoder  # built on the first batch, then kept
    slice_encoder = TruncatingEncoder(tokenizer, MAX_LENGTH, truncation="slice")
    assert first.column("ids").to_pylist() == [list(ids) for ids in slice_encoder(texts)]


def test_a_bad_row_or_column_is_named(fixtures):
    call = TokenizeBatch(fixtures / "text" / "tokenizer.json", max_length=MAX_LENGTH)
    for texts, reason in (
        (["a cat", None], "row 1 of the batch is null"),
        (["a cat", "  "], "row 1 of the batch is empty"),
        ([b"bytes"], "row 0 of the batch is bytes, not a string"),
    ):
        with pytest.raises(DataError, match=f"column 'text', {reason}; drop such rows first"):
            call(pa.table({"text": texts}))
    with pytest.raises(DataError, match="row 0 of the batch is not valid UTF-8"):
        call({"text": np.array(["\ud800"], dtype=object)})
    with pytest.raises(DataError, match=r"no column 'text' \(text_field\); it has \['body'\]"):
        call(pa.table({"body": ["a cat"]}))
    with pytest.raises(DataError, match="has a column 'input_ids' already; pass ids_field="):
        call(pa.table({"text": ["a cat"], "input_ids": [[1]]}))
    with pytest.raises(TypeError, match="got list; pass batch_format='pyarrow'"):
        call(["a cat"])


def test_a_max_length_without_room_fails_on_the_caller(fixtures):
    with pytest.raises(ValueError, match="leaves no room for the 2 special tokens"):
        TokenizeBatch(fixtures / "text" / "tokenizer.json", max_length=1)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TokenizeBatch("no/such/tokenizer.json")


@pytest.fixture(scope="module")
def ray_output(fixtures, texts, tmp_path_factory):
    """The fixture corpus as two Parquet files, tokenised on a local Ray (2 CPUs): by tasks into
    Parquet files (returned sorted), and by actors into rows in memory."""
    ray = pytest.importorskip("ray")
    folder = tmp_path_factory.mktemp("ray")
    corpus, tokens = folder / "corpus", folder / "tokens"
    corpus.mkdir()
    rows = np.arange(len(texts))
    for shard in range(2):  # two files, so the read makes more than one block
        pq.write_table(pa.table({"text": texts[shard::2], "row": rows[shard::2]}), corpus / f"{shard}.parquet")
    started = time.perf_counter()
    # a cluster of this process's own: address="local" never joins one that RAY_ADDRESS names
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20,
             log_to_driver=False)
    try:
        call = TokenizeBatch(fixtures / "text" / "tokenizer.json", max_length=MAX_LENGTH)
        ds = ray.data.read_parquet(str(corpus)).map_batches(call, batch_format="pyarrow", batch_size=32)
        ds.write_parquet(str(tokens))
        actors = ray.data.read_parquet(str(corpus)).map_batches(  # the class: Ray runs actors that build it
            TokenizeBatch, fn_constructor_args=(fixtures / "text" / "tokenizer.json",),
            fn_constructor_kwargs={"max_length": MAX_LENGTH}, compute=ray.data.ActorPoolStrategy(size=1),
            batch_format="pyarrow", batch_size=32,
        ).take_all()
    finally:
        ray.shutdown()
    print(f"ray: {len(texts)} rows tokenised in {time.perf_counter() - started:.1f} s, start and shutdown included")
    return sorted(tokens.glob("*.parquet")), actors


@pytest.mark.slow
def test_local_ray_pipeline_writes_the_ids_of_local_tokenisation(ray_output, tokenizer, texts):
    files, actor_rows = ray_output
    table = pa.concat_tables(pq.read_table(path) for path in files)
    assert table.schema.field("input_ids").type == pa.list_(pa.int32())
    rows = table.column("row").to_pylist()
    assert sorted(rows) == list(range(len(texts)))  # every row once, in whatever order the tasks wrote
    by_row = dict(zip(rows, table.column("input_ids").to_pylist()))
    assert [by_row[row] for row in range(len(texts))] == _expected(tokenizer, texts)
    assert {row["row"]: list(row["input_ids"]) for row in actor_rows} == by_row  # the actors' ids are the same


@pytest.mark.slow
def test_ray_output_reads_back_as_a_tokenized_dataset_without_a_tokenizer(ray_output):
    files, _ = ray_output
    table = pa.concat_tables(pq.read_table(path) for path in files)
    dataset = TokenizedTextDataset.from_ids([str(path) for path in files], ids_field="input_ids")
    assert len(dataset) == table.num_rows
    assert [dataset[i]["input_ids"].tolist() for i in range(len(dataset))] == table.column("input_ids").to_pylist()
