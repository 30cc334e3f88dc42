"""The loaders: the presets' keyword arguments and their one composition, loader states, mixtures,
``DevicePrefetcher``, what trainers' launchers need, and ``tune_loader``. It imports every other room.
"""
