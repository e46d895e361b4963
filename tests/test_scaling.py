"""The scaling study (gen.scaling, ``rbdgen scaling``) on small mechanisms."""
import json
import subprocess
import sys

import pytest

from gen.errors import RbdgenError
from gen.scaling import case, fit_exponent, markdown, study, write


def test_fit_recovers_the_exponent_of_a_power_law():
    ns = [10, 20, 40, 80]
    assert fit_exponent(ns, [3.0 * n ** 1.5 for n in ns]) == pytest.approx(1.5, rel=1e-12)
    assert fit_exponent(ns, [7.0 * n for n in ns]) == pytest.approx(1.0, rel=1e-12)
    assert fit_exponent([10], [5.0]) is None


def test_cases_constrain_the_chain_tip_and_every_tree_leaf():
    model, spec = case("chain", 5)
    assert spec == "6D:link5_tip" and model.nv == 5
    model, spec = case("tree", 9)            # three branches: two leaves
    assert spec == "3D:leaf1,3D:leaf2" and model.nv == 9
    with pytest.raises(RbdgenError, match="unknown mechanism family"):
        case("star", 5)


def test_op_count_study_writes_tables_exponents_and_plots(tmp_path):
    r = study(chains=(4, 8), trees=(6, 12), algorithms=("constrained_aba", "prox_ltl"), iterations=(1, 3),
              bench=False)
    assert len(r["cases"]) == 2 * 2 * 2 * 2
    by = {(c["family"], c["n"], c["algorithm"], c["iterations"]): c["ops"] for c in r["cases"]}
    # one more iteration costs operations; a longer chain costs more
    assert by[("chain", 8, "constrained_aba", 3)] > by[("chain", 8, "constrained_aba", 1)]
    assert by[("chain", 8, "prox_ltl", 1)] > by[("chain", 4, "prox_ltl", 1)]
    fits = {(f["family"], f["algorithm"], f["iterations"]): f for f in r["fits"]}
    assert fits[("chain", "constrained_aba", 1)]["ops_exponent"] == pytest.approx(
        fit_exponent([4, 8], [by[("chain", 4, "constrained_aba", 1)], by[("chain", 8, "constrained_aba", 1)]]))
    assert fits[("tree", "prox_ltl", 3)]["time_exponent"] is None          # no timings asked for
    paths = write(r, tmp_path, "2026-01-01")
    assert json.loads(paths["json"].read_text())["cases"] == r["cases"]
    text = paths["md"].read_text()
    assert "| chain | constrained_aba | 1 |" in text and "## trees: op counts" in text
    if "scaling-ops" in paths:
        assert paths["scaling-ops"].stat().st_size > 1000


def test_timed_study_reports_a_median_and_a_build_time():
    r = study(chains=(3,), trees=(), algorithms=("constrained_aba",), iterations=(1,), bench=True,
              rounds=3, batch=5)
    (c,) = r["cases"]
    assert c["median_us"] > 0 and c["seconds_build"] >= 0
    assert "· " in markdown(r)


def test_cli_rejects_bad_sizes_in_one_line():
    p = subprocess.run([sys.executable, "-m", "gen.cli", "scaling", "--chains", "4,x", "--no-bench"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--chains takes a comma list of integers" in p.stderr
    assert "Traceback" not in p.stderr


def test_kernels_over_the_operation_budget_are_counted_not_timed():
    r = study(chains=(3,), trees=(), algorithms=("prox_ltl",), iterations=(1,), bench=True, max_timed_ops=10)
    (c,) = r["cases"]
    assert c["ops"] > 10 and "median_us" not in c and c["not_timed"] == f"{c['ops']} ops > 10"
    assert "| 3 | 3 | 6 | " in markdown(r) and "*" in markdown(r)
