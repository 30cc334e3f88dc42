"""The vision recipe's own tests: they travel with ``recipes copy vision`` and run in the copy."""
