"""The tests that travel with a copy of the vision recipe (recipes/vision/tests/), run here on the package;
tests/core/test_standalone_copy.py runs them again inside a standalone copy, without the package."""

from recipes.vision.tests.test_vision import *  # noqa: F403  (pytest collects the tests and the fixture)
