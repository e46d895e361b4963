"""The Python API of DESIGN §4: ``run`` (the NumPy reference path) and its input checks."""
from __future__ import annotations

import numpy as np

from .algorithms import ALGORITHMS, Algorithm
from .backend import NUMPY
from .errors import RbdgenError
from .model import Model
from .robots import load_robot


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise RbdgenError(f"unknown algorithm '{name}' (choose from {', '.join(ALGORITHMS)})") from None


def check_inputs(model: Model, algo: Algorithm, inputs, cset=None) -> list[np.ndarray]:
    """Validate and convert user inputs to finite float64 columns."""
    spec = algo.inputs(model, cset)
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
        out.append(a.reshape(n, 1))
    return out


def shape_outputs(algo: Algorithm, model: Model, cset, outs) -> tuple:
    """Outputs as users get them: vectors 1-D, matrices 2-D."""
    return tuple(np.asarray(o).reshape(-1) if cols == 1 else np.asarray(o)
                 for o, (_, _, cols) in zip(outs, algo.outputs(model, cset)))


def run(robot, algorithm: str, *inputs, constraints=None, **options):
    """Evaluate ``algorithm`` on ``robot`` with the NumPy backend.  Vectors come back 1-D,
    matrices 2-D; several outputs come back as a tuple.  Inputs, options
    (:meth:`~gen.algorithms.registry.Algorithm.check_options`) and constraints
    (required by the constrained algorithms, refused by the others) are checked."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    options = algo.check_options(options)
    args = check_inputs(model, algo, inputs, cset)
    extra = {"cset": cset} if algo.constrained else {}
    shaped = shape_outputs(algo, model, cset, algo.fn(model, *args, be=NUMPY, **extra, **options))
    return shaped[0] if len(shaped) == 1 else tuple(shaped)
