"""Token ids: tokenizers and encoding, truncation that keeps special tokens, padding ids into batches.
It imports ``contracts`` and ``sources``.
"""
