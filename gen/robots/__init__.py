"""Robot lookup: named robots (example-robot-data), synthetic trees, a URDF path or an
MJCF path (``.xml``, through MuJoCo's compiler, :mod:`gen.mjcf`)."""
from __future__ import annotations

import os

from ..errors import RbdgenError
from ..mjcf import load_mjcf
from ..model import Model
from ..pinmodel import is_pinocchio_model, load_pinocchio
from ..urdf import load_urdf
from .named import NAMED_ROBOTS, load_named
from .synthetic import SYNTHETIC, load_synthetic


def load_robot(name_or_path: str, *, floating_base: bool = False, lock_joints=(), mimic: bool = False) -> Model:
    """A :class:`~gen.model.Model` for a named robot (``talos``), a synthetic spec
    (``chain:10``, ``bintree:15``, ``humanoid30``, ``fourbar``), a URDF path or an MJCF
    path (``.xml``), or a ``pinocchio.Model`` (:mod:`gen.pinmodel`).  ``floating_base``, ``lock_joints`` and ``mimic`` (honour ``<mimic>``
    tags, Pinocchio's ``mimic=True``) apply to URDF paths; an MJCF file says itself
    whether the base floats (a free joint)."""

    if isinstance(name_or_path, Model):
        return name_or_path
    if is_pinocchio_model(name_or_path):             # gen.load_robot(pinocchio.Model): gen/pinmodel.py
        if floating_base or lock_joints or mimic:
            raise RbdgenError("floating_base, lock_joints and mimic apply to URDF paths; a pinocchio.Model comes "
                              "with its own joints (pinocchio.buildReducedModel locks joints)")
        return load_pinocchio(name_or_path)
    spec = str(name_or_path)
    is_file = spec.lower().endswith((".urdf", ".xml")) or os.path.sep in spec
    if (floating_base or lock_joints or mimic) and not is_file:
        raise RbdgenError(f"'{spec}': floating_base, lock_joints and mimic (--floating-base, --lock, --mimic) apply to URDF "
                          f"paths; a named or synthetic robot comes with its own base and joints")
    if spec in NAMED_ROBOTS:
        return load_named(spec)
    if spec.split(":")[0] in ("chain", "bintree") or spec in SYNTHETIC:
        return load_synthetic(spec)
    if spec.lower().endswith(".xml"):
        if floating_base or lock_joints or mimic:
            raise RbdgenError(f"{spec}: --floating-base, --lock and --mimic apply to URDF files; in MJCF a free "
                              f"joint makes the base float, and joints are removed in the file")
        return load_mjcf(spec)
    if spec.endswith(".urdf") or os.path.sep in spec:
        return load_urdf(spec, floating_base=floating_base, lock_joints=lock_joints, mimic=mimic)
    choices = ", ".join(list(NAMED_ROBOTS) + list(SYNTHETIC))
    raise RbdgenError(f"unknown robot '{spec}' (choose from {choices}, or give a .urdf or MJCF .xml path)")
