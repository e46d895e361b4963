"""The Python API of DESIGN §4: ``load_robot``, ``run`` (the NumPy reference path)."""
from __future__ import annotations

import numpy as np

from .algorithms import ALGORITHMS, Algorithm
from .backend import NUMPY
from .errors import RbdgenError
from .model import Model


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise RbdgenError(f"unknown algorithm '{name}' (choose from {', '.join(ALGORITHMS)})") from None


def check_inputs(model: Model, algo: Algorithm, inputs, cset=None) -> list[np.ndarray]:
    """Validate and convert user inputs to finite float64 columns."""
    spec = algo.inputs(model, cset)
    if len(inputs) != len(spec):
        names = ", ".join(n for n, _ in spec)
        raise RbdgenError(f"{algo.name} on {model.name} takes {len(spec)} inputs ({names}), got {len(inputs)}")
    out = []
    for (name, n), x in zip(spec, inputs):
        a = np.asarray(x, dtype=float)
        if a.size != n or a.ndim > 2 or (a.ndim == 2 and 1 not in a.shape):
            raise RbdgenError(f"{algo.name} on {model.name}: input '{name}' must have {n} entries, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise RbdgenError(f"{algo.name} on {model.name}: input '{name}' contains NaN or inf")
        out.append(a.reshape(n, 1))
    return out


def run(robot, algorithm: str, *inputs, constraints=None, **options):
    """Evaluate ``algorithm`` on ``robot`` with the NumPy backend.  Vectors come back 1-D,
    matrices 2-D; several outputs come back as a tuple."""
    from .robots import load_robot

    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    args = check_inputs(model, algo, inputs, constraints)
    extra = {"cset": constraints} if algo.constrained else {}
    outs = algo.fn(model, *args, be=NUMPY, **extra, **options)
    shaped = [np.asarray(o).reshape(-1) if cols == 1 else np.asarray(o)
              for o, (_, _, cols) in zip(outs, algo.outputs(model, constraints))]
    return shaped[0] if len(shaped) == 1 else tuple(shaped)
