"""What every room of the core reads: the hooks a dataset offers the core, the bad-input policy,
checked states and parameters, rarely changed read options, per-sample tables workers share, and
the helpers every collate uses. It imports no other room.
"""
