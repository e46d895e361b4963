"""An independent oracle (docs/DESIGN.md §6f): sympy.physics.mechanics (Kane's method) derivations
of a planar double pendulum's mass matrix and bias, compared with CRBA and NLE, and of the
four-bar linkage's loop-closure dynamics (ddq and the constraint force), compared with the
four proximal constrained-dynamics solvers."""
import numpy as np
import pytest
import sympy as sp
from conftest import rel_err
from sympy.physics import mechanics as me

import gen
from gen.backend import NUMPY
from gen.model import SE3, Body, Frame, Inertia, Model

ORACLE_TOL = 1e-12
L1, L2, M1, M2, IZ1, IZ2 = 0.7, 0.5, 1.3, 0.8, 0.05, 0.03


def double_pendulum() -> Model:
    """Two links swinging about z in the x-y plane; gravity (0, 0, -9.81) is rotated into
    the plane by hanging the pendulum from a base rotated 90 degrees about x, so it acts
    along -y of the joint frames."""
    Rx = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])          # +90 deg about x: y_base = z_world
    z = np.array([0.0, 0.0, 1.0])
    i1 = Inertia(M1, np.array([L1 / 2, 0, 0]), np.diag([0.0, IZ1, IZ1]) + 1e-3 * np.eye(3))
    i2 = Inertia(M2, np.array([L2 / 2, 0, 0]), np.diag([0.0, IZ2, IZ2]) + 1e-3 * np.eye(3))
    bodies = [Body("j1", "l1", -1, "revolute", z, SE3(Rx, np.zeros(3)), i1),
              Body("j2", "l2", 0, "revolute", z, SE3(np.eye(3), np.array([L1, 0, 0])), i2)]
    frames = [Frame("l1", 0, SE3.identity(), "body"), Frame("l2", 1, SE3.identity(), "body")]
    return Model("double_pendulum", bodies, frames)


def sympy_dynamics():
    q1, q2 = me.dynamicsymbols("q1 q2")
    u1, u2 = me.dynamicsymbols("u1 u2")
    g = sp.Symbol("g")
    N = me.ReferenceFrame("N")
    A = N.orientnew("A", "Axis", [q1, N.z])
    B = A.orientnew("B", "Axis", [q2, A.z])
    A.set_ang_vel(N, u1 * N.z)
    B.set_ang_vel(A, u2 * A.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", L1 / 2 * A.x)
    J = O.locatenew("J", L1 * A.x)
    P2 = J.locatenew("P2", L2 / 2 * B.x)
    P1.v2pt_theory(O, N, A)
    J.v2pt_theory(O, N, A)
    P2.v2pt_theory(J, N, B)
    I1 = me.inertia(A, 1e-3, IZ1 + 1e-3, IZ1 + 1e-3)
    I2 = me.inertia(B, 1e-3, IZ2 + 1e-3, IZ2 + 1e-3)
    bodies = [me.RigidBody("b1", P1, A, M1, (I1, P1)), me.RigidBody("b2", P2, B, M2, (I2, P2))]
    # gravity acts along -N.y in the pendulum's plane (see double_pendulum())
    loads = [(P1, -M1 * g * N.y), (P2, -M2 * g * N.y)]
    kane = me.KanesMethod(N, q_ind=[q1, q2], u_ind=[u1, u2], kd_eqs=[q1.diff() - u1, q2.diff() - u2])
    kane.kanes_equations(bodies, loads)
    Mm = kane.mass_matrix
    forcing = kane.forcing                      # M u' = forcing, so b = -forcing
    subs_syms = {q1: sp.Symbol("a"), q2: sp.Symbol("b"), u1: sp.Symbol("c"), u2: sp.Symbol("d")}
    args = [sp.Symbol(s) for s in "abcd"] + [g]
    return (sp.lambdify(args, Mm.subs(subs_syms), "numpy"),
            sp.lambdify(args, (-forcing).subs(subs_syms), "numpy"))


@pytest.fixture(scope="module")
def oracle():
    return sympy_dynamics()


def test_double_pendulum_matches_kane(oracle):
    M_fn, b_fn = oracle
    model = double_pendulum()
    rng = np.random.default_rng(5)
    for _ in range(10):
        q, v = rng.uniform(-np.pi, np.pi, 2), rng.normal(size=2)
        M_ref = np.array(M_fn(*q, *v, 9.81), dtype=float)
        b_ref = np.array(b_fn(*q, *v, 9.81), dtype=float).reshape(-1)
        assert np.max(np.abs(gen.run(model, "crba", q) - M_ref)) < ORACLE_TOL, "M vs sympy"
        assert np.max(np.abs(gen.run(model, "nle", q, v) - b_ref)) < ORACLE_TOL, "b vs sympy"


# --- four-bar linkage: open chain (Kane) + holonomic loop closure -------------------------

FOURBAR_TOL = 1e-9          # ddq, lam, J^T lam vs the sympy KKT solve (relative), converged
FOURBAR_CONVERGED = dict(tol=1e-13, max_iter=200)
FOURBAR_MU = {"prox_ltl": 1e-6, "prox_pv": 1e-6, "prox_ltls": 1e-4, "constrained_aba": 1e-4}
BAUMGARTE = [(0.0, 0.0), (10.0, 2.0)]


def fourbar_sympy(gravity):
    """The four-bar of ``gen.robots.synthetic.fourbar`` (crank, coupler, rocker about z in
    series, uniform rods along their x axes, the rocker's tip closing on the ground pivot
    ``anchor``) derived independently: the open chain by Kane's method with the joint
    torques and an unknown in-plane force ``F = (Fx, Fy)`` (world axes) applied at the
    tip, and the loop ``p_tip(q) = p_anchor`` differentiated twice with Baumgarte terms,
    ``J ddq + dJ/dt dq = -Kd J dq - Kp (p_tip - p_anchor)`` in the plane.  The motion is
    planar, so the out-of-plane row of a 3D loop is void (no force along z does work).

    Returns ``(solve, jacobian)``: ``solve(q, v, tau, Kp, Kd) -> (ddq, F, R, G)`` solves
    the 5 x 5 KKT system ``[[M, -G], [J, 0]] [ddq; F] = [forcing_0; rhs]``, with ``R`` the
    tip frame's rotation in the world (``lam`` in the tip's LOCAL axes is
    ``R^T (Fx, Fy, 0)``) and ``G F`` the generalized constraint force; ``jacobian`` is
    the in-plane loop Jacobian (2 x 3) as a function of the same arguments."""
    from gen.robots.synthetic import FOURBAR, LINK_MASS, rod

    qs, us = me.dynamicsymbols("q1:4"), me.dynamicsymbols("u1:4")
    taus, (Fx, Fy), (Kp, Kd) = sp.symbols("tau1:4"), sp.symbols("Fx Fy"), sp.symbols("Kp Kd")
    N = me.ReferenceFrame("N")
    frames, prev = [], N
    for k in range(3):
        f = prev.orientnew(f"L{k}", "Axis", [qs[k], prev.z])
        f.set_ang_vel(prev, us[k] * prev.z)
        frames.append(f)
        prev = f
    O = me.Point("O")
    O.set_vel(N, 0)
    lengths = [FOURBAR["crank"], FOURBAR["coupler"], FOURBAR["rocker"]]
    bodies, loads, joint = [], [], O
    for k, (f, length) in enumerate(zip(frames, lengths)):
        inertia = rod(LINK_MASS, length)
        com = joint.locatenew(f"G{k}", float(inertia.com[0]) * f.x)
        com.v2pt_theory(joint, N, f)
        Ic = [float(x) for x in np.diag(inertia.I_c)]
        bodies.append(me.RigidBody(f"B{k}", com, f, LINK_MASS, (me.inertia(f, *Ic), com)))
        loads.append((com, LINK_MASS * sum(float(gk) * e for gk, e in zip(gravity, (N.x, N.y, N.z)))))
        nxt = joint.locatenew(f"P{k + 1}", length * f.x)
        nxt.v2pt_theory(joint, N, f)
        joint = nxt
    tip = joint
    for k, f in enumerate(frames):                # joint k drives body k against body k-1
        loads.append((f, (taus[k] - (taus[k + 1] if k < 2 else 0)) * N.z))
    loads.append((tip, Fx * N.x + Fy * N.y))
    kane = me.KanesMethod(N, q_ind=qs, u_ind=us, kd_eqs=[q.diff() - u for q, u in zip(qs, us)])
    kane.kanes_equations(bodies, loads)
    M, forcing = kane.mass_matrix, kane.forcing   # M du/dt = forcing (linear in F)
    G = forcing.jacobian([Fx, Fy])
    f0 = forcing.subs({Fx: 0, Fy: 0})
    p = tip.pos_from(O).to_matrix(N)[:2, :] - sp.Matrix([FOURBAR["ground"], 0])
    J = p.jacobian(qs)
    u = sp.Matrix(us)
    rhs_c = -(J * u).jacobian(qs) * u - Kd * J * u - Kp * p
    R = N.dcm(frames[2])                          # tip axes -> world axes
    plain = {**{q: sp.Symbol(f"q{k}") for k, q in enumerate(qs)}, **{w: sp.Symbol(f"u{k}") for k, w in enumerate(us)}}
    args = [[sp.Symbol(f"q{k}") for k in range(3)], [sp.Symbol(f"u{k}") for k in range(3)], list(taus), Kp, Kd]
    fns = [sp.lambdify(args, e.subs(plain), "numpy") for e in (M, f0, G, J, rhs_c, R)]

    def solve(q, v, tau, kp, kd):
        Mn, f0n, Gn, Jn, cn, Rn = [np.array(fn(q, v, tau, kp, kd), dtype=float) for fn in fns]
        K = np.block([[Mn, -Gn], [Jn, np.zeros((2, 2))]])
        x = np.linalg.solve(K, np.concatenate([f0n.ravel(), cn.ravel()]))
        return x[:3], x[3:], Rn, Gn

    return solve, fns[3]


def closed_fourbar_state(crank, rate, jacobian):
    """A configuration closing the loop for crank angle ``crank`` (circle intersection of
    the coupler and rocker ends, elbow up) and a velocity in the null space of the loop
    Jacobian with crank rate ``rate``."""
    from gen.robots.synthetic import FOURBAR

    a, b, c, g = FOURBAR["crank"], FOURBAR["coupler"], FOURBAR["rocker"], FOURBAR["ground"]
    p1, p3 = a * np.array([np.cos(crank), np.sin(crank)]), np.array([g, 0.0])
    d = np.linalg.norm(p3 - p1)
    x = (d ** 2 + b ** 2 - c ** 2) / (2 * d)
    e = (p3 - p1) / d
    p2 = p1 + x * e + np.sqrt(b ** 2 - x ** 2) * np.array([-e[1], e[0]])
    th = [crank, np.arctan2(*(p2 - p1)[::-1]), np.arctan2(*(p3 - p2)[::-1])]
    q = np.array([th[0], th[1] - th[0], th[2] - th[1]])
    J = np.array(jacobian(q, np.zeros(3), np.zeros(3), 0.0, 0.0), dtype=float)
    null = np.linalg.svd(J)[2][-1]
    return q, rate * null / null[0]


@pytest.fixture(scope="module", params=["out-of-plane", "in-plane"])
def fourbar_case(request):
    """The stock fourbar (gravity along -z, normal to its plane) and a copy with gravity
    along -y, in the plane, so that it drives the linkage."""
    import dataclasses

    from gen.robots.synthetic import fourbar

    model = fourbar()
    if request.param == "in-plane":
        model = dataclasses.replace(model, name="fourbar_gravity_y", gravity=np.array([0.0, -9.81, 0.0]))
    return model, fourbar_sympy(model.gravity)


def fourbar_states(jacobian):
    rng = np.random.default_rng(11)
    out = [(rng.uniform(-np.pi, np.pi, 3), rng.normal(size=3), rng.normal(size=3)) for _ in range(3)]
    for crank in (0.3, 2.5):                          # closed loop, compatible velocity
        q, v = closed_fourbar_state(crank, rng.normal(), jacobian)
        out.append((q, v, rng.normal(size=3)))
    return out


@pytest.mark.parametrize("Kp, Kd", BAUMGARTE)
def test_fourbar_loop_closure_matches_kane(fourbar_case, Kp, Kd):
    """ddq, lam (tip LOCAL axes; its z row is void, lam_z = 0, the minimum-norm/proximal
    choice) and the generalized constraint force J^T lam, converged, for all four
    solvers, against the sympy KKT solve; open-loop random states and closed ones."""
    from gen.constraint_spec import parse_constraints

    model, (oracle, jacobian) = fourbar_case
    cset = parse_constraints(model, "3D:tip~anchor", Kp=Kp, Kd=Kd)
    for q, v, tau in fourbar_states(jacobian):
        ddq_ref, F, R, G = oracle(q, v, tau, Kp, Kd)
        lam_ref = R.T @ np.array([F[0], F[1], 0.0])
        for alg in FOURBAR_MU:
            ddq, lam, _, _ = gen.run(model, alg, q, v, tau, constraints=cset, mu=FOURBAR_MU[alg],
                                     **FOURBAR_CONVERGED)
            assert rel_err(ddq, ddq_ref) < FOURBAR_TOL, f"{alg} {model.name} Kp={Kp}: ddq vs sympy"
            assert rel_err(lam, lam_ref) < FOURBAR_TOL, f"{alg} {model.name} Kp={Kp}: lam vs sympy"
            Jl = cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)
            assert rel_err(Jl.T @ lam, G @ F) < FOURBAR_TOL, f"{alg} {model.name}: J^T lam vs sympy"
