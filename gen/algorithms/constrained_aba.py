"""constrainedABA: the articulated-body algorithm on the augmented Lagrangian of Gauss'
principle in maximal coordinates, O(n + m) per iteration.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(docs/REFERENCES.md), Algorithms 1-3, in LOCAL frames, Pinocchio's sign
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

Setup is step 1 up to the roll-out (phases ``kinematics`` and ``factorisation``, the
latter the augmented sweep, H^A in Sathya 2024 Fig. 1); a step rolls out ``S_E``, updates
``lam`` (2) and carries the new bias forces to the root (3), so the loop state is ``lam``
and ``D^-1 u`` on ``S_E`` (:class:`State`); see :class:`proximal.ProximalSolver`.

A loop between two moving bodies couples their accelerations in the penalty (Sathya 2024
§II-E); those couplings are eliminated with the joints (the loop-constrained ABA of
Sathya & Carpentier, ICRA 2026, :mod:`gen.algorithms.loops`).
With mimic joints (``gen.model``) the articulated sweeps do not apply (one dof moves bodies
on several branches): the same ALM iterates ``M_mu ddq_k = tau - b + J^T (lam_{k-1} +
rho^-1 a_c*)``, ``M_mu = M + J^T rho^-1 J``, are computed on the sparse factor of CRBA's
``M_mu`` by ``prox_ltls`` (:func:`~gen.algorithms.proximal.mimic_fallback`).
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1),
residual (1,1).  Options and the stopping test: :mod:`gen.algorithms.proximal`.
"""
from __future__ import annotations

from typing import NamedTuple

from ..model import Model
from ..spatial import act_force
from .articulated import (
    backward_pass,
    dsolve,
    forward_pass,
    rollout,
    row_residual,
    supporting_bodies,
)
from .loops import Couplings
from .prox_ltls import prox_ltls
from .proximal import ALM_CONVERGED_MU, Iterate, ProximalSolver, column, dynamics_residual, mimic_fallback


class Plan(NamedTuple):
    """The structure of a constrainedABA solve (plain ints and floats)."""

    SE: list            # bodies supporting a constraint (Sathya 2024's S_E), ascending
    rest: list          # the other bodies, ascending
    rows: list          # per constraint: (its terms' bodies, 1/rho)


class Const(NamedTuple):
    """What every constrainedABA iteration reads."""

    art: object         # articulated.Articulated after the augmented sweep
    K: list             # per constraint: its terms' K (size x 6)
    k: list             # per constraint (size x 1)
    coupled: dict       # loops.Couplings.coupled: body -> [(j, C_ji S, D^-1 S^T C_ji^T)]
    inputs: tuple = ()  # (q, v, tau) for the dynamics residual (v, tau None: zero)


class State(NamedTuple):
    """The loop state of iterate k."""

    lam: list           # lam_{k-1}, per constraint
    Dinv_u: list        # D^-1 u of iterate k on S_E


def augment(model: Model, art, rows, q, tau, be) -> Const:
    """Eq. 29 and the augmented backward sweep: per constraint ``w K_t^T K_t`` on each
    term's body (a constant for anchored ones, eq. 24), ``-K_t^T w k`` on its bias force,
    and for a loop the coupling ``w K_1^T K_2`` eliminated with the joints
    (:mod:`gen.algorithms.loops`).  Shared with the impact map."""
    loops = Couplings()
    for row in rows:
        for body, K in row.terms:
            art.IA[body] = art.IA[body] + (be.asarray(row.inertia) if row.inertia is not None
                                           else row.w * (K.T @ K))
            art.pA[body] = art.pA[body] - K.T @ (row.w * row.k)
        if len(row.terms) == 2:
            (b1, K1), (b2, K2) = row.terms
            loops.add(b1, b2, row.w * (K1.T @ K2))
    backward_pass(model, q, tau, art, be, lambda i: loops.eliminate(model, i, art, be))
    return Const(art, [[K for _, K in row.terms] for row in rows], [row.k for row in rows], loops.coupled)


def setup(model: Model, q, v, tau, prox, be):
    """Alg. 1 up to its roll-out: the first forward sweep with the augmented inertia and
    bias force (eq. 29, :func:`augment`), then the backward sweep."""
    art, rows = forward_pass(model, q, v, be, prox)
    const = augment(model, art, rows, q, tau, be)._replace(inputs=(q, v, tau))
    SE = supporting_bodies(model, prox.cset)
    plan = Plan(SE, [i for i in range(model.nbodies) if i not in SE],
                [([body for body, _ in row.terms], row.w) for row in rows])
    state = State([be.zeros(row.con.size, 1) for row in rows], [art.Dinv_u[i] for i in SE])
    return plan, const, state


def step(model: Model, plan: Plan, const: Const, state: State, prox, be) -> Iterate:
    """Roll-out of ``S_E`` (Alg. 1 / Alg. 2), ``r_k = K a - k``, ``lam_k`` (eq. 27b), and the
    reduced backward sweep (Alg. 2) giving the next iterate's ``D^-1 u`` on ``S_E``."""
    art, nb = const.art, model.nbodies
    Dinv_u = list(art.Dinv_u)
    for i, d in zip(plan.SE, state.Dinv_u):
        Dinv_u[i] = d
    acc, ddq = [None] * nb, [None] * nb
    rollout(model, plan.SE, art, acc, ddq, be, Dinv_u, const.coupled)
    r = [row_residual(bodies, Ks, k, acc) for (bodies, _), Ks, k in zip(plan.rows, const.K, const.k)]
    lam = [lj - w * rj for lj, rj, (_, w) in zip(state.lam, r, plan.rows)]              # eq. 27b

    nxt, dp = list(Dinv_u), {}                        # Alg. 2, reduced backward sweep

    def push(body, f):
        dp[body] = f if body not in dp else dp[body] + f

    for (bodies, w), Ks, rj in zip(plan.rows, const.K, r):
        for body, K in zip(bodies, Ks):
            push(body, K.T @ (w * rj))
    for i in reversed(plan.SE):
        if i not in dp:
            continue
        du = dsolve(art.Dfac[i], art.S[i].T @ dp[i], be)
        nxt[i] = nxt[i] - du
        for j, M, _ in const.coupled.get(i, ()):     # loops: dp_j -= C_ji S D^-1 S^T dp_i
            push(j, -(M @ du))
        p = model.bodies[i].parent
        if p != -1:
            push(p, act_force(art.liMi[i], dp[i] - art.U[i] @ du, be))

    def accelerations():                               # Alg. 3, lines 9-11
        rollout(model, plan.rest, art, acc, ddq, be, Dinv_u)
        return be.vcat(ddq)

    return Iterate(State(lam, [nxt[i] for i in plan.SE]), column(lam, be), column(r, be), accelerations,
                   dynamics=lambda ddq_k: residual(model, plan, const, lam, ddq_k, be))


def residual(model: Model, plan: Plan, const: Const, lam: list, ddq, be):
    """The relative dynamics residual of ``(ddq, lam)`` (:func:`.proximal.dynamics_residual`)
    with the constraint forces ``K^T lam`` on their bodies: the ALM iterate satisfies the
    dynamics equation only to the augmented sweep's rounding (``J^T J / mu`` in the
    inertias), so a run with ``tol`` tests and reports it beside ``K a - k``."""
    fext = [None] * model.nbodies
    for (bodies, _), Ks, lj in zip(plan.rows, const.K, lam):
        for body, K in zip(bodies, Ks):
            f = K.T @ lj
            fext[body] = f if fext[body] is None else fext[body] + f
    q, v, tau = const.inputs
    return dynamics_residual(model, q, be.zeros(model.nv, 1) if v is None else v, ddq, tau, fext, be)


constrained_aba = ProximalSolver("constrained_aba", *mimic_fallback(setup, step, prox_ltls.setup, prox_ltls.step),
                                 converged_mu=ALM_CONVERGED_MU)
