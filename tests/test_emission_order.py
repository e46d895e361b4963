"""gen/bench/emission_order.py on a big and a small kernel: both orders compiled, counted and timed,
their outputs compared, the report row written."""
from __future__ import annotations

import shutil

import pytest

from gen.bench import emission_order

#: the two orders differ at most where gcc contracts a*b+c differently
AGREE_TOL = 1e-12


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("objdump") is None,
                    reason="needs a C compiler and objdump")
def test_tape_and_schedule_are_measured_and_agree():
    # at -O1: at -O0 (the tests' flags) every value lives on the stack in either order
    doc = emission_order.run([("talos", "crba"), ("panda", "aba")], flags="-O1", date="test")
    crba, aba = doc["rows"]
    assert crba["auto"]["scheduled"] and not aba["auto"]["scheduled"] and not crba["tape"]["scheduled"]
    assert crba["live"]["scheduled"] < 0.5 * crba["live"]["tape"]
    for row in (crba, aba):
        for v in ("tape", "auto"):
            assert row[v]["ns"] > 0 and 0 < row[v]["fp"] <= row[v]["instructions"]
        assert row["max_abs_diff"] <= AGREE_TOL
    assert crba["auto"]["stack"] < crba["tape"]["stack"]          # fewer spills and reloads
    assert aba["auto"]["instructions"] == aba["tape"]["instructions"]   # the same C
    assert doc["ghz"] is None or doc["ghz"] > 0      # a measurement: its value depends on the load
    md = emission_order.markdown(doc, "extra note")
    assert "| talos crba | " in md and "| panda aba | " in md and md.rstrip().endswith("extra note")
