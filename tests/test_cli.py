"""The ``rbdgen`` command line (gen/cli.py): every command runs and prints its table in
each format; user errors print exactly one line ``rbdgen: error: ...`` and exit 2."""
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import HAVE_PIN, SOLVERS, load_or_skip, needs_pin

import gen
from gen.cli import main, render_table

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc, err, *needles):
    lines = err.strip().splitlines()
    assert rc == 2, f"exit status {rc}, stderr: {err}"
    assert len(lines) == 1 and lines[0].startswith("rbdgen: error: "), f"not one error line: {err!r}"
    for n in needles:
        assert n in lines[0]


# --- tables ----------------------------------------------------------------------------------

def test_render_table_formats():
    rows = [{"a": "x", "b": 1.5e-16, "c": None}, {"a": "yy", "b": 2.0, "c": 3}]
    md = render_table(rows, ["a", "b", "c"], "md").splitlines()
    assert md[0].startswith("| a ") and set(md[1]) <= set("|-:") and len(md) == 4
    assert "1.5e-16" in md[2] and "n/a" in md[2]
    assert list(csv.reader(io.StringIO(render_table(rows, ["a", "b", "c"], "csv"))))[2] == ["yy", "2.0", "3"]
    assert json.loads(render_table(rows, ["a", "b", "c"], "json"))[0] == {"a": "x", "b": 1.5e-16, "c": None}


# --- commands --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["md", "csv", "json"])
def test_robots(capsys, fmt):
    rc, out, _ = run(capsys, "robots", "--format", fmt)
    assert rc == 0
    for name in ("humanoid30", "chain:N", "bintree:N", "fourbar", "talos", "ur5"):
        assert name in out
    if fmt == "json":
        rows = json.loads(out)
        assert {"robot", "kind", "nq", "nv", "description"} <= set(rows[0])


def test_robots_frames(capsys):
    rc, out, _ = run(capsys, "robots", "--frames", "humanoid30", "--format", "json")
    assert rc == 0
    frames = {r["frame"]: r for r in json.loads(out)}
    assert frames["left_foot"]["body"] == "left_leg6"


def test_opcount(capsys):
    rc, out, _ = run(capsys, "opcount", "humanoid30", "--algorithm", "rnea", "--format", "json")
    assert rc == 0
    assert "rnea" in out and json.loads(out)
    rc, out, _ = run(capsys, "opcount", "chain:4", "--algorithm", "all", "--format", "csv")
    assert rc == 0 and "aba" in out and "crba" in out


def test_build(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RBDGEN_CACHE", str(tmp_path / "cache"))       # a cold cache: trace and compile
    rc, out, err = run(capsys, "build", "chain:3", "--algorithm", "aba", "--out", str(tmp_path / "k"), "--format", "json")
    assert rc == 0, err
    (row,) = json.loads(out)
    assert row["symbol"] == "rbd_chain3_aba" and row["folder"] == str(tmp_path / "k")
    assert (tmp_path / "k" / "rbd_chain3_aba.h").exists() and (tmp_path / "k" / "manifest.json").exists()
    assert "compile" in err and "trace" in err          # progress with timings on stderr
    rc, out, err = run(capsys, "build", "chain:3", "-a", "aba", "-o", str(tmp_path / "k2"))
    assert rc == 0 and "trace" not in err and len([ln for ln in err.splitlines() if "cached" in ln]) == 1, err
    rc, out, err = run(capsys, "build", "chain:3", "-a", "aba", "-o", str(tmp_path / "k"), "--quiet")
    assert rc == 0 and err == ""


def test_build_lanes_and_no_lanes(capsys, tmp_path):
    load_or_skip("solo12")
    for flag, lanes in (([], True), (["--no-lanes"], False)):
        out_dir = tmp_path / ("lanes" if lanes else "doubles")
        rc, _, err = run(capsys, "build", "solo12", "-a", "rnea", "-o", str(out_dir), "--quiet", *flag)
        assert rc == 0, err
        manifest = json.loads((out_dir / "manifest.json").read_text())
        assert ("lanes" in manifest["codegen"]) == lanes
        assert ("rbdgen_v4" in (out_dir / "rbd_solo12_rnea_kernel.c").read_text()) == lanes
        header = (out_dir / "rbd_solo12_rnea.h").read_text()
        assert ("GCC vector extensions (gcc or clang: isomorphic limbs as lanes" in header) == lanes
        assert ("plain C99" in header) != lanes


def test_build_early_exit_driver(capsys, tmp_path):
    load_or_skip("solo12")
    spec = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
    rc, out, err = run(capsys, "build", "solo12", "-a", "constrained_aba", "-c", spec, "--tol", "1e-10",
                       "--max-iter", "50", "--out", str(tmp_path / "k"), "--format", "json")
    assert rc == 0, err
    (row,) = json.loads(out)
    man = json.loads((tmp_path / "k" / "manifest.json").read_text())
    assert (man["iterations"], man["tolerance"], man["max_iter"]) == (None, 1e-10, 50)
    assert row["ops"] == man["functions"][0]["opcount"]["total"] and "early-exit driver" in err
    rc, out, err = run(capsys, "build", "solo12", "-a", "prox_ltl", "-c", spec, "--iterations", "4",
                       "--out", str(tmp_path / "fixed"), "--quiet")
    assert rc == 0, err
    assert json.loads((tmp_path / "fixed" / "manifest.json").read_text())["iterations"] == 4


def test_verify(capsys):
    rc, out, err = run(capsys, "verify", "chain:4", "--algorithm", "rnea,crba,ltdl", "--samples", "2", "--format", "json")
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["algorithm"] for r in rows] == ["rnea", "crba", "ltdl"]
    for r in rows:
        assert r["status"] == "ok" and r["err_c_numpy"] < 1e-12
        try:
            import pinocchio  # noqa: F401
        except ImportError:
            continue
        assert r["err_c_pinocchio"] is not None and r["err_c_pinocchio"] < 1e-9


@pytest.mark.slow
def test_demo(capsys, tmp_path):
    rc, out, err = run(capsys, "demo", "--out", str(tmp_path / "demo"), "--samples", "2", "--format", "json")
    assert rc == 0, err
    rows = {r["algorithm"]: r for r in json.loads(out)}
    assert {"rnea", "crba", "aba"} <= set(rows)
    for name, r in rows.items():
        assert r["ops"] > 0 and Path(r["folder"]).is_dir(), name
    assert "demo done in" in err
    if HAVE_PIN and "prox_ltl" in rows:          # the constrained solvers have a Pinocchio column
        for name in SOLVERS:
            assert rows[name]["err_c_pinocchio"] is not None, name


# --- constrained verification against Pinocchio -----------------------------------------------

FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
DUAL_PIN_TOL = 1e-9      # prox_ltl, prox_pv: the same iterate as Pinocchio (--tol default)
ALM_PIN_TOL = 1e-6       # prox_ltls, constrained_aba, impulse: the 1/mu rounding floor (gen/cli.py PIN_TOL_FLOOR)


def needs_robot(name):
    load_or_skip(name)


def verify_rows(capsys, *argv):
    rc, out, err = run(capsys, "verify", *argv, "--samples", "3", "--format", "json", "--quiet")
    assert rc == 0, err
    return {r["algorithm"]: r for r in json.loads(out)}


@needs_pin
@pytest.mark.parametrize("gains", [[], ["--baumgarte", "10,2"]], ids=["no-gains", "baumgarte"])
def test_verify_constrained_solvers_against_pinocchio(capsys, gains):
    needs_robot("solo12")
    rows = verify_rows(capsys, "solo12", "-a", ",".join(SOLVERS), "-c", FEET, *gains)
    assert list(rows) == list(SOLVERS)
    for name, r in rows.items():
        tol = DUAL_PIN_TOL if name in ("prox_ltl", "prox_pv") else ALM_PIN_TOL
        for col in ("err_c_pinocchio", "err_numpy_pinocchio"):
            assert r[col] is not None and r[col] < tol, f"{name} {gains}: {col} = {r[col]}"
        assert r["status"] == "ok"


@needs_pin
def test_verify_velocity_constraints_with_kv(capsys):
    needs_robot("solo12")
    rows = verify_rows(capsys, "solo12", "-a", "prox_ltl,constrained_aba", "-c",
                       "3Dv:FL_FOOT,3D:FR_FOOT,3Dv:HL_FOOT,3D:HR_FOOT", "--kv", "5", "--baumgarte", "10,2")
    assert rows["prox_ltl"]["err_c_pinocchio"] < DUAL_PIN_TOL
    assert rows["constrained_aba"]["err_c_pinocchio"] < ALM_PIN_TOL
    assert all(r["status"] == "ok" for r in rows.values())


@needs_pin
def test_verify_impulse_and_delassus(capsys):
    """The impact map is compared converged (Pinocchio's impulseDynamics is one damped
    solve, not the kernel's K iterates): NumPy column only.  Delassus: exact."""
    needs_robot("ur5")
    rows = verify_rows(capsys, "ur5", "-a", "impulse,delassus,kkt_delassus,caba_osim", "-c", "6D:tool0")
    imp = rows["impulse"]
    assert imp["err_c_pinocchio"] is None and imp["err_numpy_pinocchio"] < ALM_PIN_TOL
    for name in ("delassus", "kkt_delassus"):
        assert rows[name]["err_c_pinocchio"] < 1e-12 and rows[name]["err_numpy_pinocchio"] < 1e-12, name
    # the damped inverse against Pinocchio's Delassus matrix + rho inverted densely, within
    # cABA-OSIM's augmented floor (printed as its tolerance)
    osim = rows["caba_osim"]
    assert osim["err_c_pinocchio"] is not None and osim["err_c_pinocchio"] <= osim["rtol_pinocchio"]
    assert all(r["status"] == "ok" for r in rows.values())


@needs_pin
def test_verify_impulse_derivatives_near_a_singular_pose(capsys):
    """ur5 6D:tool0 reaches Delassus eigenvalues of 2e-4 on verify's default states, where
    Pinocchio's impulse derivatives at damping 1e-12 were 3.9e-7 off the exact ones (they
    move linearly with the damping): the reference's damping is EXACT_DERIVATIVE_MU."""
    needs_robot("ur5")
    r = verify_rows(capsys, "ur5", "-a", "impulse_derivatives", "-c", "6D:tool0")["impulse_derivatives"]
    assert r["err_numpy_pinocchio"] < 1e-9 and r["err_c_numpy"] < 1e-9 and r["status"] == "ok"


@needs_pin
def test_verify_redundant_sets_scale_the_tolerance_with_the_condition_number(capsys):
    """tool0 constrained twice: J M^-1 J^T is singular, the damped solve's condition number
    is ~lambda_max / mu (6e5 here; C vs NumPy measured 4e-10 and 9e-10); the tolerance is
    CONDITION_SLACK eps kappa, and Pinocchio's impact derivatives (an exact solve) are no
    reference there."""
    from gen.algorithms.registry import CONDITION_SLACK
    needs_robot("ur5")
    rows = verify_rows(capsys, "ur5", "-a", "constrained_derivatives,impulse_derivatives", "-c",
                       "3D:tool0,3D:tool0")
    for name, r in rows.items():
        assert r["kappa"] > 1e5, name
        assert r["rtol"] == pytest.approx(max(1e-9, CONDITION_SLACK * np.finfo(float).eps * r["kappa"])), name
        assert r["status"] == "ok", name
    assert rows["constrained_derivatives"]["err_c_pinocchio"] is not None
    assert rows["impulse_derivatives"]["err_numpy_pinocchio"] is None


def test_the_ad_route_is_held_to_its_value_algorithms_floor():
    """A kernel on the AD route is the Jacobian of its value algorithm's graph and rounds
    as that algorithm does: constrained_derivatives' is constrained_aba's (an augmented
    Lagrangian: eps kappa(M + J^T Rho^-1 J)); NumPy, the analytical row, keeps the row's own
    floor (CONDITION_SLACK eps kappa of the damped Delassus matrix)."""
    from gen.algorithms.registry import CONDITION_SLACK
    from gen.verify import EPS, tolerances

    kappa = {"augmented": 1e10, "delassus": 1e3}
    analytical = tolerances("constrained_derivatives", 1e-9, kappa)
    ad = tolerances("constrained_derivatives", 1e-9, kappa, route="ad")
    assert analytical == {"c_numpy": 1e-9, "c_pinocchio": 1e-9, "numpy_pinocchio": 1e-9, "c_mujoco": 1e-9}
    assert ad == {"c_numpy": EPS * 1e10, "c_pinocchio": EPS * 1e10, "numpy_pinocchio": 1e-9, "c_mujoco": EPS * 1e10}
    bad = tolerances("constrained_derivatives", 1e-9, {"delassus": 1e8})
    assert bad["c_numpy"] == pytest.approx(CONDITION_SLACK * EPS * 1e8)
    assert tolerances("rnea_derivatives", 1e-9, route="ad") == tolerances("rnea_derivatives", 1e-9)


def test_floors_are_derived_from_the_factorised_matrix():
    """The augmented-Lagrangian rows' floor is eps |M + J^T Rho^-1 J| |M^-1| at the state,
    computed independently here; an exact row has none; the note names the matrix only
    where the floor exceeds rtol."""
    from gen.constraint_spec import parse_constraints
    from gen.robots import load_robot
    from gen.verify import EPS, floor_at, kappas, note

    model = load_robot("humanoid30")
    cset = parse_constraints(model, "6D:left_foot,6D:right_foot")
    q = model.random_q(np.random.default_rng(5))
    M = gen.run(model, "crba", q)
    J = cset.jacobian(model, q.reshape(-1, 1), be=gen.backend.NUMPY)
    kappa = np.linalg.norm(M + J.T @ J / 1e-6, 2) * np.linalg.norm(np.linalg.inv(M), 2)
    assert floor_at("prox_ltls", model, cset, q, 1e-6) == pytest.approx(EPS * kappa, rel=1e-6)
    assert floor_at("prox_ltl", model, cset, q, 1e-6) == 0.0
    k = kappas("constrained_aba", model, cset, q, {})
    assert k["augmented"] == pytest.approx(kappa, rel=1e-6)
    assert note("constrained_aba", 1e-9, k) == "eps kappa(|M + J^T Rho^-1 J| |M^-1|) floor"
    assert note("constrained_aba", 1.0, k) == ""


@needs_pin
def test_verify_the_ad_route_of_the_constrained_derivatives(capsys):
    """solo12 four feet: the AD route (the Jacobian of constrained_aba) is 1.3e-8 from the
    analytical kernel and Pinocchio, the same at K = 3 and 5 (constrained_aba's rounding, not
    convergence): ok at constrained_aba's floor.  ur5 6D:tool0 near singular poses (kappa 1e6):
    the K = 3 iterate it differentiates is not converged (4e-5 off; 6e-10 at K = 30): FAIL,
    with the hint to raise --iterations."""
    needs_robot("solo12")
    needs_robot("ur5")
    r = verify_rows(capsys, "solo12", "-a", "constrained_derivatives", "-c", FEET, "--route", "ad")
    r = r["constrained_derivatives"]
    assert 1e-9 < r["err_c_numpy"] <= r["rtol"] and r["err_numpy_pinocchio"] < 1e-12 and r["status"] == "ok"
    rc, _, err = run(capsys, "verify", "ur5", "-a", "constrained_derivatives", "-c", "6D:tool0", "--route", "ad",
                     "--quiet")
    assert rc == 1 and "the AD route differentiates the K-th proximal iterate" in err and "--iterations" in err


def test_the_condition_number_is_the_damped_delassus_one():
    from gen.verify import damped_condition
    from gen.constraint_spec import parse_constraints
    from gen.robots import load_robot

    model = load_robot("humanoid30")
    cset = parse_constraints(model, "6D:left_foot")
    q = model.random_q(np.random.default_rng(3))
    lam = np.linalg.eigvalsh(gen.run(model, "delassus", q, constraints=cset))
    assert damped_condition(model, cset, q, 1e-6) == pytest.approx((lam[-1] + 1e-6) / (lam[0] + 1e-6))
    weighted = parse_constraints(model, "6D:left_foot", weights=[2.0])     # Rho = mu / w
    assert damped_condition(model, weighted, q, 1e-6) == pytest.approx((lam[-1] + 5e-7) / (lam[0] + 5e-7))
    twice = parse_constraints(model, "6D:left_foot,6D:left_foot")
    assert damped_condition(model, twice, q, 1e-6) > 1e5 * damped_condition(model, cset, q, 1e-6)


@needs_pin
def test_verify_weights_skip_the_pinocchio_solvers(capsys):
    needs_robot("solo12")
    rows = verify_rows(capsys, "solo12", "-a", "prox_ltl,delassus", "-c", "3D:FL_FOOT,3D:FR_FOOT", "--weights", "1,2")
    assert rows["prox_ltl"]["err_c_pinocchio"] is None, "Pinocchio has no per-constraint weights"
    assert rows["delassus"]["err_c_pinocchio"] < 1e-12


def test_constraint_options_make_one_set():
    from gen.cli import constraint_set, parser
    from gen.robots import load_robot

    model = load_robot("fourbar")
    args = parser().parse_args(["verify", "fourbar", "-c", "3D:tip~anchor,3Dv:tip", "--baumgarte", "10,2",
                                "--kv", "5", "--weights", "1,0.5"])
    cset = constraint_set(model, args)
    assert (cset.Kp, cset.Kd, cset.Kv) == (10.0, 2.0, 5.0)
    assert [c.weight for c in cset.constraints] == [1.0, 0.5] and cset.gains(1) == (0.0, 5.0)
    assert constraint_set(model, parser().parse_args(["verify", "fourbar"])) is None


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "gen.cli", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0
    for cmd in ("robots", "opcount", "build", "verify", "demo"):
        assert cmd in out.stdout
    for cmd in ("robots", "opcount", "build", "verify", "demo"):
        sub = subprocess.run([sys.executable, "-m", "gen.cli", cmd, "--help"], cwd=ROOT, capture_output=True, text=True)
        assert sub.returncode == 0 and "--format" in sub.stdout, cmd


# --- user errors: one line, exit 2 -----------------------------------------------------------

def test_bad_robot(capsys):
    assert_user_error(*run(capsys, "opcount", "no_such_robot", "-a", "rnea")[::2], "unknown robot 'no_such_robot'")


def test_bad_algorithm(capsys):
    assert_user_error(*run(capsys, "verify", "chain:3", "-a", "nope")[::2], "unknown algorithm 'nope'")


def test_bad_frame(capsys):
    rc, _, err = run(capsys, "robots", "--frames", "nope")
    assert_user_error(rc, err, "unknown robot")
    rc, _, err = run(capsys, "opcount", "humanoid30", "-a", "prox_ltl", "-c", "6D:no_such_frame")
    assert_user_error(rc, err, "no_such_frame")


def test_bad_arguments(capsys):
    assert_user_error(*run(capsys, "robots", "--format", "xml")[::2], "xml")
    assert_user_error(*run(capsys, "frobnicate")[::2])
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba")[::2], "--out")
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba", "--iterations", "3", "-o", "x")[::2], "iterations")
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba", "--tol", "1e-9", "-o", "x")[::2], "--tol")
    assert_user_error(*run(capsys, "build", "fourbar", "-a", "prox_ltl", "-c", "3D:tip~anchor", "--max-iter", "9",
                           "-o", "x")[::2], "--max-iter")
    assert_user_error(*run(capsys, "verify", "chain:3", "--samples", "0")[::2], "samples")


@pytest.mark.parametrize("cmd", ["opcount", "verify"])
@pytest.mark.parametrize("options, needle", [
    (["--baumgarte", "1"], "KP,KD"),
    (["--baumgarte=-1,2"], "Kp=-1.0"),
    (["--baumgarte", "nan,1"], "Kp=nan"),
    (["--baumgarte", "1,inf"], "Kd=inf"),
    (["--kv", "-3"], "Kv=-3.0"),
    (["--kv", "nan"], "Kv=nan"),
    (["--weights", "1,2,3"], "3 constraint weights given for 2 constraints"),
    (["--weights", "1,0"], "weight 0.0"),
    (["--weights", "1,nan"], "weight nan"),
    (["--weights", "x,1"], "--weights"),
])
def test_bad_constraint_options(capsys, cmd, options, needle):
    assert_user_error(*run(capsys, cmd, "fourbar", "-a", "prox_ltl", "-c", "3D:tip~anchor,3D:coupler",
                           *options)[::2], needle)


@pytest.mark.parametrize("options", [["--kv", "3"], ["--baumgarte", "1,1"], ["--weights", "1"]])
def test_constraint_options_need_constraints(capsys, options):
    assert_user_error(*run(capsys, "build", "chain:3", "-a", "aba", "-o", "x", *options)[::2],
                      options[0], "without --constraints")


def test_user_error_in_a_subprocess_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "gen.cli", "verify", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "Traceback" not in out.stderr
    assert out.stderr.startswith("rbdgen: error: unknown robot 'nope'")


@pytest.mark.parametrize("args, words", [
    (["aba", "--mu", "1e-3"], "aba has no option --mu"),
    (["prox_ltl", "-c", "3D:FL_FOOT", "--restitution", "0.5"], "prox_ltl has no option --restitution"),
    (["caba_osim", "-c", "3D:FL_FOOT", "--iterations", "3"], "caba_osim has no option --iterations"),
])
def test_build_rejects_options_the_algorithm_does_not_take(args, words, tmp_path, capsys):
    assert main(["build", "solo12", "-a", *args, "--out", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_build_passes_mu_and_restitution_into_the_kernel(tmp_path, capsys):
    import json

    assert main(["build", "solo12", "-a", "impulse", "-c", "3D:FL_FOOT", "--mu", "1e-4", "--restitution", "0.5",
                 "--out", str(tmp_path / "imp"), "-q"]) == 0
    man = json.loads((tmp_path / "imp" / "manifest.json").read_text())
    assert man["options"]["mu"] == 1e-4 and man["options"]["restitution"] == 0.5


def test_verify_an_mjcf_model_against_mujoco(capsys):
    """MuJoCo is the reference for MJCF models as Pinocchio is for URDF: ``verify`` has an
    ``err_c_mujoco`` column (gen.mujocoref: mj_rne, mj_fullM with passive terms zeroed)."""
    pytest.importorskip("mujoco")
    gym = pytest.importorskip("gymnasium")
    path = Path(gym.__file__).parent / "envs" / "mujoco" / "assets" / "hopper.xml"
    rows = verify_rows(capsys, str(path), "-a", "rnea,crba")
    for name, r in rows.items():
        assert r["err_c_mujoco"] is not None and r["err_c_mujoco"] < 1e-12 and r["status"] == "ok", name


def test_all_leaves_out_the_rows_that_do_not_apply(capsys):
    """-a all on a fixed-base arm with a constraint leaves caba_osimf out (eq. 41 splits at a
    floating base) with a note, instead of failing after building the others."""
    rc, out, err = run(capsys, "opcount", "chain:4", "-a", "all", "-c", "3D:link4", "--format", "csv")
    assert rc == 0, err
    assert "leaves out caba_osimf" in err and "caba_osimf" not in out and "caba_osim" in out
