"""Articulated-body algorithm, forward dynamics ``ddq = M(q)^-1 (tau - b(q, v))``.

Featherstone 2008, Table 7.1, LOCAL frames, Pinocchio's conventions: the three passes of
:mod:`gen.algorithms.articulated` (forward: velocities, ``c_i``, ``IA_i = I_i``,
``pA_i = v_i x* I_i v_i``; backward: joint terms, articulated inertias and bias forces;
roll-out: ``ddq_i = D_i^-1 u_i - D_i^-1 U_i^T a'_i``), with ``a_0 = -g``.  At a root the
roll-out solves ``D^-1 (u - U^T a')`` directly, so a free-flyer never forms ``D^-1 U^T``.
With mimic joints (``gen.model``) the articulated recursion does not apply (one dof
moves bodies on several branches; Pinocchio's ``aba`` refuses them): ``ddq`` is the
dense solve ``M^-1 (tau - b)`` of :func:`~gen.algorithms.crba.crba` and
:func:`~gen.algorithms.rnea.nle` (unrolled LDL^T, :mod:`gen.algorithms.dense`).
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> ddq (nv,1).
"""
from __future__ import annotations

from ..model import Model
from .articulated import backward_pass, forward_pass, rollout
from .crba import crba
from .dense import ldlt_factor, ldlt_solve
from .rnea import nle


def aba(model: Model, q, v, tau, *, be, fext=None):
    """``fext``: optional list of external spatial forces per body (LOCAL frame)."""
    if model.has_mimic and fext is None:
        return (mimic_solve(model, q, tau - nle(model, q, v, be=be)[0], be),)
    n = model.nbodies
    art, _ = forward_pass(model, q, v, be, fext=fext, phase="forward")
    backward_pass(model, q, tau, art, be, phase="backward")
    acc, ddq = [None] * n, [None] * n
    rollout(model, range(n), art, acc, ddq, be, solve_roots=True)
    out = be.vcat(ddq)
    be.mark("acceleration", out)
    return (out,)


def mimic_solve(model: Model, q, rhs, be):
    """``M(q)^-1 rhs`` by a dense LDL^T of CRBA's ``M`` (models with mimic joints)."""
    M = crba(model, q, be=be)[0]
    be.mark("crba", M)
    return ldlt_solve(ldlt_factor(M, be), rhs, be)
