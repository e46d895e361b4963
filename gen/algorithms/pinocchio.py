"""Pinocchio's counterparts of the registered algorithms, in rbdgen's output shapes.

Each function takes the ``pinocchio`` module as its first argument (nothing here imports
it), a ``pin.Model`` ``pm`` and its ``pin.Data`` ``pd``, the inputs as 1-D arrays and,
for constrained algorithms, the :class:`~gen.constraints.ConstraintSet` and the
algorithm's options.  The registry rows (:mod:`gen.algorithms`) point at them; the
conditions under which each is a valid reference are the row's
:class:`~gen.algorithms.registry.PinocchioRef` flags.

* ``crba``: Pinocchio fills the upper triangle; it is symmetrised.
* ``aba`` and ``minv`` on a model with mimic joints, which Pinocchio's ``aba`` and
  ``computeMinverse`` refuse: ``M^-1 (tau - nle)`` and ``M^-1`` from its ``crba`` and
  ``nonLinearEffects`` (NumPy's dense solve).
* ``ltdl``: Pinocchio's ``M = U D U^T`` is rbdgen's ``L^T D L`` with ``L = U^T``;
  ``ltl``: ``L = sqrt(D) U^T``.
* Constraints become ``pin.RigidConstraintModel`` with ``reference_frame = LOCAL``,
  ``joint1`` = frame A's joint, ``joint2`` = frame B's joint or the world (0) with the
  anchor placement, and the corrector gains ``cset.gains(c)``.  Pinocchio's joint ids
  are rbdgen's body indices + 1 (same joint order).
* The proximal solvers: ``pin.constraintDynamics`` with ``ProximalSettings(accuracy=0,
  mu, max_iter=K)``: from ``lam_0 = 0`` Pinocchio's K-th proximal iterate *is* rbdgen's
  K-th iterate (Carpentier 2021 eq. 18), so the reference runs the kernel's fixed
  ``iterations`` (or ``max_iter``) at its ``mu``.
* ``impulse``: ``pin.impulseDynamics`` at damping :data:`EXACT_MU`, one exact solve:
  the converged impact map (rbdgen's first iterate only at the kernel's own mu).
* ``impulse_derivatives``: the same solve at :data:`EXACT_DERIVATIVE_MU`: Pinocchio's
  derivatives of the damped solve move linearly with the damping, 100 times more than
  its value (ur5 6D:tool0 near a singular pose, Delassus eigenvalue 2e-4: 3.9e-7
  relative at 1e-12, 3.9e-9 at 1e-14, 1e-11 from 1e-18 on, against central differences
  and rbdgen's converged iteration alike).  Exact only where J has full row rank
  (``PinocchioRef.full_rank``).
* ``delassus``, ``kkt_delassus``: ``pin.computeDelassusMatrix`` with ``mu = 0``.
"""
from __future__ import annotations

import numpy as np

from .proximal import DEFAULT_ITERATIONS, DEFAULT_MU

EXACT_MU = 1e-12          # impulseDynamics' damping for the exact impact map
EXACT_DERIVATIVE_MU = 1e-20   # its damping for computeImpulseDynamicsDerivatives


def symmetrise(M: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose upper triangle is ``M``'s."""
    return np.triu(M) + np.triu(M, 1).T


def rnea(pin, pm, pd, q, v, a, **_):
    return np.array(pin.rnea(pm, pd, q, v, a))


def nle(pin, pm, pd, q, v, **_):
    return np.array(pin.nonLinearEffects(pm, pd, q, v))


def crba(pin, pm, pd, q, **_):
    return symmetrise(np.array(pin.crba(pm, pd, q)))


def has_mimic(pm) -> bool:
    return len(pm.mimicking_joints) > 0


def aba(pin, pm, pd, q, v, tau, **_):
    if has_mimic(pm):
        return np.linalg.solve(crba(pin, pm, pd, q), tau - nle(pin, pm, pd, q, v))
    return np.array(pin.aba(pm, pd, q, v, tau))


def ltdl(pin, pm, pd, q, **_):
    pin.crba(pm, pd, q)
    pin.cholesky.decompose(pm, pd)
    return np.array(pd.U).T.copy(), np.array(pd.D).copy()


def ltl(pin, pm, pd, q, **_):
    L, D = ltdl(pin, pm, pd, q)
    return np.sqrt(D)[:, None] * L


def crba_solve(pin, pm, pd, q, b, **_):
    pin.crba(pm, pd, q)
    pin.cholesky.decompose(pm, pd)
    return np.array(pin.cholesky.solve(pm, pd, np.array(b, dtype=float)))


def _se3(pin, M):
    return pin.SE3(np.asarray(M.R, dtype=float), np.asarray(M.p, dtype=float))


def rigid_constraints(pin, pm, cset):
    """``(models, datas)``: one ``pin.RigidConstraintModel`` per constraint of ``cset``
    (see the module docstring)."""
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for ci, c in enumerate(cset.constraints):
        kind = pin.ContactType.CONTACT_3D if c.kind == "3D" else pin.ContactType.CONTACT_6D
        cm = pin.RigidConstraintModel(kind, pm, c.body1 + 1, _se3(pin, c.placement1), c.body2 + 1,
                                      _se3(pin, c.placement2), pin.ReferenceFrame.LOCAL)
        cm.m_baumgarte_parameters.Kp, cm.m_baumgarte_parameters.Kd = cset.gains(ci)
        cms.append(cm)
        cds.append(cm.createData())
    return cms, cds


def fixed_iterations(options: dict) -> int:
    """The proximal solvers' fixed iteration count: ``max_iter`` if given, else
    ``iterations``."""
    for key in ("max_iter", "iterations"):
        if options.get(key) is not None:
            return int(options[key])
    return DEFAULT_ITERATIONS


def proximal_setup(pin, pm, pd, cset, options: dict):
    """``(models, datas, settings)`` for ``constraintDynamics`` with ``cset``'s constraints
    initialised on ``pd`` and ``ProximalSettings(accuracy=0, mu, K)``: exactly K proximal
    steps at the options' damping (:func:`fixed_iterations`)."""
    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    mu = options.get("mu")
    return cms, cds, pin.ProximalSettings(0.0, float(DEFAULT_MU if mu is None else mu), fixed_iterations(options))


def constraint_dynamics(pin, pm, pd, q, v, tau, *, cset, options):
    """Pinocchio's K-th proximal iterate (accuracy 0: exactly K steps) at the same mu."""
    cms, cds, settings = proximal_setup(pin, pm, pd, cset, options)
    ddq = pin.constraintDynamics(pm, pd, q, v, tau, cms, cds, settings)
    return np.array(ddq), np.array(pd.lambda_c)


def impulse_dynamics(pin, pm, pd, q, v_minus, *, cset, options):
    """The exact impact map: one solve at damping :data:`EXACT_MU`."""
    cms, cds = rigid_constraints(pin, pm, cset)
    pin.initConstraintDynamics(pm, pd, cms, cds)
    e = float(options.get("restitution", 0.0))
    v_plus = pin.impulseDynamics(pm, pd, q, v_minus, cms, cds, e, pin.ProximalSettings(0.0, EXACT_MU, 1))
    return np.array(v_plus), np.array(pd.impulse_c)


def delassus(pin, pm, pd, q, *, cset, options):
    cms, cds = rigid_constraints(pin, pm, cset)
    return np.array(pin.computeDelassusMatrix(pm, pd, q, cms, cds, 0.0))


def damped_delassus_inverse(pin, pm, pd, q, *, cset, options):
    """``(G + diag(rho))^-1``: G by ``computeDelassusMatrix`` (mu = 0), ``rho = mu / weight``
    per row at the options' damping, inverted densely by NumPy (the Python binding has no
    ``computeDampedDelassusMatrixInverse``; the benchmark shim times that one)."""
    mu = options.get("mu")
    rho = cset.damping(float(DEFAULT_MU if mu is None else mu))
    return np.linalg.inv(delassus(pin, pm, pd, q, cset=cset, options=options) + np.diag(rho))
