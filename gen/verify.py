"""Verification: a compiled kernel against NumPy, Pinocchio (URDF models) and MuJoCo
(MJCF models, :mod:`gen.mujocoref`: MuJoCo's own rigid-body computation) on random
states, with tolerances derived from the problem.

**The tolerance of a comparison** is ``max(rtol, floor)``: ``rtol`` the user's (``--rtol``,
default :data:`VERIFY_TOL`), ``floor`` what rounding alone can make two correct
float64 computations of the same quantity differ by.  Exact recursions (RNEA, CRBA, ABA,
the factorisations, the Delassus matrices) lose no more than a few ulps per operation and
have no floor above ``rtol``.  A formulation that solves with an ill-conditioned matrix
has the floor ``slack eps kappa`` (:class:`~gen.algorithms.registry.Floor`), ``kappa`` the
condition number of the matrix it actually factorises, computed at every state compared
(the worst is printed):

* ``augmented``: ``M_mu = M + J^T Rho^-1 J``, ``Rho = diag(mu / w)`` — the
  augmented-Lagrangian solvers (``prox_ltls``, ``constrained_aba``, the impact map) and
  cABA-OSIM add the penalty ``1/mu`` to the inertia: ``kappa = |M_mu| |M^-1|``
  (:func:`augmented_condition`, ~|J|^2 / (mu lambda_min(M)): 5e9 on solo12's four feet at
  ``mu = 1e-6``), the normwise bound ``eps kappa`` of a backward-stable solve (measured 1e-3
  to 1e-2 of it, on CPUs with and without FMA);
* ``delassus``: ``J M^-1 J^T + Rho`` — implicit differentiation of the KKT conditions
  (the constrained and impact derivatives), ``~lambda_max / mu`` on a redundant set.

Where the floor exceeds ``rtol`` the row's ``note`` says so: the formulation, not the
kernel, limits the agreement.  Comparisons are relative: ``max|x - ref| / max(1, max|ref|)``.

**States** are random (``--seed``); constrained ones well posed (:func:`well_posed_q`).
"""
from __future__ import annotations

import numpy as np

from . import mujocoref, pinref
from .algorithms import ALGORITHMS
from .api import get_algorithm, run
from .backend import NUMPY
from .conditioning import CONDITION, EPS, augmented_condition, damped_condition, floor_at, kernel_mu  # noqa: F401

VERIFY_TOL = 1e-9                     # relative: max|x - ref| / max(1, max|ref|)
# Random states of constrained kernels are well posed: the non-zero singular values of J
# within this factor of the largest (near a singular configuration the proximal rate
# rho / (rho + sigma_min) is slow and the damped solution leaves the exact one), the best
# of WELL_POSED_DRAWS draws otherwise.
WELL_POSED = 1e-3
WELL_POSED_DRAWS = 100
#: the matrix each kind of floor is the condition number of, for the note
KAPPA_NAMES = {"augmented": "|M + J^T Rho^-1 J| |M^-1|", "delassus": "J M^-1 J^T + Rho"}


# --- states --------------------------------------------------------------------------------

def random_inputs(model, algorithm, rng, cset=None) -> list[np.ndarray]:
    """Random inputs for ``algorithm``: a random configuration for ``q`` (well posed for
    the constraint set ``cset``, :func:`well_posed_q`), standard normal vectors for the
    others."""
    return [well_posed_q(model, rng, cset) if name == "q" else rng.normal(size=n)
            for name, n in get_algorithm(algorithm).inputs(model, cset)]


def _conditioning(model, cset, q) -> float:
    """Smallest over largest non-zero singular value of the constraint Jacobian at q."""
    s = np.linalg.svd(cset.jacobian(model, NUMPY.asarray(q), be=NUMPY), compute_uv=False)
    return float(s[s > 1e-9 * s[0]].min() / s[0]) if s[0] > 0 else 0.0


def well_posed_q(model, rng, cset=None) -> np.ndarray:
    """A random configuration at which the constraints of ``cset`` are well posed
    (:data:`WELL_POSED`): the first of up to :data:`WELL_POSED_DRAWS` draws that is,
    else the best conditioned one."""
    if cset is None or not getattr(cset, "m", 0):
        return model.random_q(rng)
    best, best_ratio = None, -1.0
    for _ in range(WELL_POSED_DRAWS):
        q = model.random_q(rng)
        ratio = _conditioning(model, cset, q)
        if ratio >= WELL_POSED:
            return q
        if ratio > best_ratio:
            best, best_ratio = q, ratio
    return best


def runtime_defaults(manifest: dict) -> list[np.ndarray]:
    """The run-time parameters of a kernel built with runtime_params at their built values
    (the manifest's defaults, the values Pinocchio's reference uses); [] for other kernels."""
    rt = manifest.get("runtime_params") or {}
    return [np.array(rt[name]["default"], dtype=float).reshape(-1) for name in ("mu", "gains", "weights") if name in rt]


def floors(name: str, route: str | None = None) -> list:
    """The :class:`~gen.algorithms.registry.Floor` rows a kernel of ``name`` is held to: its
    row's, and on the AD route its value algorithm's too (the AD kernel differentiates that
    algorithm's graph and rounds as it does: constrained_derivatives' AD route is the
    Jacobian of constrained_aba, an augmented Lagrangian)."""
    algo = ALGORITHMS[name]
    return [algo.floor] + ([ALGORITHMS[algo.ad.value].floor] if route == "ad" and algo.ad else [])


def kappas(name: str, model, cset, q, options: dict, route: str | None = None) -> dict:
    """``{kind: condition number at q}`` for every conditioned floor of the kernel."""
    if cset is None or not cset.m:
        return {}
    mu = kernel_mu(ALGORITHMS[name], options)
    kinds = {f.kappa for f in floors(name, route) if f.kappa}
    return {k: CONDITION[k](model, cset, q, mu) for k in sorted(kinds)}


def tolerances(name: str, rtol: float, kappa: dict | None = None, route: str | None = None) -> dict:
    """The relative tolerance of each comparison of :func:`verify_kernel`: ``rtol`` floored
    by the kernel's :func:`floors` (their fixed parts, and ``slack eps kappa`` with the
    worst condition numbers ``kappa`` of the states compared).  NumPy runs the analytical
    row, so ``numpy_pinocchio`` takes the row's own floor only."""
    kappa = kappa or {}

    def floor(rows, fixed):
        return max([rtol] + [fixed(f) for f in rows]
                   + [f.slack * EPS * kappa[f.kappa] for f in rows if f.kappa in kappa])

    kernel, row = floors(name, route), floors(name)
    return {"c_numpy": floor(kernel, lambda f: f.c_numpy), "c_pinocchio": floor(kernel, lambda f: f.pinocchio),
            "numpy_pinocchio": floor(row, lambda f: f.pinocchio), "c_mujoco": floor(kernel, lambda f: f.pinocchio)}


def note(name: str, rtol: float, kappa: dict | None, route: str | None = None) -> str:
    """Where a conditioned floor exceeds ``rtol``: which matrix's condition number sets it."""
    kappa = kappa or {}
    over = [f"eps kappa({KAPPA_NAMES[f.kappa]}) floor" for f in floors(name, route)
            if f.kappa in kappa and f.slack * EPS * kappa[f.kappa] > rtol]
    return "; ".join(dict.fromkeys(over))


# --- the comparison ------------------------------------------------------------------------

def relerr(got, ref) -> float:
    """max over outputs of ``max|got - ref| / max(1, max|ref|)``."""
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    return max(float(np.max(np.abs(np.asarray(g) - np.asarray(r)))) / max(1.0, float(np.max(np.abs(r))))
               for g, r in zip(got, ref))


def verify_kernel(kernel, samples: int, seed: int = 0) -> dict:
    """Worst relative errors of a compiled kernel against NumPy, Pinocchio and (MJCF
    models) MuJoCo over ``samples`` random states: ``{"c_numpy", "c_pinocchio",
    "numpy_pinocchio", "c_mujoco"}`` (``None`` where there is no such reference,
    :func:`gen.pinref.supports`, :func:`gen.mujocoref.supports`), and ``"kappa"``: the worst condition
    number of each conditioned floor over the states (:func:`kappas`).  NumPy and
    Pinocchio run with the kernel's options and constraint set (gains, weights); where
    Pinocchio's value is a converged solution (the row's ``pinocchio.converged`` options:
    the impact map) ``numpy_pinocchio`` compares a converged NumPy run and ``c_pinocchio``
    is ``None`` (the kernel's K iterates are not that solution)."""
    model, name, cset = kernel.model, kernel.algorithm.name, kernel.cset
    options = dict(kernel.manifest.get("options") or {})
    route = (kernel.manifest.get("route") or {}).get("used")
    pm = None
    if pinref.available() and pinref.supports(model, name, cset, options):
        pm = pinref.pin_model(model)
    converged = kernel.algorithm.pinocchio.converged if pm is not None else None
    rng = np.random.default_rng(seed)
    mj = mujocoref.supports(model, name, cset)
    worst = {"c_numpy": 0.0, "c_pinocchio": None if pm is None or converged else 0.0,
             "numpy_pinocchio": None if pm is None else 0.0, "c_mujoco": 0.0 if mj else None, "kappa": {}}
    params = runtime_defaults(kernel.manifest)
    for _ in range(samples):
        ins = random_inputs(model, name, rng, cset)
        c = kernel(*ins, *params)
        ref = run(model, name, *ins, *params, constraints=cset, **options)
        worst["c_numpy"] = max(worst["c_numpy"], relerr(c, ref))
        if mj:
            worst["c_mujoco"] = max(worst["c_mujoco"], relerr(c, mujocoref.reference(model, name, *ins)))
        for kind, k in kappas(name, model, cset, ins[0], options, route).items():
            worst["kappa"][kind] = max(worst["kappa"].get(kind, 1.0), k)
        if pm is not None:
            p = pinref.reference(model, name, *ins, pmodel=pm, cset=cset, options=options)
            if converged:
                ref = run(model, name, *ins, constraints=cset, **{**options, **converged})
            else:
                worst["c_pinocchio"] = max(worst["c_pinocchio"], relerr(c, p))
            worst["numpy_pinocchio"] = max(worst["numpy_pinocchio"], relerr(ref, p))
    return worst


def passed(name: str, worst: dict, rtol: float, route: str | None = None) -> bool:
    tols = tolerances(name, rtol, worst["kappa"], route)
    return all(worst[k] is None or worst[k] <= tol for k, tol in tols.items())
