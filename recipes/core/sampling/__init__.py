"""Which sample, when and on which rank: per-sample seeds, keyed shuffles, epoch plans and draws,
the one batch sampler, ranks and the order of a stream. It imports ``contracts`` and ``workers``.
"""
