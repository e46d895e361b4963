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
    doc = emission_order.run([("talos", "crba"), ("solo12", "aba")], flags="-O1", date="test")
    crba, aba = doc["rows"]
    assert crba["auto"]["scheduled"] and not aba["auto"]["scheduled"] and not crba["tape"]["scheduled"]
    assert crba["live"]["scheduled"] < 0.5 * crba["live"]["tape"]
    for row in (crba, aba):
        for v in ("tape", "auto"):
            assert row[v]["ns"] > 0 and 0 < row[v]["fp"] <= row[v]["instructions"]
        assert row["max_abs_diff"] <= AGREE_TOL
    assert crba["auto"]["stack"] < crba["tape"]["stack"]          # fewer spills and reloads
    assert aba["auto"]["instructions"] == aba["tape"]["instructions"]   # the same C (207 values live: tape order)
    assert doc["ghz"] is None or doc["ghz"] > 0      # a measurement: its value depends on the load
    md = emission_order.markdown(doc, "extra note")
    assert "| talos crba | " in md and "| solo12 aba | " in md and md.rstrip().endswith("extra note")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("printed,reported,expected", [
    ("3.01 7", 2600.0, 3.01),        # boost above the nominal clock: a clock
    ("21.08 7", 2600.0, None),       # what a chain of add $1 read on a 2.6 GHz Golden Cove-class Xeon
    ("0.9 7", 2600.0, None),         # below half the reported clock
    ("4.2 7", None, 4.2)])           # no clock reported: no range to check against
def test_clock_probe_keeps_readings_within_the_reported_clock(tmp_path, monkeypatch, printed, reported, expected):
    monkeypatch.setattr(emission_order, "CLOCK_C",
                        f'#include <stdio.h>\nint main(void) {{ puts("{printed}"); return 0; }}\n')
    monkeypatch.setattr(emission_order, "reported_mhz", lambda: reported)
    assert emission_order.clock_ghz(tmp_path) == expected


def test_reported_clock_is_read_from_the_system():
    mhz = emission_order.reported_mhz()
    assert mhz is None or 100 < mhz < 10000
