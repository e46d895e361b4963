"""The shared test helpers of tests/conftest.py: rel_err's formula, and load_or_skip
skipping only for a named robot without example-robot-data (issue 11 §6)."""
import conftest
import numpy as np
import pytest
from conftest import load_or_skip, rel_err

from gen.errors import RbdgenError


def test_rel_err_is_scaled_by_max_one_and_ref():
    assert rel_err([1.0, 2.0], [1.0, 2.5]) == 0.5 / 2.5
    assert rel_err([0.1, 0.2], [0.1, 0.25]) == pytest.approx(0.05)       # |ref| < 1: absolute
    assert rel_err(np.array([[1.0], [2.0]]), [1.0, 2.0]) == 0.0          # raveled, not broadcast
    assert rel_err([], []) == 0.0


def test_load_or_skip_skips_only_a_named_robot_without_example_robot_data(monkeypatch):
    monkeypatch.setattr(conftest, "HAVE_ROBOTS", False)
    with pytest.raises(pytest.skip.Exception, match="example-robot-data"):
        load_or_skip("ur5")
    assert load_or_skip("chain:3").nv == 3
    with pytest.raises(RbdgenError):                     # any other error fails the test
        load_or_skip("no_such_robot")
