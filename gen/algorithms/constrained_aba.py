"""constrainedABA: the articulated-body algorithm on the augmented Lagrangian of Gauss'
principle in maximal coordinates, O(n + m) per iteration.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(``../shared/papers/sathya2024-...``), Algorithms 1-3, in LOCAL frames, Pinocchio's sign
(``M ddq + b = tau + J^T lam``) and Pinocchio's damping ``rho = mu / weight`` (the
paper's penalty is ``1/rho``).  Each constraint is ``K a_b = k`` on the (gravity-offset)
spatial acceleration of its body (eq. 20c), ``k = K a0_b + a_rest`` (see
:class:`gen.constraints.ConstraintEval`):

1. three-sweep pass (Alg. 1): ABA with the augmented inertia and bias force (eq. 29)
   ``IA_b = I_b + K^T K / rho``, ``pA_b = v x* I v - K^T (lam + k / rho)`` (the inertia
   term is a constant point mass at the frame, added at trace time), then a roll-out of
   the bodies supporting constraints (``S_E``);
2. ``lam <- lam - (K a_b - k) / rho`` (eq. 27b);
3. reduced two-sweep passes (Alg. 2) over ``S_E`` only: the bias force changes by
   ``dp_b = K^T r / rho``, carried to the root through ``P_i = I - U_i D_i^-1 S_i^T``
   (eq. 38), and the roll-out of ``S_E`` is repeated;
4. after the last iteration, the roll-out of the bodies that support no constraint
   (Alg. 3 lines 9-11).

Only constraints relative to the world are handled (§II-E: a loop between two moving
bodies couples their accelerations in the penalty; use ``prox_ltl`` or ``prox_ltls``).
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1),
residual (1,1).  Options and the stopping test: :mod:`gen.algorithms.proximal`.
"""
from __future__ import annotations

from ..model import Model
from ..spatial import act_force, cross_force, inertia_matrix, inv_motion
from .common import forward_velocities, gravity_acceleration, subspaces
from .proximal import (Proximal, body_gravity, constant_constraint_inertia, dsolve, joint_terms,
                       propagate_inertia, supporting_bodies)


def constrained_aba(model: Model, q, v, tau, *, be, cset=None, **options):
    prox = Proximal(model, cset, be, **options)
    cset, m, nb = prox.cset, prox.cset.m, model.nbodies
    cset.require_anchored("constrained_aba")
    S = subspaces(model, be)
    Xup, vel, c = forward_velocities(model, q, v, S, be)
    cons = constraint_rows(model, cset, prox.rho, q, v, (Xup, vel, c), be) if m else []

    IA, pA = [], []                                   # Alg. 1, first forward sweep (eq. 29)
    for i, b in enumerate(model.bodies):
        I = inertia_matrix(b.inertia, be)
        IA.append(I)
        pA.append(cross_force(vel[i], I @ vel[i], be))
    for con, body, K, k, w, aug in cons:
        IA[body] = IA[body] + (be.asarray(aug) if aug is not None else w * (K.T @ K))
        pA[body] = pA[body] - K.T @ (w * k)
    be.mark("forward", *c, *IA, *pA)

    U, Dfac, Dinv_u, Dinv_Ut = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):                     # Alg. 1, backward sweep
        U[i], Dfac[i], Dinv_u[i], Dinv_Ut[i] = joint_terms(model, i, S, IA, pA, tau, be)
        if model.bodies[i].parent != -1:
            propagate_inertia(model, i, q, Xup, c, IA, pA, U[i], Dinv_u[i], Dinv_Ut[i], be)
    be.mark("backward", *U, *Dinv_u, *Dinv_Ut)

    SE = supporting_bodies(model, cset)
    acc, ddq = [None] * nb, [None] * nb
    rollout(model, SE, Xup, c, S, Dinv_u, Dinv_Ut, acc, ddq, be)
    lam = [be.zeros(con.size, 1) for con, *_ in cons]
    while m:
        r = [K @ acc[body] - k for _, body, K, k, _, _ in cons]                     # K a - k
        lam = [lj - w * rj for lj, rj, (_, _, _, _, w, _) in zip(lam, r, cons)]     # eq. 27b
        if prox.step(be.vcat(r)):
            break
        dp = {}                                        # Alg. 2, reduced backward sweep
        for (_, body, K, _, w, _), rj in zip(cons, r):
            f = K.T @ (w * rj)
            dp[body] = f if body not in dp else dp[body] + f
        for i in reversed(SE):
            if i not in dp:
                continue
            du = dsolve(Dfac[i], S[i].T @ dp[i], be)
            Dinv_u[i] = Dinv_u[i] - du
            p = model.bodies[i].parent
            if p != -1:
                f = act_force(Xup[i], dp[i] - U[i] @ du, be)
                dp[p] = f if p not in dp else dp[p] + f
        rollout(model, SE, Xup, c, S, Dinv_u, Dinv_Ut, acc, ddq, be)   # Alg. 2, roll-out
    rest = [i for i in range(nb) if ddq[i] is None]
    rollout(model, rest, Xup, c, S, Dinv_u, Dinv_Ut, acc, ddq, be)     # Alg. 3, lines 9-11
    return prox.outputs(be.vcat(ddq), be.vcat(lam) if m else None)


def rollout(model: Model, bodies, Xup, c, S, Dinv_u, Dinv_Ut, acc, ddq, be):
    """``a' = X^-1 a_parent + c``, ``ddq_i = D^-1 u_i - D^-1 U^T a'``, ``a_i = a' + S ddq_i``
    for the listed bodies (ascending), ``a_0 = -g``."""
    a0 = gravity_acceleration(model, be)
    for i in bodies:
        p = model.bodies[i].parent
        a = inv_motion(Xup[i], a0 if p == -1 else acc[p], be) + c[i]
        ddq[i] = Dinv_u[i] - Dinv_Ut[i] @ a
        acc[i] = a + S[i] @ ddq[i]


def constraint_rows(model: Model, cset, rho, q, v, kin, be):
    """Per constraint: (constraint, body, K, k, 1/rho, constant w K^T K or None), with
    ``k = K a0_body + a_rest`` the desired (gravity-offset) body acceleration component."""
    ev = cset.evaluate(model, q, v, be=be, kin=kin, jacobian=False, drift=False)
    Xup = kin[0]
    bodies = [terms[0][0] for terms in ev.terms]
    grav = body_gravity(model, Xup, bodies, be)
    out = []
    for ci, (con, terms) in enumerate(zip(cset.constraints, ev.terms)):
        (body, K), = terms
        r0 = cset.offsets[ci]
        w = 1.0 / float(rho[r0])
        k = K @ grav[body] + ev.a_rest[r0:r0 + con.size, 0:1]
        const = constant_constraint_inertia(con, w)
        out.append((con, body, K, k, w, None if const is None else const[1]))
    return out
