"""Where samples come from: local paths and fsspec URLs (secrets never shown, retries and a deadline),
disk and index caches, Parquet, tar archives, class folders, and streams that shard themselves.
It imports ``contracts``, ``workers`` and ``sampling``.
"""
