"""The tests that travel with a copy of the video recipe (recipes/video/tests/), run here on the package;
tests/core/test_standalone_copy.py runs them again inside a standalone copy, without the package."""

from recipes.video.tests.test_video import *  # noqa: F403  (pytest collects the tests and the fixtures)
