"""Partial derivatives of constrained forward dynamics: ``(dddq/dq, dddq/dv, dddq/dtau,
dlam/dq, dlam/dv, dlam/dtau)`` at ``(q, v, tau)``, then the values ``(ddq, lam)`` they
are taken at, the semantics of Pinocchio's
``computeConstraintDynamicsDerivatives`` (Carpentier & Mansard, RSS 2018, extended to
contacts in Pinocchio's ``constrained-dynamics-derivatives.hxx``; here re-derived).

**Forward solve reused.**  The derivatives are those of the solution ``(ddq, lam)``
returned by the proximal method of Carpentier 2021 eq. 18 after ``iterations`` steps at
damping ``mu`` (Pinocchio's ``constraintDynamics`` with ``ProximalSettings(0, mu, K)``,
iterate for iterate the registered ``prox_ltl``; the last two outputs are this
``(ddq, lam)``, what Pinocchio's ``constraintDynamics`` leaves in ``data.ddq`` and
``data.lambda_c``, so one kernel gives an optimal-control node its value and
derivatives), written here on the dense dual::

    ddq_f = aba(q, v, tau),  M^-1 = minv(q),  D_mu = J M^-1 J^T + Rho,  Rho = diag(mu / w)
    lam_k = D_mu^-1 (Rho lam_{k-1} - (J ddq_f - a_c*)),   lam_0 = 0
    ddq   = ddq_f + (J M^-1)^T lam_K

The K steps are linear in their right-hand side: ``lam_K = -S_K (J ddq_f - a_c*)`` with
the symmetric ``S_K = sum_{k=1..K} (D_mu^-1 Rho)^(k-1) D_mu^-1`` (:func:`proximal_operator`),
formed once.  Without mimic joints ``ddq_f`` and ``M^-1`` come from one world pass and the
sparse ``L^T D L`` of ``M`` (:func:`~gen.algorithms.aba_derivatives.forward_ltdl`), whose
``M^-1 = W D^-1 W^T`` (``W = L^-1``, nonzero on each row's ancestors) is never formed in
the straight-line code: ``J M^-1 = ((J W) D^-1) W^T`` follows the tree's sparsity
(talos 6D soles: 6.3k operations against 27.3k for ``M^-1`` and ``J M^-1``) and
``M^-1`` enters ``P`` below as the product term ``W (W D^-1)^T``.

**Implicit differentiation of the KKT conditions** ``M ddq + b = tau + J^T lam``,
``J ddq + gamma + Kd J v = 0`` at the returned ``(ddq, lam)``, for x in (q, v, tau)::

    M dddq/dx - J^T dlam/dx = -dtau/dx,      J dddq/dx = -dac/dx

where ``dtau/dx`` are the partials of ``rnea(q, v, ddq) - J^T lam`` (``rnea_derivatives``
with the constraint forces as body-fixed external forces, ``dtau/dtau = -I``) and
``dac/dx`` those of the constraint acceleration at fixed ``ddq`` (frame formulas of
:mod:`gen.algorithms.world`; 3D rows the classical acceleration
``lin(a_f) + ang(v_f) x lin(v_f)``, 6D rows the spatial one; ``+ Kd dv_c/dx``).
Eliminating ``dddq/dx``: ``(J M^-1 J^T) dlam/dx = -R_x`` with
``R_x = dac/dx - J M^-1 dtau/dx``.  **How the damping enters**: as in Pinocchio, this
system is solved by the same K proximal steps, ``dlam/dx = -S_K R_x`` (redundant sets get
the minimum-norm limit, a converged solve the exact derivatives), then
``dddq/dx = M^-1 (J^T dlam/dx - dtau/dx)``.  With ``Q = S_K J M^-1`` (m x nv) and
``P = M^-1 - (J M^-1)^T Q`` (symmetric) these are, exactly::

    dddq/dtau = P,   dlam/dtau = -Q,
    dddq/dx = -Q^T dac/dx - P dtau/dx,   dlam/dx = Q dtau/dx - S_K dac/dx   (x = q, v)

one product of the dense ``P``, ``Q``, ``S_K`` with the sparse partials (a foot row
touches its leg and the base only; branch sparsity of ``dtau/dx``), formed by
``be.product``, which the C runs as vectorised loops (:mod:`gen.products`).  The dense
factors are such products too, whose loops run first: ``Q_n = -Q = S_n (J M^-1)``
(``S_n = -S_K``), its transpose ``Q_n^T = (J M^-1)^T S_n`` (``S_n`` symmetric; no output,
the ``A`` of the products below) and ``P = W (W D^-1)^T + Q_n^T (J M^-1)``, so the
straight-line code forms none of them (talos 6D soles: 34 -> 27 us, measured).

**Free-flyer columns** (a free-flyer base that is the only root, no mimic joint): as in
:mod:`gen.algorithms.aba_derivatives`, in the base's axes gravity is the linear base
acceleration ``a_g``, and every other quantity, the constraint rows included (LOCAL frame
rows, ``Kp = 0``), is relative to the base.  The base position columns are 0; its
orientation ``delta`` changes ``a_g`` by ``a_g x delta``, i.e. by ``A = -[a_g]x`` per
unit, which acts as the joint torque ``-M E A`` (``E`` the base's linear rows):
``dddq/dq[:, 3:6] = E A - Q^T J E A``, ``dlam/dq[:, 3:6] = -S_K J E A``, i.e. ``E A`` plus
the products' terms with ``J E A`` in place of ``dac/dq``'s columns 3:6 (and ``dtau/dq``'s
zero there).  With 3D rows
only and ``Kd = 0`` (classical accelerations and the forces are invariant under a
Galilean boost) ``dlam/dv[:, 0:3] = 0`` and ``dddq/dv[:, 0:3] = -E [w]x`` (6D rows, whose
spatial accelerations change under a boost, and ``Kd`` rows keep the product).

**Mimic joints** (``gen.model``): the world-frame passes run on the extended tree (every
mimic joint its own coordinate, :func:`~gen.kinematics.mimic_extension`) at ``q_ext(q)``,
``G v``, ``G ddq``; since ``J = J_ext G`` and mimic joints are revolute or prismatic
(``d q_ext / d q = G``), ``dtau/dx = G^T dtau_ext/dx_ext G`` and ``dac/dx = dac_ext/dx_ext G``
(:func:`~gen.kinematics.chain`); ``aba`` and ``minv`` are the dense solve of CRBA's ``M``.

Constraints: relative to the world with frame A moving (``TYPE:FRAME``), bilateral,
position rows without Baumgarte position gain (``Kp = 0``; ``Kd`` is supported).
Shapes: q (nq,1), v (nv,1), tau (nv,1) -> six nv x nv / m x nv matrices as named, then
ddq (nv,1) and lam (m,1).
Options: ``iterations`` (K, default 3), ``mu`` (default 1e-6).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..constraint_spec import as_constraint_set
from ..constraints import ConstraintSet
from ..errors import RbdgenError
from ..kinematics import chain, extended_state
from ..model import Model
from ..spatial import ang, cross3, lin, skew3
from .aba import aba
from .aba_derivatives import columns_from, forward_ltdl
from .dense import sym_product
from .minv import minv
from .pinocchio import proximal_setup
from .proximal import DEFAULT_ITERATIONS, DEFAULT_MU, Unmarked
from .sparse_ldl import fill_pattern, inverse_from_ltdl, ldl_factor
from .world import base_coordinates, frame_partials, tau_partials, world_forces, world_pass


def check_set(cset: ConstraintSet, algorithm: str) -> None:
    """The constraint sets the derivative algorithms handle (module docstring)."""
    for con in cset.constraints:
        if con.body1 < 0 or con.body2 >= 0:
            raise RbdgenError(f"{algorithm} handles constraints of a moving frame relative to the world "
                              f"('TYPE:FRAME'); '{con}' is not one")
        if con.unilateral or con.velocity:
            raise RbdgenError(f"{algorithm} handles bilateral position constraints only; '{con}' is not one")
    if cset.Kp != 0.0:
        raise RbdgenError(f"{algorithm}: Baumgarte position gain Kp={cset.Kp} is not supported (use Kp = 0)")


def constraint_partials(model: Model, cset: ConstraintSet, w, be, velocity: bool = False):
    """``(dc/dq, dc/dv)`` (m x nv) of the constraint rows at fixed ``ddq``: the
    acceleration rows ``a_c + Kd v_c`` (``velocity`` False) or the velocity rows ``v_c``
    (``velocity`` True; dc/dv is then J), from the world pass ``w``."""
    dq, dv = be.zeros(cset.m, model.nv), be.zeros(cset.m, model.nv)
    for ci, con in enumerate(cset.constraints):
        r0, kd = cset.offsets[ci], cset.gains(ci)[1]
        vf, _, dvq, dvv, daq, dav = frame_partials(model, w, con.body1, con.placement1, con.size, be,
                                                   velocity_only=velocity)
        for d in dvq:
            if velocity:
                cq, cv = dvq[d], dvv[d]
            else:
                cq, cv = daq[d], dav[d]
                if kd != 0.0:
                    cq, cv = cq + kd * dvq[d], cv + kd * dvv[d]
            if con.kind == "3D":
                if not velocity:       # classical acceleration: + d(ang(v_f) x lin(v_f))
                    cq = lin(cq) + cross3(ang(dvq[d]), lin(vf), be) + cross3(ang(vf), lin(dvq[d]), be)
                    cv = lin(cv) + cross3(ang(dvv[d]), lin(vf), be) + cross3(ang(vf), lin(dvv[d]), be)
                else:
                    cq, cv = lin(cq), lin(cv)
            dq[r0:r0 + con.size, d:d + 1] = cq
            dv[r0:r0 + con.size, d:d + 1] = cv
    return dq, dv


def constrained_derivatives(model: Model, q, v, tau, *, be, cset=None, iterations=DEFAULT_ITERATIONS,
                            mu=DEFAULT_MU):
    cset = as_constraint_set(model, cset)
    check_set(cset, "constrained_derivatives")
    ev = cset.evaluate(model, q, v, be=be)
    if model.has_mimic:
        sub = Unmarked(be)
        (ddq_f,) = aba(model, q, v, tau, be=sub)
        (Minv,) = minv(model, q, be=sub)
        inverse = dense_inverse(ev.J, Minv)
    else:                               # M^-1 = W diag(d) W^T, never formed in the straight-line code
        ddq_f, W, d = forward_ltdl(model, q, v, tau, be)
        inverse = factored_inverse(ev.J, W, d, be)
    JMinv = inverse.JMinv
    Sn = -proximal_operator(sym_product(JMinv.T, ev.J.T, be), cset.damping(mu), int(iterations), be)
    lam = Sn @ (ev.J @ ddq_f - ev.a_star)                                   # eq. 18, K steps
    ddq = ddq_f + JMinv.T @ lam
    be.mark("forward", ddq, lam)

    ext, qe, (ve, ae), G = extended_state(model, q, (v, ddq), be)     # mimic joints: chain rule
    w = world_pass(ext, qe, ve, ae, be)
    F = world_forces(ext, w, cset.body_forces(ext, ev, lam, be), be)
    dtau_dq, dtau_dv = chain(G, *tau_partials(ext, w, F, be)[:2], left=True)
    dac_dq, dac_dv = chain(G, *constraint_partials(ext, cset, w, be))
    be.mark("partials", dtau_dq, dtau_dv, dac_dq, dac_dv)

    nv, m = model.nv, cset.m
    Qn, QnT, P = dual_products(inverse, Sn, be)
    base = not model.has_mimic and base_coordinates(model)
    boost = base and all(con.kind == "3D" and cset.gains(ci)[1] == 0.0 for ci, con in enumerate(cset.constraints))
    known = (6 if base else 0, 3 if boost else 0)
    dtaus = [columns_from(X, k, be) for X, k in zip((dtau_dq, dtau_dv), known)]
    dacs = [columns_from(X, k, be) for X, k in zip((dac_dq, dac_dv), known)]
    bases = [(be.zeros(nv, nv), be.zeros(m, nv)) for _ in range(2)]
    if base:                            # the free-flyer's columns in closed form (module docstring):
        A = -skew3(lin(w.a0), be)       # J E A enters as dac's orientation columns
        dacs[0][:, 3:6] = ev.J[:, 0:3] @ A
        bases[0][0][0:3, 3:6] = A
    if boost:
        bases[1][0][0:3, 0:3] = -skew3(ang(v[0:6, 0:1]), be)
    out = []
    for (X, Y), dtau, dac in zip(bases, dtaus, dacs):
        out += [be.product(X, [(1.0, QnT, dac), (-1.0, P, dtau)]), be.product(Y, [(1.0, Sn, dac), (-1.0, Qn, dtau)])]
    ddq_dq, dlam_dq, ddq_dv, dlam_dv = out
    be.mark("kkt", ddq_dq, ddq_dv, P, dlam_dq, dlam_dv, Qn)
    return ddq_dq, ddq_dv, P, dlam_dq, dlam_dv, Qn, ddq, lam


class Inverse(NamedTuple):
    """``M^-1`` as the dual products read it: ``J M^-1`` (straight-line) and ``M^-1`` as a
    product ``base + terms`` (:func:`dual_products`)."""

    JMinv: object
    base: object
    terms: list


def dense_inverse(J, Minv) -> Inverse:
    """From a dense ``M^-1`` (mimic joints: :func:`~gen.algorithms.minv.minv`)."""
    return Inverse(J @ Minv, Minv, [])


def factored_inverse(J, W, d, be) -> Inverse:
    """From ``M^-1 = W diag(d) W^T`` (the tree's ``L^T D L``, ``W = L^-1``), never formed in
    the straight-line code: ``J M^-1 = ((J W) D^-1) W^T`` follows the tree's sparsity and
    ``M^-1`` is the product term ``W (W D^-1)^T``."""
    WD = be.hcat([W[:, k:k + 1] * d[k] for k in range(W.shape[0])])
    return Inverse((J @ WD) @ W.T, be.zeros(*W.shape), [(1.0, W, WD.T)])


def dual_products(inverse: Inverse, Sn, be):
    """``(Q_n, Q_n^T, P)`` as products (C loops, :mod:`gen.products`) with ``S_n = -S_K``:
    ``Q_n = S_n (J M^-1)``, ``Q_n^T = (J M^-1)^T S_n`` (``S_n`` symmetric; no output, the
    ``A`` of later products) and ``P = M^-1 + Q_n^T (J M^-1)``."""
    m, nv = inverse.JMinv.shape
    Qn = be.product(be.zeros(m, nv), [(1.0, Sn, inverse.JMinv)])
    QnT = be.product(be.zeros(nv, m), [(1.0, inverse.JMinv.T, Sn)])
    return Qn, QnT, be.product(inverse.base, [*inverse.terms, (1.0, QnT, inverse.JMinv)])


def proximal_operator(D, rho, iterations: int, be):
    """``S_K = sum_{k=1..K} (D_mu^-1 Rho)^(k-1) D_mu^-1`` (``D_mu = D + Rho``,
    ``Rho = diag(rho)``): K proximal steps ``X_k = D_mu^-1 (Rho X_{k-1} - R)`` from
    ``X_0 = 0`` give ``X_K = -S_K R`` for every right-hand side ``R``.  ``D_mu^-1`` from
    its dense ``L^T D L`` (:func:`~gen.algorithms.sparse_ldl.inverse_from_ltdl`), then
    Horner ``S_k = D_mu^-1 + (D_mu^-1 Rho) S_{k-1}``; every ``S_k`` is symmetric (a sum
    of ``D_mu^-1 (Rho D_mu^-1)^j``), so its upper triangle is formed and mirrored."""
    m = D.shape[0]
    pattern = fill_pattern([set(range(k)) for k in range(m)])
    dinv, L = ldl_factor(pattern, [D[k, k] + float(rho[k]) for k in range(m)],
                         {(k, i): D[k, i] for k in range(m) for i in pattern[k]}, be)
    Dinv, _ = inverse_from_ltdl(pattern, dinv, L, be)
    RhoDinv = be.asarray(np.diag(rho)) @ Dinv                # (D_mu^-1 Rho)^T
    S = Dinv
    for _ in range(1, iterations):
        S = Dinv + sym_product(RhoDinv, S, be)
    return S


# --- registry helpers ------------------------------------------------------------------

def constrained_derivatives_outputs(model: Model, cset) -> list[tuple[str, int, int]]:
    m, nv = as_constraint_set(model, cset).m, model.nv
    return [("ddq_dq", nv, nv), ("ddq_dv", nv, nv), ("ddq_dtau", nv, nv),
            ("dlam_dq", m, nv), ("dlam_dv", m, nv), ("dlam_dtau", m, nv), ("ddq", nv, 1), ("lam", m, 1)]


def pinocchio_constraint_derivatives(pin, pm, pd, q, v, tau, *, cset, options):
    """``constraintDynamics`` (K proximal steps at mu), then
    ``computeConstraintDynamicsDerivatives`` with the same settings; the values are the
    ``data.ddq`` and ``data.lambda_c`` it leaves."""
    cms, cds, settings = proximal_setup(pin, pm, pd, cset, options)
    pin.constraintDynamics(pm, pd, q, v, tau, cms, cds, settings)
    out = tuple(np.array(x) for x in pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, settings))
    return out + (np.array(pd.ddq), np.array(pd.lambda_c))
