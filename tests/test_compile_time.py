"""gen/bench/compile_time.py on a small kernel split on purpose: both variants compiled
and measured, their outputs compared, the report row written."""
from __future__ import annotations

import os
import shutil

import pytest

from gen.bench import compile_time
from gen.codegen.config import CodegenConfig

#: the split and the unsplit kernel differ at most where gcc contracts a*b+c differently
AGREE_TOL = 1e-12


@pytest.mark.skipif(shutil.which("cc") is None or not os.path.exists("/usr/bin/time"),
                    reason="needs a C compiler and /usr/bin/time")
def test_split_and_unsplit_are_measured_and_agree():
    doc = compile_time.run([("ur5", "aba", None), ("ur5", "crba", None)], date="test",
                           config=CodegenConfig(split_above=500))
    split, small = doc["rows"]
    assert split["split"]["parts"] == [3] and split["unsplit"]["parts"] == [1]
    for v in ("split", "unsplit"):
        assert split[v]["seconds"] > 0 and split[v]["rss_mb"] > 0 and split[v]["ns"] > 0
    assert split["max_abs_diff"] <= AGREE_TOL
    assert small["unsplit"] == "same as split" and small["max_abs_diff"] is None
    md = compile_time.markdown(doc, "extra note")
    assert "| ur5 aba | " in md and "| ur5 crba | " in md and md.rstrip().endswith("extra note")
