"""Pinocchio models of the named robots, built exactly as rbdgen builds its own
(``buildModelFromUrdf`` with a free-flyer root when floating, then ``buildReducedModel``
at the neutral configuration for the locked joints).  Cached per process."""
from __future__ import annotations

import functools

import pinocchio as pin

from gen.robots.named import NAMED_ROBOTS, robots_dir


@functools.lru_cache(maxsize=None)
def pin_model(name: str) -> pin.Model:
    rel, floating_base, lock_joints, _ = NAMED_ROBOTS[name]
    path = str(robots_dir() / rel)
    model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base \
        else pin.buildModelFromUrdf(path)
    if lock_joints:
        ids = [model.getJointId(j) for j in lock_joints]
        model = pin.buildReducedModel(model, ids, pin.neutral(model))
    return model
