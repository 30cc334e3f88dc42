"""The tests that travel with a copy of the detection recipe (recipes/detection/tests/), run here on the package;
tests/core/test_standalone_copy.py runs them again inside a standalone copy, without the package."""

from recipes.detection.tests.test_detection import *  # noqa: F403  (pytest collects the tests and the fixtures)
