"""The tests that travel with a copy of the audio recipe (recipes/audio/tests/), run here on the package;
tests/core/test_standalone_copy.py runs them again inside a standalone copy, without the package."""

from recipes.audio.tests.test_audio import *  # noqa: F403  (pytest collects the tests and the fixtures)
