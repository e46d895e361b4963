"""Mimic joints through the articulated solvers, the OSIM rows and the constrained /
impulse derivatives (issue 16 §2).

On a model with mimic joints ``constrained_aba`` and ``prox_pv`` compute their iterates
by ``prox_ltls``'s and ``prox_ltl``'s joint-space formulations, the impact map by
``prox_ltls``'s on ``M_mu`` with ``tau - b = 0``, ``caba_osim[f]`` by ``ltl_osim``, and the
derivatives take their partials on the extended tree (``gen.kinematics.extended_state``).
Pinocchio refuses mimic joints in ``constraintDynamics``, ``impulseDynamics`` and their
derivatives, so the reference is the dense KKT system built from its ``crba`` (fresh
Data: pin 4.1's mimic crba accumulates in a reused one), ``nonLinearEffects``,
``getFrameJacobian(LOCAL)`` and the frame's classical (3D) or spatial (6D) drift; for a
loop between two moving bodies ``J`` and ``a_c*`` are rbdgen's (Pinocchio's M and b).
Derivatives: against Richardson differences, on the manifold, of that dense solution.
Models: the gripper URDF of tests/test_joint_types.py (planar root, a revolute mimic on
another branch, a prismatic mimic under it) and a random mimic tree under a free-flyer
(so that 6D constraints are not redundant)."""
import dataclasses

import numpy as np
import pytest
from conftest import row_floor, needs_pin, rel_err, richardson
from random_trees import random_inertia, random_state
from test_joint_types import MIMIC_URDF, mimic_tree

import gen
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.model import SE3, Body, Model
from gen.pinref import depth_first
from gen.simulate import integrate
from gen.trace import trace
from gen.urdf import load_urdf

KKT_TOL = 1e-8           # converged solution vs the dense KKT solve from Pinocchio's pieces
ITERATE_TOL = 1e-9       # K-th iterate vs the iterate-identical partner
ORDINARY_ITERATE_TOL = 1e-9   # articulated vs joint-space iterates on an ordinary tree (mu = 1e-3)
RESIDUAL_TOL = 1e-10     # true constraint residual of a converged solve
OSIM_TOL = 1e-9          # Delassus / damped inverse vs Pinocchio's crba and Jacobians
DERIV_TOL = 1e-7         # derivatives vs Richardson differences of the converged solution
#: the augmented-Lagrangian iterates (prox_ltls's, run by constrained_aba and the impact map
#: on mimic models) at mu = 1e-6 round at ~eps / (mu lambda_min(M)): AD of the 12th iterate
#: vs the analytical route (worst seen 2.2e-10), the impact map's K-th iterate vs a dense
#: NumPy ALM iteration (5.9e-10)
ALM_TOL = 1e-8
SX_TOL = 1e-11
C_TOL = 1e-11
CONVERGED = {"tol": 1e-13, "max_iter": 400}
FD_STEP = 1e-4

#: (model, constraint specs): anchored 3D / 6D and a 3D loop between two moving bodies
GRIPPER_SPECS = ("3D:tip", "3D:left", "3D:tip~left")
TREE_SPECS = ("3D:tip4", "6D:tip4", "3D:tip3,3D:tip6", "3D:tip3~tip6", "3D:tip2~tip5")
ANCHORED = {"gripper": ("3D:tip", "3D:left"), "tree": ("3D:tip4", "6D:tip4", "3D:tip3,3D:tip6")}


@pytest.fixture(scope="module")
def gripper(tmp_path_factory):
    path = tmp_path_factory.mktemp("urdf") / "gripper.urdf"
    path.write_text(MIMIC_URDF)
    return load_urdf(str(path), mimic=True)


def floating_mimic_tree(seed=0, n=7):
    """:func:`test_joint_types.mimic_tree` hung from a free-flyer (body 0)."""
    inner = mimic_tree(seed, n)
    shift = lambda b: dataclasses.replace(
        b, parent=b.parent + 1, idx_q=0, idx_v=0,
        mimic=None if b.mimic is None else dataclasses.replace(b.mimic, primary=b.mimic.primary + 1))
    base = Body("base", "base_link", -1, "free", np.array([0.0, 0.0, 1.0]), SE3.identity(),
                random_inertia(np.random.default_rng(seed)))
    frames = [dataclasses.replace(f, body=f.body + 1) for f in inner.frames]
    model = Model(f"floating_mimic{seed}", [base] + [shift(b) for b in inner.bodies], frames,
                  source=f"random mimic tree seed {seed} under a free-flyer")
    assert model.has_mimic and depth_first(model)
    return model


@pytest.fixture(scope="module")
def tree():
    return floating_mimic_tree()


def models(gripper, tree):
    return {"gripper": (gripper, GRIPPER_SPECS), "tree": (tree, TREE_SPECS)}


# --- the reference from Pinocchio's pieces ---------------------------------------------------

def pin_pieces(model, pm, q, v, spec):
    """``M``, ``b`` from Pinocchio; ``J``, ``a_c*`` from its LOCAL frame Jacobians and drifts
    for anchored constraints, rbdgen's (:meth:`ConstraintSet.evaluate`) for a loop."""
    import pinocchio as pin
    pd = pm.createData()
    M = np.array(pin.crba(pm, pm.createData(), q))
    M = np.triu(M) + np.triu(M, 1).T
    b = pin.nonLinearEffects(pm, pd, q, v)
    cset = parse_constraints(model, spec)
    if not all(c.anchored for c in cset.constraints):
        ev = cset.evaluate(model, q.reshape(-1, 1), v.reshape(-1, 1), be=NUMPY)
        return M, b, ev.J, ev.a_star.ravel()
    pin.forwardKinematics(pm, pd, q, v, np.zeros(model.nv))
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    Js, acs = [], []
    for token in spec.split(","):
        kind, frame = token.split(":")
        fid = pm.getFrameId(frame)
        J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)
        if kind == "3D":
            Js.append(J[:3])
            acs.append(-pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).linear)
        else:
            Js.append(J)
            acs.append(-pin.getFrameAcceleration(pm, pd, fid, pin.LOCAL).vector)
    return M, b, np.vstack(Js), np.concatenate(acs)


def kkt_solution(model, pm, q, v, tau, spec):
    """``(ddq, lam)`` of ``M ddq + b = tau + J^T lam``, ``J ddq = a_c*`` (dense)."""
    M, b, J, ac = pin_pieces(model, pm, q, v, spec)
    m, nv = J.shape[0], model.nv
    K = np.block([[M, -J.T], [J, np.zeros((m, m))]])
    sol = np.linalg.solve(K, np.concatenate([tau - b, ac]))
    return sol[:nv], sol[nv:]


def impact_solution(model, pm, q, v_minus, spec, e):
    """``(v+, P)``: ``M (v+ - v-) = J^T P``, ``J v+ = -e J v-`` (dense KKT)."""
    M, _, J, _ = pin_pieces(model, pm, q, np.zeros(model.nv), spec)
    m, nv = J.shape[0], model.nv
    K = np.block([[M, -J.T], [J, np.zeros((m, m))]])
    sol = np.linalg.solve(K, np.concatenate([np.zeros(nv), -(1.0 + e) * (J @ v_minus)]))
    return v_minus + sol[:nv], sol[nv:]


def pin_model_of(model):
    """Pinocchio's model of ``model`` with rbdgen's frames (a synthetic tree has none in
    :func:`gen.pinref.pin_model`)."""
    import pinocchio as pin

    from gen.pinref import pin_model
    pm = pin_model(model)
    for f in model.frames:
        if f.body >= 0 and not pm.existFrame(f.name):
            placement = pin.SE3(np.asarray(f.placement.R, float), np.asarray(f.placement.p, float))
            pm.addFrame(pin.Frame(f.name, f.body + 1, placement, pin.FrameType.OP_FRAME))
    return pm


# --- iterates ------------------------------------------------------------------------------

PARTNERS = {"constrained_aba": "prox_ltls", "prox_pv": "prox_ltl"}


@pytest.mark.parametrize("algorithm", list(PARTNERS))
def test_partners_iterate_for_iterate_on_an_ordinary_tree(algorithm):
    """The pairs are the same iteration: constrained_aba = prox_ltls (augmented
    Lagrangian on M + J^T rho^-1 J), prox_pv = prox_ltl (proximal point on the dual), K-th
    iterate for K = 1, 3 on a tree without mimic joints (mu = 1e-3: away from the ALM
    rounding floor, so that the two formulations' rounding does not hide a difference)."""
    from random_trees import random_tree
    model = random_tree(8, 3)
    q, v, tau = random_state(model, np.random.default_rng(5))
    for spec in ("3D:tip7", "6D:tip5,3D:tip7", "3D:tip4~tip7"):
        for K in (1, 3):
            got = gen.run(model, algorithm, q, v, tau, constraints=spec, iterations=K, mu=1e-3)
            ref = gen.run(model, PARTNERS[algorithm], q, v, tau, constraints=spec, iterations=K, mu=1e-3)
            for name, x, y in zip(("ddq", "lam"), got, ref):
                assert rel_err(x, y) < ORDINARY_ITERATE_TOL, f"{spec} K={K} {algorithm} {name}"


@pytest.mark.parametrize("which", ["gripper", "tree"])
@pytest.mark.parametrize("algorithm", list(PARTNERS))
def test_mimic_iterates_equal_partner(gripper, tree, which, algorithm):
    model, specs = models(gripper, tree)[which]
    q, v, tau = random_state(model, np.random.default_rng(7))
    for spec in specs:
        for K in (1, 3):
            got = gen.run(model, algorithm, q, v, tau, constraints=spec, iterations=K)
            ref = gen.run(model, PARTNERS[algorithm], q, v, tau, constraints=spec, iterations=K)
            for name, x, y in zip(("ddq", "lam", "iterations", "residual"), got, ref):
                assert rel_err(x, y) < ITERATE_TOL, f"{which} {spec} K={K} {algorithm} {name}"


# --- converged solutions against Pinocchio's pieces ------------------------------------------

@needs_pin
@pytest.mark.parametrize("which", ["gripper", "tree"])
@pytest.mark.parametrize("algorithm", list(PARTNERS))
def test_mimic_converged_equals_kkt(gripper, tree, which, algorithm):
    model, specs = models(gripper, tree)[which]
    pm = pin_model_of(model)
    rng = np.random.default_rng(8)
    for spec in specs:
        for _ in range(2):
            q, v, tau = random_state(model, rng)
            ddq, lam, _, res = gen.run(model, algorithm, q, v, tau, constraints=spec, **CONVERGED)
            ddq_ref, lam_ref = kkt_solution(model, pm, q, v, tau, spec)
            assert rel_err(ddq, ddq_ref) < KKT_TOL, f"{which} {spec} {algorithm} ddq"
            assert rel_err(lam, lam_ref) < KKT_TOL, f"{which} {spec} {algorithm} lam"
            assert res < RESIDUAL_TOL, f"{which} {spec} {algorithm} residual"


@needs_pin
@pytest.mark.parametrize("which", ["gripper", "tree"])
def test_mimic_impulse(gripper, tree, which):
    """The converged impact map = the KKT impact formula from Pinocchio's M and J; its
    K-th iterate (K = 1, 3) = the augmented-Lagrangian iteration written densely
    (``M_mu dv_k = J^T (P_{k-1} + rho^-1 a*)``, ``P_k = P_{k-1} - rho^-1 (J dv_k - a*)``)."""
    model, _ = models(gripper, tree)[which]
    pm = pin_model_of(model)
    rng = np.random.default_rng(9)
    for spec in ANCHORED[which]:
        q, v_minus, _ = random_state(model, rng)
        for e in (0.0, 0.4):
            vp, P, _, res = gen.run(model, "impulse", q, v_minus, constraints=spec, restitution=e, **CONVERGED)
            vp_ref, P_ref = impact_solution(model, pm, q, v_minus, spec, e)
            assert rel_err(vp, vp_ref) < KKT_TOL, f"{which} {spec} e={e} v+"
            assert rel_err(P, P_ref) < KKT_TOL, f"{which} {spec} e={e} impulse"
            assert res < RESIDUAL_TOL
        M, _, J, _ = pin_pieces(model, pm, q, np.zeros(model.nv), spec)
        rho = 1e-6
        a_star = -(1.0 + 0.4) * (J @ v_minus)
        Mmu, Pk = M + J.T @ J / rho, np.zeros(J.shape[0])
        for K in (1, 2, 3):
            dv = np.linalg.solve(Mmu, J.T @ (Pk + a_star / rho))
            Pk = Pk - (J @ dv - a_star) / rho
            if K in (1, 3):
                got = gen.run(model, "impulse", q, v_minus, constraints=spec, restitution=0.4, iterations=K)
                assert rel_err(got[0], v_minus + dv) < ALM_TOL, f"{which} {spec} K={K} v+"
                assert rel_err(got[1], Pk) < ALM_TOL, f"{which} {spec} K={K} impulse"


@needs_pin
@pytest.mark.parametrize("which", ["gripper", "tree"])
def test_mimic_delassus_and_osim(gripper, tree, which):
    model, _ = models(gripper, tree)[which]
    pm = pin_model_of(model)
    rng = np.random.default_rng(10)
    for spec in ANCHORED[which]:
        q = model.random_q(rng)
        M, _, J, _ = pin_pieces(model, pm, q, np.zeros(model.nv), spec)
        D = J @ np.linalg.solve(M, J.T)
        for algorithm in ("delassus", "kkt_delassus"):
            assert rel_err(gen.run(model, algorithm, q, constraints=spec), D) < OSIM_TOL, f"{which} {spec} {algorithm}"
        for mu in (1e-6, 1e-3):
            Lam = np.linalg.inv(D + mu * np.eye(len(D)))
            for algorithm in ("ltl_osim", "kkt_osim", "caba_osim", "caba_osimf"):
                got = gen.run(model, algorithm, q, constraints=spec, mu=mu)
                assert rel_err(got, Lam) < OSIM_TOL, f"{which} {spec} {algorithm} mu={mu}"


# --- derivatives -----------------------------------------------------------------------------

def _check_derivatives(model, pm, spec, rng):
    q, v, tau = random_state(model, rng)
    nv = model.nv

    def solve(qq, vv, tt):
        return np.concatenate(kkt_solution(model, pm, qq, vv, tt, spec))

    at_q = lambda d: solve(integrate(model, q.reshape(-1, 1), d.reshape(-1, 1), be=NUMPY).ravel(), v, tau)
    ref_q = richardson(at_q, np.zeros(nv), FD_STEP)
    ref_v = richardson(lambda d: solve(q, v + d, tau), np.zeros(nv), FD_STEP)
    ref_t = richardson(lambda d: solve(q, v, tau + d), np.zeros(nv), FD_STEP)
    got = gen.run(model, "constrained_derivatives", q, v, tau, constraints=spec, iterations=40)
    refs = (ref_q[:nv], ref_v[:nv], ref_t[:nv], ref_q[nv:], ref_v[nv:], ref_t[nv:])
    names = ("ddq_dq", "ddq_dv", "ddq_dtau", "dlam_dq", "dlam_dv", "dlam_dtau")
    for name, x, y in zip(names, got, refs):
        assert rel_err(x, y) < DERIV_TOL, f"{spec} {name}"

    e = 0.4
    v_minus = v

    def impact(qq, vv):
        return np.concatenate(impact_solution(model, pm, qq, vv, spec, e))

    ref_q = richardson(lambda d: impact(integrate(model, q.reshape(-1, 1), d.reshape(-1, 1), be=NUMPY).ravel(),
                                        v_minus), np.zeros(nv), FD_STEP)
    ref_v = richardson(lambda d: impact(q, v_minus + d), np.zeros(nv), FD_STEP)
    got = gen.run(model, "impulse_derivatives", q, v_minus, constraints=spec, iterations=40, restitution=e)
    names = ("dvplus_dq", "dvplus_dv", "dimpulse_dq", "dimpulse_dv")
    for name, x, y in zip(names, got, (ref_q[:nv], ref_v[:nv], ref_q[nv:], ref_v[nv:])):
        assert rel_err(x, y) < DERIV_TOL, f"{spec} {name}"


@needs_pin
@pytest.mark.parametrize("which", ["gripper", "tree"])
def test_mimic_constrained_derivatives(gripper, tree, which):
    """constrained_derivatives and impulse_derivatives (Pinocchio's refuse mimic joints)
    against Richardson differences, on the manifold, of the dense KKT solution and impact
    formula from Pinocchio's pieces."""
    model, _ = models(gripper, tree)[which]
    pm = pin_model_of(model)
    rng = np.random.default_rng(12)
    for spec in ANCHORED[which]:
        _check_derivatives(model, pm, spec, rng)


@pytest.mark.parametrize("which", ["gripper", "tree"])
def test_mimic_derivative_routes_agree(gripper, tree, which):
    """route="ad" (CasADi's Jacobian of the traced constrained_aba / impulse, which on a
    mimic model run prox_ltls's iteration) = the analytical route, traced and evaluated,
    at a converged iteration count."""
    model, _ = models(gripper, tree)[which]
    spec = ANCHORED[which][-1]
    q, v, tau = random_state(model, np.random.default_rng(13))
    for algorithm, opts, ins in (("constrained_derivatives", {"iterations": 12}, (q, v, tau)),
                                 ("impulse_derivatives", {"iterations": 12, "restitution": 0.4}, (q, v))):
        want = gen.run(model, algorithm, *ins, constraints=spec, **opts)
        for route in ("analytical", "ad"):
            cset = parse_constraints(model, spec)
            f = trace(model, algorithm, cset, route=route, **opts).function()
            got = f.call([np.reshape(x, (-1, 1)) for x in ins])
            tol = SX_TOL if route == "analytical" else ALM_TOL
            for g, w in zip(got, want):
                assert rel_err(np.array(g), w) < tol, f"{which} {algorithm} {route}"


# --- traced SX and compiled C ------------------------------------------------------------------

TRACED = (("constrained_aba", "3D:tip~left", {"iterations": 3}), ("prox_pv", "3D:tip", {"iterations": 3}),
          ("impulse", "3D:tip", {"iterations": 3, "restitution": 0.4}), ("caba_osim", "3D:tip", {}),
          ("caba_osimf", "3D:left", {}))


def _inputs(model, algorithm, spec, rng):
    q, v, tau = random_state(model, rng)
    names = [n for n, _ in ALGORITHMS[algorithm].inputs(model, spec)]
    return [{"q": q, "v": v, "v_minus": v, "tau": tau}[n] for n in names]


def floor(model, algorithm, spec, q, opts, tol):
    """``tol``, or the row's rounding floor at ``q`` where larger (the augmented-Lagrangian
    rows: eps |M + J^T Rho^-1 J| |M^-1|, gen.conditioning)."""
    from gen.conditioning import floor_at, kernel_mu
    mu = kernel_mu(ALGORITHMS[algorithm], opts)
    return max(tol, floor_at(algorithm, model, parse_constraints(model, spec), q, mu))


def test_mimic_traced_sx_equals_numpy(gripper):
    rng = np.random.default_rng(14)
    for algorithm, spec, opts in TRACED:
        args = _inputs(gripper, algorithm, spec, rng)
        tr = trace(gripper, algorithm, parse_constraints(gripper, spec), **opts)
        got = tr.function().call([np.reshape(a, (-1, 1)) for a in args])
        ref = gen.run(gripper, algorithm, *args, constraints=spec, **opts)
        ref = ref if isinstance(ref, tuple) else (ref,)
        tol = floor(gripper, algorithm, spec, args[0], opts, SX_TOL)
        for g, r in zip(got, ref):
            assert rel_err(np.array(g).reshape(np.shape(r)), r) < tol, f"{algorithm} {spec}"


@pytest.mark.parametrize("algorithm, spec, opts", [
    ("constrained_aba", "3D:tip~left", {"iterations": 3}),        # solver family, a loop
    ("caba_osim", "3D:tip", {}),                                  # Delassus family
    ("impulse_derivatives", "3D:tip", {"iterations": 8}),         # derivative family
])
def test_mimic_compiled_c_equals_numpy(gripper, tmp_path, algorithm, spec, opts):
    k = gen.build(gripper, algorithm, spec, out_dir=tmp_path / algorithm, **opts)
    rng = np.random.default_rng(15)
    for _ in range(2):
        args = _inputs(gripper, algorithm, spec, rng)
        got = k(*args)
        ref = gen.run(gripper, algorithm, *args, constraints=spec, **opts)
        got, ref = (got, ref) if isinstance(ref, tuple) else ((got,), (ref,))
        tol = floor(gripper, algorithm, spec, args[0], opts, C_TOL)
        for g, r in zip(got, ref):
            assert rel_err(g, r) < tol, f"{algorithm} {spec}"


def test_every_row_handles_mimic(gripper):
    """Every registered algorithm runs on the mimic gripper (constraints 3D:tip where it
    takes them); an articulated pass called on a mimic model directly still refuses it
    with one line."""
    from gen.algorithms.world import world_pass
    from gen.errors import RbdgenError
    q, v, tau = random_state(gripper, np.random.default_rng(16))
    values = {"q": q, "v": v, "v_minus": v}
    for name, algo in ALGORITHMS.items():
        spec = "3D:tip" if algo.constrained else None
        args = [values.get(n, tau) for n, _ in algo.inputs(gripper, spec)]
        outs = gen.run(gripper, name, *args, constraints=spec)
        for x in outs if isinstance(outs, tuple) else (outs,):
            assert np.all(np.isfinite(x)), name
    col = np.reshape
    with pytest.raises(RbdgenError, match="joint 'd_right' mimics 'c_left'.*does not handle mimic joints"):
        world_pass(gripper, col(q, (-1, 1)), col(v, (-1, 1)), col(tau, (-1, 1)), NUMPY)


@pytest.mark.parametrize("algorithm", ["prox_pv", "impulse"])
def test_mimic_early_exit_driver(gripper, tmp_path, algorithm):
    """The early-exit C driver (setup and step traced separately) on a mimic model: the
    fallback's setup and step, converged, = NumPy with the same tolerance."""
    opts = {"tol": 1e-12, "max_iter": 100}
    k = gen.build(gripper, algorithm, "3D:tip", out_dir=tmp_path / algorithm, **opts)
    args = _inputs(gripper, algorithm, "3D:tip", np.random.default_rng(17))
    got, ref = k(*args), gen.run(gripper, algorithm, *args, constraints="3D:tip", **opts)
    tol = row_floor(algorithm, gripper, "3D:tip", args[0], opts, tol=C_TOL)
    for g, r in zip(got[:2], ref[:2]):
        assert rel_err(g, r) < tol, algorithm
    assert got[3] <= opts["tol"], "residual"
