"""The constrained benchmark suite (``rbdgen bench --constrained-suite``) on one small set;
a report is written and well formed (no wall-clock thresholds)."""
import json

import pytest

from gen.cli import main

pytestmark = pytest.mark.slow      # the slow tier: compiles the Pinocchio shim, CMake projects, ...


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


def test_constrained_suite_covers_delassus_and_event_rows(tmp_path):
    from gen.bench.report import constrained_markdown
    from gen.bench.suite import run_constrained_suite

    s = run_constrained_suite(["ur5_6d_tool0"], ("caba_osim", "delassus", "impulse", "prox_lcp"), against=("generic",),
                              rounds=2, batch=3, warmup=1, n_states=8)
    rows = {r["algorithm"]: r for r in s["results"]}
    assert all("error" not in r and r["verify"]["ok"] for r in rows.values()), rows
    assert rows["caba_osim"]["options"] == {"mu": 1e-4} and rows["impulse"]["options"]["iterations"] == 1
    assert rows["prox_lcp"]["constraints"] == "6D+:tool0"            # the contact made one-sided
    md = constrained_markdown(s)
    assert "| ur5_6d_tool0 | 6 | caba_osim |" in md and "| ur5_6d_tool0 | 6 | prox_lcp |" in md
