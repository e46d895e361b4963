"""Named robots for the tests: load one, or skip the test when example-robot-data (or the
robot's files) are not installed."""
import pytest

import gen
from gen.algorithms import ALGORITHMS, of_family
from gen.errors import RbdgenError


def load_or_skip(name: str):
    try:
        return gen.load_robot(name)
    except RbdgenError as e:           # example-robot-data missing
        pytest.skip(str(e))


#: the bilateral constrained forward-dynamics solvers (iterative rows of the "solver"
#: family), from the registry
SOLVERS = tuple(n for n in of_family("solver") if ALGORITHMS[n].iterative)
