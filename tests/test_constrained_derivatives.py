"""constrained_derivatives and impulse_derivatives: against Pinocchio's
computeConstraintDynamicsDerivatives / computeImpulseDynamicsDerivatives on every named
constraint set (free-flyers at non-zero velocity), central differences of the converged
solution on the manifold (dense KKT solves), identities of dddq/dtau and dlam/dtau, the
traced SX graph and the compiled C."""
import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, rel_err

import gen
from gen import pinref
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.configuration import integrate
from gen.constraint_spec import parse_constraints
from gen.trace import trace
from opcount.constrained import CONSTRAINED_SETS

PIN_TOL = 1e-8          # relative to max(1, max|ref|)
REDUNDANT_TOL = 3e-7    # sets with repeated rows: J M^-1 J^T singular, rounding ~ eps / mu amplified:
                        # two algebraically equal routes of ours (J M^-1 from M^-1, or from W = L^-1)
                        # differ by 7e-8 on talos_6d_soles_x2's ddq_dv, each ~1e-7 from Pinocchio
FD_TOL = 1e-5           # central differences, h = 1e-6
SX_TOL = 1e-11
C_TOL = 1e-11
REDUNDANT = ("talos_6d_soles_x2", "talos_6d_soles_hand_x2")
CONVERGED = {"iterations": 40}


def _state(model, rng):
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


@needs_pin
@pytest.mark.parametrize("setname", list(CONSTRAINED_SETS))
def test_constrained_derivatives_match_pinocchio(setname):

    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    pm = pinref.pin_model(model)
    rng = np.random.default_rng(21)
    outs = [n for n, _, _ in gen.api.get_algorithm("constrained_derivatives").outputs(model, spec)]
    tol = REDUNDANT_TOL if setname in REDUNDANT else PIN_TOL
    for _ in range(2):
        q, v, tau = _state(model, rng)
        ours = gen.run(model, "constrained_derivatives", q, v, tau, constraints=spec)
        ref = pinref.reference(model, "constrained_derivatives", q, v, tau, pmodel=pm, cset=spec, options={})
        for name, o, r in zip(outs, ours, ref):
            err = rel_err(o, r)
            assert err <= tol, f"{setname} {name}: {err:.1e} against Pinocchio"


@needs_pin
@pytest.mark.parametrize("setname", [s for s in CONSTRAINED_SETS if s not in REDUNDANT])
@pytest.mark.parametrize("e", (0.0, 0.4))
def test_impulse_derivatives_match_pinocchio(setname, e):
    """Pinocchio's impact map is one solve at damping 1e-12: compared with our converged
    iteration (redundant sets excluded: there its single solve is not the minimum-norm map)."""

    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    pm = pinref.pin_model(model)
    rng = np.random.default_rng(22)
    outs = [n for n, _, _ in gen.api.get_algorithm("impulse_derivatives").outputs(model, spec)]
    for _ in range(2):
        q, v, _ = _state(model, rng)
        ours = gen.run(model, "impulse_derivatives", q, v, constraints=spec, restitution=e, **CONVERGED)
        ref = pinref.reference(model, "impulse_derivatives", q, v, pmodel=pm, cset=spec,
                               options={"restitution": e})
        for name, o, r in zip(outs, ours, ref):
            err = rel_err(o, r)
            assert err <= PIN_TOL, f"{setname} e={e} {name}: {err:.1e} against Pinocchio"


@pytest.mark.parametrize("setname", ("ur5_3d_tool0", "ur5_6d_tool0", "solo12_3d_4feet"))
def test_constrained_derivatives_match_finite_differences(setname):
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    q, v, tau = _state(model, np.random.default_rng(23))
    h = 1e-6

    def fwd(q, v, tau):
        ddq, lam, _, _ = gen.run(model, "prox_ltl", q, v, tau, constraints=spec, **CONVERGED)
        return np.concatenate([ddq, lam])

    ours = gen.run(model, "constrained_derivatives", q, v, tau, constraints=spec, **CONVERGED)
    E = np.eye(model.nv)
    fq = np.column_stack([(fwd(integrate(model, q, h * e), v, tau) - fwd(integrate(model, q, -h * e), v, tau))
                          / (2 * h) for e in E])
    fv = np.column_stack([(fwd(q, v + h * e, tau) - fwd(q, v - h * e, tau)) / (2 * h) for e in E])
    ft = np.column_stack([(fwd(q, v, tau + h * e) - fwd(q, v, tau - h * e)) / (2 * h) for e in E])
    nv = model.nv
    for k, (f, name) in enumerate(((fq, "q"), (fv, "v"), (ft, "tau"))):
        assert rel_err(ours[k], f[:nv]) <= FD_TOL, f"{setname}: dddq/d{name} vs central differences"
        assert rel_err(ours[3 + k], f[nv:]) <= FD_TOL * 100, f"{setname}: dlam/d{name} vs central differences"

    cset = parse_constraints(model, spec)

    def imp(q, v):              # Tedrake 2012 eq. 3.2, dense: P = -(J M^-1 J^T)^-1 J v-
        J, Minv = cset.jacobian(model, q.reshape(-1, 1), be=NUMPY), gen.run(model, "minv", q)
        P = -np.linalg.solve(J @ Minv @ J.T, J @ v)
        return np.concatenate([v + Minv @ J.T @ P, P])

    ours = gen.run(model, "impulse_derivatives", q, v, constraints=spec, **CONVERGED)
    fq = np.column_stack([(imp(integrate(model, q, h * e), v) - imp(integrate(model, q, -h * e), v)) / (2 * h)
                          for e in E])
    fv = np.column_stack([(imp(q, v + h * e) - imp(q, v - h * e)) / (2 * h) for e in E])
    assert rel_err(ours[0], fq[:nv]) <= FD_TOL * 10, f"{setname}: dv+/dq vs central differences"
    assert rel_err(ours[1], fv[:nv]) <= FD_TOL * 10, f"{setname}: dv+/dv- vs central differences"
    assert rel_err(ours[2], fq[nv:]) <= FD_TOL * 100, f"{setname}: dimpulse/dq vs central differences"


@pytest.mark.parametrize("setname", ("ur5_6d_tool0", "solo12_3d_4feet"))
def test_constrained_derivative_identities(setname):
    """dddq/dtau = M^-1 (1 - J^T D^-1 J M^-1) (the projected inverse inertia), symmetric
    at convergence; J dddq/dtau = 0 (the constraint holds for every torque)."""
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    q, v, tau = _state(model, np.random.default_rng(24))
    out = gen.run(model, "constrained_derivatives", q, v, tau, constraints=spec, **CONVERGED)
    Jc = parse_constraints(model, spec).jacobian(model, q.reshape(-1, 1), be=NUMPY)
    Minv = gen.run(model, "minv", q)
    assert np.abs(Jc @ out[2]).max() <= 1e-8 * max(1.0, np.abs(out[2]).max()), f"{setname}: J dddq/dtau != 0"
    assert rel_err(out[2], out[2].T) <= 1e-9, f"{setname}: dddq/dtau not symmetric"
    assert rel_err(out[5], -(np.linalg.pinv(Jc @ Minv @ Jc.T) @ Jc @ Minv)) <= 1e-7, f"{setname}: dlam/dtau"


#: issue 30 §2: the values the rows end with vs the plain rows, relative to max(1, max|ref|).
#: constrained_derivatives' (ddq, lam) is prox_ltl's K-th proximal iterate at the same
#: iterations and mu, computed on the dense dual (D_mu from the tree's L^T D L of M) where
#: prox_ltl factorises the sparse KKT matrix: the same iterates, not the same rounding
#: (worst seen 2.4e-13, talos_6d_soles; redundant sets, whose J M^-1 J^T is singular, differ
#: at their conditioned floor, 2e-8, and are left out).  The AD route's values are its value
#: row's own traced graph (constrained_aba, impulse): the same arithmetic.
VALUE_TOL = 1e-12
VALUE_SETS = ("panda_6d_tcp", "solo12_3d_4feet", "talos_6d_soles", "ur5_6d_tool0", "icub_6d_soles")


@pytest.mark.parametrize("setname", VALUE_SETS)
def test_constrained_values_equal_prox_ltl(setname):
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    rng = np.random.default_rng(30)
    names = [n for n, _, _ in ALGORITHMS["constrained_derivatives"].outputs(model, spec)]
    assert names == ["ddq_dq", "ddq_dv", "ddq_dtau", "dlam_dq", "dlam_dv", "dlam_dtau", "ddq", "lam"]
    for iterations in (1, 3, 12):
        q, v, tau = _state(model, rng)
        out = gen.run(model, "constrained_derivatives", q, v, tau, constraints=spec, iterations=iterations)
        ddq, lam, _, _ = gen.run(model, "prox_ltl", q, v, tau, constraints=spec, iterations=iterations)
        assert rel_err(out[6], ddq) <= VALUE_TOL, f"{setname} K={iterations}: ddq vs prox_ltl"
        assert rel_err(out[7], lam) <= VALUE_TOL, f"{setname} K={iterations}: lam vs prox_ltl"


def _dense_impact(model, cset, q, v_minus, iterations, mu, e):
    """The impact map's K damped dual steps on a dense NumPy D_mu (the iteration the row's
    docstring writes): P_k = D_mu^-1 (rho P_(k-1) - (1 + e) J v-), v+ = v- + M^-1 J^T P_K."""
    J, Minv = cset.jacobian(model, q.reshape(-1, 1), be=NUMPY), gen.run(model, "minv", q)
    rho = cset.damping(mu)
    D = J @ Minv @ J.T + np.diag(rho)
    P = np.zeros(cset.m)
    for _ in range(iterations):
        P = np.linalg.solve(D, rho * P - (1 + e) * (J @ v_minus))
    return v_minus + Minv @ J.T @ P, P


@pytest.mark.parametrize("setname", VALUE_SETS)
def test_impulse_values_equal_the_impact_map(setname):
    """impulse_derivatives' (v_plus, impulse) are the K-th damped dual iterate of the impact
    map: equal to a dense NumPy iteration within the row's conditioned floor (100 eps
    kappa(J M^-1 J^T + Rho)), and to the ``impulse`` row (constrainedABA's augmented
    Lagrangian, the same iterates in exact arithmetic) within that row's floor eps
    kappa(M + J^T Rho^-1 J) (up to ~1e-8 at mu = 1e-6 on these sets)."""
    from gen.conditioning import floor_at
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    cset = parse_constraints(model, spec)
    rng = np.random.default_rng(31)
    names = [n for n, _, _ in ALGORITHMS["impulse_derivatives"].outputs(model, spec)]
    assert names == ["dvplus_dq", "dvplus_dv", "dimpulse_dq", "dimpulse_dv", "v_plus", "impulse"]
    for iterations, e in ((1, 0.0), (3, 0.4), (12, 0.0)):
        q, v, _ = _state(model, rng)
        out = gen.run(model, "impulse_derivatives", q, v, constraints=spec, iterations=iterations, restitution=e)
        dense = _dense_impact(model, cset, q, v, iterations, 1e-6, e)
        plain = gen.run(model, "impulse", q, v, constraints=spec, iterations=iterations, restitution=e)
        kkt = max(VALUE_TOL, floor_at("impulse_derivatives", model, cset, q.reshape(-1, 1), 1e-6))
        alm = max(VALUE_TOL, floor_at("impulse", model, cset, q.reshape(-1, 1), 1e-6))
        for k, name in ((0, "v_plus"), (1, "impulse")):
            assert rel_err(out[4 + k], dense[k]) <= kkt, f"{setname} K={iterations}: {name} vs the dense iteration"
            assert rel_err(out[4 + k], plain[k]) <= alm, f"{setname} K={iterations}: {name} vs the impulse row"


@pytest.mark.parametrize("setname", ("panda_6d_tcp", "solo12_3d_4feet"))
def test_compiled_constrained_values_equal_the_plain_kernels(setname):
    """Compiled, both routes: the analytical kernels' values equal prox_ltl's kernel (1e-12,
    the same iterates) and the impact map's dense iteration; the AD kernels' equal their
    value rows' kernels (constrained_aba, impulse) to 1e-12, the same traced graph."""
    from gen.conditioning import floor_at
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    cset = parse_constraints(model, spec)
    rng = np.random.default_rng(32)
    opts = {"iterations": 3}
    cases = (("constrained_derivatives", "prox_ltl", "constrained_aba", 3, 6),
             ("impulse_derivatives", None, "impulse", 2, 4))
    for algo, exact_row, ad_row, nin, first in cases:
        # the AD route first: its build traces both routes and records their counts, so the
        # analytical build traces its own route only (gen.trace.route_counts)
        kernels = {r: gen.build(model, algo, spec, route=r, **opts) for r in ("ad", "analytical")}
        plain = {r: gen.build(model, row, spec, **opts) for r, row in (("analytical", exact_row), ("ad", ad_row))
                 if row is not None}
        for _ in range(2):
            ins = _state(model, rng)[:nin]
            for r, k in kernels.items():
                got = k(*ins)[first:]
                if r == "analytical" and exact_row is None:     # the impact map: vs the dense iteration
                    want = _dense_impact(model, cset, ins[0], ins[1], 3, 1e-6, 0.0)
                    tol = max(VALUE_TOL, floor_at(algo, model, cset, ins[0].reshape(-1, 1), 1e-6))
                else:
                    want, tol = plain[r](*ins)[:2], VALUE_TOL
                for g, w, name in zip(got, want, ("value", "multiplier")):
                    assert rel_err(g, w) <= tol, f"{setname} {algo} route {r}: {name} vs the plain kernel"


@pytest.mark.parametrize("setname", ("ur5_3d_tool0",))
def test_traced_and_compiled_constrained_derivatives_equal_numpy(setname):
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    rng = np.random.default_rng(25)
    q, v, tau = _state(model, rng)
    for algo, ins in (("constrained_derivatives", (q, v, tau)), ("impulse_derivatives", (q, v))):
        f = trace(model, algo, spec).function()
        kernel = gen.build(model, algo, spec)
        ref = gen.run(model, algo, *ins, constraints=spec)
        for o, r in zip(f(*ins), ref):
            assert rel_err(np.array(o), r) <= SX_TOL, f"{setname} {algo}: SX vs NumPy"
        for o, r in zip(kernel(*ins), ref):
            assert rel_err(o, r) <= C_TOL, f"{setname} {algo}: C vs NumPy"


ROUTE_TOL = 1e-8        # AD of the K-th iterate vs implicit differentiation at it (equal at convergence)

def alm_route_tol(model, spec, q, mu=1e-6):
    """The constrained AD route differentiates constrained_aba, an augmented-Lagrangian
    formulation: held to its floor eps kappa(M + J^T Rho^-1 J) at the state (gen.verify)."""
    from gen.verify import floor_at
    return max(ROUTE_TOL, floor_at("constrained_aba", model, gen.parse_constraints(model, spec), q, mu))


#: row -> (options, inputs taken) at a converged iteration count: the AD route differentiates
#: the K-th iterate, the analytical one the converged solution with K proximal steps (equal
#: at convergence).  K = 3 converges on these full-rank sets at mu = 1e-6 (solo12's four
#: feet: AD and analytical within 1.3e-8 of each other, the floor eps kappa is 3e-6) and
#: costs a quarter of K = 12's AD graph.  The impact map too is converged at K = 3, as
#: Pinocchio's exact solve needs: on solo12's four feet at restitution 0.4 the AD route is
#: 5.7e-9, 9.6e-10 and 3.7e-9 from the analytical one on three states at K = 3, 5.7e-9,
#: 9.6e-10 and 3.2e-9 at K = 5 (the analytical one within 5.1e-15 of Pinocchio at both)
AD_ROUTE_CASES = {"constrained_derivatives": ({"iterations": 3}, 3),
                  "impulse_derivatives": ({"restitution": 0.4, "iterations": 3}, 2)}


@pytest.mark.slow
@pytest.mark.parametrize("algo", AD_ROUTE_CASES)
@pytest.mark.parametrize("setname", ("ur5_3d_tool0", "solo12_3d_4feet"))
def test_ad_route_equals_analytical_and_pinocchio(setname, algo):
    """Issue 13 §2: route="ad" (CasADi jacobian of the traced constrained_aba / impulse graph
    at the same iterations and mu, tangent map for q), compiled, against the analytical
    kernel and Pinocchio; the impact map at a converged iteration count, as Pinocchio's is
    an exact solve.  One test per row, so the two workers share the long AD traces."""
    from gen import pinref
    robot, spec = CONSTRAINED_SETS[setname]
    model = load_or_skip(robot)
    pm = pinref.pin_model(model) if pinref.available() else None
    rng = np.random.default_rng(26)
    opts, nin = AD_ROUTE_CASES[algo]
    # the AD route first: its build traces both routes and records their counts, so the
    # analytical build traces its own route only (gen.trace.route_counts)
    kernels = {r: gen.build(model, algo, spec, route=r, **opts) for r in ("ad", "analytical")}
    assert kernels["ad"].manifest["route"]["used"] == "ad"
    for _ in range(2):
        ins = _state(model, rng)[:nin]
        an, ad = kernels["analytical"](*ins), kernels["ad"](*ins)
        for o_an, o_ad in zip(an, ad):
            tol = alm_route_tol(model, spec, ins[0]) if algo == "constrained_derivatives" else ROUTE_TOL
            assert rel_err(o_ad, o_an) <= tol, f"{setname} {algo}: AD vs analytical"
        if pm is not None:
            ref = pinref.reference(model, algo, *ins, pmodel=pm, cset=spec, options=opts)
            for o, r in zip(ad, ref):
                tol = alm_route_tol(model, spec, ins[0]) if algo == "constrained_derivatives" else PIN_TOL
                assert rel_err(o, r) <= tol, f"{setname} {algo}: AD route vs Pinocchio"
