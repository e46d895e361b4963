"""The Python API of docs/DESIGN.md §4: ``run`` (the NumPy reference path) and its input checks."""
from __future__ import annotations

import warnings

import numpy as np

from .algorithms import ALGORITHMS, Algorithm
from .algorithms.proximal import DEFAULT_MAX_ITER
from .backend import NUMPY
from .errors import NotConvergedWarning, RbdgenError
from .model import Model
from .robots import load_robot


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise RbdgenError(f"unknown algorithm '{name}' (choose from {', '.join(ALGORITHMS)})") from None


#: unit-norm coordinates (a free-flyer's or spherical joint's quaternion, a continuous
#: joint's (cos, sin)) must have |norm - 1| <= UNIT_NORM_TOL; rbdgen does not normalise
#: them silently (a non-unit quaternion scales the rotation and changes every result)
UNIT_NORM_TOL = 1e-6
#: joint kind -> (offset in the joint's q, length) of its unit-norm coordinates
UNIT_NORM = {"free": (3, 4), "spherical": (0, 4), "revolute_unb": (0, 2), "planar": (2, 2)}


def check_unit_norms(model: Model, q: np.ndarray, name: str = "q") -> None:
    """Refuse a configuration whose quaternions or (cos, sin) pairs are not unit
    (:data:`UNIT_NORM_TOL`), naming the joint and the norm."""
    for b in model.bodies:
        if b.kind in UNIT_NORM and b.mimic is None:
            off, n = UNIT_NORM[b.kind]
            norm = float(np.linalg.norm(q[b.idx_q + off:b.idx_q + off + n]))
            if abs(norm - 1.0) > UNIT_NORM_TOL:
                what = "(cos, sin) pair" if b.kind in ("revolute_unb", "planar") else "quaternion"
                raise RbdgenError(f"{model.name}: the {what} of joint '{b.name}' in input '{name}' has norm "
                                  f"{norm:.9g}, not 1: normalise it (q[{b.idx_q + off}:{b.idx_q + off + n}] /= norm)")


def check_inputs(model: Model, algo: Algorithm, inputs, cset=None, options=None) -> list[np.ndarray]:
    """Validate and convert user inputs to finite float64 columns (unit-norm coordinates
    of ``q`` checked by :func:`check_unit_norms`; with ``runtime_params`` in ``options``,
    the run-time parameters by :func:`check_runtime`)."""
    spec = algo.input_spec(model, cset, options or {})
    if len(inputs) != len(spec):
        names = ", ".join(n for n, _ in spec)
        raise RbdgenError(f"{algo.name} on {model.name} takes {len(spec)} inputs ({names}), got {len(inputs)}")
    out = []
    for (name, n), x in zip(spec, inputs):
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise RbdgenError(f"{algo.name} on {model.name}: input '{name}' is not an array of numbers") from None
        if a.size != n or a.ndim > 2 or (a.ndim == 2 and 1 not in a.shape):
            raise RbdgenError(f"{algo.name} on {model.name}: input '{name}' must have {n} entries, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise RbdgenError(f"{algo.name} on {model.name}: input '{name}' contains NaN or inf")
        if name == "q":
            check_unit_norms(model, a.reshape(-1))
        out.append(a.reshape(n, 1))
    check_runtime(algo, {name: a for (name, _), a in zip(spec, out)})
    return out


#: the order of the run-time ``gains`` input (ConstraintSet's Kp, Kd, Kv)
GAIN_NAMES = ("Kp", "Kd", "Kv")


def check_runtime(algo: Algorithm, values: dict) -> None:
    """The run-time parameters among ``values`` (name -> column) in range, as the C
    checks them (RBDGEN_ERR_INVALID_ARGUMENT): ``mu`` by the row's own ``mu`` option
    (positive; at least the accuracy floor of an augmented-Lagrangian row), each gain
    finite and non-negative, each weight positive and finite."""
    if "mu" in values:
        option = next(o for o in algo.options if o.name == "mu")
        option.check(algo.name, float(values["mu"][0, 0]), "mu")
    for name, g in zip(GAIN_NAMES, values["gains"][:, 0] if "gains" in values else ()):
        if not (np.isfinite(g) and g >= 0):
            raise RbdgenError(f"{algo.name}: run-time Baumgarte gain {name}={g:g} must be finite and non-negative")
    for c, w in enumerate(values["weights"][:, 0] if "weights" in values else ()):
        if not (np.isfinite(w) and w > 0):
            raise RbdgenError(f"{algo.name}: run-time weight {w:g} of constraint {c} must be positive and finite")


#: one-number outputs of the iterative solvers and the impact map, returned as Python
#: numbers of this type for one state (``gen.run``, a scalar :class:`gen.build.Kernel`)
SCALAR_OUTPUTS = {"iterations": int, "residual": float}


def scalar_output(name: str, value):
    """The one-number output ``name`` (:data:`SCALAR_OUTPUTS`) as a Python number: the
    iteration count an ``int`` (it is computed as a double, an integer value), the
    residual a ``float``."""
    x = float(np.asarray(value, dtype=float).reshape(-1)[0])
    return int(round(x)) if SCALAR_OUTPUTS[name] is int else x


def shape_outputs(algo: Algorithm, model: Model, cset, outs) -> tuple:
    """Outputs as users get them: vectors 1-D, matrices 2-D, ``iterations`` and
    ``residual`` Python numbers (:func:`scalar_output`)."""
    return tuple(scalar_output(name, o) if name in SCALAR_OUTPUTS else
                 np.asarray(o).reshape(-1) if cols == 1 else np.asarray(o)
                 for o, (name, _, cols) in zip(outs, algo.outputs(model, cset)))


def run(robot, algorithm: str, *inputs, constraints=None, **options):
    """Evaluate ``algorithm`` on ``robot`` with the NumPy backend.  Vectors come back 1-D,
    matrices 2-D, ``iterations`` and ``residual`` as Python numbers (an ``int``, a
    ``float``); several outputs come back as a tuple.  Inputs, options
    (:meth:`~gen.algorithms.registry.Algorithm.check_options`) and constraints
    (required by the constrained algorithms, refused by the others) are checked; with
    ``runtime_params=True`` the inputs end with the row's run-time parameters (``mu``,
    ``gains`` = [Kp, Kd, Kv], ``weights``; registry ``runtime``) in place of the built-in
    values.  A
    derivative row's ``route`` selects the traced graph (:func:`gen.trace.trace`); the
    NumPy path is always the row's analytical algorithm."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    options = algo.check_options(options)
    args = check_inputs(model, algo, inputs, cset, options)
    extra = {"cset": cset} if algo.constrained else {}
    with np.errstate(all="ignore"):          # a non-finite result is refused below, with its name
        outs = algo.fn(model, *args, be=NUMPY, **extra, **algo.fn_options(options))
    for (name, _, _), o in zip(algo.outputs(model, cset), outs):
        if not np.all(np.isfinite(o)):
            raise RbdgenError(f"{algo.name} on {model.name}: output '{name}' is NaN or inf "
                              f"(singular model or extreme state)")
    shaped = shape_outputs(algo, model, cset, outs)
    if algo.iterative and options.get("tol") is not None:
        warn_not_converged(algo.name, model.name, options, shaped)
    return shaped[0] if len(shaped) == 1 else tuple(shaped)


def warn_not_converged(algorithm: str, robot: str, options: dict, outputs) -> bool:
    """Warn (:class:`~gen.errors.NotConvergedWarning`) when an iterative run with ``tol``
    returned a residual above it (it stopped at ``max_iter``); ``outputs``: the solver's
    ``(x, lam, iterations, residual)``.  Returns True when it warned.  The compiled
    kernel warns through this function too, on ``RBDGEN_ERR_NOT_CONVERGED``."""
    it, res = scalar_output("iterations", outputs[2]), scalar_output("residual", outputs[3])
    tol = float(options["tol"])
    if res <= tol:
        return False
    cap = next((options[k] for k in ("max_iter", "iterations") if options.get(k) is not None), DEFAULT_MAX_ITER)
    warnings.warn(f"{algorithm} on {robot}: not converged: residual {res:.3e} > tol={tol:g} after "
                  f"{it} iterations (max_iter={int(cap)}); the outputs are the last iterate",
                  NotConvergedWarning, stacklevel=3)
    return True
