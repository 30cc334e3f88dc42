"""The tests that travel with a copy of the text recipe (recipes/text/tests/), run here on the package;
tests/core/test_standalone_copy.py runs them again inside a standalone copy, without the package."""

from recipes.text.tests.test_text import *  # noqa: F403  (pytest collects the tests and the fixtures)
