"""The constrained benchmark suite (``rbdgen bench --constrained-suite``) on one small set;
a report is written and well formed (no wall-clock thresholds)."""
import json

import pytest

from gen.cli import main


def test_constrained_suite_writes_a_report_row_per_solver(tmp_path, capsys):
    rc = main(["bench", "--constrained-suite", "--sets", "ur5_6d_tool0", "--algorithms", "constrained_aba,prox_ltl",
               "--against", "generic", "--rounds", "2", "--batch", "3", "--warmup", "1", "--states", "8",
               "--out", str(tmp_path), "-q"])
    out = capsys.readouterr().out
    assert rc == 0
    (js,) = tmp_path.glob("*-constrained.json")
    (md,) = tmp_path.glob("*-constrained.md")
    suite = json.loads(js.read_text())
    rows = {r["algorithm"]: r for r in suite["results"]}
    assert set(rows) == {"constrained_aba", "prox_ltl"} and suite["method"]["iterations"] == 3
    for r in rows.values():
        assert r["set"] == "ur5_6d_tool0" and r["m"] == 6 and r["verify"]["ok"]
        assert r["ratios"]["generic/specialized"] > 0
    assert "| ur5_6d_tool0 | 6 | constrained_aba |" in md.read_text() and "| ur5_6d_tool0 | 6 | prox_ltl |" in out


@pytest.mark.parametrize("args, words", [
    (["--sets", "nope"], "unknown constraint set(s) nope"),
    (["--tol", "1e-8"], "fixed iteration count"),
    (["ur5"], "give no ROBOT"),
])
def test_constrained_suite_user_errors(args, words, capsys):
    assert main(["bench", "--constrained-suite", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
