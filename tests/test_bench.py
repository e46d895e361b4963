"""The benchmark harness and the Pinocchio shim (gen/bench; docs/DESIGN.md §5).

Benchmarks are not tests: nothing here checks a wall-clock number, only that the harness
runs, cross-checks the implementations and writes a well-formed report, and that the
Pinocchio C++ shim computes what pin's Python bindings compute.

The shim is compiled once (header-only Pinocchio: minutes of g++ on a cold cache) and
cached in $RBDGEN_CACHE (default ~/.cache/rbdgen); afterwards these tests take seconds.
"""
from __future__ import annotations

import argparse
import csv
import json

import numpy as np
import pytest
from conftest import SOLVERS, load_or_skip, needs_pin
from pin_models import shim_part_ready

import gen
from gen.algorithms import ALGORITHMS
from gen.bench import harness, pinshim, report
from gen.bench.peers import pinocchio as pin_peer

pytestmark = pytest.mark.slow      # the slow tier: compiles the Pinocchio shim, CMake projects, ...

SMALL = {"n_states": 8, "rounds": 5, "batch": 10, "warmup": 10, "seed": 0}
SHIM_TOL = 1e-12          # relative to max(1, max |reference|)

try:
    import pinocchio as pin
except ImportError:       # pragma: no cover - the test extra installs pin (needs_pin)
    pin = None


def _check_result(r: dict, impls) -> None:
    assert set(r["implementations"]) == set(impls)
    for name, s in r["implementations"].items():
        for key in ("median_ns", "p10_ns", "p90_ns", "mean_ns"):
            assert np.isfinite(s[key]) and s[key] > 0, f"{name} {key} = {s[key]}"
        assert s["p10_ns"] <= s["median_ns"] <= s["p90_ns"], f"{name}: p10 <= median <= p90"
        assert s["trials"] == SMALL["rounds"] * SMALL["batch"]
        assert s["rc"] == 0, f"{name} returned a non-zero code while timed"
    for name in impls:
        if name != "specialized":
            assert r["ratios"][f"{name}/specialized"] > 0
    v = r["verify"]
    assert v["ok"], f"implementations disagree: {v}"
    assert v["states"] == SMALL["n_states"]
    assert all(n == 0 for n in v["failed_calls"].values())
    assert v["numpy_max_abs_diff"] <= 1e-9 * max(1.0, max(v["max_abs_ref"].values()))
    json.dumps({k: x for k, x in r.items() if k not in ("states", "outputs")})   # JSON-serialisable


@needs_pin
def test_processes_needing_one_shim_part_compile_it_once(tmp_path, monkeypatch):
    """Two builders asking for the same missing parts at once (a parallel run's workers):
    each part is compiled once (gen.bench.pinshim._part_lock), the later builder waits and
    takes the first one's object.  The compiler is replaced by a stand-in that takes 0.5 s
    (the real parts take minutes); flock holds between two open files of one process too,
    so two threads stand for two processes."""
    import threading
    import time

    from gen.bench import pinshim

    monkeypatch.setenv("RBDGEN_CACHE", str(tmp_path))
    compiled = []

    def stand_in(base, part, folder, target, say):
        compiled.append(part)
        time.sleep(0.5)
        target.write_bytes(b"object")
        return 0.5

    monkeypatch.setattr(pinshim, "_compile_part", stand_in)
    builds = []
    workers = [threading.Thread(target=lambda: builds.append(pinshim.build_shim(("rnea",), jobs=2)))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(compiled) == ["core", "rnea"], compiled
    assert len(builds) == 2 and all(b.objects["rnea"].read_bytes() == b"object" for b in builds)
    assert builds[0].compile_seconds["rnea"] == 0.5


@pytest.mark.parametrize("algorithm", ["rnea", "crba"])
def test_harness_generic_chain(algorithm):
    """Specialised vs generic C on chain:6: runs, agrees, reports positive times."""
    r = harness.benchmark("chain:6", algorithm, against=("generic",), **SMALL)
    _check_result(r, ("specialized", "generic"))
    assert r["verify"]["max_rel_diff"]["generic"] <= harness.TOLERANCE


def test_harness_generic_every_joint_kind_and_mimic():
    """The generic column on a tree with spherical, planar and helical joints; a mimic
    model, which the generic C refuses, is timed without it (the reason recorded)."""
    from random_trees import every_kind_tree
    from test_joint_types import mimic_tree
    r = harness.benchmark(every_kind_tree(12, 8), "aba", against=("generic",), **SMALL)
    _check_result(r, ("specialized", "generic"))
    r = harness.benchmark(mimic_tree(0), "rnea", against=("generic",), **SMALL)
    _check_result(r, ("specialized",))
    assert r["skipped"] == {"generic": "the generic C has no mimic joints (joint 'j4')"}


def test_harness_generic_skipped_on_loops_where_it_takes_anchored_rows_only():
    """The generic constrained_aba takes constraints to the world only (registry
    ``GenericC.anchored_only``): on the four-bar cut between its moving links the
    specialised kernel, which closes the loop, is timed without it, the reason recorded;
    the generic prox_ltl takes the loop and is timed."""
    r = harness.benchmark("fourbar_cut", "constrained_aba", "3D:coupler_tip~rocker_tip", against=("generic",), **SMALL)
    _check_result(r, ("specialized",))
    assert r["skipped"] == {"generic": "the generic C's constrained_aba takes constraints relative to the world "
                                       "only ('3D:coupler_tip~rocker_tip' closes a loop between two moving bodies)"}
    r = harness.benchmark("fourbar_cut", "prox_ltl", "3D:coupler_tip~rocker_tip", against=("generic",), **SMALL)
    _check_result(r, ("specialized", "generic"))


def test_harness_refuses_to_time_wrong_code():
    """A mismatch (here: an impossible tolerance) raises instead of reporting times."""
    with pytest.raises(harness.BenchmarkMismatch, match="disagree"):
        harness.benchmark("chain:6", "rnea", against=("generic",), tolerance=-1.0, **SMALL)
    r = harness.benchmark("chain:6", "rnea", against=("generic",), tolerance=-1.0, check=False, **SMALL)
    assert r["verify"]["ok"] is False


def _pin_reference(pm, pd, algorithm, q, rest, nv):
    if algorithm == "rnea":
        return pin.rnea(pm, pd, q, rest[:nv], rest[nv:])
    if algorithm == "nle":
        return pin.nonLinearEffects(pm, pd, q, rest[:nv])
    if algorithm == "aba":
        return pin.aba(pm, pd, q, rest[:nv], rest[nv:])
    if algorithm == "minv":
        M = np.array(pin.computeMinverse(pm, pd, q))
        return np.triu(M) + np.triu(M, 1).T
    M = np.array(pin.crba(pm, pd, q))
    return np.triu(M) + np.triu(M, 1).T


@needs_pin
@pytest.mark.parametrize("algorithm", ["rnea", "nle", "crba", "aba", "minv"])
@pytest.mark.parametrize("robot", ["ur5", "solo12"])
def test_pin_shim_equals_pin_python(robot, algorithm):
    """The shim (in the tests' mode, $RBDGEN_PINSHIM_MODE; model passed as a text archive)
    gives pin's Python results on every state, for rnea, nle, crba, aba and minv
    (computeMinverse, symmetrised) (one test each:
    the shim's parts they need build on both workers at once)."""
    _check_shim_vs_pin_python(robot, algorithm)


@needs_pin
def test_header_only_pin_shim_equals_pin_python(monkeypatch, tmp_path):
    """The benchmarks' own build of the shim (header-only Pinocchio compiled with the
    benchmark flags, -march=native: the Eigen ABI the module docstring of gen.bench.pinshim
    guards) gives pin's Python rnea on ur5, whatever mode the other tests use (its program
    in a folder of its own: the harness keeps one build per program folder)."""
    monkeypatch.setenv(pinshim.MODE_ENV, "header-only")
    _check_shim_vs_pin_python("ur5", "rnea", keep_dir=tmp_path)


@needs_pin
def test_library_mode_flags_folder_and_link(monkeypatch):
    """Library mode (gen.bench.pinshim.MODES) compiles the parts without the machine
    options (the wheel's baseline Eigen ABI) and with PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION,
    into a cache folder of its own, and links libpinocchio_default; header-only keeps the
    benchmark flags and links no Pinocchio library; an unknown mode is refused."""
    from gen.errors import RbdgenError

    flags = ("-O0", "-march=native", "-mavx2", "-DNDEBUG")
    assert pinshim.shim_flags(flags, "header-only") == flags
    assert pinshim.shim_flags(flags, "library") == ("-O0", "-DNDEBUG", "-DPINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION")
    assert pinshim.shim_folder(flags, "library") != pinshim.shim_folder(flags, "header-only")
    assert "-lpinocchio_default" in pinshim.link_flags(mode="library")
    assert "-lpinocchio_default" not in pinshim.link_flags(mode="header-only")
    monkeypatch.setenv(pinshim.MODE_ENV, "library")
    assert pinshim.shim_flags(flags) == pinshim.shim_flags(flags, "library")
    monkeypatch.setenv(pinshim.MODE_ENV, "fast")
    with pytest.raises(RbdgenError, match="RBDGEN_PINSHIM_MODE='fast' is not a shim mode"):
        pinshim.build_shim(("rnea",))


#: the library-mode parts and a symbol of the wheel's explicit instantiations each calls
LIBRARY_SYMBOLS = {"rnea": "pinocchio::impl::rnea<double, 0, pinocchio::JointCollectionDefaultTpl, Eigen::Ref<",
                   "crba": "pinocchio::crba<double, 0, pinocchio::JointCollectionDefaultTpl, Eigen::Ref<",
                   "aba": "pinocchio::aba<double, 0, pinocchio::JointCollectionDefaultTpl, Eigen::Ref<",
                   "constrained": "pinocchio::constraintDynamics<double, 0, pinocchio::JointCollectionDefaultTpl, "
                                  "Eigen::Matrix<double, -1, 1, 0, -1, 1>",
                   "impulse": "pinocchio::impulseDynamics<double, 0, pinocchio::JointCollectionDefaultTpl, "
                              "Eigen::Matrix<double, -1, 1, 0, -1, 1>"}


@needs_pin
def test_library_mode_calls_the_wheels_instantiations():
    """In library mode the shim's objects leave the algorithms undefined, for
    libpinocchio_default.so's explicit instantiations to supply: pin_shim.cpp passes its
    arguments in their types (else g++ instantiates the algorithm again: 69 s of CPU for
    aba's part instead of 6)."""
    import subprocess

    b = pinshim.build_shim(tuple(LIBRARY_SYMBOLS), mode="library")
    for part, symbol in LIBRARY_SYMBOLS.items():
        undefined, defined = (subprocess.run(["nm", "-C", which, str(b.objects[part])], capture_output=True,
                                             text=True, check=True).stdout
                              for which in ("--undefined-only", "--defined-only"))
        assert symbol in undefined, f"part {part}: {symbol} is not taken from libpinocchio_default"
        assert symbol not in defined, f"part {part}: {symbol} is instantiated in the shim"


def _check_shim_vs_pin_python(robot, algorithm, keep_dir=None):
    from gen.pinref import pin_model

    model = gen.load_robot(robot)
    pm = pin_model(model)
    pd = pm.createData()
    r = harness.benchmark(model, algorithm, keep_outputs=True, keep_dir=keep_dir, **SMALL)
    generic = ("generic",) if ALGORITHMS[algorithm].generic else ()
    _check_result(r, ("specialized", *generic, "pinocchio"))
    assert r["implementations"]["pinocchio"]["function"] == ALGORITHMS[algorithm].pin_peer
    got_all = next(iter(r["outputs"]["pinocchio"].values()))
    for s in range(SMALL["n_states"]):
        q, rest = r["states"][s, :model.nq], r["states"][s, model.nq:]
        ref = np.asarray(_pin_reference(pm, pd, algorithm, q, rest, model.nv))
        err = np.max(np.abs(got_all[s] - ref)) / max(1.0, np.max(np.abs(ref)))
        assert err <= SHIM_TOL, f"{robot}/{algorithm} state {s}: shim vs pin Python {err:.2e}"


@needs_pin
def test_suite_report_is_well_formed(tmp_path):
    """A one-robot suite writes <stem>.md/.json (and .png with matplotlib) with machine,
    compiler, flags, versions, and the results."""
    from gen.bench import suite

    s = suite.run_suite(["ur5"], ("rnea", "aba"), **SMALL)
    paths = suite.write_report(s, tmp_path, stem="test-suite")
    data = json.loads(paths["json"].read_text())
    assert {"date", "machine", "method", "results", "shim"} <= set(data)
    m = data["machine"]
    assert m["cpu"] and m["cores"] >= 1 and "-march=native" in m["flags"]
    assert m["flags"] == " ".join(pinshim.BENCH_FLAGS)     # the flags it ran with ($RBDGEN_BENCH_FLAGS)
    assert m["cc"] and m["cxx"]
    for k in ("rbdgen", "pinocchio", "casadi", "numpy"):
        assert m["versions"][k]
    assert [(r["robot"], r["algorithm"]) for r in data["results"]] == [("ur5", "rnea"), ("ur5", "aba")]
    for r in data["results"]:
        assert "error" not in r, r.get("error")
        assert r["verify"]["ok"]
        adam = {"adam/specialized"} if r["algorithm"] == "rnea" else set()    # ADAM floats ur5's base: no aba
        assert set(r["ratios"]) == {"generic/specialized", "pinocchio/specialized"} | adam
    md = paths["md"].read_text()
    assert "Pinocchio / specialized" in md and "generic / specialized" in md and m["cpu"] in md
    assert "ADAM / specialized" in md and "| ur5 | rnea |" in md.split("## Operations: rbdgen vs ADAM")[1]
    assert data["shim"]["mode"] == pinshim.shim_mode()      # the shim's build is named as it was made
    assert ("Library-mode build" if pinshim.shim_mode() == "library" else "Header-only build") in md
    if "png" in paths:
        assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"


@needs_pin
@pytest.mark.skipif(not shim_part_ready("constrained"),
                    reason="the shim's constrained part is not compiled yet (~1 min of g++); "
                           "set RBDGEN_TEST_CONSTRAINED_SHIM=1 to build it here")
def test_constrained_shim_equals_pin_python():
    """prox_ltl vs the generic C and Pinocchio's constraintDynamics (same iterates) in the
    harness, and the shim's (ddq, lambda) equal pin's Python constraintDynamics with the
    same settings."""
    from gen.algorithms.proximal import DEFAULT_ITERATIONS, DEFAULT_MU
    from gen.constraint_spec import parse_constraints
    from gen.pinref import pin_model

    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    r = harness.benchmark(model, "prox_ltl", cset, keep_outputs=True, **SMALL)
    _check_result(r, ("specialized", "generic", "pinocchio"))
    assert r["implementations"]["pinocchio"]["function"] == "constraint_dynamics"
    pm = pin_model(model)
    pd = pm.createData()
    cms = []
    for c in cset.constraints:
        frame = model.frame(c.frame1)
        cms.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, frame.body + 1,
                                            pin.SE3(c.placement1.R, c.placement1.p), pin.ReferenceFrame.LOCAL))
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(pm, pd, cms, cds)
    nq, nv = model.nq, model.nv
    for s in range(SMALL["n_states"]):
        x = r["states"][s]
        settings = pin.ProximalSettings(0.0, DEFAULT_MU, r["iterations"] or DEFAULT_ITERATIONS)
        ddq = pin.constraintDynamics(pm, pd, x[:nq], x[nq:nq + nv], x[nq + nv:], cms, cds, settings)
        for name, ref in (("ddq", np.array(ddq)), ("lam", np.array(pd.lambda_c))):
            got = r["outputs"]["pinocchio"][name][s]
            err = np.max(np.abs(got - ref)) / max(1.0, np.max(np.abs(ref)))
            assert err <= SHIM_TOL, f"constraintDynamics {name} state {s}: shim vs pin Python {err:.2e}"


@pytest.mark.parametrize("algorithm", SOLVERS)
def test_harness_constrained_generic_ur5(algorithm):
    """A proximal solver on ur5 6D:tool0, specialised vs generic C: the program embeds the
    constraint set, the generic C agrees with the specialised C and with NumPy on every
    state, and the md / csv / json reports are well formed."""
    from gen.constraint_spec import parse_constraints

    model = gen.load_robot("ur5")
    cset = parse_constraints(model, "6D:tool0")
    mu = 1e-3 if algorithm in ("prox_ltls", "constrained_aba") else 1e-6
    r = harness.benchmark(model, algorithm, cset, against=("generic",), keep_outputs=True, mu=mu, **SMALL)
    _check_result(r, ("specialized", "generic"))
    assert r["constraints"] == "6D:tool0" and r["m"] == 6 and r["iterations"] == 3
    out = r["outputs"]["generic"]
    for s in range(SMALL["n_states"]):
        x = r["states"][s]
        ref = gen.run(model, algorithm, x[:model.nq], x[model.nq:model.nq + model.nv], x[model.nq + model.nv:],
                      constraints=cset, mu=mu)
        for k, name in enumerate(("ddq", "lam", "iterations")):
            got = out[name][s]
            err = np.max(np.abs(got - ref[k])) / max(1.0, np.max(np.abs(ref[k])))
            assert err <= 1e-9, f"{algorithm} state {s} {name}: generic C in the harness vs NumPy {err:.2e}"
    r = {k: x for k, x in r.items() if k not in ("states", "outputs")}
    md = report.render([r], "md")
    assert f"| ur5 | {algorithm} (6D:tool0) | 6 |" in md and "| ok |" in md
    csv_rows = report.render([r], "csv").splitlines()
    assert len(csv_rows) == 2 and csv_rows[1].startswith(f"ur5,{algorithm},6D:tool0,6,")
    row = json.loads(report.render([r], "json"))[0]
    assert row["verify"]["ok"] and set(row["implementations"]) == {"specialized", "generic"}


def test_harness_constrained_generic_early_exit():
    """With a tolerance the generic C takes the specialised driver's iteration counts."""
    r = harness.benchmark("ur5", "prox_pv", "6D:tool0", against=("generic",), keep_outputs=True, tol=1e-10,
                          max_iter=20, **SMALL)
    _check_result(r, ("specialized", "generic"))
    its = {name: r["outputs"][name]["iterations"].ravel() for name in ("specialized", "generic")}
    assert np.array_equal(its["specialized"], its["generic"]), f"iteration counts differ: {its}"
    assert its["generic"].max() > 1


@pytest.mark.parametrize("robot,algorithm,spec", [("ur5", "delassus", "6D:tool0"), ("ur5", "caba_osim", "6D:tool0"),
                                                   ("ur5", "ltl_osim", "6D:tool0"), ("ur5", "kkt_osim", "6D:tool0"),
                                                   ("solo12", "caba_osimf", FEET)])
def test_harness_delassus_generic(robot, algorithm, spec):
    """A Delassus algorithm (input q, output m x m), specialised vs generic C (caba_osimf:
    rbg_caba_osim): the generic C agrees with the specialised C and NumPy on every state
    and the report is well formed."""
    from gen.constraint_spec import parse_constraints

    model = gen.load_robot(robot)
    cset = parse_constraints(model, spec)
    opts = {} if algorithm == "delassus" else {"mu": 1e-3}
    r = harness.benchmark(model, algorithm, cset, against=("generic",), keep_outputs=True, **opts, **SMALL)
    _check_result(r, ("specialized", "generic"))
    assert r["m"] == cset.m and r["iterations"] is None
    out = r["outputs"]["generic"]["Delassus" if algorithm == "delassus" else "Lambda"]
    assert out.shape == (SMALL["n_states"], cset.m, cset.m)
    for s in range(SMALL["n_states"]):
        ref = gen.run(model, algorithm, r["states"][s], constraints=cset, **opts)
        err = np.max(np.abs(out[s] - ref)) / np.max(np.abs(ref))
        assert err <= 1e-10, f"{algorithm} state {s}: generic C in the harness vs NumPy {err:.2e}"
    md = report.render([{k: x for k, x in r.items() if k not in ("states", "outputs")}], "md")
    assert f"| {robot} | {algorithm} ({spec}) | {model.nv} |" in md and "| ok |" in md


DELASSUS_SHIM_MU = 1e-4       # Pinocchio's lemma rounds at ~eps / mu (tests/test_delassus.py)
DELASSUS_SHIM_TOL = 1e-7      # its frame form vs the exact (J M^-1 J^T + mu)^-1, relative (seen 1.3e-9)


@needs_pin
@pytest.mark.skipif(not shim_part_ready("contact"),
                    reason="the shim's contact part is not compiled yet (~2 min of g++); "
                           "set RBDGEN_TEST_CONSTRAINED_SHIM=1 to build it here")
def test_damped_delassus_inverse_vs_pinocchio():
    """caba_osim on solo12's feet vs the generic C and computeDampedDelassusMatrixInverse
    at mu = 1e-4: the cross-check passes, the shim returns the full symmetric matrix (pin
    4.1 fills the blocks on and above the diagonal; the shim mirrors them) equal to the
    damped inverse by LTL-OSIM, and the report is well formed.  (pin's Python binding of
    computeDampedDelassusMatrixInverse cannot serve as the reference: without a binding of
    initPvDelassus it returns 1/mu on the diagonal and zeros elsewhere in pin 4.1.)"""
    from gen.constraint_spec import parse_constraints

    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    r = harness.benchmark(model, "caba_osim", cset, keep_outputs=True, mu=DELASSUS_SHIM_MU, **SMALL)
    _check_result(r, ("specialized", "generic", "pinocchio"))
    assert r["implementations"]["pinocchio"]["function"] == "delassus_inv"
    assert "pinocchio_iterations" not in r["verify"]
    got_all = r["outputs"]["pinocchio"]["Lambda"]
    for s in range(SMALL["n_states"]):
        got = got_all[s]
        assert np.array_equal(got, got.T), f"state {s}: the shim's damped inverse is not symmetric"
        ref = gen.run(model, "ltl_osim", r["states"][s], constraints=cset, mu=DELASSUS_SHIM_MU)
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        assert err <= DELASSUS_SHIM_TOL, f"state {s}: Pinocchio's damped inverse vs LTL-OSIM {err:.2e}"
    rr = {k: x for k, x in r.items() if k not in ("states", "outputs")}
    md = report.render([rr], "md")
    assert f"| solo12 | caba_osim ({FEET}) | {model.nv} |" in md and "| ok |" in md
    row = json.loads(report.render([rr], "json"))[0]
    assert set(row["ratios"]) == {"generic/specialized", "pinocchio/specialized"}


EVENTS = [("impulse", FEET, {"mu": 1e-4, "restitution": 0.5}),
          ("prox_lcp", FEET.replace("3D:", "3D+:"), {}),
          ("impulse", FEET, {"mu": 1e-4, "tol": 1e-10, "max_iter": 50})]


@pytest.mark.parametrize("algorithm,spec,opts", EVENTS, ids=["impulse", "prox_lcp", "impulse-tol"])
def test_harness_events_generic_solo12(algorithm, spec, opts):
    """The impact map (inputs q, v_minus) and proxLCP (3D+ feet) on solo12, specialised vs
    generic C: the program embeds the set (with its unilateral flags) and the restitution,
    the generic C agrees with the specialised C and NumPy on every state (same iteration
    counts), and the md / csv / json reports are well formed."""
    from gen.algorithms import ALGORITHMS
    from gen.constraint_spec import parse_constraints

    model = gen.load_robot("solo12")
    cset = parse_constraints(model, spec)
    r = harness.benchmark(model, algorithm, cset, against=("generic",), keep_outputs=True, **opts, **SMALL)
    _check_result(r, ("specialized", "generic"))
    assert r["constraints"] == spec and r["m"] == 12
    out = r["outputs"]["generic"]
    names = [n for n, _, _ in ALGORITHMS[algorithm].outputs(model, cset)]
    assert list(out) == names
    nq, nv = model.nq, model.nv
    for s in range(SMALL["n_states"]):
        x = r["states"][s]
        inputs = (x[:nq], x[nq:nq + nv]) if algorithm == "impulse" else (x[:nq], x[nq:nq + nv], x[nq + nv:])
        ref = gen.run(model, algorithm, *inputs, constraints=cset, **opts)
        for k, name in enumerate(names[:3]):
            got = out[name][s]
            err = np.max(np.abs(got - ref[k])) / max(1.0, np.max(np.abs(ref[k])))
            assert err <= 1e-9, f"{algorithm} state {s} {name}: generic C in the harness vs NumPy {err:.2e}"
        assert out["iterations"][s] == r["outputs"]["specialized"]["iterations"][s], "iteration counts differ"
    rr = {k: x for k, x in r.items() if k not in ("states", "outputs")}
    md = report.render([rr], "md")
    assert f"| solo12 | {algorithm} ({spec}) | {nv} |" in md and "| ok |" in md
    csv_rows = list(csv.reader(report.render([rr], "csv").splitlines()))
    assert len(csv_rows) == 2 and csv_rows[1][:4] == ["solo12", algorithm, spec, str(nv)]
    row = json.loads(report.render([rr], "json"))[0]
    assert row["verify"]["ok"] and set(row["implementations"]) == {"specialized", "generic"}


def test_impulse_peer_only_where_pinocchio_computes_the_same_map():
    """impulseDynamics is one damped solve: the peer runs for a one-iteration kernel (same
    mu) or a tolerance-driven one (the converged map, exact solve), and is skipped with
    the reason for a fixed K > 1."""
    assert pin_peer.impulse_peer_settings({"iterations": 1}, {"mu": 1e-4}) == (1e-4, None)
    assert pin_peer.impulse_peer_settings({"iterations": None, "tolerance": 1e-10}, {"mu": 1e-4}) == \
        (pin_peer.IMPULSE_EXACT_MU, None)
    mu, reason = pin_peer.impulse_peer_settings({"iterations": 3}, {})
    assert mu is None and "one damped solve" in reason


@needs_pin
def test_impulse_pinocchio_peer_skipped_at_fixed_k():
    """At the default 3 iterations the harness reports why Pinocchio is not timed (no shim
    build needed) and still times the generic C."""
    r = harness.benchmark("solo12", "impulse", FEET, mu=1e-4, **SMALL)
    _check_result(r, ("specialized", "generic"))
    assert "one damped solve" in r["skipped"]["pinocchio"]


IMPULSE_PIN_TOL = 1e-8        # converged map vs Pinocchio's exact solve (relative; tests/test_impact.py)


@needs_pin
@pytest.mark.skipif(not shim_part_ready("impulse"),
                    reason="the shim's impulse part is not compiled yet (minutes of g++); "
                           "set RBDGEN_TEST_CONSTRAINED_SHIM=1 to build it here")
def test_impulse_vs_pinocchio():
    """The impact map on solo12's feet against impulseDynamics in the harness: at one
    iteration (Pinocchio at the kernel's mu) the shim's (v_plus, impulse) equal pin's
    Python impulseDynamics with the same settings and restitution; with a tolerance the
    converged map agrees with Pinocchio's exact solve."""
    from gen.algorithms.pinocchio import rigid_constraints
    from gen.constraint_spec import parse_constraints
    from gen.pinref import pin_model

    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    mu, e = 1e-4, 0.5
    r = harness.benchmark(model, "impulse", cset, keep_outputs=True, mu=mu, iterations=1, restitution=e, **SMALL)
    _check_result(r, ("specialized", "generic", "pinocchio"))
    assert r["implementations"]["pinocchio"]["function"] == "impulse_dynamics"
    pm = pin_model(model)
    pd = pm.createData()
    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    nq = model.nq
    for s in range(SMALL["n_states"]):
        x = r["states"][s]
        v_plus = pin.impulseDynamics(pm, pd, x[:nq], x[nq:], cms, cds, e, pin.ProximalSettings(0.0, mu, 1))
        for name, ref in (("v_plus", np.array(v_plus)), ("impulse", np.array(pd.impulse_c))):
            got = r["outputs"]["pinocchio"][name][s]
            err = np.max(np.abs(got - ref)) / max(1.0, np.max(np.abs(ref)))
            assert err <= SHIM_TOL, f"impulseDynamics {name} state {s}: shim vs pin Python {err:.2e}"
    r = harness.benchmark(model, "impulse", cset, keep_outputs=True, mu=mu, tol=1e-12, max_iter=100,
                          restitution=e, tolerance=IMPULSE_PIN_TOL, **SMALL)
    _check_result(r, ("specialized", "generic", "pinocchio"))
    assert r["verify"]["max_rel_diff"]["pinocchio"] <= IMPULSE_PIN_TOL


@needs_pin
@pytest.mark.skipif(not shim_part_ready("constrained_derivatives"),
                    reason="the shim's constrained_derivatives part is not compiled yet (minutes of g++); "
                           "set RBDGEN_TEST_CONSTRAINED_SHIM=1 to build it here")
def test_impulse_derivatives_vs_pinocchio_on_every_state():
    """impulseDynamics + computeImpulseDynamicsDerivatives in the shim, one damped solve
    against the kernel's one iteration, agree on every state of the run (pin 4.1 leaves
    data.dvc_dq stale between calls: the shim zeroes it, else dv+/dq is O(1) off from the
    second state on) and equal pin's Python with a fresh initConstraintDynamics."""
    from gen.pinref import pin_model, reference

    model = gen.load_robot("solo12")
    r = harness.benchmark(model, "impulse_derivatives", FEET, against=("pinocchio",), keep_outputs=True,
                          iterations=1, **SMALL)
    _check_result(r, ("specialized", "pinocchio"))
    assert r["verify"]["max_rel_diff"]["pinocchio"] <= 1e-10
    pm, nq = pin_model(model), model.nq
    for s in range(1, SMALL["n_states"]):
        x = r["states"][s]
        ref = reference(model, "impulse_derivatives", x[:nq], x[nq:], pmodel=pm, cset=FEET, options={})
        got = r["outputs"]["pinocchio"]["dvplus_dq"][s]
        # the Python reference is the exact map (damping 1e-20); one damped solve at 1e-6 is 1e-4 from it
        assert np.max(np.abs(got - ref[0])) <= 1e-3 * max(1.0, np.max(np.abs(ref[0]))), f"state {s}"


def test_cli_bench_json(capsys):
    """``rbdgen bench chain:6 --algorithm aba --against generic --format json`` through
    the sub-command's own parser."""
    from gen.bench import cli

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    cli.add_parser(sub)
    args = p.parse_args(["bench", "chain:6", "--algorithm", "aba", "--against", "generic", "--format", "json",
                         "--states", "8", "--rounds", "5", "--batch", "10", "--warmup", "10", "--quiet"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["robot"] == "chain:6" and out[0]["algorithm"] == "aba"
    assert out[0]["verify"]["ok"]


def test_cli_bench_user_errors():
    from gen.bench import cli
    from gen.errors import RbdgenError

    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    cli.add_parser(sub)
    for argv, msg in ((["bench", "chain:6"], "--algorithm"),
                      (["bench", "chain:6", "-a", "rnea", "--against", "drake"], "drake"),
                      (["bench", "chain:6", "-a", "rnea", "--rounds", "0"], "--rounds"),
                      (["bench", "chain:6", "-a", "rnea", "--iterations", "3"], "constrained"),
                      (["bench", "ur5", "-a", "prox_ltl", "-c", "6D:tool0", "--max-iter", "9"], "--tol")):
        args = p.parse_args(argv)
        with pytest.raises(RbdgenError, match=msg):
            args.func(args)


def test_report_formats():
    """md / csv / json renderings of a result, including an errored suite entry."""
    fake = {"robot": "r", "algorithm": "aba", "constraints": None, "nv": 3,
            "implementations": {n: {"median_ns": 100.0 * (i + 1), "p10_ns": 90.0 * (i + 1),
                                    "p90_ns": 120.0 * (i + 1), "trials": 10}
                                for i, n in enumerate(("specialized", "generic", "pinocchio"))},
            "ratios": {"generic/specialized": 2.0, "pinocchio/specialized": 3.0},
            "verify": {"ok": True, "max_rel_diff": {"generic": 1e-16, "pinocchio": 2e-16}}, "skipped": {}}
    err = {"robot": "r", "algorithm": "crba", "error": "boom"}
    md = report.render([fake, err], "md")
    assert "| r | aba | 3 | 2 | 3 |" in md and "error: boom" in md
    csv_text = report.render([fake], "csv").splitlines()
    assert csv_text[0].split(",")[:6] == ["robot", "algorithm", "constraints", "nv", "generic/spec", "pin/spec"]
    assert json.loads(report.render([fake], "json"))[0]["ratios"]["pinocchio/specialized"] == 3.0



@pytest.mark.parametrize("model, algorithm", [("hopper", "nle"), ("hopper", "crba_solve"),
                                              ("ant", "crba_solve"), ("humanoid", "crba_solve")])
def test_mujoco_peer(model, algorithm):
    """MuJoCo's C library timed in the same program (issue 16 §4): its bias force and its
    CRBA + factorisation + solve agree with the specialised C on every state (free-joint
    models through the coordinate conversion), the calls are reported, and nle on a
    free-floating model is skipped with the reason."""
    pytest.importorskip("mujoco")
    pytest.importorskip("gymnasium")
    from gen.bench import mujoco_suite
    path = mujoco_suite.gymnasium_model(model)
    r = harness.benchmark(path, algorithm, against=("mujoco",), **SMALL)
    _check_result(r, ("specialized", "mujoco"))
    assert r["verify"]["max_rel_diff"]["mujoco"] <= 1e-12
    assert r["implementations"]["mujoco"]["calls"].startswith("mj_kinematics + mj_comPos")
    table = report.markdown_table([r]).splitlines()
    ratio = table[0].split(" | ").index("MuJoCo / spec")
    assert float(table[2].split(" | ")[ratio]) == pytest.approx(r["ratios"]["mujoco/specialized"], rel=1e-2)
    if model == "ant":
        r = harness.benchmark(path, "nle", against=("mujoco",), **SMALL)
        assert "world-linear" in r["skipped"]["mujoco"]


def test_mujoco_peer_only_where_it_applies():
    r = harness.benchmark("chain:3", "nle", against=("mujoco",), **SMALL)
    assert r["skipped"]["mujoco"] == "MuJoCo is timed on MJCF models only (the same file on both sides)"
    r = harness.benchmark("chain:3", "rnea", against=("mujoco",), **SMALL)
    assert r["skipped"]["mujoco"].startswith("MuJoCo has no counterpart of rnea")
    assert [n for n, row in ALGORITHMS.items() if row.mujoco_peer] == ["nle", "crba_solve"]


@pytest.mark.parametrize("robot, algorithm", [("ur5", "rnea"), ("ur5", "crba"), ("ur5", "nle"), ("solo12", "aba"),
                                              ("solo12", "rnea"), ("panda", "rnea"), ("go1", "aba")])
def test_adam_peer(robot, algorithm):
    """ADAM's CasADi functions (adam-robotics) as C in the same program (issue 15 §5): they
    agree with the specialised C on every state (fixed base through ADAM's joint block,
    the floating base through H(q) and its body-fixed velocities; ABA with an unactuated
    base), and their op counts are reported."""
    pytest.importorskip("adam")
    r = harness.benchmark(load_or_skip(robot), algorithm, against=("adam",), **SMALL)
    _check_result(r, ("specialized", "adam"))
    assert r["verify"]["max_rel_diff"]["adam"] <= 1e-12
    adam = r["implementations"]["adam"]
    assert adam["quantity"] == ALGORITHMS[algorithm].adam_peer and adam["ops"] > 0


def test_adam_reads_a_normalised_copy_of_the_urdf():
    """What urdf_parser_py refuses or misreads is rewritten, the dynamics data kept: go1's
    inertials without <origin>, icub's <texture> without a file, panda's locked mimic
    fingers (fixed at q = 0, as rbdgen locks them)."""
    import xml.etree.ElementTree as ET
    from gen.bench.peers import adam as adam_peer
    for name in ("go1", "icub", "panda"):
        model = load_or_skip(name)
        root = ET.fromstring(adam_peer.urdf_text(model))
        source = ET.parse(model.source).getroot()
        assert {c.tag for c in root} == {"link", "joint"}
        assert len(root.findall("link")) == len(source.findall("link"))
        assert all(i.find("origin") is not None and i.find("mass").get("value") is not None
                   for i in root.iter("inertial"))
        assert all(j.find("origin") is not None and j.find("mimic") is None for j in root.iter("joint"))
        moving = [j.get("name") for j in root.iter("joint") if j.get("type") != "fixed"]
        assert sorted(moving) == sorted(b.name for b in model.bodies if b.kind != "free")
    fingers = {j.get("name"): j.get("type") for j in root.iter("joint") if "finger" in j.get("name")}
    assert fingers == {"panda_finger_joint1": "fixed", "panda_finger_joint2": "fixed"}


def test_adam_peer_only_where_it_computes_the_same_quantity():
    pytest.importorskip("adam")
    r = harness.benchmark(load_or_skip("ur5"), "aba", against=("adam",), **SMALL)
    assert r["skipped"]["adam"].startswith("ADAM's model always floats its base")
    r = harness.benchmark("chain:3", "rnea", against=("adam",), **SMALL)
    assert r["skipped"]["adam"] == "ADAM is timed on URDF models only (the same file on both sides)"
    r = harness.benchmark(load_or_skip("ur5"), "ltdl", against=("adam",), **SMALL)
    assert r["skipped"]["adam"].startswith("ADAM has no counterpart of ltdl")


def test_issue15_targets_from_small_measurements(tmp_path):
    """The suite's issue 15 section from real (small) measurements of each part: one
    verdict per target, each consistent with the numbers it shows, and every part's table
    in the report."""
    from gen.bench import batch, choice, compile_time, emission_order, report, targets

    doc = {"seconds": {"batch": 1.0},
           "batch": [batch.batch_benchmark("ur5", "rnea", lanes=(4,), n_states=16, rounds=5, per_sample=16,
                                           warmup=16, pinocchio=False)],
           "order": emission_order.run((("ur5", "rnea"),)),
           "compile": compile_time.run((("ur5", "rnea", None),)),
           "choice": targets.choice_times({"ur5_3d_tool0": ("ur5", "3D:tool0")})}
    assert doc["order"]["rows"][0]["robot"] == "ur5"
    got = targets.verdicts(doc, [{"robot": "ur5", "algorithm": "rnea", "ratios": {"adam/specialized": 1.5},
                                  "skipped": {}},
                                 {"robot": "g1", "algorithm": "crba", "ratios": {},
                                  "skipped": {"adam": "ADAM failed on g1: parse error"}}])
    by = {}
    for v in got:
        by.setdefault(v["section"], []).append(v)
    assert set(by) == {"§1", "§3", "§4", "§5"}          # §2 is judged on talos only
    speed, lanes = by["§1"]
    r = doc["batch"][0]
    assert speed["met"] == (r["ratios"]["scalar/batch4"] >= targets.BATCH_SPEEDUP)
    assert lanes["met"] and max(v["max_rel_diff"] for v in r["verify"].values()) <= targets.LANE_TOL
    row = doc["compile"]["rows"][0]
    assert by["§3"][0]["met"] == (row["split"]["rss_mb"] <= compile_time.MAX_RSS_MB) and "same C" in \
        by["§3"][0]["measured"]
    # the choice on ur5 3D: both automatic choices, each with the fastest measured candidate
    assert [v["target"].split(":")[0] for v in by["§4"]] == ["ur5_3d_tool0 -a auto", "ur5_3d_tool0 -a auto_osim"]
    timed = {x["algorithm"]: x["implementations"]["specialized"]["median_ns"] for x in doc["choice"]["results"]}
    for x in doc["choice"]["results"]:            # a choice's candidates were timed in one program
        assert "error" not in x and x["algorithm"] in x["together"] and timed[x["algorithm"]] > 0
        assert x["together"] == [y["algorithm"] for y in doc["choice"]["results"] if y["auto"] == x["auto"]]
    assert {x["auto"] for x in doc["choice"]["results"]} == {"auto", "auto_osim"}
    for v, auto in zip(by["§4"], ("auto", "auto_osim")):
        summary = [x for x in choice.rows(None, [doc["choice"]["results"]], doc["choice"]["sets"])
                   if x["auto"] == auto and x["status"] == "summary"][0]
        assert summary["fastest"] in timed and v["met"] == (summary["ratio"] <= choice.WITHIN)
    assert by["§5"] == [{"section": "§5", "target": "ADAM timed wherever it computes the same quantity",
                         "measured": "1 robot x algorithm timed; failed: g1 crba", "met": False}]
    md = targets.summary(doc) + targets.details(doc)
    assert md.count("| §") == 1 + len(got) - 1 and "### §1 Batched kernels" in md   # header + rows but §5
    assert "### Instruction order" in md and "### Compile time" in md and "### §4 Automatic choice" in md
    assert targets.limits(doc) == []                   # everything judged here is met
    # a target not met gets its limit, in the run's numbers
    import copy
    worse = copy.deepcopy(doc)
    for v in worse["batch"][0]["verify"].values():
        v["max_rel_diff"] = 1e-12
    worse["order"]["rows"][0]["robot"] = "talos"      # judged as talos: ur5 rnea keeps the tape, ~1x
    notes = targets.limits(worse)
    assert len(notes) == 2 and notes[0].startswith("§1 lanes of ur5 rnea (1.0e-12 from the scalar kernel)")
    row = worse["order"]["rows"][0]
    assert notes[1].startswith(f"§2 emission order (rnea: {row['live']['tape']:.0f} -> "
                               f"{row['live']['scheduled']:.0f} live values")
    assert "What limits the targets not met" in targets.details(worse)
    # the suite report carries both
    s = {"date": "2026-01-01", "machine": doc["order"]["machine"] | {"cc": "gcc", "cxx": "g++", "os": "linux",
                                                                     "flags": "-O3", "python": "3"},
         "method": {"n_states": 8, "seed": 0, "warmup": 1, "rounds": 1, "batch": 1}, "shim": None,
         "results": [], "targets": doc}
    s["machine"].setdefault("versions", {"rbdgen": "0", "pinocchio": "0", "casadi": "0", "numpy": "0"})
    text = report.suite_markdown(s, (targets.summary(doc), targets.details(doc)))
    assert text.index("## Issue 15 targets") < text.index("## All results") < text.index("## Issue 15 measurements")


def test_scaling_study_verdicts(tmp_path):
    """§3's scaling rows read the committed study: a point up to 102 bodies without a time,
    or an O(n) algorithm's point to 300 without one, is not met; super-linear ones are
    named, not required."""
    from gen.bench import targets

    def case(n, algorithm, us, family="chain"):
        return {"family": family, "n": n, "algorithm": algorithm, "iterations": 1, "median_us": us}

    def fit(algorithm, exponent, family="chain"):
        return {"family": family, "algorithm": algorithm, "iterations": 1, "ops_exponent": exponent}

    for sub, cases, fits in (("scaling", [case(10, "prox_pv", 1.0), case(102, "prox_pv", None)], []),
                             ("scaling-300", [case(300, "constrained_aba", 9.0), case(300, "prox_pv", None, "tree")],
                              [fit("constrained_aba", 1.01), fit("prox_pv", 2.4, "tree")])):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "scaling.json").write_text(json.dumps({"cases": cases, "fits": fits}))
    small, large = targets.scaling_verdicts(tmp_path)
    assert small[3] is False and small[2].startswith("1 of 2 points")
    assert large[3] is True and large[2].startswith("1 of 1 points") and "tree prox_pv K=1 (ops exponent 2.40)" in large[2]


def test_targets_option_is_checked():
    from gen.bench import cli
    from gen.errors import RbdgenError
    assert cli._targets("all") == ("batch", "order", "compile", "choice") and cli._targets("none") == ()
    assert cli._targets("choice, batch") == ("choice", "batch")
    with pytest.raises(RbdgenError, match="--targets: unknown part 'speed'"):
        cli._targets("batch,speed")
