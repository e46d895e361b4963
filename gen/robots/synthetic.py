"""Built-in synthetic trees (docs/DESIGN.md §4): ``chain:N``, ``bintree:N``, ``humanoid30``,
``fourbar``, ``fourbar_cut``, ``closed_leg``.  Links are uniform rods, so every model is deterministic and physically
plausible (positive-definite inertias, realistic mass ratios)."""
from __future__ import annotations

import numpy as np

from ..errors import RbdgenError
from ..model import SE3, Body, Frame, Inertia, Model

LINK_LENGTH = 0.3
LINK_MASS = 1.0
AXES = [np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])]


def rod(mass: float, length: float, radius: float = 0.02) -> Inertia:
    """A solid cylinder along +x from the body origin to ``length``."""
    ia = 0.5 * mass * radius ** 2
    it = mass * (3 * radius ** 2 + length ** 2) / 12.0
    return Inertia(mass, np.array([length / 2, 0.0, 0.0]), np.diag([ia, it, it]))


def _offset(x: float, y: float = 0.0, z: float = 0.0) -> SE3:
    return SE3(np.eye(3), np.array([x, y, z]))


def _add_link(bodies, frames, name, parent, placement, axis, inertia, length: float = LINK_LENGTH):
    """A revolute link ``name`` with frames ``<name>_joint``, ``<name>`` and
    ``<name>_tip`` (``length`` along its x axis); returns its body index.  The body owns a
    copy of ``axis``: a model's arrays are never shared with another model."""
    bodies.append(Body(f"{name}_joint", name, parent, "revolute", axis.copy(), placement, inertia))
    i = len(bodies) - 1
    frames.append(Frame(f"{name}_joint", i, SE3.identity(), "joint"))
    frames.append(Frame(name, i, SE3.identity(), "body"))
    frames.append(Frame(f"{name}_tip", i, _offset(length), "fixed_joint"))
    return i


def chain(n: int) -> Model:
    """A serial chain of ``n`` revolute joints, axes cycling z, y, x."""
    bodies, frames = [], []
    for k in range(n):
        placement = SE3.identity() if k == 0 else _offset(LINK_LENGTH)
        _add_link(bodies, frames, f"link{k + 1}", k - 1, placement, AXES[k % 3], rod(LINK_MASS, LINK_LENGTH))
    return Model(f"chain:{n}", bodies, frames, source=f"chain:{n}")


def bintree(n: int) -> Model:
    """A balanced binary tree of ``n`` links in branches of three (Sathya 2024 Fig. 3):
    each branch is a 3-link chain whose end carries two child branches; branches are
    filled breadth-first (so the tree stays balanced) and numbered depth-first (as
    Pinocchio requires).  Leaf links carry the frames ``leaf<k>``."""
    sizes, children = [], []                       # per branch: link count, child branches
    remaining, queue = n, [None]
    while remaining > 0:
        parent_branch = queue.pop(0)
        sizes.append(min(3, remaining))
        children.append([])
        remaining -= sizes[-1]
        if parent_branch is not None:
            children[parent_branch].append(len(sizes) - 1)
        queue += [len(sizes) - 1] * 2
    bodies, frames = [], []

    def emit(branch: int, parent: int) -> None:
        prev = parent
        for j in range(sizes[branch]):
            k = len(bodies)
            side = 0.0 if prev == -1 or j > 0 else (0.1 if branch % 2 else -0.1)
            placement = SE3.identity() if prev == -1 else _offset(LINK_LENGTH, side)
            prev = _add_link(bodies, frames, f"link{k + 1}", prev, placement, AXES[k % 3],
                             rod(LINK_MASS, LINK_LENGTH))
        for child in children[branch]:
            emit(child, prev)

    emit(0, -1)
    has_child = {b.parent for b in bodies}
    leaves = [i for i in range(len(bodies)) if i not in has_child]
    for k, i in enumerate(leaves):
        frames.append(Frame(f"leaf{k + 1}", i, _offset(LINK_LENGTH), "fixed_joint"))
    return Model(f"bintree:{n}", bodies, frames, source=f"bintree:{n}")


def humanoid30() -> Model:
    """Featherstone 2005 §6's humanoid: a floating torso and four six-joint limbs
    (nv = 6 + 4 x 6 = 30).  Limb ends carry frames ``left_foot``, ``right_foot``,
    ``left_hand``, ``right_hand``."""
    torso = Inertia(10.0, np.zeros(3), np.diag([0.3, 0.25, 0.1]))
    bodies = [Body("root_joint", "torso", -1, "free", np.zeros(3), SE3.identity(), torso)]
    frames = [Frame("root_joint", 0, SE3.identity(), "joint"), Frame("torso", 0, SE3.identity(), "body")]
    limbs = {"left_leg": (0.0, 0.1, -0.3), "right_leg": (0.0, -0.1, -0.3),
             "left_arm": (0.0, 0.2, 0.3), "right_arm": (0.0, -0.2, 0.3)}
    ends = {"left_leg": "left_foot", "right_leg": "right_foot", "left_arm": "left_hand", "right_arm": "right_hand"}
    for limb, (x, y, z) in limbs.items():
        prev = 0
        for k in range(6):
            placement = _offset(x, y, z) if k == 0 else _offset(LINK_LENGTH)
            prev = _add_link(bodies, frames, f"{limb}{k + 1}", prev, placement, AXES[k % 3],
                             rod(LINK_MASS, LINK_LENGTH))
        frames.append(Frame(ends[limb], prev, _offset(LINK_LENGTH), "fixed_joint"))
    return Model("humanoid30", bodies, frames, source="humanoid30")


# Four-bar linkage: ground pivots 1 m apart, crank 0.4, coupler 1.0, rocker 0.8 (m).
FOURBAR = {"ground": 1.0, "crank": 0.4, "coupler": 1.0, "rocker": 0.8}


def fourbar() -> Model:
    """A planar four-bar linkage as its spanning tree: crank, coupler and rocker joints
    about z in series.  The loop closes by constraining frame ``tip`` (rocker end) to
    frame ``anchor`` (the second ground pivot): ``3D:tip~anchor``."""
    lengths = [FOURBAR["crank"], FOURBAR["coupler"], FOURBAR["rocker"]]
    z = np.array([0.0, 0.0, 1.0])
    bodies, frames = [], [Frame("anchor", -1, _offset(FOURBAR["ground"]), "fixed_joint")]
    for k, (name, length) in enumerate(zip(["crank", "coupler", "rocker"], lengths)):
        placement = SE3.identity() if k == 0 else _offset(lengths[k - 1])
        bodies.append(Body(f"{name}_joint", name, k - 1, "revolute", z, placement, rod(LINK_MASS, length)))
        frames.append(Frame(f"{name}_joint", k, SE3.identity(), "joint"))
        frames.append(Frame(name, k, SE3.identity(), "body"))
    frames.append(Frame("tip", 2, _offset(lengths[2]), "fixed_joint"))
    return Model("fourbar", bodies, frames, source="fourbar")


def fourbar_cut() -> Model:
    """The four-bar linkage cut at the coupler-rocker pivot, so the loop joins two moving
    bodies: crank -> coupler from the first ground pivot, rocker from the second (1 m
    along x), joints about z; close it with ``3D:coupler_tip~rocker_tip``."""
    z = np.array([0.0, 0.0, 1.0])
    bodies, frames = [], []
    crank = _add_link(bodies, frames, "crank", -1, SE3.identity(), z, rod(LINK_MASS, FOURBAR["crank"]),
                      FOURBAR["crank"])
    _add_link(bodies, frames, "coupler", crank, _offset(FOURBAR["crank"]), z, rod(LINK_MASS, FOURBAR["coupler"]),
              FOURBAR["coupler"])
    _add_link(bodies, frames, "rocker", -1, _offset(FOURBAR["ground"]), z, rod(LINK_MASS, FOURBAR["rocker"]),
              FOURBAR["rocker"])
    return Model("fourbar_cut", bodies, frames, source="fourbar_cut")


def closed_leg() -> Model:
    """A floating body (2 kg) on a five-bar closed-chain leg: two thigh-shin chains from
    hip pivots 0.1 m apart, joints about y, whose shin ends meet at the foot; close it
    with ``3D:shin_a_tip~shin_b_tip`` and stand with ``3D:shin_a_tip``."""
    y = np.array([0.0, 1.0, 0.0])
    down = SE3(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]), np.zeros(3))  # x -> -z
    body = Inertia(2.0, np.zeros(3), np.diag([0.02, 0.03, 0.04]))
    bodies = [Body("root_joint", "body", -1, "free", np.zeros(3), SE3.identity(), body)]
    frames = [Frame("root_joint", 0, SE3.identity(), "joint"), Frame("body", 0, SE3.identity(), "body")]
    for side, x in (("a", 0.05), ("b", -0.05)):
        hip = SE3(down.R, np.array([x, 0.0, -0.05]))
        thigh = _add_link(bodies, frames, f"thigh_{side}", 0, hip, y, rod(0.3, 0.25), 0.25)
        _add_link(bodies, frames, f"shin_{side}", thigh, _offset(0.25), y, rod(0.2, 0.25), 0.25)
    return Model("closed_leg", bodies, frames, source="closed_leg")


def load_synthetic(spec: str) -> Model:
    kind, _, arg = spec.partition(":")
    if kind in ("chain", "bintree"):
        if not arg.isdigit() or int(arg) < 1:
            raise RbdgenError(f"synthetic robot '{spec}': expected {kind}:N with N a positive integer")
        return chain(int(arg)) if kind == "chain" else bintree(int(arg))
    if spec == "humanoid30":
        return humanoid30()
    if spec == "fourbar":
        return fourbar()
    if spec == "fourbar_cut":
        return fourbar_cut()
    if spec == "closed_leg":
        return closed_leg()
    raise RbdgenError(f"unknown synthetic robot '{spec}'")


SYNTHETIC = {"chain:N": "serial chain of N revolute joints", "bintree:N": "binary tree of N links, 3 per branch",
             "humanoid30": "floating torso + four 6-joint limbs (nv = 30)", "fourbar": "planar four-bar linkage (loop: 3D:tip~anchor)",
             "fourbar_cut": "the four-bar cut between two moving links (loop: 3D:coupler_tip~rocker_tip)",
             "closed_leg": "floating body on a five-bar leg (loop: 3D:shin_a_tip~shin_b_tip)"}
