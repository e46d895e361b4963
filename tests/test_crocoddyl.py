"""gen.crocoddyl's action models against crocoddyl's built-in models of the same names, on the
problems of examples/crocoddyl/problems.py (short horizons): one node's calc / calcDiff
(xout, Fx, Fu, cost and its derivatives, contact forces and their derivatives),
quasiStatic, and whole FDDP solves (same iterations, cost and trajectories), each for both
implementations (the fixture ``impl``: the Python model, and the compiled model where a C++
compiler and the wheel's headers are present); the public classes' choice between them;
bad arguments refused in one line, before anything reaches C++."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

#: crocoddyl's wheel links libgomp, which reads these when it loads (at the import below):
#: with OpenMP's default spin-waiting and thread count, solves on a loaded machine are
#: erratic and this worker's spinning threads slow the others (examples/crocoddyl/README.md)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OMP_NUM_THREADS", "1")

crocoddyl = pytest.importorskip("crocoddyl", reason="crocoddyl is not installed: these tests run in their own venv "
                                                   "(pip install -e '.[test-crocoddyl]', README 'Quick start')")
pin = pytest.importorskip("pinocchio")
pytest.importorskip("example_robot_data", reason="the problems load robots from example-robot-data")

from gen.errors import RbdgenError  # noqa: E402
import gen.crocoddyl as gc  # noqa: E402
import gen.crocoddyl_cpp as gcpp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "crocoddyl"
_spec = importlib.util.spec_from_file_location("croc_problems", EXAMPLES / "problems.py")
P = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P)

#: one node, rbdgen vs Pinocchio's ABA / KKT and their derivatives, relative to the largest
#: entry: both are exact algorithms in double precision (measured 2e-15 .. 4e-14 relative;
#: with eps = 0 rbdgen's three proximal iterates at mu = 1e-6 are (mu kappa)^3 ~ 1e-15 away)
NODE_RTOL = 1e-10
#: whole solves: cost to 1e-9 relative and trajectories to 1e-7 (issue 31's targets; measured
#: 1e-15 and 4e-12: FDDP amplifies node differences over its iterations)
COST_RTOL, TRAJ_ATOL = 1e-9, 1e-7


@pytest.fixture(params=["python", "compiled"])
def impl(request):
    """The implementation under test: ``free`` and ``contact`` take crocoddyl's constructor
    arguments (as the public classes do)."""
    if request.param == "python":
        return SimpleNamespace(name="python", free=gc.PythonDifferentialActionModelFreeFwdDynamics,
                               contact=gc.PythonDifferentialActionModelContactFwdDynamics)
    why = gcpp.unavailable()
    if why:
        pytest.skip(f"the compiled models cannot be built here: {why}")
    return SimpleNamespace(name="compiled", free=gc.compiled_free_fwd_dynamics,
                           contact=gc.compiled_contact_fwd_dynamics)


def close(a, b, rtol=NODE_RTOL) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max(initial=0.0)) <= rtol * max(1.0, float(np.abs(b).max(initial=0.0)))


def node_pair(problem_b, problem_r, k=0):
    mb, mr = problem_b.runningModels[k].differential, problem_r.runningModels[k].differential
    return mb, mb.createData(), mr, mr.createData()


def random_point(model, x0, seed):
    rng = np.random.default_rng(seed)
    x = x0.copy()
    nq, nv = model.state.nq, model.state.nv
    x[nq:] = 0.3 * rng.normal(size=nv)
    x[nq - nv + 6 if nq > nv else 0:nq] += 0.1 * rng.normal(size=nv - 6 if nq > nv else nv)
    return x, rng.normal(size=model.nu)


def compare_node(mb, db, mr, dr, x, u, forces=()):
    for m, d in ((mb, db), (mr, dr)):
        m.calc(d, x, u)
        m.calcDiff(d, x, u)
    assert close(dr.xout, db.xout), np.abs(dr.xout - db.xout).max()
    assert close(dr.Fx, db.Fx), np.abs(dr.Fx - db.Fx).max()
    assert close(dr.Fu, db.Fu), np.abs(dr.Fu - db.Fu).max()
    assert close(dr.cost, db.cost)
    for name in ("Lx", "Lu", "Lxx", "Luu", "Lxu"):
        assert close(getattr(dr, name), getattr(db, name)), name
    cb = db.multibody.contacts.contacts.todict() if forces else {}
    cr = dr.multibody.contacts.contacts.todict() if forces else {}
    for name in forces:
        assert close(cr[name].f.vector, cb[name].f.vector), name
        if mr.enable_force:
            assert close(cr[name].df_dx, cb[name].df_dx), name
            assert close(cr[name].df_du, cb[name].df_du), name
    assert close(mr.quasiStatic(dr, x), mb.quasiStatic(db, x))


def test_panda_free_node(impl):
    pb, x0 = P.panda_reaching(crocoddyl.DifferentialActionModelFreeFwdDynamics, T=3)
    pr, _ = P.panda_reaching(impl.free, T=3)
    for k, seed in ((0, 0), (2, 1)):
        mb, db, mr, dr = node_pair(pb, pr, k)
        compare_node(mb, db, mr, dr, *random_point(mb, x0, seed))
    tb, tr = pb.terminalModel.differential, pr.terminalModel.differential
    db, dr = tb.createData(), tr.createData()
    x, _ = random_point(tb, x0, 2)
    for m, d in ((tb, db), (tr, dr)):
        m.calc(d, x)
        m.calcDiff(d, x)
    assert close(dr.cost, db.cost) and close(dr.Lx, db.Lx) and close(dr.Lxx, db.Lxx)


FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


@pytest.mark.parametrize("inv_damping, enable_force", [(0.0, True), (1e-3, True)])
def test_solo12_four_feet_node(impl, inv_damping, enable_force):
    """Four 3D contacts with crocoddyl's Baumgarte Kd = 50; with inv_damping > 0 the damped
    KKT (rbdgen iterations = 1, mu = eps)."""
    kw = dict(T=2, inv_damping=inv_damping, enable_force=enable_force)
    pb, x0 = P.solo12_base(crocoddyl.DifferentialActionModelContactFwdDynamics, **kw)
    pr, _ = P.solo12_base(impl.contact, **kw)
    mb, db, mr, dr = node_pair(pb, pr)
    for seed in range(2):
        compare_node(mb, db, mr, dr, *random_point(mb, x0, seed), forces=FEET)


def test_talos_6d_soles_node(impl):
    """talos on its two 6D soles (Kd = 50), with the contact forces and their derivatives,
    and a contact-force cost, which reads the forces rbdgen writes into the contact data."""
    kw = dict(T=2, enable_force=True)
    pb, x0 = P.talos_standing(crocoddyl.DifferentialActionModelContactFwdDynamics, **kw)
    pr, _ = P.talos_standing(impl.contact, **kw)
    for p in (pb, pr):
        d = p.runningModels[0].differential
        res = crocoddyl.ResidualModelContactForce(d.state, d.state.pinocchio.getFrameId("left_sole_link"),
                                                  pin.Force.Zero(), 6, d.nu)
        d.costs.addCost("force", crocoddyl.CostModelResidual(d.state, res), 1e-3)
    mb, db, mr, dr = node_pair(pb, pr)
    compare_node(mb, db, mr, dr, *random_point(mb, x0, 3), forces=["left_sole_link", "right_sole_link"])


class DerivedFloatingBase(crocoddyl.ActuationModelFloatingBase):
    """crocoddyl's floating-base actuation under another type: gen.crocoddyl knows the
    constant Jacobians of crocoddyl's own full and floating-base actuations only, so a model
    on this one takes the general route (actuation.calcDiff, its Jacobians composed with the
    kernel's d/dtau)."""


def test_solo12_node_with_an_unknown_actuation_type(impl):
    """One solo12 node with enable_force on DerivedFloatingBase agrees with the built-in
    model as on crocoddyl's actuation (the Python model's general route gives the same
    values)."""
    pm, q0 = P.solo12_model()
    state = crocoddyl.StateMultibody(pm)
    actuation = DerivedFloatingBase(state)
    x0 = np.concatenate([q0, np.zeros(state.nv)])
    models = []
    for cls in (crocoddyl.DifferentialActionModelContactFwdDynamics, impl.contact):
        contacts = P._contact_models(state, actuation, FEET, "3D", (0.0, 50.0), q0, pm)
        costs = P._state_costs(state, actuation.nu, x0, [1.0] * (2 * state.nv))
        models.append(cls(state, actuation, contacts, costs, 0.0, True))
    mb, mr = models
    if impl.name == "python":
        assert mr.actuated is None
    compare_node(mb, mb.createData(), mr, mr.createData(), *random_point(mb, x0, 4), forces=FEET)


@pytest.mark.parametrize("residuals", ["velocity com", "unknown"])
def test_solo12_node_with_kinematic_costs(impl, residuals):
    """The Pinocchio data the costs read, as far as the residual types ask (gen.crocoddyl's
    Kinematics; the compiled model's kinematics_* switches): a frame-velocity and a
    centre-of-mass cost, and a residual of a type neither model knows (centroidal momentum:
    everything the built-in model computes).  On the contact model, whose built-in calc
    computes all of it (computeAllTerms, the centroidal momentum); the built-in free model
    computes neither the centre of mass nor the momentum, so these costs read stale data."""
    pm, q0 = P.solo12_model()
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    x0 = np.concatenate([q0, np.zeros(state.nv)])
    fid = pm.getFrameId("FL_FOOT")
    if residuals == "unknown":
        extra = [crocoddyl.ResidualModelCentroidalMomentum(state, np.ones(6), actuation.nu)]
    else:
        extra = [crocoddyl.ResidualModelFrameVelocity(state, fid, pin.Motion(np.ones(6)), pin.LOCAL_WORLD_ALIGNED,
                                                      actuation.nu),
                 crocoddyl.ResidualModelCoMPosition(state, np.array([0.1, 0.2, 0.3]), actuation.nu)]
    models = []
    for cls in (crocoddyl.DifferentialActionModelContactFwdDynamics, impl.contact):
        contacts = P._contact_models(state, actuation, FEET, "3D", (0.0, 50.0), q0, pm)
        costs = P._state_costs(state, actuation.nu, x0, [1.0] * (2 * state.nv))
        for i, r in enumerate(extra):
            costs.addCost(f"extra{i}", crocoddyl.CostModelResidual(state, r), 10.0)
        models.append(cls(state, actuation, contacts, costs, 0.0, True))
    mb, mr = models
    if impl.name == "compiled":
        flags = (mr.kinematics_velocity, mr.kinematics_com, mr.kinematics_full)
        assert flags == ((True, True, True) if residuals == "unknown" else (True, True, False))
    compare_node(mb, mb.createData(), mr, mr.createData(), *random_point(mb, x0, 5), forces=FEET)


@pytest.mark.parametrize("build, T", [(P.panda_reaching, 20), (P.solo12_base, 15)])
def test_fddp_solves_agree(impl, build, T):
    B = crocoddyl.DifferentialActionModelFreeFwdDynamics if build is P.panda_reaching \
        else crocoddyl.DifferentialActionModelContactFwdDynamics
    R = impl.free if build is P.panda_reaching else impl.contact
    (pb, _), (pr, _) = build(B, T=T), build(R, T=T)
    (sb, _), (sr, _) = P.solve(pb), P.solve(pr)
    assert sr.iter == sb.iter
    assert abs(sr.cost - sb.cost) <= COST_RTOL * abs(sb.cost)
    assert P.largest_difference(sb, sr) <= TRAJ_ATOL


#: the phase-by-phase replay against solver.solve: the same steps in the same order (measured
#: 3.5e-12 on solo12; without solve's starting regularization reg_min the replay ends 3e-9 away)
REPLAY_ATOL = 1e-10


def test_solve_phases_replays_the_solve(impl):
    """problems.solve_phases (the report's phase-by-phase timing) runs the solve it times:
    FDDP's iterations and trajectory on solo12, whose steps are all full at T = 50."""
    pr, _ = P.solo12_base(impl.contact, T=50)
    s, _ = P.solve(pr)
    r = P.solve_phases(pr)
    assert r["iterations"] == s.iter + 1  # solve returns during its last iteration, before counting it
    dx = max(float(np.abs(a - b).max()) for a, b in zip(r["xs"], s.xs))
    du = max(float(np.abs(a - b).max()) for a, b in zip(r["us"], s.us))
    assert max(dx, du) <= REPLAY_ATOL
    assert set(r["ms"]) == {"first calc", "calcDiff", "gaps", "backward pass", "trial step"}


def test_solve_phases_refuses_a_line_search():
    """panda reaching takes steps shorter than 1, which the replay does not model: refused."""
    pr, _ = P.panda_reaching(crocoddyl.DifferentialActionModelFreeFwdDynamics, T=20)
    with pytest.raises(RuntimeError, match="step shorter than 1"):
        P.solve_phases(pr)


def _contact_problem(contact):
    pm, q0 = P.solo12_model()
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    contacts = crocoddyl.ContactModelMultiple(state, actuation.nu)
    for i, c in enumerate(contact(state, actuation, pm)):
        contacts.addContact(f"c{i}", c)
    return state, actuation, contacts, crocoddyl.CostModelSum(state, actuation.nu)


@pytest.mark.parametrize("contact, message", [
    (lambda s, a, pm: [crocoddyl.ContactModel3D(s, pm.getFrameId("FL_FOOT"), np.zeros(3), pin.LOCAL_WORLD_ALIGNED,
                                                a.nu)], "LOCAL_WORLD_ALIGNED is not supported"),
    (lambda s, a, pm: [crocoddyl.ContactModel3D(s, pm.getFrameId("FL_FOOT"), np.zeros(3), pin.LOCAL, a.nu,
                                                np.array([0.0, 1.0])),
                       crocoddyl.ContactModel3D(s, pm.getFrameId("FR_FOOT"), np.zeros(3), pin.LOCAL, a.nu,
                                                np.array([0.0, 2.0]))], "different Baumgarte gains"),
    (lambda s, a, pm: [crocoddyl.ContactModel1D(s, pm.getFrameId("FL_FOOT"), 0.0, pin.LOCAL, np.eye(3), a.nu)],
     "ContactModel1D has no rbdgen constraint"),
    (lambda s, a, pm: [crocoddyl.ContactModel3D(s, pm.getFrameId("FL_FOOT"), np.zeros(3), pin.LOCAL, a.nu,
                                                np.array([10.0, 1.0]))], "position gain Kp = 10 is not supported"),
])
def test_refused_contacts(impl, contact, message):
    state, actuation, contacts, costs = _contact_problem(contact)
    with pytest.raises(RbdgenError, match=message):
        impl.contact(state, actuation, contacts, costs)


def test_refused_armature(impl):
    pm, _ = P.panda_model()
    pm.armature[:] = 0.1
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFull(state)
    with pytest.raises(RbdgenError, match="non-zero armature"):
        impl.free(state, actuation, crocoddyl.CostModelSum(state, actuation.nu))


def _panda_parts():
    pm, _ = P.panda_model()
    state = crocoddyl.StateMultibody(pm)
    return pm, state, crocoddyl.ActuationModelFull(state)


@pytest.mark.parametrize("bad, message", [
    ("state", r"state is a StateVector; crocoddyl.StateMultibody expected"),
    ("actuation", r"actuation is a CostModelSum; crocoddyl.ActuationModelAbstract expected"),
    ("costs nu", r"costs.nu has nu = 3; the model's nu is 7"),
    ("costs state", r"costs.state has nx = 4; the model's nx is 14"),
])
def test_refused_arguments(impl, bad, message):
    """A wrong type or size is one RbdgenError line, before any model is constructed (the
    compiled model's C++ would otherwise get a kernel writing outside its arrays)."""
    pm, state, actuation = _panda_parts()
    costs = crocoddyl.CostModelSum(state, actuation.nu)
    args = {"state": (crocoddyl.StateVector(14), actuation, costs),
            "actuation": (state, costs, costs),
            "costs nu": (state, actuation, crocoddyl.CostModelSum(state, 3)),
            "costs state": (state, actuation, crocoddyl.CostModelSum(crocoddyl.StateVector(4), actuation.nu))}[bad]
    with pytest.raises(RbdgenError, match=message) as e:
        impl.free(*args)
    assert "\n" not in str(e.value)


def test_contacts_of_another_size_refused(impl):
    state, actuation, contacts, costs = _contact_problem(
        lambda s, a, pm: [crocoddyl.ContactModel3D(s, pm.getFrameId("FL_FOOT"), np.zeros(3), pin.LOCAL, a.nu,
                                                   np.array([0.0, 50.0]))])
    other = crocoddyl.ContactModelMultiple(state, actuation.nu - 1)
    with pytest.raises(RbdgenError, match=r"contacts.nu has nu = 11; the model's nu is 12"):
        impl.contact(state, actuation, other, costs)


def test_compiled_model_checks_its_calls():
    """The compiled model refuses, as a Python exception, an x or u of the wrong size and
    another model's data (each would have the kernel read or write outside its arrays)."""
    if gcpp.unavailable():
        pytest.skip(f"the compiled models cannot be built here: {gcpp.unavailable()}")
    pr, x0 = P.panda_reaching(gc.compiled_free_fwd_dynamics, T=1)
    m = pr.runningModels[0].differential
    d = m.createData()
    u = np.zeros(m.nu)
    with pytest.raises(ValueError, match="x has 13 entries, expected 14"):
        m.calc(d, x0[:-1], u)
    with pytest.raises(ValueError, match="u has 6 entries, expected 7"):
        m.calcDiff(d, x0, u[:-1])
    other = crocoddyl.DifferentialActionModelFreeFwdDynamics(m.state, m.actuation, m.costs).createData()
    with pytest.raises(ValueError, match="the data was not made by this model's createData"):
        m.calc(other, x0, u)


def test_public_classes_choose_the_implementation(monkeypatch):
    """The public classes return the compiled model where it can be built, the Python model
    with RBDGEN_CROCODDYL_MODELS=python, and, with a one-line warning naming why, where it
    cannot; a subclass is always the Python model."""
    pm, state, actuation = _panda_parts()
    costs = crocoddyl.CostModelSum(state, actuation.nu)
    expected = "python" if gcpp.unavailable() else "compiled"
    assert gc.DifferentialActionModelFreeFwdDynamics(state, actuation, costs).implementation == expected

    class Mine(gc.DifferentialActionModelFreeFwdDynamics):
        pass
    assert isinstance(Mine(state, actuation, costs), gc.PythonDifferentialActionModelFreeFwdDynamics)
    monkeypatch.setenv("RBDGEN_CROCODDYL_MODELS", "python")
    m = gc.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
    assert isinstance(m, gc.PythonDifferentialActionModelFreeFwdDynamics)
    monkeypatch.delenv("RBDGEN_CROCODDYL_MODELS")
    monkeypatch.setattr(gc, "_EXTENSIONS", {})
    monkeypatch.setitem(gc._unavailable, "why", "")
    monkeypatch.setattr(gcpp, "unavailable", lambda: "no working compiler 'c++' ($CXX)")
    with pytest.warns(RuntimeWarning, match=r"using the Python models \(cannot build the crocoddyl extension: no "
                                            r"working compiler 'c\+\+' \(\$CXX\)\)"):
        m = gc.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
    assert m.implementation == "python"


SUMMARY = re.compile(r"same iterations: (\w+); cost relative difference (\S+); largest trajectory difference (\S+);")


def assert_examples_agree(stdout: str, count: int) -> None:
    """``count`` printed example reports, each with the same iterations, the cost to
    COST_RTOL and the trajectories to TRAJ_ATOL."""
    found = SUMMARY.findall(stdout)
    assert len(found) == count, stdout
    for same, cost, traj in found:
        assert same == "yes" and float(cost) <= COST_RTOL and float(traj) <= TRAJ_ATOL, stdout


@pytest.mark.parametrize("script", ["panda_reaching.py", "solo12_base.py"])
def test_python_examples_run(script):
    """The examples solve with both models and report the same iterations, cost and
    trajectories (short horizon)."""
    r = subprocess.run([sys.executable, str(EXAMPLES / script), "--T", "10", "--repeat", "1"], capture_output=True,
                       text=True, cwd=EXAMPLES, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert_examples_agree(r.stdout, 1)


def _cmeel_prefix() -> Path | None:
    import sysconfig
    prefix = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix"
    needed = ["lib/cmake/crocoddyl/crocoddylConfig.cmake", "lib/cmake/pinocchio/pinocchioConfig.cmake",
              "share/eigen3/cmake/Eigen3Config.cmake"]
    ok = all((prefix / n).exists() for n in needed) and any(prefix.glob("**/urdfdom_headers*onfig.cmake"))
    return prefix if ok else None


#: the C++ examples and their kernels compiled at -O0 (the test compares values): gcc
#: neither reassociates nor contracts multiply-adds below -O2 (tests/conftest.py's
#: RBDGEN_CFLAGS), so the values are -O1's, and the examples print the same differences at
#: -O0 and -O1.  The kernels' C compiles about 9 times faster at -O0 (2.5 s of CPU for the
#: three, 22 s at -O1: talos' 1.8 MB kernel 1.8 s against 8 s, solo12's 0.5 s against
#: 13 s); the examples' C++ is mostly parsing and instantiating crocoddyl's and
#: Pinocchio's templates (58 s at -O0, 64 s at -O1)
CPP_TEST_BUILD = "-DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0"
#: compile jobs of run.sh's build: the three examples' C++ (about 1.8 GB each) on two cores
CPP_TEST_JOBS = 2
#: the C++ examples' horizon: at T = 10 talos' FDDP solution is sensitive to rounding (6
#: iterations, the Python and C++ models' torques 2.5e-7 from the built-in's, 1.4e-9 of
#: max |u| = 179 N m; the costs agree to 2e-14); at T = 20, 2e-11 (bench/reports/2026-11-28-crocoddyl.md)
CPP_T = 20


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("c++") is None,
                    reason="needs cmake and a C++ compiler")
@pytest.mark.skipif(_cmeel_prefix() is None, reason="needs the crocoddyl, Pinocchio, Eigen and urdfdom-headers CMake "
                                                    "configurations of the wheels (pip install 'rbdgen[crocoddyl]')")
def test_cpp_examples_build_and_agree(tmp_path):
    """The C++ action models (gen.crocoddyl_cpp's headers) on the three examples' kernels,
    compiled against the wheels' headers, solving with the same iterations, cost and
    trajectories as crocoddyl's built-in models (short horizon).  The kernel folders come
    from the Python examples' Pinocchio models (problems.cpp_kernel_folders: the kernels
    the Python tests build, found in the cache, not traced and compiled a second time);
    test_cli_crocoddyl_writes_the_header covers rbdgen build --crocoddyl."""
    P.cpp_kernel_folders(tmp_path / "kernels")
    env = dict(os.environ, WORK=str(tmp_path), PYTHON=sys.executable, CMAKE_ARGS=CPP_TEST_BUILD,
               CMAKE_BUILD_PARALLEL_LEVEL=str(CPP_TEST_JOBS), RBDGEN_KERNELS=str(tmp_path / "kernels"))
    r = subprocess.run(["sh", str(EXAMPLES / "cpp" / "run.sh"), "--T", str(CPP_T), "--repeat", "1"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    log = tmp_path / "build.log"
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{log.read_text() if log.exists() else ''}"
    assert_examples_agree(r.stdout, 3)


def test_cli_crocoddyl_writes_the_header(tmp_path):
    """rbdgen build --crocoddyl writes the header beside the kernel folder, the class the
    kernel decides, in namespace rbdgen, naming the kernel's symbol."""
    from gen.cli import main
    assert main(["build", "panda", "-a", "aba_derivatives", "--crocoddyl", "-o", str(tmp_path / "k"), "-q"]) == 0
    header, = (tmp_path / "k").glob("*_crocoddyl.hpp")
    text = header.read_text()
    symbol = header.name[:-len("_crocoddyl.hpp")]
    assert "namespace rbdgen" in text and "class DifferentialActionModelFreeFwdDynamics" in text
    assert f"{symbol}(" in text and (tmp_path / "k" / f"{symbol}.h").exists()


def test_cli_crocoddyl_refuses_a_value_kernel(tmp_path, capsys):
    from gen.cli import main
    assert main(["build", "chain:3", "-a", "aba", "--crocoddyl", "-o", str(tmp_path / "k"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--crocoddyl needs -a aba_derivatives (free dynamics) or -a constrained_derivatives" in err
