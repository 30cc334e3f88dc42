"""A COCO annotation file from a URL (HTTP with injected faults, S3 through s3fs) gives the local dataset."""

import pytest

from recipes.detection import CocoDataset
from tests.harness import digest
from tests.servers import FaultyHTTPServer, s3_server, upload

# the faults are retried as ever, without the real backoff's seconds (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quick_retries")


def test_annotations_from_a_url_give_the_local_targets(fixtures):
    images, folder = fixtures / "detection" / "images", fixtures / "detection"
    local = CocoDataset(images, folder / "instances.json", masks=True)
    with FaultyHTTPServer(folder, fail_every=2, fail_first=1) as server:  # the file is one GET
        remote = CocoDataset(images, server.url("instances.json"), masks=True)
    assert server.faults["503"] > 0
    assert [digest(remote[i]) for i in range(len(local))] == [digest(local[i]) for i in range(len(local))]
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        again = CocoDataset(images, "s3://data/instances.json", storage_options=options)
        assert again.image_ids.tolist() == local.image_ids.tolist()
        with pytest.raises(FileNotFoundError, match="s3://data/nothing.json does not exist"):
            CocoDataset(images, "s3://data/nothing.json", storage_options=options)
