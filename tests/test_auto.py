"""Automatic choice (issue 15 §4, gen/choose.py): ``-a auto`` picks the cheapest applicable
constrained forward-dynamics solver, ``-a auto_osim`` the cheapest damped Delassus
inverse, by the weighted op count; the excluded candidates say why; the manifest, the
API (run, opcount, build) and the CLI agree."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SOLVERS, load_or_skip

import gen
from gen.algorithms import ALGORITHMS
from gen.choose import AUTO, WEIGHTS, choose, cost
from gen.cli import main
from opcount import CLASSES

SOLO_FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
TALOS_SOLES = "6D:left_sole_link,6D:right_sole_link"
HUMANOID_LOOP = "6D:left_foot,3D:left_hand~right_hand"     # a loop between two moving bodies
ALL = set(SOLVERS)

#: (robot, constraints, the candidates that apply): every solver closes loops, also between
#: two moving bodies (humanoid30's hands; fourbar's ``anchor`` is a world frame)
CASES = [("solo12", SOLO_FEET, ALL), ("talos", TALOS_SOLES, ALL), ("fourbar", "3D:tip~anchor", ALL),
         ("humanoid30", HUMANOID_LOOP, ALL)]


def test_candidates_come_from_the_registry():
    assert AUTO["auto"][1] == SOLVERS == ("prox_ltl", "prox_ltls", "constrained_aba", "prox_pv")
    assert set(AUTO["auto_osim"][1]) == {"caba_osim", "caba_osimf", "ltl_osim", "kkt_osim"}
    assert all(ALGORITHMS[n].family == "delassus" for n in AUTO["auto_osim"][1])
    assert set(WEIGHTS) == set(CLASSES) and WEIGHTS["div"] > WEIGHTS["mul"] and WEIGHTS["trig"] > WEIGHTS["div"]


@pytest.mark.parametrize("robot,spec,applicable", CASES, ids=[c[0] for c in CASES])
def test_auto_picks_the_cheapest_applicable_solver(robot, spec, applicable):
    model = load_or_skip(robot)
    ch = choose(model, "auto", spec)
    ok = {c["algorithm"]: c for c in ch.candidates if c["status"] != "excluded"}
    assert set(ok) == applicable
    for c in ch.candidates:
        if c["status"] == "excluded":
            assert "two moving bodies" in c["reason"] and c["cost"] is None
        else:
            assert c["cost"] == cost(c["classes"]) and c["ops"] == sum(c["classes"].values())
    assert ch.chosen in applicable and ok[ch.chosen]["status"] == "chosen"
    assert ok[ch.chosen]["cost"] == min(c["cost"] for c in ok.values())
    if robot != "talos":     # the estimates are the op counter's (talos: traced once is enough)
        for name, c in ok.items():
            assert c["classes"] == gen.opcount(model, name, spec)["classes"]


def test_auto_respects_the_accuracy_floor_of_the_augmented_lagrangian_rows():
    model = load_or_skip("solo12")
    ch = choose(model, "auto", SOLO_FEET, mu=1e-8)
    status = {c["algorithm"]: c for c in ch.candidates}
    for name in ("prox_ltls", "constrained_aba"):
        assert status[name]["status"] == "excluded" and "accuracy floor" in status[name]["reason"]
    assert ch.chosen in ("prox_ltl", "prox_pv") and ch.options["mu"] == 1e-8


def test_auto_osim_on_a_loop_leaves_out_the_articulated_body_rows():
    model = gen.load_robot("humanoid30")
    ch = choose(model, "auto_osim", HUMANOID_LOOP)
    status = {c["algorithm"]: c["status"] for c in ch.candidates}
    assert status["caba_osim"] == status["caba_osimf"] == "excluded"
    costs = {c["algorithm"]: c["cost"] for c in ch.candidates if c["cost"] is not None}
    assert set(costs) == {"ltl_osim", "kkt_osim"} and costs[ch.chosen] == min(costs.values())


def test_no_applicable_candidate_is_an_error_with_every_reason():
    with pytest.raises(gen.RbdgenError, match="no candidate applies.*prox_ltl.*prox_pv"):
        choose("fourbar", "auto", "3D:tip~anchor", restitution=0.5)
    with pytest.raises(gen.RbdgenError, match="not an automatic choice"):
        choose("fourbar", "prox_ltl", "3D:tip~anchor")


def test_run_and_opcount_use_the_choice():
    model = gen.load_robot("humanoid30")
    ch = choose(model, "auto", HUMANOID_LOOP, iterations=5)
    rng = np.random.default_rng(3)
    q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    got = gen.run(model, "auto", q, v, tau, constraints=HUMANOID_LOOP, iterations=5)
    want = gen.run(model, ch.chosen, q, v, tau, constraints=HUMANOID_LOOP, iterations=5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    oc = gen.opcount(model, "auto", HUMANOID_LOOP, iterations=5)
    assert oc["algorithm"] == ch.chosen and oc["choice"]["chosen"] == ch.chosen
    assert [c["algorithm"] for c in oc["choice"]["candidates"]] == list(SOLVERS)


def test_build_records_the_choice_in_the_manifest(tmp_path):
    k = gen.build("fourbar", "auto", "3D:tip~anchor", out_dir=tmp_path / "k")
    manifest = json.loads((tmp_path / "k" / "manifest.json").read_text())
    choice = manifest["choice"]
    assert manifest["algorithm"] == k.algorithm.name == choice["chosen"]
    assert choice["auto"] == "auto" and choice["weights"] == WEIGHTS
    assert [c["algorithm"] for c in choice["candidates"]] == list(SOLVERS)
    assert all(c["status"] in ("chosen", "ok") and c["cost"] > 0 for c in choice["candidates"])
    model = k.model
    rng = np.random.default_rng(0)
    q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    for c, r in zip(k(q, v, tau), gen.run(model, "auto", q, v, tau, constraints="3D:tip~anchor")):
        np.testing.assert_allclose(c, r, rtol=1e-9, atol=1e-12)


def test_cli_opcount_and_build_take_auto(capsys, tmp_path):
    assert main(["opcount", "fourbar", "-a", "auto", "-c", "3D:tip~anchor", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    ch = choose("fourbar", "auto", "3D:tip~anchor")
    assert f"chose {ch.chosen}" in err and all(n in err for n in SOLVERS)
    assert list(json.loads(out)["algorithms"]) == [ch.chosen]
    assert main(["build", "humanoid30", "-a", "auto_osim", "-c", HUMANOID_LOOP, "--mu", "1e-4",
                 "-o", str(tmp_path / "b"), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    row, = json.loads(out)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert row["algorithm"] == manifest["algorithm"] == manifest["choice"]["chosen"] in ("ltl_osim", "kkt_osim")
    assert manifest["options"] == {"mu": 1e-4}


@pytest.mark.parametrize("module", ["opcount.api", "opcount.report", "gen.choose", "gen.bench.choice"])
def test_each_entry_module_imports_first(module):
    """gen.choose sits between opcount and gen.emit; importing an op-counter module first
    loads gen (and gen.choose) while that module is half-loaded: no cycle may break it."""
    r = subprocess.run([sys.executable, "-c", f"import {module}; import gen; gen.opcount"],
                       capture_output=True, text=True, check=False, cwd=str(Path(__file__).resolve().parent.parent))
    assert r.returncode == 0, r.stderr
