"""Loop closures between two moving bodies in the articulated-body sweeps: the
cross-coupled elimination of the loop-constrained ABA (Sathya & Carpentier, "Constrained
Articulated Body Algorithms for Closed-Loop Mechanisms", ICRA 2026; Pinocchio's
``lcaba``), in rbdgen's LOCAL frames.

constrainedABA minimises the augmented-Lagrangian objective of Gauss' principle over the
body accelerations (Sathya 2024 eq. 29).  A constraint to the world adds ``w K^T K`` to
one body's inertia; a loop ``K_1 a_1 + K_2 a_2 = k`` between two moving bodies also adds
the cross term ``a_1^T (w K_1^T K_2) a_2``, so bodies no longer interact with their parent
only.  With couplings ``a_j^T C_ji a_i`` (``j < i``, the bodies not yet eliminated),
eliminating body i's joint (``a_i = a'_i + S_i ddq_i``, ``a'_i = X_i a_p + c_i``) gives::

    ddq_i  = D^-1 (u_i - U^T a'_i - S^T sum_j C_ji^T a_j)              (roll-out)
    IA_j  -= C_ji S D^-1 S^T C_ji^T                                   (each neighbour j)
    pA_j  += C_ji (P_i c_i + S D^-1 u_i),   P_i = I - S D^-1 U^T
    C_jp  += C_ji P_i X_i                   (IA_p += C_pi P X + (C_pi P X)^T when j = p)
    C_jk  -= C_ji S D^-1 S^T C_ki^T          (each pair of neighbours j < k: fill-in)

besides ABA's usual ``IA_p += X^T Ia X``, ``pA_p += X^T (pA + Ia c + U D^-1 u)``.  For a root
body ``a'_i = X_i a_0 + c_i`` is constant (``a_0 = -g``), so its couplings become bias
terms only.  The couplings travel up both branches of the loop and fold into the common
ancestor's inertia; eliminating in descending body order keeps every neighbour not yet
eliminated.  The reduced sweeps of the iterations carry a bias change ``dp_i`` to the
neighbours as ``dp_j -= C_ji S D^-1 S^T dp_i`` as well as to the parent.
"""
from __future__ import annotations

from ..kinematics import gravity_acceleration
from ..model import Model
from ..spatial import act_force, inv_motion
from .articulated import dsolve


def to_parent(X, C, be):
    """``C X`` for a 6x6 ``C`` acting on body i's motions and ``X`` the motion transform
    from its parent's frame (``a'_i = X a_p``): row by row, ``(C X)^T = X^T C^T`` with
    ``X^T`` the force transform to the parent (:func:`gen.spatial.act_force`)."""
    return be.hcat([act_force(X, C.T[:, r:r + 1], be) for r in range(6)]).T


class Couplings:
    """The loop couplings of one articulated sweep: ``C[(j, i)]`` (``j < i``, the energy
    term ``a_j^T C a_i``) while the sweep runs, and per eliminated body ``coupled[i] = [(j,
    C_ji S_i, D^-1 S_i^T C_ji^T)]`` for the roll-out and the reduced sweeps."""

    def __init__(self):
        self.C: dict[tuple[int, int], object] = {}
        self.coupled: dict[int, list] = {}

    def add(self, a: int, b: int, C) -> None:
        """Add the term ``a_a^T C a_b``."""
        if a > b:
            a, b, C = b, a, C.T
        self.C[(a, b)] = C if (a, b) not in self.C else self.C[(a, b)] + C

    def eliminate(self, model: Model, i: int, art, be) -> None:
        """Body i's couplings after its joint terms (``art``: articulated.Articulated) and
        its ABA propagation to the parent: the module docstring's updates."""
        nbrs = sorted(j for (j, k) in self.C if k == i)
        if not nbrs:
            return
        S, X, p = art.S[i], art.liMi[i], model.bodies[i].parent
        a_const = art.c[i] if p != -1 else inv_motion(X, gravity_acceleration(model, be), be) + art.c[i]
        a_bias = a_const + S @ (art.Dinv_u[i] - art.Dinv_Ut[i] @ a_const)      # P a' + S D^-1 u
        rec = []
        for j in nbrs:
            Cji = self.C.pop((j, i))
            M = Cji @ S
            MD = dsolve(art.Dfac[i], M.T, be)
            rec.append((j, M, MD))
            art.IA[j] = art.IA[j] - M @ MD
            art.pA[j] = art.pA[j] + Cji @ a_bias
            if p == -1:
                continue
            CPX = to_parent(X, Cji - M @ art.Dinv_Ut[i], be)
            if j == p:
                art.IA[p] = art.IA[p] + CPX + CPX.T
            else:
                self.add(j, p, CPX)
        for x, (j, Mj, _) in enumerate(rec):
            for k, _, MDk in rec[x + 1:]:
                self.add(j, k, -(Mj @ MDk))
        self.coupled[i] = rec
