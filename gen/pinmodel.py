"""A :class:`~gen.model.Model` from a ``pinocchio.Model``: ``gen.load_robot(pin_model)``.

rbdgen follows Pinocchio's conventions (:mod:`gen.model`), so the joints, placements,
inertias and frames move over unchanged: joint ``j`` of Pinocchio (``j >= 1``) is body
``j - 1`` of rbdgen, its ``jointPlacements[j]`` the body's ``placement``, its
``inertias[j]`` (mass, ``lever``, rotational inertia about the centre of mass) the body's
:class:`~gen.model.Inertia`, every frame a :class:`~gen.model.Frame` on the body of its
``parentJoint`` (``BODY`` -> ``body``, ``FIXED_JOINT`` -> ``fixed_joint``, ``JOINT`` ->
``joint``, ``OP_FRAME`` and ``SENSOR`` -> ``site``).  The exception is the universal
joint, two bodies in rbdgen (:func:`gen.model.universal_joint`), so body indices shift
after one.

Joint kinds, by Pinocchio's ``shortname()``: ``FreeFlyer`` -> free, ``Spherical`` ->
spherical, ``Planar`` -> planar, ``Universal`` -> universal, ``RX/RY/RZ`` and
``RevoluteUnaligned`` -> revolute, ``RUBX/RUBY/RUBZ`` and ``RevoluteUnboundedUnaligned``
-> revolute_unb, ``PX/PY/PZ`` and ``PrismaticUnaligned`` -> prismatic, ``HX/HY/HZ`` and
``HelicalUnaligned`` -> helical, ``Mimic`` -> a mimic of a revolute or prismatic joint.
The axis (and the helical pitch) of a one-dof joint is read from its motion subspace
``S`` at the neutral configuration (angular part: the axis of a revolute or helical
joint; linear part: the prismatic axis, or ``pitch * axis``), which every Pinocchio joint
exposes the same way, aligned or not.  Anything else (``SphericalZYX``, ``Translation``,
``Composite``, ``Ellipsoid``, a mimic of a helical joint, a non-zero armature, which
rbdgen's dynamics would ignore) is refused in one line naming the joint; ``friction``
and ``damping`` are ignored, as by Pinocchio's dynamics algorithms.

Pinocchio is optional: this module imports nothing from it; :func:`is_pinocchio_model`
recognises a model by its type's name and module.
"""
from __future__ import annotations

import numpy as np

from .errors import RbdgenError
from .model import SE3, Body, Frame, Inertia, Mimic, Model, universal_joint

#: Pinocchio joint shortname -> rbdgen kind (one-dof kinds read their axis from S)
KINDS = {"JointModelFreeFlyer": "free", "JointModelSpherical": "spherical", "JointModelPlanar": "planar",
         **{f"JointModel{n}": "revolute" for n in ("RX", "RY", "RZ", "RevoluteUnaligned")},
         **{f"JointModel{n}": "revolute_unb" for n in ("RUBX", "RUBY", "RUBZ", "RevoluteUnboundedUnaligned")},
         **{f"JointModel{n}": "prismatic" for n in ("PX", "PY", "PZ", "PrismaticUnaligned")},
         **{f"JointModel{n}": "helical" for n in ("HX", "HY", "HZ", "HelicalUnaligned")}}
#: Pinocchio FrameType name -> rbdgen Frame kind
FRAME_KINDS = {"BODY": "body", "FIXED_JOINT": "fixed_joint", "JOINT": "joint", "OP_FRAME": "site", "SENSOR": "site"}
#: |S| entries below this are zero (an axis read from Pinocchio's S is exact to rounding)
AXIS_ZERO = 1e-12


def is_pinocchio_model(obj) -> bool:
    """Whether ``obj`` is a ``pinocchio.Model`` (by its type, without importing Pinocchio)."""
    t = type(obj)
    return t.__name__ == "Model" and t.__module__.split(".")[0] == "pinocchio"


def _se3(M) -> SE3:
    return SE3(np.array(M.rotation, dtype=float), np.array(M.translation, dtype=float).reshape(3))


def _inertia(I) -> Inertia:
    return Inertia(float(I.mass), np.array(I.lever, dtype=float).reshape(3), np.array(I.inertia, dtype=float))


def _subspace(pm, data, jid: int) -> np.ndarray:
    """Joint ``jid``'s motion subspace at the neutral configuration, a 6-vector
    ``[linear; angular]`` (one-dof joints)."""
    return np.array(data.joints[jid].S, dtype=float).reshape(6)


def _axis_kind(where: str, kind: str, S: np.ndarray) -> tuple[str, np.ndarray, float]:
    """(kind, unit axis, pitch) of a one-dof joint of motion subspace ``S``."""
    lin, ang = S[:3], S[3:]
    if kind == "prismatic" or (kind == "mimic" and np.linalg.norm(ang) <= AXIS_ZERO):
        n = float(np.linalg.norm(lin))
        if n <= AXIS_ZERO:
            raise RbdgenError(f"{where}: motion subspace {S.tolist()} moves nothing")
        return "prismatic", lin / n, 0.0
    n = float(np.linalg.norm(ang))
    if n <= AXIS_ZERO:
        raise RbdgenError(f"{where}: motion subspace {S.tolist()} moves nothing")
    axis = ang / n
    pitch = float(lin @ axis) / n
    if kind == "mimic":
        if np.linalg.norm(lin) > AXIS_ZERO:
            raise RbdgenError(f"{where}: a mimic of a helical joint is not representable (rbdgen's mimic joints "
                              f"are revolute or prismatic, Pinocchio's URDF parser's)")
        return "revolute", axis, 0.0
    if kind == "helical":
        return "helical", axis, pitch
    if np.linalg.norm(lin) > AXIS_ZERO:
        raise RbdgenError(f"{where}: revolute joint with a linear motion subspace {S.tolist()}")
    return kind, axis, 0.0


def _check_extras(pm, name: str) -> None:
    """Refuse a non-zero armature: Pinocchio's ``crba`` (and crocoddyl's models) add it to
    ``M``'s diagonal, rbdgen's dynamics do not.  ``friction`` and ``damping`` (URDF
    ``<dynamics>``) are ignored, as Pinocchio's own dynamics algorithms ignore them."""
    vals = np.asarray(getattr(pm, "armature", np.zeros(0)), dtype=float)
    if vals.size and np.any(vals != 0.0):
        raise RbdgenError(f"{name}: the Pinocchio model has a non-zero armature, which rbdgen's dynamics do not "
                          f"model; set model.armature[:] = 0")


def load_pinocchio(pm) -> Model:
    """The :class:`~gen.model.Model` of the Pinocchio model ``pm`` (module docstring)."""
    import pinocchio as pin                     # pm is one, so Pinocchio is importable

    name = str(pm.name) or "pinocchio_model"
    source = f"pinocchio model '{name}'"
    _check_extras(pm, source)
    data = pm.createData()
    pin.forwardKinematics(pm, data, pin.neutral(pm))
    mimic_of = dict(zip((int(j) for j in getattr(pm, "mimicking_joints", [])),
                        (int(j) for j in getattr(pm, "mimicked_joints", []))))
    bodies: list[Body] = []
    body_of = {0: -1}                           # Pinocchio joint id -> rbdgen body index
    for jid in range(1, pm.njoints):
        jm = pm.joints[jid]
        short = jm.shortname()
        jname = str(pm.names[jid])
        where = f"{source}: joint '{jname}' ({short})"
        parent = body_of[int(pm.parents[jid])]
        placement, inertia = _se3(pm.jointPlacements[jid]), _inertia(pm.inertias[jid])
        link = _link_name(pm, jid, jname)
        if short == "JointModelUniversal":
            e = jm.extract()
            bodies += universal_joint(jname, link, parent, len(bodies), np.array(e.axis1, dtype=float),
                                      np.array(e.axis2, dtype=float), placement, inertia)
            body_of[jid] = len(bodies) - 1
            continue
        kind = "mimic" if short == "JointModelMimic" else KINDS.get(short)
        if kind is None:
            raise RbdgenError(f"{where}: joint type not representable in rbdgen (supported: free-flyer, "
                              f"spherical, planar, universal, revolute, continuous, prismatic, helical, mimic)")
        axis, pitch, mimic = np.zeros(3), 0.0, None
        if kind in ("revolute", "revolute_unb", "prismatic", "helical", "mimic"):
            kind, axis, pitch = _axis_kind(where, kind, _subspace(pm, data, jid))
        if short == "JointModelMimic":
            mimic = _mimic(pm, jm, jid, mimic_of, body_of, where)
            axis = -axis if mimic.multiplier < 0 else axis     # S is scaling * the mimicked axis
        bodies.append(Body(jname, link, parent, kind, axis, placement, inertia, pitch=pitch, mimic=mimic))
        body_of[jid] = len(bodies) - 1
    frames = [Frame(str(f.name), body_of[int(f.parentJoint)], _se3(f.placement), FRAME_KINDS[str(f.type.name)])
              for f in pm.frames]
    model = Model(name, bodies, frames, gravity=np.array(pm.gravity.linear, dtype=float), source=source)
    if (model.nq, model.nv) != (pm.nq, pm.nv):
        raise RbdgenError(f"{source}: rbdgen's model has nq={model.nq}, nv={model.nv}, Pinocchio's "
                          f"nq={pm.nq}, nv={pm.nv}")
    model.check_singular_inertia()            # not check_physical_inertias: Pinocchio accepts any inertia
    return model


def _mimic(pm, jm, jid: int, mimic_of: dict, body_of: dict, where: str) -> Mimic:
    primary = mimic_of.get(jid)
    if primary is None or primary not in body_of:
        raise RbdgenError(f"{where}: its mimicked joint is not an earlier joint of the model")
    scaling = float(jm.extract().scaling)
    return Mimic(body_of[primary], scaling, float(jm.extract().offset))


def _link_name(pm, jid: int, jname: str) -> str:
    """The BODY frame carried by joint ``jid`` at its origin (the URDF child link), else
    the first BODY frame on it, else the joint's name."""
    on = [f for f in pm.frames if int(f.parentJoint) == jid and str(f.type.name) == "BODY"]
    for f in on:
        if np.allclose(f.placement.homogeneous, np.eye(4), rtol=0.0, atol=0.0):
            return str(f.name)
    return str(on[0].name) if on else jname
