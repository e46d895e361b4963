"""The impact map: post-impact velocity and constraint impulse, by the constrained
articulated-body algorithm's proximal (augmented-Lagrangian) iterations.

Tedrake 2012 §3.2 (docs/REFERENCES.md): integrating
``M ddq + b = tau + J^T lam`` over an instantaneous impact (q, tau and ``b`` bounded,
so they integrate to zero)::

    M (v+ - v-) = J^T Lambda,        J v+ = -e J v-                            (3.2)

with the impulse ``Lambda`` (Pinocchio's ``impulseDynamics`` sign) and the restitution
coefficient ``e`` (option ``restitution``, default 0: Tedrake's plastic impact
``J v+ = 0``).  Eliminating, ``Lambda = -(1 + e) (J M^-1 J^T)^+ J v-`` and
``v+ = v- + M^-1 J^T Lambda``.

**Method.**  With ``dv = v+ - v-``, (3.2) is constrained forward dynamics with no
torque, no bias force, no gravity and, per constraint ``K dv_body = k``, the target
``k = -(1 + e) K v-_body`` (``K v-_body`` is the constraint's row of ``J v-``).  It is
solved exactly as ``constrained_aba`` solves forward dynamics (Sathya 2024 Alg. 1-3, in
Pinocchio's damping ``rho = mu / weight``): one articulated-body sweep with the
constraint inertias ``K^T K / rho`` folded into the bodies and the bias forces
``pA_b = -K^T k / rho`` (eq. 29), then per iteration a roll-out of the supporting bodies,
``Lambda_k = Lambda_{k-1} - (K dv_b - k) / rho`` (eq. 27b) and the reduced backward sweep
(Alg. 2); the iteration is ``constrained_aba``'s step on the model without gravity.
From ``Lambda_0 = 0`` the iterates converge to the minimum-norm (pseudo-inverse)
impulse, also on redundant sets.

**Why the articulated sweeps rather than the sparse LTDL of M.**  An impact has no
velocity-product terms, so the sweep is the inertia part of ABA, O(n), while the KKT
route (``prox_ltl``'s factorisation: CRBA, then LTDL with the constraint columns) costs
more on floating-base robots.  Measured at the default 3 iterations: solo12 with four 3D
feet 4610 operations against 5838 for the KKT route, talos with 6D soles 10297 against
19708.  A KKT iteration is cheaper (the joint right-hand side is zero: ~300 operations
on these sets against ~850 and ~800), so the KKT route overtakes from ~5 iterations on
solo12 and ~20 on talos.  The price is the augmented-Lagrangian accuracy floor
``~eps / (mu lambda_min(M))`` (see :mod:`gen.algorithms.proximal`): converged at
``mu = 1e-4`` the map agrees with the pseudo-inverse formula to ~1e-11, at the default
``1e-6`` to ~5e-9 on solo12's light legs.  Loops between two moving bodies are eliminated
with the joints as in ``constrained_aba`` (:mod:`gen.algorithms.loops`).  Baumgarte gains
play no role.  With mimic joints (``gen.model``) the articulated sweeps do not apply (one dof
moves bodies on several branches): the same iterates ``M_mu dv_k = J^T (Lambda_{k-1} +
rho^-1 k)``, ``M_mu = M + J^T rho^-1 J``, are ``prox_ltls``'s on the sparse factor of
CRBA's ``M_mu`` with ``tau - b = 0`` (:func:`mimic_setup`, :func:`~gen.algorithms.proximal.mimic_fallback`).

Setup (phases ``kinematics``: placements, velocities, the targets ``k``;
``factorisation``: the augmented sweep) and step (loop state: ``Lambda`` and ``D^-1 u``
on the supporting bodies), see :class:`proximal.ProximalSolver`; the final phase (named
``acceleration`` as in every proximal solver) rolls out the other bodies and adds ``v-``.

Shapes: q (nq,1), v_minus (nv,1) -> v_plus (nv,1), impulse (m,1), iterations (1,1),
residual (1,1) = ``|J v+ + e J v-|_inf``.  Options: ``restitution`` (in [0, 1]) and those
of :mod:`gen.algorithms.proximal` (``iterations``, ``mu``, ``tol``, ``max_iter``); the
early-exit driver (``tol``) traces setup with the default ``restitution``.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..constraint_spec import as_constraint_set
from ..errors import RbdgenError
from ..kinematics import forward_velocities, subspaces
from ..model import Model
from ..spatial import inertia_matrix
from .articulated import Articulated, by_body, constraint_row, supporting_bodies
from .constrained_aba import Plan, State, augment
from .constrained_aba import step as caba_step
from .prox_ltls import Const as LtlsConst
from .prox_ltls import augmented_factor, prox_ltls
from .prox_ltls import start as ltls_start
from .crba import crba
from .proximal import ALM_CONVERGED_MU, Iterate, ProximalSolver, Unmarked, column, mimic_fallback


class Const(NamedTuple):
    """What every impact-map iteration reads."""

    inner: object       # constrained_aba's Const (the augmented sweep, K and k per constraint), or
                        # with mimic joints prox_ltls's (the factor of M_mu, J, a_c*)
    v_minus: object     # nv x 1


def setup(model: Model, q, v_minus, prox, be, restitution: float = 0.0):
    """Placements and velocities, ``k = -(1 + e) K v-_body``, and the augmented sweep
    (Sathya 2024 Alg. 1 up to its roll-out, eq. 29) with ``tau = 0``, ``c = 0``."""
    check_restitution(restitution)
    cset, nb = prox.cset, model.nbodies
    S = subspaces(model, be)
    liMi, vel, _ = forward_velocities(model, q, v_minus, S, be)
    c = [be.zeros(6, 1)] * nb                           # no velocity-product terms in an impact
    ev = cset.evaluate(model, q, v_minus, be=be, kin=(liMi, vel, c), jacobian=False, drift=False)
    rows = []
    for ci, (con, terms) in enumerate(zip(cset.constraints, ev.terms)):
        r0 = cset.offsets[ci]
        k = -(1.0 + restitution) * ev.Jv[r0:r0 + con.size, 0:1]           # -(1 + e) K v-
        rows.append(constraint_row(con, by_body(terms), k, 1.0 / prox.rho[r0]))
    be.mark("kinematics", *[x for X in liMi for x in X], *[row.k for row in rows])
    IA = [inertia_matrix(b.inertia, be) for b in model.bodies]
    art = Articulated.begin(S, liMi, c, IA, [be.zeros(6, 1)] * nb)
    caba = augment(model, art, rows, q, be.zeros(model.nv, 1), be)._replace(inputs=(q, None, None))  # eq. 29
    SE = supporting_bodies(model, cset)
    plan = Plan(SE, [i for i in range(nb) if i not in SE], [([body for body, _ in row.terms], row.w) for row in rows])
    state = State([be.zeros(con.size, 1) for con in cset.constraints], [art.Dinv_u[i] for i in SE])
    return plan, Const(caba, v_minus), state


def step(model: Model, plan, const: Const, state, prox, be) -> Iterate:
    """``constrained_aba``'s step without gravity (roll-out, eq. 27b, Alg. 2);
    ``r_k = K dv_b - k = J v+_k + e J v-``; the returned iterate's ``v+ = v- + dv``."""
    it = caba_step(without_gravity(model), plan, const.inner, state, prox, be)
    return Iterate(it.state, it.lam, it.r, lambda: const.v_minus + it.ddq(),
                   dynamics=lambda v_plus: it.dynamics(v_plus - const.v_minus))


def mimic_setup(model: Model, q, v_minus, prox, be, restitution: float = 0.0):
    """A model with mimic joints: ``J``, ``a_c* = -(1 + e) J v-`` and the sparse factor of
    ``M_mu = M + J^T rho^-1 J`` (``prox_ltls``'s, :func:`~gen.algorithms.prox_ltls.augmented_factor`)."""
    check_restitution(restitution)
    cset = prox.cset
    J = cset.jacobian(model, q, be=be)
    a_star = -(1.0 + restitution) * (J @ v_minus)
    (M,) = crba(model, q, be=Unmarked(be)) if prox.tol is not None else (None,)
    be.mark("kinematics", J, a_star)
    pattern, dinv, L = augmented_factor(model, cset, q, prox.rho, J, be)
    be.mark("factorisation", column(dinv, be), column([L[e] for e in sorted(L)], be))
    inner = LtlsConst(dinv, L, be.zeros(model.nv, 1), J, a_star, M, be.zeros(model.nv, 1))
    return pattern, Const(inner, v_minus), ltls_start(inner, cset.m, prox, be)


def mimic_step(model: Model, pattern, const: Const, lam, prox, be) -> Iterate:
    """``prox_ltls``'s step with ``tau - b = 0``: ``M_mu dv_k = J^T (P_{k-1} + rho^-1
    a_c*)``, ``r_k = J dv_k - a_c* = J v+_k + e J v-``, ``P_k = P_{k-1} - rho^-1 r_k``."""
    it = prox_ltls.step(model, pattern, const.inner, lam, prox, be)
    return Iterate(it.state, it.lam, it.r, lambda: const.v_minus + it.ddq())


def check_restitution(restitution: float) -> None:
    if not 0.0 <= restitution <= 1.0:
        raise RbdgenError(f"restitution coefficient {restitution} must lie in [0, 1] "
                          f"(0: plastic impact, 1: elastic)")


def without_gravity(model: Model) -> Model:
    return dataclasses.replace(model, gravity=np.zeros(3))


impulse = ProximalSolver("impulse", *mimic_fallback(setup, step, mimic_setup, mimic_step),
                         converged_mu=ALM_CONVERGED_MU)


# --- registry helpers ------------------------------------------------------------------

def impulse_inputs(model: Model, cset) -> list[tuple[str, int]]:
    as_constraint_set(model, cset)          # validate the spec early, with its own message
    return [("q", model.nq), ("v_minus", model.nv)]


def impulse_outputs(model: Model, cset) -> list[tuple[str, int, int]]:
    m = as_constraint_set(model, cset).m
    return [("v_plus", model.nv, 1), ("impulse", m, 1), ("iterations", 1, 1), ("residual", 1, 1)]
