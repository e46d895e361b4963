"""proxLCP: forward dynamics with unilateral constraints, the linear complementarity
problem solved by projected proximal iterations on the sparse KKT factorisation.

Tedrake 2012 §3.1 (docs/REFERENCES.md): a unilateral constraint
``phi(q) >= 0`` (a contact normal, a joint limit) holds with a force ``lam >= 0`` that
vanishes when the constraint accelerates away.  With Baumgarte stabilisation the
condition is on ``w = J ddq - a_c*`` (Tedrake's ``alpha``), and mixed with bilateral
rows (Pinocchio's sign, ``M ddq + b = tau + J^T lam``)::

    w_B = 0,                0 <= lam_U  _|_  w_U >= 0,      w = G lam + g,      (3.1)
    G = J M^-1 J^T,  g = J M^-1 (tau - b) - a_c*,   ddq = M^-1 (tau - b + J^T lam).

**Which rows are unilateral** is part of the constraint spec: a TYPE ending in ``+``
(``3D+:FL_FOOT``, ``6D+:left_sole_link``) makes the constraint's normal row (frame A's
LOCAL z, the contact normal) the unilateral row ``U``; its other rows and all other
constraints are bilateral (``B``).  A ``3D+`` contact is thus a sticking contact that
may only push (tangential rows held, friction unbounded); without unilateral rows the
solver is ``prox_ltl``, iterate by iterate.  As in Tedrake's notes the LCP is posed for
the constraints in contact: with Baumgarte gains a row whose ``phi > 0`` still bounds the
approach, ``ddq_n >= -Kp phi - Kd dphi`` (the caller lists the contacts within reach).

**Method.**  Proximal-point iterations on the dual (Carpentier 2021 eq. 18), each one
exact on the bilateral rows and one projected Gauss-Seidel sweep on the unilateral ones:

1. ``K_mu = [[-rho I, J], [J^T, M]] = L^T D L`` with the rows ordered ``U`` first (then
   ``B``, then the joints), factorised once (Carpentier 2021 Alg. 1).  Eliminating the
   joints and ``B`` last-to-first leaves on ``U`` the Schur complement
   ``-A_U = -(G_UU + R_U - (G + R)_UB (G + R)_BB^-1 (G + R)_BU)``: ``A_U`` is rebuilt
   from its factor (``u x u``, SPD).
2. Iteration k, from ``lam_{k-1}``: the bilateral proximal step
   ``K_mu [x; ddq] = [a_c* + rho lam_{k-1}; tau - b]`` gives ``lam^ = -x`` (every row
   held).  Letting ``U`` push only, the proximal step is
   ``lam = lam^ + (G + R)^-1 [w^_U; 0]`` with ``w^_U = A_U (lam_U - lam^_U)``,
   ``0 <= lam_U _|_ w^_U >= 0``, an LCP in ``u`` unknowns; one projected Gauss-Seidel
   sweep from ``lam_{k-1, U}`` approximates it (the projection through ``fmax``)::

       lam_a <- max(0, lam_a - (A_U (lam_U - lam^_U))_a / (A_U)_aa),   a in U.

3. ``K_mu [x; ddq_k] = [a_c* + rho lam_{k-1} + (w^_U; 0); tau - b]`` gives
   ``lam_{k, B} = -x_B`` and ``ddq_k``, so ``M ddq_k + b = tau + J^T lam_k`` at every
   iterate.

Fixed points are exactly the solutions of (3.1); redundant bilateral rows are handled as
in ``prox_ltl`` (``lam_0 = 0``, minimum norm).  The residual is the natural one:
``r_B = w_B = rho (lam_{k-1} - lam_k)_B`` and ``r_U = min(lam_U, w_U)`` with
``w_U = w^_U - rho (lam_k - lam_{k-1})_U`` (zero exactly at a solution); the options
(``iterations``, ``mu`` = Pinocchio's damping, ``tol``, ``max_iter``) and the stopping
test on ``|r_k|_inf`` are those of :mod:`gen.algorithms.proximal`.

Setup (phases ``kinematics``: ``b``, ``J``, ``a_c*``; ``factorisation``: ``M`` and the
joint rows of the factor; ``delassus``: the constraint rows of the factor, ``A_U``,
``1/(A_U)_aa`` and the part of step 2's solve that does not depend on ``lam_{k-1}``) and
step (loop state ``lam_{k-1}``), see :class:`proximal.ProximalSolver`.

Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1), lam (m,1), iterations (1,1),
residual (1,1).
"""
from __future__ import annotations

from typing import NamedTuple

from ..model import Model
from .crba import crba
from .prox_ltl import kkt_factor
from .proximal import Iterate, ProximalSolver, Unmarked, column
from .rnea import nle
from .sparse_ldl import ldl_backward, ldl_forward


class Plan(NamedTuple):
    pattern: list       # pattern of the factor of K_mu, rows ordered U, B, joints
    U: list             # unilateral rows (indices into lam), in factor order
    B: list             # bilateral rows, in factor order


class Const(NamedTuple):
    """What every proxLCP iteration reads."""

    dinv: list          # 1/D of K_mu = L^T D L
    L: dict             # L over the pattern
    base: list          # D^-1 L^-T [a_c*; tau - b] (factor order): the lam-free part of steps 2-3
    A: list             # A_U, u x u nested lists
    Adinv: list         # 1 / (A_U)_aa


def setup(model: Model, q, v, tau, prox, be):
    """``b``, ``J``, ``a_c*``, ``M``, the factorisation of ``K_mu`` (rows ``U``, ``B``,
    joints), ``A_U`` and the constant part of the bilateral step; state: ``lam_0 = 0``."""
    cset, m, n = prox.cset, prox.cset.m, model.nv
    U = cset.unilateral_rows()
    B = [r for r in range(m) if r not in U]
    order = U + B
    (b,) = nle(model, q, v, be=Unmarked(be))
    ev = cset.evaluate(model, q, v, be=be) if m else None
    be.mark("kinematics", b, *([ev.J, ev.a_star] if m else []))
    (M,) = crba(model, q, be=Unmarked(be))
    pattern, dinv, L = kkt_factor(model, cset, M, ev.J if m else None, prox.rho, be, order)
    be.mark("factorisation", column(dinv[m:], be), column([L[e] for e in sorted(L) if e[0] >= m], be))
    A = schur_block(len(U), dinv, L, be)
    Adinv = [1.0 / A[a][a] for a in range(len(U))]
    top = [ev.a_star[r, 0] for r in order] if m else []
    base = ldl_backward(pattern, dinv, L, top + [tau[i, 0] - b[i, 0] for i in range(n)])
    if m:
        be.mark("delassus", column(dinv[:m], be), column([L[e] for e in sorted(L) if e[0] < m], be),
                column([x for row in A for x in row] + Adinv, be), column(base[:m], be))
    return Plan(pattern, U, B), Const(dinv, L, base, A, Adinv), be.zeros(m, 1)


def step(model: Model, plan: Plan, const: Const, lam, prox, be) -> Iterate:
    """Steps 2-3: the bilateral proximal step, one projected Gauss-Seidel sweep on ``U``,
    the corrected solve; ``r_k`` the natural residual."""
    m, n, u = prox.cset.m, model.nv, len(plan.U)
    order, rho = plan.U + plan.B, prox.rho
    pattern, L = plan.pattern, const.L
    t = [rho[r] * lam[r, 0] for r in order]                                   # rho lam_{k-1}
    y = ldl_backward(pattern, const.dinv, L, t + [0.0] * n)
    hat = [-z for z in ldl_forward(pattern, L, [const.base[a] + y[a] for a in range(u)], u)]   # lam^_U
    lu = [lam[r, 0] for r in plan.U]
    for a in range(u):                                                        # projected Gauss-Seidel
        lu[a] = be.fmax(0.0, lu[a] - schur_product(const.A[a], lu, hat) * const.Adinv[a])
    w_hat = [schur_product(const.A[a], lu, hat) for a in range(u)]            # w^_U = A_U (lam_U - lam^_U)
    y = ldl_backward(pattern, const.dinv, L, [t[a] + w_hat[a] for a in range(u)] + t[u:] + [0.0] * n)
    y = [const.base[i] + y[i] for i in range(m)] + const.base[m:]            # joint rows: lam-free
    sol = ldl_forward(pattern, L, y, m)
    new = [None] * m
    res = [None] * m
    for a, r in enumerate(plan.U):
        new[r] = lu[a]
        w = w_hat[a] - rho[r] * (lu[a] - lam[r, 0])                           # J_r ddq_k - a_r*
        res[r] = -be.fmax(-lu[a], -w)                                         # min(lam, w)
    for j, r in enumerate(plan.B):
        new[r] = -sol[u + j]
        res[r] = rho[r] * (lam[r, 0] - new[r])                                # J_r ddq_k - a_r*
    lam_k = column(new, be)
    return Iterate(lam_k, lam_k, column(res, be), lambda: column(ldl_forward(pattern, L, y, m + n, sol)[m:], be))


prox_lcp = ProximalSolver("prox_lcp", setup, step, unilateral=True)


def schur_block(u: int, dinv, L, be) -> list:
    """``A_U = -(L_U^T D_U L_U)`` from the leading ``u x u`` block of the factor, which
    factorises the Schur complement left after eliminating every later index.  Upper
    triangle computed, mirrored."""
    D = [1.0 / dinv[k] for k in range(u)]
    A = [[None] * u for _ in range(u)]
    for a in range(u):
        for c in range(a, u):
            s = 0.0
            for k in range(c, u):
                la = 1.0 if k == a else L.get((k, a), 0.0)
                lc = 1.0 if k == c else L.get((k, c), 0.0)
                if not (isinstance(la, float) and la == 0.0) and not (isinstance(lc, float) and lc == 0.0):
                    s = s + la * D[k] * lc
            A[a][c] = A[c][a] = -s
    return A


def schur_product(row, lu, hat):
    """``sum_c A_ac (lam_c - lam^_c)``."""
    out = 0.0
    for c, a_c in enumerate(row):
        out = out + a_c * (lu[c] - hat[c])
    return out
