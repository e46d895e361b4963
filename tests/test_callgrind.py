"""The callgrind instruction counter (gen.bench.callgrind) on a small robot."""
import shutil

import pytest

from gen.bench.callgrind import count, table

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")]


def test_instruction_counts_per_call_are_measured_for_both_implementations():
    r = count("ur5", "rnea", calls=200)
    # a call executes at least one instruction per arithmetic op of the specialised graph,
    # and the generic C walks the tree at run time, so it executes more
    assert r["ir_specialized"] >= r["ops"] > 0
    assert r["ir_generic"] > r["ir_specialized"]
    assert r["ratio"] == pytest.approx(r["ir_generic"] / r["ir_specialized"])
    text = table([r])
    assert text.count("\n") == 3 and "| ur5 | rnea |" in text


def test_counts_are_repeatable():
    a, b = count("ur5", "aba", calls=100), count("ur5", "aba", calls=100)
    assert a["ir_specialized"] == pytest.approx(b["ir_specialized"], rel=1e-3)
