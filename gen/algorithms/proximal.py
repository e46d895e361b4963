"""Pieces shared by the four proximal constrained-dynamics solvers (``prox_ltl``,
``prox_ltls``, ``constrained_aba``, ``prox_pv``).

**The proximal parameter mu, in both senses.**  Options take ``mu`` in Pinocchio's sense:
the *damping* of the dual (Carpentier 2021 eq. 18, the ``-mu I`` block of ``K_mu``; default
``1e-6``).  Sathya 2024 writes the same method with the *penalty* ``mu_S = 1/mu`` (``1e6``):
``M_mu = M + mu_S J^T J`` (eq. 16a), ``Lambda_mu^-1 = Lambda^-1 + (1/mu_S) I`` (eq. 13b).
A constraint of weight ``w`` gets the damping ``rho = mu / w`` on its rows (Sathya 2024
Remark 2, ``R_E^-1``), see :meth:`gen.constraints.ConstraintSet.damping`.

**One iteration sequence.**  In Pinocchio's sign (``M ddq + b = tau + J^T lam``), each
solver produces, from ``lam_0 = 0``, the iterates of the proximal-point method on the dual,
equivalently the augmented-Lagrangian method (Sathya 2024 §II-D3)::

    M ddq_k = tau - b + J^T lam_k,    J ddq_k - a_c* = rho (lam_{k-1} - lam_k),

so at equal ``mu`` and iteration count the four agree iterate by iterate, and ``lam``
fed back as external forces reproduces ``ddq`` exactly at every iterate.

**Iterations.**  ``iterations`` (default 3) proximal steps are unrolled; the SX trace always
runs that many (``be.converged`` is False for SX: the count is static and recorded).  With
a tolerance ``tol`` the NumPy run exits early when the residual test ``<= tol``;
``max_iter`` (if given, else ``iterations`` if given, else ``DEFAULT_MAX_ITER`` = 200) is
the cap.  Without ``tol`` both backends run exactly the cap.  The emitted C applies the
same test in a driver that loops a traced step (:func:`gen.trace.trace_driver`).  (Sathya
2024 Alg. 3 also stops when the iterates stagnate, which detects the least-squares
solution of an infeasible set; near a singular configuration the convergence is slow
enough (rate ``rho / (rho + sigma_min(J M^-1 J^T))``) to look like stagnation, so only the
residual is used: an infeasible set runs to the cap and returns the least-squares iterate.)

**Honest residual.**  The reported ``residual`` is computed from the returned iterate,
never a quantity internal to the iteration: ``|J ddq_k - a_c*|_inf`` (for the impact map
``|J v+ + e J v-|_inf``): prox_ltl and prox_ltls evaluate ``J ddq_k - a_c*`` from the
returned ``ddq_k``; constrained_aba, prox_pv and impulse ``K a_b - k`` per constraint from
the body accelerations of the returned roll-out (the same linear map in maximal
coordinates).  prox_ltl and prox_pv test the dual difference ``rho (lam_{k-1} - lam_k)``
(O(m), equal in exact arithmetic; it is exactly 0 at a fixed point of the iteration while
the true residual is ~1e-13) and report the true one (:class:`Iterate`).  The
augmented-Lagrangian solvers also test and report the dynamics equation's residual
``M ddq_k + b - tau - J^T lam_k`` relative to ``max(1, |tau|_inf, |J^T lam_k|_inf)``
(:func:`relative_residual`): the ALM iterate satisfies it only to the augmented matrix's
rounding, so their residual is the KKT residual of the returned ``(ddq, lam)``.
All three do so with ``tol`` only (a fixed-K run returns Pinocchio's K-th iterate at the
least cost, its residual the constraint one): prox_ltls every iteration (its correction
form carries it), constrained_aba and the impact map for the returned iterate, by RNEA with the
constraint forces as external forces (:func:`dynamics_residual`).  The dual solvers
satisfy it by construction (``ddq`` is the forward dynamics of ``tau + J^T lam``, a
backward-stable solve with ``M``).  A run with ``tol`` is converged iff the reported
residual is ``<= tol``; otherwise ``gen.run`` and compiled kernels warn
:class:`gen.errors.NotConvergedWarning` and the C driver returns
``RBDGEN_ERR_NOT_CONVERGED``.  A constraint residual ``tol`` bounds the force error by
``tol / sigma_min(J M^-1 J^T)``.

**Accuracy and the default mu.**  The dual methods (``prox_ltl``, ``prox_pv``) never form
``1/mu``-sized numbers and reach the KKT solution to ~1e-13 at the default ``mu = 1e-6``.
The augmented-Lagrangian ones (``prox_ltls``, ``constrained_aba``, and the impact map)
add ``J^T J / mu`` to the inertia, so rounding in the directions the constraints leave
free enters at ~``c eps / mu`` with ``c ~ |J|^2 / lambda_min(M)``; verification holds them
to ``eps |M_mu| |M^-1|`` (:mod:`gen.conditioning`).  With ``tol`` prox_ltls iterates in correction form
(iterative refinement against the KKT residual, :func:`.prox_ltls.step`), so the solve's
rounding falls on each correction instead of the iterate; the multiplier update
``lam - rho^-1 r`` keeps a floor ``~eps |a_c*| / rho`` in ``lam``.  Consequences: (1)
``mu`` below ``ALM_MU_FLOOR = 1e-6`` (``registry.ALM_MU``) is refused for these rows (and
caba_osim[f]); (2) a run with ``tol`` and no ``mu`` uses ``ALM_CONVERGED_MU = 1e-4`` for
them (the converged solution does not depend on mu; ``DEFAULT_MU`` for the dual ones):
at ``tol = 1e-10`` the named sets converge in 3-19 iterations to within 3e-9 of the exact
KKT solution with their KKT residual below tol (at 1e-5 the dynamics residual stayed at
1.6e-10 on solo12's feet); (3) ``-a auto`` excludes them where their floor exceeds
``tol`` (:func:`gen.choose.floor_above_tol`).  A fixed-K run keeps ``mu = 1e-6``: its K-th
iterate is Pinocchio's.
Outputs: ``ddq`` (nv), ``lam`` (m), ``iterations`` (the number of proximal steps taken;
0 with no constraints) and ``residual`` (see above).

**Run-time parameters.**  With the option ``runtime_params`` (registry.RUNTIME_PARAMS) the
solver's inputs end with ``mu`` (1 x 1), for the rows that read them ``gains`` =
``[Kp, Kd, Kv]`` (3 x 1; :class:`gen.constraints.ConstraintSet`'s set-wide gains), and
``weights`` (one per constraint; ``rho = mu / weight`` on its rows).
:meth:`ProximalSolver.start` takes them off the inputs for :class:`Proximal`: numbers (the
NumPy run) replace the built-in values and run the same code; symbols (a trace) make
``rho`` one expression ``mu / weight`` per constraint and the set's gains symbols
(:meth:`ConstraintSet.with_gains`, ``runtime=True``), so that the C takes them per call
(docs/ARCHITECTURE.md, "Run-time parameters").  Every solver reads ``rho`` as a list of
floats or backend values, never converting it.

**Setup and step.**  Each solver is a :class:`ProximalSolver`: ``setup`` computes what
every iteration reads (``const``: factors, articulated inertias, constraint terms) and
the loop state of the first iteration (``lam_0 = 0`` plus whatever the iterations
update), ``step`` maps a loop state to the next :class:`Iterate`.  Calling the solver
composes them with the stopping test; that one composition is the NumPy run and the
fixed-K trace, and the early-exit driver traces setup and step separately.

**Phases** (``be.mark``; Sathya 2024 Fig. 1 blocks in brackets), the same names in the
four solvers: ``kinematics`` (placements, velocities, bias forces, constraint Jacobian
and ``a_c*`` or the rows ``K``, ``k``), ``factorisation`` (``M`` and its sparse
factor [M^-1], ``M_mu`` and its factor [M_mu^-1], or the articulated-body sweep [H^A]),
``delassus`` (dual solvers only: the damped Delassus matrix and its factor [Lambda]),
``iteration_1``, ``iteration_2``, ... (what it takes to get ``lam_k`` and ``r_k`` from
the previous iterate [proximal]), ``acceleration`` (``ddq`` of the returned iterate beyond
what its iteration computed).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..constraint_spec import as_constraint_set
from ..constraints import ConstraintSet
from ..errors import RbdgenError
from ..model import Model
from .rnea import rnea

DEFAULT_ITERATIONS = 3
DEFAULT_MU = 1e-6             # Pinocchio's damping: the K-th iterate of a fixed-K run is Pinocchio's
DEFAULT_MAX_ITER = 200        # the cap of a run with tol and neither max_iter nor iterations
#: the default mu of a run with tol (a converged solution does not depend on mu) for the
#: augmented-Lagrangian formulations: their KKT residual (dynamics equation included) then
#: reaches tol = 1e-10 on the named sets in 3-19 iterations (rate mu / (mu + sigma_min))
ALM_CONVERGED_MU = 1e-4
PROXIMAL_OPTIONS = ("iterations", "mu", "tol", "max_iter", "runtime_params")


# --- registry helpers ------------------------------------------------------------------

def constrained_inputs(model: Model, cset) -> list[tuple[str, int]]:
    as_constraint_set(model, cset)          # validate the spec early, with its own message
    return [("q", model.nq), ("v", model.nv), ("tau", model.nv)]


def constrained_outputs(model: Model, cset) -> list[tuple[str, int, int]]:
    m = as_constraint_set(model, cset).m
    return [("ddq", model.nv, 1), ("lam", m, 1), ("iterations", 1, 1), ("residual", 1, 1)]


# --- the iteration controller ------------------------------------------------------------

def default_mu(mu, tol, converged_mu: float = DEFAULT_MU) -> float:
    """``mu`` if given, else ``DEFAULT_MU`` for a fixed-K run and ``converged_mu`` (the
    solver's) with a tolerance ("Accuracy" in the module docstring)."""
    if mu is not None:
        return float(mu)
    return DEFAULT_MU if tol is None else float(converged_mu)


class Proximal:
    """Options, damping and the stopping test shared by the solvers."""

    def __init__(self, model: Model, cset, be, iterations=None, mu=None, tol=None, max_iter=None,
                 converged_mu=DEFAULT_MU, runtime_params=False, params=None):
        self.cset: ConstraintSet = as_constraint_set(model, cset)
        if tol is not None and not tol >= 0:
            raise RbdgenError(f"tolerance tol={tol} must be non-negative")
        if max_iter is not None:
            cap = max_iter
        elif iterations is not None:
            cap = iterations
        else:
            cap = DEFAULT_ITERATIONS if tol is None else DEFAULT_MAX_ITER
        if int(cap) != cap or cap < 1:
            raise RbdgenError(f"the number of proximal iterations must be a positive integer, got {cap}")
        self.be, self.n, self.mu = be, int(cap), default_mu(mu, tol, converged_mu)
        self.tol = None if tol is None else float(tol)
        #: the run-time parameters were traced as symbols ("Run-time parameters" above)
        self.runtime = bool(runtime_params) and be.symbolic
        self.weights = None           # run-time weights (symbols), else the constraints' own
        if runtime_params:
            self._take(params or {})
        self.rho = self.damping() if self.cset.m else None
        self.k, self.res = 0, 0.0

    def _take(self, params: dict) -> None:
        """Use the run-time parameters ``params`` (name -> backend value: 1 x 1 ``mu``,
        3 x 1 ``gains`` = [Kp, Kd, Kv], ``weights`` one per constraint): numbers replace
        the built-in values (checked), symbols make them inputs of the trace."""
        if "mu" in params:
            mu = params["mu"][0, 0]
            self.mu = mu if self.runtime else float(mu)
        if "gains" in params:
            g = [params["gains"][i, 0] for i in range(3)]
            self.cset = self.cset.with_gains(*(g if self.runtime else map(float, g)), runtime=self.runtime)
        if "weights" in params:
            w = [params["weights"][c, 0] for c in range(len(self.cset))]
            if self.runtime:
                self.weights = w
            else:
                self.cset = self.cset.with_weights([float(x) for x in w])

    def damping(self) -> list:
        """Per-row ``rho = mu / weight`` (:meth:`ConstraintSet.damping`): floats, or with a
        run-time ``mu`` or weights backend values (one per constraint, shared by its rows)."""
        if not self.runtime:
            return [float(x) for x in self.cset.damping(self.mu)]
        weights = self.weights or [c.weight for c in self.cset.constraints]
        return [self.mu / w for c, w in zip(self.cset.constraints, weights) for _ in range(c.size)]

    def step(self, r) -> bool:
        """Record the residual ``r = J ddq_k - a_c*`` of a new iterate; True to stop."""
        be = self.be
        self.k += 1
        self.res = norm_inf(r, be)
        if self.k >= self.n:
            return True
        return self.tol is not None and be.converged(self.res, self.tol)

    def outputs(self, ddq, lam, residual=None):
        """The solver's outputs; ``residual`` the true constraint residual of ``ddq`` when
        the stopping test used another expression of it (the dual solvers' iterates)."""
        be = self.be
        if lam is None:
            lam = be.zeros(0, 1)
        res = (self.res if residual is None else norm_inf(residual, be)) if self.k else 0.0
        return ddq, lam, be.asarray([[float(self.k)]]), be.vcat([res])


@dataclass
class Iterate:
    """Iterate k of a solver's ``step``: ``state`` (the loop state step k+1 starts from),
    ``lam`` (``lam_k``, m x 1), ``r`` (the residual the stopping test reads, m x 1),
    ``ddq`` (a function of no argument giving ``ddq_k``: only the returned iterate needs
    it) and ``true_r``: None when ``r`` is ``J ddq_k - a_c*`` evaluated from the returned
    ``ddq_k`` itself, else the function of the returned ``ddq_k`` giving that residual
    (prox_pv tests the dual difference ``rho (lam_{k-1} - lam_k)``, equal in exact
    arithmetic but exactly 0 at a fixed point of the iteration where the true residual is
    ~1e-13; the reported residual is always the true one)."""

    state: object
    lam: object
    r: object
    ddq: Callable[[], object]
    true_r: Callable[[object], object] | None = None
    #: with ``tol``: the relative dynamics residual of the returned ``ddq`` (the ALM solvers
    #: whose step does not test it, :func:`dynamics_residual`), reported beside ``r``
    dynamics: Callable[[object], object] | None = None


@dataclass(frozen=True)
class ProximalSolver:
    """A proximal solver as ``setup`` + ``step`` (docs/DESIGN.md §3.3), called like any registered
    algorithm: ``solver(model, *inputs, be, cset, iterations=, mu=, tol=, max_iter=,
    **own)`` with the inputs of its registry row (``q, v, tau`` for forward dynamics).

    * ``setup(model, *inputs, prox, be, **own) -> (plan, const, state)``: ``own`` are the
      solver's own options (keyword parameters of ``setup``, e.g. ``restitution``);
      ``plan`` is structure (ints, patterns; never a backend value), ``const`` the numbers
      every iteration reads, ``state`` the loop state of iteration 1;
    * ``step(model, plan, const, state, prox, be) -> Iterate``.

    ``const`` and ``state`` are nested lists, tuples (named or not) and dicts of backend
    values, so that :func:`gen.trace.trace_driver` can trace setup and step as separate
    functions for the early-exit C driver."""

    name: str
    setup: Callable
    step: Callable
    unilateral: bool = False        # reads one-sided rows (3D+, 6D+); the others refuse them
    converged_mu: float = DEFAULT_MU    # the default mu with tol (ALM_CONVERGED_MU for the ALM ones)

    def start(self, model: Model, cset, be, options: dict, inputs=()):
        """``(Proximal controller, own options, the solver's inputs)`` after checking the
        options and that the set has no one-sided row this solver would silently treat as
        two-sided.  With ``runtime_params``, ``inputs`` end with the run-time parameters
        (:data:`~gen.algorithms.registry.RUNTIME_INPUTS` order): they are taken off and
        given to the controller; ``runtime_params`` holds their names (the registry row's
        ``runtime``, :meth:`~gen.algorithms.registry.Algorithm.fn_options`)."""
        loop, own = self.split_options(options)
        inputs = list(inputs)
        names = loop.get("runtime_params") or ()
        n = len(inputs) - len(names)
        params = dict(zip(names, inputs[n:]))
        inputs = inputs[:n]
        prox = Proximal(model, cset, be, converged_mu=self.converged_mu, params=params, **loop)
        one_sided = [str(c) for c in prox.cset.constraints if c.unilateral]
        if one_sided and not self.unilateral:
            raise RbdgenError(f"{self.name} solves bilateral constraints only; {', '.join(one_sided)} "
                              f"has a unilateral row (+): use prox_lcp")
        return prox, own, inputs

    def split_options(self, options: dict) -> tuple[dict, dict]:
        """``(options of the proximal loop, the solver's own options)``; an option neither
        takes is a user error naming the choices."""
        own_names = [n for n, p in inspect.signature(self.setup).parameters.items()
                     if p.kind == p.POSITIONAL_OR_KEYWORD and p.default is not p.empty]
        unknown = [k for k in options if k not in PROXIMAL_OPTIONS and k not in own_names]
        if unknown:
            raise RbdgenError(f"{self.name} has no option {', '.join(map(repr, unknown))} "
                              f"(options: {', '.join(PROXIMAL_OPTIONS + tuple(own_names))})")
        return ({k: v for k, v in options.items() if k in PROXIMAL_OPTIONS},
                {k: v for k, v in options.items() if k not in PROXIMAL_OPTIONS})

    def __call__(self, model: Model, *inputs, be, cset=None, **options):
        prox, own, inputs = self.start(model, cset, be, options, inputs)
        plan, const, state = self.setup(model, *inputs, prox, be, **own)
        m = prox.cset.m
        last = None
        while True:
            it = self.step(model, plan, const, state, prox, be)
            if not m:
                break
            be.mark(f"iteration_{prox.k + 1}", it.lam, it.r)
            if prox.step(it.r):
                if prox.tol is None or be.symbolic or prox.k >= prox.n:
                    break
                # the test passed: stop when the true residual of this iterate is <= tol
                # or did not fall below the previous tested iterate's (the C driver's rule)
                ddq, true_r = returned(it, prox, be)
                res = norm_inf(it.r if true_r is None else true_r, be)
                if res <= prox.tol or (last is not None and not res < last):
                    return prox.outputs(ddq, it.lam, true_r)
                last = res
            state = it.state
        ddq, true_r = returned(it, prox, be)
        return prox.outputs(ddq, it.lam if m else None, true_r)


def returned(it: Iterate, prox: Proximal, be):
    """``(ddq, r)`` of the returned iterate: its ``ddq`` and its true residual (None where
    the stopping test's ``it.r`` is it), with ``tol`` extended by the relative dynamics
    residual where the solver's step does not test it (:attr:`Iterate.dynamics`)."""
    ddq = it.ddq()
    m = prox.cset.m
    true_r = it.true_r(ddq) if m and it.true_r is not None else None
    if m and prox.tol is not None and it.dynamics is not None:
        true_r = be.vcat([it.r if true_r is None else true_r, it.dynamics(ddq)])
    be.mark("acceleration", ddq, *([] if true_r is None else [true_r]))
    return ddq, true_r


def relative_residual(r_d, scale_terms, be):
    """The dynamics residual ``r_d`` over ``max(1, |t|_inf for t in scale_terms)`` (the
    equation's terms, e.g. ``tau`` and ``J^T lam``): a tolerance then means the same on a
    2 kg arm and a 100 kg humanoid."""
    scale = 1.0
    for t in scale_terms:
        scale = be.fmax(scale, norm_inf(t, be))
    inv = 1.0 / scale
    return be.vcat([r_d[i, 0] * inv for i in range(r_d.shape[0])])


def dynamics_residual(model: Model, q, v, ddq, tau, fext, be):
    """``(tau + J^T lam - M ddq - b)`` relative to ``max(1, |tau|, |J^T lam|)``, with the
    constraint forces as LOCAL external forces ``fext`` (:meth:`ConstraintSet.body_forces`):
    two RNEA passes over the kinematics the solver already traced (CSE shares them)."""
    (tau_c,) = rnea(model, q, v, ddq, be=Unmarked(be), fext=fext)          # M ddq + b - J^T lam
    still = dataclasses.replace(model, gravity=np.zeros(3))
    zero = be.zeros(model.nv, 1)
    (minus_force,) = rnea(still, q, zero, zero, be=Unmarked(be), fext=fext)  # -J^T lam
    terms = [minus_force] if tau is None else [tau, minus_force]
    return relative_residual((zero if tau is None else tau) - tau_c, terms, be)


def mimic_fallback(setup: Callable, step: Callable, mimic_setup: Callable, mimic_step: Callable):
    """``(setup, step)`` of an articulated-body solver that run ``mimic_setup`` and
    ``mimic_step`` instead on a model with mimic joints (:mod:`gen.model`): one
    articulated recursion per joint cannot couple a dof that moves bodies on several
    branches, so the same iteration is computed by a joint-space formulation over CRBA's
    ``M`` (the precedent of ``aba``'s :func:`~gen.algorithms.aba.mimic_solve`).  The
    dispatch is on the model's structure (plain Python), so a trace holds one of the two;
    ``setup`` keeps the articulated one's signature (its own options)."""
    @functools.wraps(setup)
    def dispatch_setup(model: Model, *args, **own):
        return (mimic_setup if model.has_mimic else setup)(model, *args, **own)

    @functools.wraps(step)
    def dispatch_step(model: Model, *args):
        return (mimic_step if model.has_mimic else step)(model, *args)

    return dispatch_setup, dispatch_step


class Unmarked:
    """The backend ``be`` with :meth:`mark` a no-op: a sub-algorithm (CRBA, RNEA) called
    by a solver adds its operations to the solver's phases instead of its own."""

    def __init__(self, be):
        self.be = be

    def __getattr__(self, name):
        return getattr(self.be, name)

    def mark(self, phase: str, *values) -> None:
        pass


def norm_inf(x, be):
    out = 0.0
    for i in range(x.shape[0]):
        a = be.fmax(x[i, 0], -x[i, 0])
        out = a if i == 0 else be.fmax(out, a)
    return out


def column(xs, be):
    return be.vcat(xs) if xs else be.zeros(0, 1)
