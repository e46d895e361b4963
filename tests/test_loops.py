"""Loops between two moving bodies in the articulated-body solvers (gen/algorithms/loops.py:
the loop-constrained ABA of Sathya & Carpentier, ICRA 2026; Pinocchio's ``lcaba``).

On the named loop sets (opcount.constrained.LOOP_SETS: the four-bar cut between its
moving links, a five-bar leg on its foot, talos holding an object with both grippers) and
on humanoid30's hands: constrained_aba and prox_pv against Pinocchio's
``constraintDynamics`` iterate for iterate (same K and mu; the registry's reference), both
converged against a dense KKT solve and constrained_aba converged against Pinocchio's
``lcaba``; the impact map with a loop against the pseudo-inverse formula and Pinocchio's
``impulseDynamics``; traced SX and compiled C = NumPy; and the generic C, which still
handles constraints to the world only, refuses in one line.  The synthetic sets
(humanoid30, random trees) also run through tests/test_constrained.py."""
import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, rel_err
from test_constrained import dense_kkt, states
from test_impact import pinv_impact

import gen
from gen import RbdgenError
from gen.constraint_spec import parse_constraints
from gen.pinref import pin_model, reference
from gen.trace import trace
from opcount.constrained import LOOP_SETS

ARTICULATED = ("constrained_aba", "prox_pv")
MU = 1e-4                  # Pinocchio's lcaba and the ALM rounding floor (~eps/mu) at 1e-6: see below
ITERATE_TOL = 1e-9         # vs constraintDynamics' K-th iterate (relative)
KKT_TOL = 1e-8             # converged vs the dense KKT solve (relative)
LCABA_MU = 1e-2            # lcaba's own rounding is ~eps/mu (see its test)
LCABA_TOL = 1e-9           # constrained_aba's K-th iterate vs lcaba's (relative)
C_TOL = 1e-10              # compiled C / traced SX vs NumPy
RESIDUAL_TOL = 1e-11       # |J ddq - a_c*|_inf of a converged run (rounding stops tighter ones)
CASES = [*LOOP_SETS.values(), ("humanoid30", "6D:left_foot,3D:left_hand~right_hand")]
IDS = [*LOOP_SETS, "humanoid30_hands"]


def case(robot, spec):
    model = load_or_skip(robot)
    return model, parse_constraints(model, spec)



def test_every_loop_set_joins_two_moving_bodies():
    for robot, spec in CASES:
        _, cset = case(robot, spec)
        assert any(c.body1 >= 0 and c.body2 >= 0 for c in cset.constraints), spec


@needs_pin
@pytest.mark.parametrize("robot, spec", CASES, ids=IDS)
@pytest.mark.parametrize("alg", ARTICULATED)
def test_iterates_equal_pinocchio_constraint_dynamics(robot, spec, alg):
    """From lam_0 = 0 the K-th iterate at equal mu is Pinocchio's (Carpentier 2021 eq. 18;
    constrainedABA's augmented Lagrangian is the same proximal iteration, Sathya 2024)."""
    model, cset = case(robot, spec)
    for q, v, tau in states(model, 71, cset=cset):
        for K in (1, 3):
            got = gen.run(model, alg, q, v, tau, constraints=cset, iterations=K, mu=MU)
            ref = reference(model, alg, q, v, tau, cset=cset, options={"iterations": K, "mu": MU})
            assert rel_err(got[0], ref[0]) < ITERATE_TOL, f"{alg} ddq, K={K}"
            assert rel_err(got[1], ref[1]) < ITERATE_TOL, f"{alg} lam, K={K}"


@pytest.mark.parametrize("robot, spec", CASES, ids=IDS)
@pytest.mark.parametrize("alg", ARTICULATED)
def test_converged_solution_is_the_kkt_solution(robot, spec, alg):
    model, cset = case(robot, spec)
    for q, v, tau in states(model, 72, cset=cset):
        ddq, lam, K = dense_kkt(model, cset, q, v, tau)
        got = gen.run(model, alg, q, v, tau, constraints=cset, mu=MU, tol=RESIDUAL_TOL, max_iter=300)
        assert got[3] <= RESIDUAL_TOL, f"{alg}: true residual {got[3]}"
        assert rel_err(got[0], ddq) < KKT_TOL, f"{alg} ddq vs the dense KKT solve"
        if np.linalg.matrix_rank(K) == K.shape[0]:
            assert rel_err(got[1], lam) < KKT_TOL, f"{alg} lam vs the dense KKT solve"


@needs_pin
@pytest.mark.parametrize("robot, spec", CASES, ids=IDS)
def test_constrained_aba_iterates_equal_pinocchio_lcaba(robot, spec):
    """Iterate for iterate against Pinocchio's loop-constrained ABA (accuracy 0: exactly K
    iterations; a fresh Data per call, its elimination order from
    computeJointMinimalOrdering -- a reused Data carries state between calls in pin 4.1).
    lcaba's world-frame sweeps round like ~eps/mu (3e-8 from the KKT solution on
    humanoid30 at mu = 1e-4, where ours is 1e-13), so the comparison runs at mu = 1e-2."""
    import pinocchio as pin
    from gen.algorithms.pinocchio import rigid_constraints
    model, cset = case(robot, spec)
    pm = pin_model(model)
    for q, v, tau in states(model, 73, cset=cset):
        for K in (1, 2, 3):
            pd = pm.createData()
            cms, cds = rigid_constraints(pin, pm, cset)
            pin.computeJointMinimalOrdering(pm, pd, cms)
            want = pin.lcaba(pm, pd, q, v, tau, cms, cds, pin.ProximalSettings(0.0, LCABA_MU, K)).copy()
            got = gen.run(model, "constrained_aba", q, v, tau, constraints=cset, mu=LCABA_MU, iterations=K)
            assert rel_err(got[0], want) < LCABA_TOL, f"ddq vs lcaba, K={K}"


@pytest.mark.parametrize("robot, spec", CASES[:2] + CASES[3:], ids=IDS[:2] + IDS[3:])
def test_impact_map_closes_loops(robot, spec):
    """The impact map reuses constrainedABA's sweeps, loops included: v+ and the impulse
    against the dense pseudo-inverse formula, restitution 0 and 0.5."""
    model, cset = case(robot, spec)
    for q, v, _ in states(model, 74, cset=cset):
        for e in (0.0, 0.5):
            v_ref, imp_ref = pinv_impact(model, cset, q, v, e)
            v_plus, imp = gen.run(model, "impulse", q, v, constraints=cset, mu=MU, tol=1e-13, max_iter=300,
                                  restitution=e)[:2]
            assert rel_err(v_plus, v_ref) < KKT_TOL, f"v+ (e = {e})"
            assert rel_err(imp, imp_ref) < KKT_TOL, f"impulse (e = {e})"


@needs_pin
def test_pinocchio_impulse_dynamics_is_no_reference_on_loops():
    """pin 4.1's impulseDynamics on a loop between two moving bodies returns a v+ that
    violates its own J v+ = 0 (O(1)), so the registry's reference leaves loops out
    (PinocchioRef.anchored_only); this checks the exclusion is still needed."""
    import pinocchio as pin
    from gen.algorithms.pinocchio import rigid_constraints
    model, cset = case("humanoid30", CASES[-1][1])
    assert reference(model, "impulse", *states(model, 75, n=1, cset=cset)[0][:2], cset=cset) is None
    pm = pin_model(model)
    for q, v, _ in states(model, 75, cset=cset):
        pd = pm.createData()
        cms, cds = rigid_constraints(pin, pm, cset)
        pin.initConstraintDynamics(pm, pd, cms, cds)
        v_plus = pin.impulseDynamics(pm, pd, q, v, cms, cds, 0.0, pin.ProximalSettings(0.0, 1e-12, 1)).copy()
        J = np.vstack([pin.getConstraintJacobian(pm, pd, cm, cd) for cm, cd in zip(cms, cds)])
        assert np.max(np.abs(J @ v_plus)) > 1e-3, "Pinocchio's impact map closes the loop now: use it as reference"
        ours = gen.run(model, "impulse", q, v, constraints=cset, mu=MU, tol=1e-13, max_iter=300)[0]
        assert np.max(np.abs(J @ ours)) < 1e-10


@pytest.mark.parametrize("alg", ARTICULATED + ("impulse",))
def test_traced_and_compiled_equal_numpy(alg, tmp_path):
    robot, spec = LOOP_SETS["closed_leg_loop_foot"]
    model, cset = case(robot, spec)
    (q, v, tau), = states(model, 76, n=1, cset=cset)
    inputs = (q, v) if alg == "impulse" else (q, v, tau)
    want = gen.run(model, alg, *inputs, constraints=cset, iterations=3, mu=MU)
    f = trace(model, alg, cset, iterations=3, mu=MU).function()
    sx = f.call([np.reshape(x, (-1, 1)) for x in inputs])
    k = gen.build(model, alg, cset, iterations=3, mu=MU, out_dir=tmp_path / alg)
    c = k(*inputs)
    for name, w, s, cc in zip(("first output", "lam"), want[:2], sx[:2], c[:2]):
        assert rel_err(np.array(s).ravel(), w) < C_TOL, f"SX {name}"
        assert rel_err(cc, w) < C_TOL, f"C {name}"


def test_articulated_solvers_beat_the_kkt_factorisation_on_talos_grippers():
    """The point of closing loops inside the sweeps: on talos standing and holding an
    object with both grippers (m = 18, nv = 50) constrainedABA and proxPV need fewer
    operations than prox_ltl's sparse KKT factorisation (K = 3; the committed
    opcount/reports/constrained/talos_6d_soles_grippers.md has every class and phase)."""
    robot, spec = LOOP_SETS["talos_6d_soles_grippers"]
    model = load_or_skip(robot)
    ops = {a: gen.opcount(model, a, spec, iterations=3)["total"] for a in ("prox_ltl", *ARTICULATED)}
    assert ops["constrained_aba"] < ops["prox_pv"] < ops["prox_ltl"], ops


def test_generic_c_still_refuses_loops_in_one_line():
    from gen.generic import GenericModel
    model, cset = case("humanoid30", CASES[-1][1])
    lib = GenericModel(model, cset)
    (q, v, tau), = states(model, 77, n=1, cset=cset)
    for alg in ARTICULATED:
        with pytest.raises(RbdgenError, match="loop between two moving bodies") as e:
            getattr(lib, alg)(q, v, tau)
        assert "\n" not in str(e.value)
