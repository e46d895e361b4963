"""Constrained simulation (gen/simulate.py, templates/simulate*.j2, ``rbdgen simulate``):
the manifold integrator and the energy against Pinocchio, the constraint errors against
Pinocchio's placements, consistent initial states, energy behaviour of symplectic Euler on
the passive four-bar, Baumgarte against no Baumgarte, the C loop against the Python loop,
CLI errors.

Bounds:

* ENERGY: symplectic Euler conserves a modified energy ``H~ = H + O(dt)`` (Hairer, Lubich,
  Wanner, *Geometric Numerical Integration*, IX.1), so ``|E(t) - E(0)|`` stays O(dt) with
  no secular term; with ``(dt/2) dE_kin/dt`` as the leading term of ``H - H~`` the bound
  ``|E(t) - E(0)| <= dt max_t |dE_kin/dt|`` follows (measured 0.63 of it on the four-bar
  over 0.5 s at dt = 1e-3 ... 2.5e-4), and halving dt halves the error (first order).
* C_LOOP_TOL: both loops call the same compiled kernel; the integrator and the PD law are
  NumPy in one and CasADi-generated C in the other, so they differ by rounding (FMA
  contraction), which the dynamics then propagate: with the dual solver ``prox_ltl`` the
  trajectories agree to ~1e-15 over 500 steps; the augmented-Lagrangian
  ``constrained_aba`` amplifies rounding by ~1/(mu lambda_min(M)) (gen/algorithms/
  proximal.py "Accuracy"), hence mu = 1e-4 and 200 steps for it (~2e-14 measured).
"""
import dataclasses
import json

import numpy as np
import pytest
from conftest import load_or_skip

import gen
from gen.backend import NUMPY
from gen.cli import main
from gen.model import Model
from gen.simulate import (
    DEFAULT_BAUMGARTE,
    build_loop,
    constraint_errors,
    energy,
    hold_torque,
    integrate,
    kernel_for,
    metrics,
    python_loop,
    scenario,
    simulate,
)

pin = pytest.importorskip("pinocchio")
from gen.pinref import pin_model  # noqa: E402

INTEGRATE_TOL = 1e-12     # q (+) dv vs pin.integrate (absolute, unit quaternions and angles)
ENERGY_TOL = 1e-10        # kinetic and potential energy vs Pinocchio (relative)
PLACEMENT_TOL = 1e-12     # constraint distance / angle vs Pinocchio's placements (absolute)
CLOSE_TOL = 1e-13         # the closed initial loop (m) and |J v0|
STATIC_TOL = 1e-8         # |ddq| at rest under the static feed-forward (m/s^2, rad/s^2)
C_LOOP_TOL = 1e-12        # C loop vs Python loop, every state (absolute)
SOLO = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"


def continuous_chain() -> Model:
    """chain:3 with its middle joint continuous (``revolute_unb``, q = (cos, sin))."""
    base = gen.load_robot("chain:3")
    bodies = [dataclasses.replace(b, kind="revolute_unb") if i == 1 else dataclasses.replace(b)
              for i, b in enumerate(base.bodies)]
    return Model("chain3_unb", bodies, list(base.frames), source="test")


def continuous_pin_model():
    """Pinocchio's configuration space of :func:`continuous_chain` (integration does not
    depend on axes or inertias)."""
    pm = pin.Model()
    j = 0
    for jm in (pin.JointModelRZ(), pin.JointModelRUBY(), pin.JointModelRX()):
        j = pm.addJoint(j, jm, pin.SE3.Identity(), f"j{j}")
    return pm


# --- the integrator and the metrics against Pinocchio ------------------------------------------

@pytest.mark.parametrize("robot", ["solo12", "humanoid30", "continuous"])
def test_integrate_equals_pinocchio(robot):
    model = continuous_chain() if robot == "continuous" else load_or_skip(robot)
    pm = continuous_pin_model() if robot == "continuous" else pin_model(model)
    rng = np.random.default_rng(3)
    worst = 0.0
    for scale in (1e-9, 1e-5, 5e-3, 0.02, 0.5, 4.0):         # both sides of the Taylor branch
        for _ in range(10):
            q, dv = model.random_q(rng), rng.normal(size=model.nv) * scale
            got = integrate(model, q.reshape(-1, 1), dv.reshape(-1, 1), be=NUMPY).ravel()
            worst = max(worst, float(np.max(np.abs(got - pin.integrate(pm, q, dv)))))
    assert worst <= INTEGRATE_TOL, f"{robot}: q (+) dv differs from pin.integrate by {worst:.2e}"


def test_energy_equals_pinocchio():
    model = load_or_skip("solo12")
    pm = pin_model(model)
    pd = pm.createData()
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, v = model.random_q(rng), rng.normal(size=model.nv)
        T, U = energy(model, q, v)
        T_ref = pin.computeKineticEnergy(pm, pd, q, v)
        U_ref = pin.computePotentialEnergy(pm, pd, q)
        assert abs(T - T_ref) <= ENERGY_TOL * max(1.0, abs(T_ref)), f"kinetic energy {T} vs Pinocchio {T_ref}"
        assert abs(U - U_ref) <= ENERGY_TOL * max(1.0, abs(U_ref)), f"potential energy {U} vs Pinocchio {U_ref}"


def test_constraint_errors_equal_pinocchio_placements():
    """6D feet of humanoid30 anchored at q0: distance and angle of each foot from its
    initial placement, against Pinocchio's forward kinematics."""
    model = gen.load_robot("humanoid30")
    pm = pin_model(model)
    pd = pm.createData()
    rng = np.random.default_rng(5)
    q0 = model.random_q(rng)
    cset = gen.parse_constraints(model, "6D:left_foot,6D:right_foot", reference_q=q0)
    q = pin.integrate(pm, q0, rng.normal(size=model.nv) * 0.2)

    def placement(qq, name):
        f = model.frame(name)
        pin.forwardKinematics(pm, pd, qq)
        return pd.oMi[f.body + 1] * pin.SE3(f.placement.R, f.placement.p)

    e0, d0, a0 = constraint_errors(model, cset, q0)
    assert max(np.max(np.abs(e0)), d0.max(), a0.max()) <= PLACEMENT_TOL, "nonzero error at the anchor posture"
    _, dist, angle = constraint_errors(model, cset, q)
    for c, name in enumerate(("left_foot", "right_foot")):
        rel = placement(q, name).actInv(placement(q0, name))
        assert abs(dist[c] - np.linalg.norm(rel.translation)) <= PLACEMENT_TOL, f"{name} distance"
        assert abs(angle[c] - np.linalg.norm(pin.log3(rel.rotation))) <= PLACEMENT_TOL, f"{name} angle"


# --- scenarios -------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot", ["fourbar", "solo12"])
def test_initial_state_is_consistent(robot):
    load_or_skip(robot)
    sc = scenario(robot)
    cset = sc.constraints()
    e, dist, _ = constraint_errors(sc.model, cset, sc.q0)
    J = cset.jacobian(sc.model, sc.q0.reshape(-1, 1), be=NUMPY)
    assert dist.max() <= CLOSE_TOL, f"{robot}: initial constraint gap {dist.max():.2e}"
    assert np.linalg.norm(sc.v0) > 0.05, f"{robot}: the initial velocity was projected to nothing"
    assert np.linalg.norm(J @ sc.v0) <= CLOSE_TOL, f"{robot}: |J v0| = {np.linalg.norm(J @ sc.v0):.2e}"


def test_fourbar_moves_in_its_plane():
    sc = scenario("fourbar")
    assert sc.model.gravity[2] == 0.0 and sc.model.gravity[1] < 0.0, "fourbar gravity is not in-plane"
    assert not np.any(sc.kp) and not np.any(sc.tau_ff), "the four-bar should be passive"


def test_static_feed_forward_holds_the_posture_at_rest():
    """With v = 0 at q0 the PD torque is tau_ff, and the constrained dynamics give ddq = 0."""
    model = load_or_skip("solo12")
    sc = scenario(model, SOLO)
    col = (lambda a: np.asarray(a, dtype=float).reshape(-1, 1))
    tau = hold_torque(sc.model, col(sc.q0), np.zeros((model.nv, 1)), col(sc.q_ref), col(sc.tau_ff),
                      col(sc.kp), col(sc.kd), be=NUMPY).ravel()
    ddq = gen.run(sc.model, "prox_ltl", sc.q0, np.zeros(model.nv), tau, constraints=sc.constraints(),
                  tol=1e-12, max_iter=50)[0]
    assert np.max(np.abs(ddq)) <= STATIC_TOL, f"|ddq| at rest = {np.max(np.abs(ddq)):.2e}"
    assert np.all(sc.kp[:6] == 0) and np.all(sc.kp[6:] > 0), "PD gains: zero on the free-flyer, positive on joints"


# --- dynamics ----------------------------------------------------------------------------------------

def test_fourbar_energy_is_conserved_to_first_order():
    sc = scenario("fourbar")
    k = kernel_for(sc, 0.0, 0.0, "prox_ltl", tol=1e-12, max_iter=50)
    cset = sc.constraints()
    errors = []
    for dt in (1e-3, 5e-4):
        tr = python_loop(k, sc, dt, int(round(0.5 / dt)))
        s = metrics(sc.model, cset, tr.qs, tr.vs, dt, 1)
        E, T = np.array(s["energy"]), np.array(s["kinetic"])
        err = float(np.max(np.abs(E - E[0])))
        dTdt = np.diff(T) / dt
        bound = dt * float(np.max(np.abs(dTdt)))
        assert err <= bound, f"dt={dt:g}: energy error {err:.3e} J above dt max|dT/dt| = {bound:.3e} J"
        errors.append(err)
    ratio = errors[0] / errors[1]
    assert 1.8 <= ratio <= 2.2, f"energy error not first order in dt: ratio {ratio:.3f} for dt halved"


def test_baumgarte_keeps_the_drift_below_the_unstabilised_drift():
    """The passive four-bar over 2 s (it swings down, speeds up to ~10 J of kinetic energy
    and comes back to rest near its start): without Baumgarte the gap grows to ~5 cm,
    with the default pair it peaks at ~1 mm at top speed and decays to ~1e-6 m."""
    r = simulate("fourbar", gains=[(0.0, 0.0), DEFAULT_BAUMGARTE], duration=2.0, dt=1e-3,
                 tol=1e-10, max_iter=50)
    free, stab = r["runs"]
    assert free["final_pos"] > 1e-2, f"no drift to correct without Baumgarte ({free['final_pos']:.2e} m)"
    assert stab["max_pos"] < free["max_pos"], "Baumgarte made the worst drift larger"
    assert stab["final_pos"] < 1e-2 * free["final_pos"], \
        f"position drift with Baumgarte {stab['final_pos']:.2e} m vs {free['final_pos']:.2e} m without"
    assert stab["final_vel"] < 1e-1 * free["final_vel"], \
        f"|J v| with Baumgarte {stab['final_vel']:.2e} vs {free['final_vel']:.2e} without"


@pytest.mark.parametrize("robot,algorithm,mu,steps", [("fourbar", "prox_ltl", 1e-6, 500),
                                                      ("solo12", "prox_ltl", 1e-6, 500),
                                                      ("fourbar", "constrained_aba", 1e-4, 200)])
def test_c_loop_equals_python_loop(robot, algorithm, mu, steps):
    load_or_skip(robot)
    sc = scenario(robot)
    k = kernel_for(sc, *DEFAULT_BAUMGARTE, algorithm, tol=1e-10, max_iter=50, mu=mu)
    py = python_loop(k, sc, 1e-3, steps)
    c = build_loop(k)(sc, 1e-3, steps)
    diff = max(float(np.max(np.abs(c.qs - py.qs))), float(np.max(np.abs(c.vs - py.vs))))
    assert diff <= C_LOOP_TOL, f"{robot}/{algorithm}: C loop vs Python loop differ by {diff:.2e}"
    assert np.array_equal(c.iterations, py.iterations), "iteration counts differ"
    assert np.max(np.abs(py.qs - sc.q0)) > 1e-3, "the system did not move"


# --- CLI ---------------------------------------------------------------------------------------------

def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_writes_the_report(capsys, tmp_path):
    rc, out, err = run(capsys, "simulate", "fourbar", "--duration", "0.05", "--compare-baumgarte", "--c-loop",
                       "--mu", "1e-4", "--out", str(tmp_path), "--format", "json", "--quiet")
    assert rc == 0, err
    result = json.loads(out)
    assert [r["label"] for r in result["runs"]] == ["no Baumgarte", "Baumgarte Kp=2500, Kd=100"]
    assert all(r["c_vs_python"] <= C_LOOP_TOL and r["c_steps_per_s"] > 0 for r in result["runs"])
    for name in ("fourbar.md", "fourbar.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    try:
        import matplotlib  # noqa: F401 -- the plots are an extra (rbdgen[plots])
    except ImportError:
        assert not list(tmp_path.glob("*.png")) and "![" not in (tmp_path / "fourbar.md").read_text()
    else:
        for name in ("fourbar_drift.png", "fourbar_energy.png"):
            assert (tmp_path / name).stat().st_size > 0, name


@pytest.mark.parametrize("argv,needle", [
    (["nosuchrobot"], "unknown robot 'nosuchrobot'"),
    (["fourbar", "--dt", "0"], "--dt must be a positive number"),
    (["fourbar", "--dt", "nan"], "--dt must be a positive number"),
    (["fourbar", "--duration", "-1"], "--duration must be a positive number"),
    (["fourbar", "--baumgarte", "1"], "--baumgarte expects KP,KD"),
    (["fourbar", "--baumgarte", "1,-2"], "must be finite and non-negative"),
    (["fourbar", "--gravity", "0,nan,0"], "--gravity expects 3"),
    (["fourbar", "--baumgarte", "1,1", "--compare-baumgarte"], "not allowed with argument"),
    (["chain:3"], "give the constraints"),
])
def test_cli_errors_are_one_line(capsys, tmp_path, argv, needle):
    rc, _, err = run(capsys, "simulate", *argv, "--out", str(tmp_path))
    lines = err.strip().splitlines()
    assert rc == 2, f"exit status {rc}, stderr: {err}"
    assert len(lines) == 1 and lines[0].startswith("rbdgen: error: "), f"not one error line: {err!r}"
    assert needle in lines[0], lines[0]
