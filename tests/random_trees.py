"""Random kinematic trees for identity tests: random parents (branched), every joint
kind (revolute about arbitrary axes, continuous, prismatic, free-flyers also mid-tree),
random placements and positive-definite inertias.  Deterministic for a given seed."""
from __future__ import annotations

import numpy as np

from gen.model import SE3, Body, Frame, Inertia, Model


def random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def random_inertia(rng) -> Inertia:
    A = rng.normal(size=(3, 3))
    return Inertia(rng.uniform(0.5, 3.0), rng.normal(scale=0.2, size=3), A @ A.T + 0.05 * np.eye(3))


def random_tree(n: int, seed: int, kinds=("revolute", "revolute_unb", "prismatic", "free")) -> Model:
    rng = np.random.default_rng(seed)
    bodies, frames = [], []
    for i in range(n):
        parent = -1 if i == 0 else int(rng.integers(-1 if i < 2 else 0, i))
        kind = str(rng.choice(kinds)) if i > 0 else "free" if "free" in kinds else str(rng.choice(kinds))
        axis = rng.normal(size=3)
        if rng.random() < 0.5:                      # half the axes aligned with x, y or z
            axis = np.eye(3)[rng.integers(3)]
        axis = axis / np.linalg.norm(axis)
        placement = SE3(random_rotation(rng), rng.normal(scale=0.3, size=3))
        bodies.append(Body(f"j{i}", f"l{i}", parent, kind, axis, placement, random_inertia(rng)))
        frames.append(Frame(f"l{i}", i, SE3.identity(), "body"))
        frames.append(Frame(f"tip{i}", i, SE3(random_rotation(rng), rng.normal(scale=0.2, size=3)), "fixed_joint"))
    return Model(f"random{seed}", bodies, frames, source=f"random tree seed {seed}")


def random_state(model: Model, rng):
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


ALL_KINDS = ("free", "spherical", "planar", "helical", "revolute", "prismatic", "revolute_unb")


def every_kind_tree(n: int, seed: int) -> Model:
    """A random tree drawing from every joint kind (spherical, planar and helical among
    them; free-flyer root, free joints mid-tree possible), helical pitches in [-0.5, 0.5]."""
    model = random_tree(n, seed, kinds=ALL_KINDS)
    rng = np.random.default_rng(100 + seed)
    for b in model.bodies:
        if b.kind == "helical":
            b.pitch = float(rng.uniform(-0.5, 0.5))
    model.name = f"every_kind{seed}"
    return model
