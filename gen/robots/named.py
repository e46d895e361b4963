"""Named robots from the ``example-robot-data`` package (docs/DESIGN.md §4).

Each entry is ``name -> (URDF path under the package's robots folder, floating_base,
lock_joints, description)``; :func:`load_named` builds the model exactly as
``pinocchio.buildModelFromUrdf`` (with a ``JointModelFreeFlyer`` root when
``floating_base``) followed by ``pinocchio.buildReducedModel`` at the neutral
configuration for the locked joints.
"""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from ..errors import RbdgenError
from ..model import Model
from ..urdf import load_urdf

NAMED_ROBOTS: dict[str, tuple[str, bool, tuple[str, ...], str]] = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False, (),
            "Universal Robots UR5, 6-DoF fixed-base arm"),
    "panda": ("panda_description/urdf/panda.urdf", False, ("panda_finger_joint1", "panda_finger_joint2"),
              "Franka Emika Panda, 7-DoF arm, fingers locked"),
    "solo12": ("solo_description/robots/solo12.urdf", True, (),
               "ODRI Solo12 quadruped, 12 joints + free-flyer"),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True, (),
                 "ANYbotics ANYmal C quadruped, 12 joints + free-flyer"),
    "go1": ("go1_description/urdf/go1.urdf", True, (),
            "Unitree Go1 quadruped, 12 joints + free-flyer"),
    "talos": ("talos_data/robots/talos_full_v2.urdf", True, (),
              "PAL Talos humanoid (talos_full_v2), free-flyer"),
    "icub": ("icub_description/robots/icub_reduced.urdf", True, (),
             "IIT iCub humanoid (reduced model), free-flyer"),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True, (),
           "Unitree G1 humanoid, 29 joints + free-flyer"),
}

ROBOTS_DIR_ENV = "RBDGEN_ROBOTS_DIR"


def robots_dir() -> Path:
    """The ``robots`` folder of example-robot-data: ``$RBDGEN_ROBOTS_DIR`` if set, else
    the installed cmeel wheel's ``cmeel.prefix/share/example-robot-data/robots``."""
    override = os.environ.get(ROBOTS_DIR_ENV)
    if override:
        path = Path(override)
        if not path.is_dir():
            raise RbdgenError(f"{ROBOTS_DIR_ENV}={override} is not a directory")
        return path
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        raise RbdgenError("named robots need example-robot-data: pip install example-robot-data "
                          f"(or rbdgen[robots]), or set {ROBOTS_DIR_ENV}") from None
    path = Path(dist.locate_file("cmeel.prefix/share/example-robot-data/robots"))
    if not path.is_dir():
        raise RbdgenError(f"example-robot-data is installed but {path} is missing; reinstall it "
                          f"(pip install --force-reinstall example-robot-data) or set {ROBOTS_DIR_ENV}")
    return path


def load_named(name: str) -> Model:
    """The :class:`~gen.model.Model` of a named robot; ``model.name`` is ``name``."""

    if name not in NAMED_ROBOTS:
        raise RbdgenError(f"unknown named robot '{name}' (choose from {', '.join(NAMED_ROBOTS)})")
    rel, floating_base, lock_joints, _ = NAMED_ROBOTS[name]
    return load_urdf(robots_dir() / rel, floating_base=floating_base, lock_joints=lock_joints, name=name)
