"""A prepared dataset written to object storage (``s3://``, ``gs://``, any fsspec URL): each shard
is written in a local staging folder, then uploaded under its name, then its record under
``.prepare/``, so a record there still means a whole shard. An object store shows an upload whole
or not at all: a run stopped at any point leaves no half-written shard under a final name, and the
same call started again reads the records back and writes only the shards they lack.

    remote = RemoteDest("s3://bucket/prepared", storage_options)
    remote.pull_records(staging / ".prepare")       # what an earlier run left there
    remote.put(staging / "shard-000000.tar", "shard-000000.tar")
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit
from pathlib import Path
from typing import Any

from recipes.core.sources.storage import filesystem
from recipes.core.sources.urls import cleaned, shown

READ_ONLY = ("http", "https")  # fsspec reads these, and has no upload


@dataclass(frozen=True)
class RemoteDest:
    """The destination ``url`` (a folder-like prefix) and the fsspec options to write it with;
    it pickles, so worker processes upload their own shards."""

    url: str
    storage_options: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", self.url.rstrip("/"))
        if urlsplit(self.url).scheme in READ_ONLY or urlsplit(self.url).query:
            raise ValueError(f"{shown(self.url)}: prepare writes a local folder or object storage (s3://, gs://, "
                             "az://, ...), not a web server's URL")

    def _fs(self) -> tuple[Any, str]:
        return filesystem(self.url, self.storage_options)

    def where(self, name: str) -> str:
        """The URL of ``name`` under the destination."""
        return f"{self.url}/{name}"

    def pull_records(self, records: Path, folder: str) -> None:
        """Copy every object under ``<url>/<folder>/`` into the local ``records`` folder."""
        fs, root = self._fs()
        prefix = f"{root}/{folder}"
        fs.invalidate_cache()  # what the store holds now, not what an earlier listing in this process saw
        for path in fs.find(prefix):
            local = records / os.path.relpath(path, prefix)
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(fs.cat_file(path))

    def sizes(self) -> dict[str, int]:
        """``{name: size}`` of every object under the destination, from one listing (a resumed run
        asks it once, not once a shard)."""
        fs, root = self._fs()
        fs.invalidate_cache()
        return {os.path.relpath(path, root): int(info["size"]) for path, info in fs.find(root, detail=True).items()}

    def put(self, local: Path, name: str) -> None:
        """Upload the local file as object ``name`` (whole or not at all)."""
        fs, root = self._fs()
        try:
            fs.put_file(str(local), f"{root}/{name}")
        except OSError as error:  # the store's reason, its URLs shown without credentials
            raise OSError(f"{shown(self.where(name))}: cannot upload it ({cleaned(str(error))})") from None

    def remove(self, names: list[str]) -> None:
        """Delete the objects ``names`` (those missing are passed over)."""
        fs, root = self._fs()
        for name in names:
            try:
                fs.rm_file(f"{root}/{name}")
            except FileNotFoundError:
                pass
