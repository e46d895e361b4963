"""An independent oracle (DESIGN §6f): a planar double pendulum's mass matrix and bias
derived with sympy.physics.mechanics (Kane's method), compared with CRBA and NLE."""
import numpy as np
import pytest
import sympy as sp
from sympy.physics import mechanics as me

import gen
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
