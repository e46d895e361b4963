"""Named robots for the tests: load one, or skip the test when example-robot-data (or the
robot's files) are not installed."""
import pytest

import gen
from gen.errors import RbdgenError


def load_or_skip(name: str):
    try:
        return gen.load_robot(name)
    except RbdgenError as e:           # example-robot-data missing
        pytest.skip(str(e))
