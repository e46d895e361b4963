"""MJCF loader: MuJoCo's own compiler reads the file, rbdgen reads the compiled model.

``mujoco.MjModel.from_xml_path`` resolves everything MJCF can say (defaults and
classes, ``<include>``, angle units, ``euler`` / ``axisangle`` / ``xyaxes`` /
``zaxis`` orientations, inertias computed from geoms, ``fromto``, ...); this module only
reads the compiled body tree (``body_parentid``, ``body_pos`` / ``body_quat``,
``body_mass``, ``body_inertia`` with ``body_ipos`` / ``body_iquat``, ``jnt_type``,
``jnt_axis``, ``jnt_pos``, ``qpos0``, sites) and builds a :class:`~gen.model.Model` in
rbdgen's (Pinocchio's) conventions.  ``mujoco`` is an optional dependency
(``pip install rbdgen[mjcf]``), imported in :func:`_mujoco` only.

**Kinematics** (MuJoCo's ``mj_kinematics``): a body sits at ``(body_pos, body_quat)``
(quaternion ``[w x y z]``) in its parent; then its joints act in order, each in the body
frame as moved by the joints before it: a hinge rotates by ``q - qpos0`` (``qpos0`` =
the joint's ``ref``) about ``jnt_axis`` through the anchor ``jnt_pos``,
``Trans(a) Rot(u, q - ref) Trans(-a)``; a slide translates by ``(q - ref) u``; a ball
rotates by its quaternion about the anchor; a free joint sets the body's world pose.
rbdgen writes the same transform as ``placement * joint_motion(q) * tail``: the joint
frame sits at the anchor, rotated by ``Rot(u, -ref)`` (a hinge: the axis is unchanged by
it, and ``Rot(u, -ref) Rot(u, q) = Rot(u, q - ref)``) or shifted by ``-ref u`` (a
slide), and ``tail = Trans(-a)`` carries the body's inertia, children and sites, so q is
MuJoCo's q for hinges and slides, reference positions included.

**Bodies with several joints** are chained: every joint but the last moves a massless,
inertia-free intermediate body named after the joint (Pinocchio's MJCF parser uses a
``JointModelComposite``; the dynamics are the same, and so are q and v).  A body without
joints is welded to its parent (its inertia lumped, as URDF fixed joints); bodies welded
to the world, with their inertia, are dropped.  Body order = MuJoCo's body order
(depth-first in the file), so rbdgen's joint, q and v order is MuJoCo's dof order.

**Coordinates**: rbdgen's q and v have MuJoCo's sizes and order, but

* free joint: MuJoCo ``qpos = [x y z qw qx qy qz]`` -> rbdgen ``[x y z qx qy qz qw]``;
  MuJoCo ``qvel = [v_world, w_local]`` (the body origin's velocity in WORLD axes, the
  angular velocity in the body frame) -> rbdgen ``[R^T v_world, w_local]``, both in the
  LOCAL frame (Pinocchio's free-flyer); forces map the same way (``f_local = R^T f``);
  since ``R`` depends on q, accelerations pick up ``d/dt (R v_local) = R (a_local + w x
  v_local)`` (:func:`acceleration_to_mujoco`);
* ball joint: MuJoCo ``[qw qx qy qz]`` -> rbdgen ``[qx qy qz qw]`` (the ``spherical``
  kind); its velocity, the LOCAL angular velocity, is the same in both;
* hinge and slide: unchanged.

:func:`q_from_mujoco`, :func:`v_from_mujoco`, :func:`q_to_mujoco`, :func:`v_to_mujoco`
and :func:`acceleration_to_mujoco` convert.

**What rbdgen computes** is MuJoCo's smooth rigid-body dynamics ``M(q) qacc + qfrc_bias =
tau`` (``mj_fullM``, ``qfrc_bias``, ``mj_rne``; ``mj_forward``'s qacc with nothing but
``qfrc_applied = tau``), checked against MuJoCo itself by :mod:`gen.mujocoref`.  What the
file says beyond the body tree, and MuJoCo's ``<option>`` fields and ``<flag>`` bits:

* **honoured**: ``opt.gravity`` and ``<flag gravity="disable"/>`` (zero gravity,
  :func:`gravity`); everything MuJoCo's compiler resolves (``<compiler>`` settings such as
  ``inertiafromgeom``, ``boundmass``, ``settotalmass``, ``fusestatic``, defaults, angle
  units); ``<flag equality="disable"/>`` and ``constraint="disable"`` (the equalities then
  act on nothing, so the file loads), and ``active="false"`` equalities likewise;
* **refused** in one line: a file MuJoCo's compiler rejects; an active equality
  constraint (it changes the dynamics; the message names each one's type and what rbdgen
  offers: a connect is a ``3D:A~B`` loop, a weld a ``6D:A~B`` loop, a joint, tendon or flex
  equality has no rbdgen form); flexes (deformables); a free joint below another body,
  combined with other joints or with an anchor; a model with no joint;
* **ignored**, because they are not rigid-body dynamics but forces that enter MuJoCo's
  ``qacc`` beside ``tau`` (a user adds them to ``tau``) or parameters of its solver and
  integrator: contacts and geoms, joint limits and friction loss (constraint rows; flags
  ``contact``, ``limit``, ``frictionloss``, ``override`` and ``o_*``, ``cone``,
  ``impratio``, ``solver``, ``iterations``, ``tolerance``, ``noslip_*``, ``ccd_*``,
  ``sdf_*``, ``jacobian``, ``warmstart``, ``refsafe``, ``filterparent``, ``midphase``,
  ``nativeccd``, ``multiccd``, ``island``, ``diagexact``, ``ipc``, ``speculative``);
  armature (``dof_armature``, ``tendon_armature``, ``actuator_armature``: MuJoCo's
  ``mj_fullM`` adds them to M, rbdgen's ``crba`` is Pinocchio's without
  ``model.armature``); passive forces (joint and tendon ``damping`` and ``stiffness``,
  ``gravcomp``, fluid forces from ``density``, ``viscosity`` and ``wind``; flags ``spring``,
  ``damper``); actuators (``actuation``, ``clampctrl``, ``actuatorgroupdisable``: tau is
  the input), tendons and sensors (``sensor``, ``magnetic``); ``timestep``,
  ``integrator`` and the integrator flags ``eulerdamp``, ``invdiscrete`` (rbdgen computes
  the continuous-time equations, MuJoCo's ``qacc`` before integration), ``energy``,
  ``fwdinv``, ``autoreset``, ``sleep`` (diagnostics and simulation control).

MuJoCo's warnings (a deprecated attribute, ...) become Python warnings; its log file
``MUJOCO_LOG.TXT`` is never written (:func:`mujoco_warnings`).

**Name**: ``<mujoco model="...">``, or the file's stem when the attribute is absent
(MuJoCo then calls every model "MuJoCo Model").

**Frames**: every body (kind ``body``, the world included as ``world``), every joint
(kind ``joint``, at the joint frame) and every site (kind ``site``); unnamed ones are
called ``body<i>``, ``<body>_joint<k>``, ``site<i>``.  MJCF names bodies, joints and sites
separately, so a body and a site may share a name (dm_control's humanoid: ``torso``):
``body:NAME``, ``site:NAME`` and ``joint:NAME`` always select one
(:meth:`gen.model.Model.frame`, e.g. ``6D:site:torso``), a plain name where it is unique.

Numbers go through :mod:`gen.portable` (quaternion and axis rotations written as single
IEEE operations, products by :func:`~gen.portable.matmul`, ``cos_sin`` for the ``ref``
rotation), so the model constants are the same on every CPU.
"""
from __future__ import annotations

import contextlib
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .backend import NUMPY
from .errors import RbdgenError
from .model import SE3, Body, Frame, Inertia, Model
from .portable import cos_sin, matmul
from .spatial import axis_rotation

# MuJoCo's mjtJoint values (mjmodel.h)
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3


def _mujoco():
    """The optional ``mujoco`` module (the one place it is imported)."""
    try:
        import mujoco
    except ImportError:
        raise RbdgenError("MJCF files need the optional 'mujoco' package: pip install 'rbdgen[mjcf]' "
                          "(or pip install mujoco)") from None
    return mujoco


@contextlib.contextmanager
def mujoco_warnings():
    """Collect MuJoCo's warnings in the yielded list instead of its default handler,
    which prints them and appends them to ``MUJOCO_LOG.TXT`` in the working directory
    (compiler warnings such as a deprecated ``settotalmass``, ``mj_warning`` from the
    engine); the previous handler is restored on exit.  Errors need nothing: the
    bindings raise them as exceptions without writing the log."""
    mujoco = _mujoco()
    previous = mujoco.get_mju_user_warning()
    got: list[str] = []
    mujoco.set_mju_user_warning(lambda msg: got.append(" ".join(str(msg).split())))
    try:
        yield got
    finally:
        mujoco.set_mju_user_warning(previous)


def compile_mjcf(path: str):
    """``mujoco.MjModel`` of the file, MuJoCo's compiler errors as one-line RbdgenErrors
    and its warnings as Python warnings (no ``MUJOCO_LOG.TXT``, :func:`mujoco_warnings`)."""
    mujoco = _mujoco()
    if not os.path.isfile(path):
        raise RbdgenError(f"{path}: MJCF file not found")
    with mujoco_warnings() as said:
        try:
            m = mujoco.MjModel.from_xml_path(path)
        except ValueError as e:
            msg = " ".join(str(e).split())
            raise RbdgenError(f"{path}: MuJoCo's compiler: {msg}") from None
    for msg in said:
        warnings.warn(f"{path}: MuJoCo: {msg}", stacklevel=3)
    return m


def gravity(m) -> np.ndarray:
    """The gravity MuJoCo applies: ``opt.gravity``, zero under ``<flag gravity="disable"/>``
    (``mjDSBL_GRAVITY`` in ``opt.disableflags``)."""
    if int(m.opt.disableflags) & int(_mujoco().mjtDisableBit.mjDSBL_GRAVITY):
        return np.zeros(3)
    return np.array([float(g) for g in m.opt.gravity])


def quat_matrix(w: float, x: float, y: float, z: float) -> np.ndarray:
    """Rotation of the unit quaternion ``[w x y z]`` (MuJoCo's order; ``mju_quat2Mat``),
    element by element, so the bits do not depend on the CPU."""
    w, x, y, z = float(w), float(x), float(y), float(z)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def axis_angle_matrix(u: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues about the unit axis ``u`` (:func:`gen.spatial.axis_rotation`), with the
    correctly rounded ``cos_sin``."""
    c, s = cos_sin(angle)
    return np.asarray(axis_rotation(np.asarray(u, dtype=float), c, s, NUMPY), dtype=float)


def _translation(p) -> SE3:
    return SE3(np.eye(3), np.array([float(a) for a in p]))


def _name(m, kind: str, i: int) -> str:
    """The name of MuJoCo object ``i`` of ``kind`` (body, joint, site, equality), "" if unnamed."""
    mujoco = _mujoco()
    return mujoco.mj_id2name(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}"), i) or ""


def _model_name(path: str) -> str:
    """``<mujoco model="...">`` of the file, else the file's stem (MuJoCo's compiled name is
    then "MuJoCo Model", the same for every such file, so two robots' kernel symbols would
    clash); read from the root element, since a file may give that name itself."""
    for _, root in ET.iterparse(path, events=("start",)):
        return root.get("model") or os.path.splitext(os.path.basename(path))[0]
    return os.path.splitext(os.path.basename(path))[0]


def _body_inertia(m, b: int) -> Inertia:
    """MuJoCo's principal inertia: ``I_c = R(iquat) diag(body_inertia) R(iquat)^T`` about
    the centre of mass ``ipos``, in the body frame."""
    R = quat_matrix(*m.body_iquat[b])
    I = matmul(matmul(R, np.diag([float(a) for a in m.body_inertia[b]])), R.T)
    return Inertia(float(m.body_mass[b]), np.array([float(a) for a in m.body_ipos[b]]), 0.5 * (I + I.T))


def _object(m, e: int, side: int) -> tuple[str, str]:
    """(kind, name) of object ``side`` (1 or 2) of a connect or weld equality: a body (id 0:
    the world) or, from MuJoCo 3.1 on, a site (``eq_objtype``)."""
    mujoco = _mujoco()
    i = int((m.eq_obj1id if side == 1 else m.eq_obj2id)[e])
    site = int(getattr(m, "eq_objtype", [mujoco.mjtObj.mjOBJ_BODY] * m.neq)[e]) == int(mujoco.mjtObj.mjOBJ_SITE)
    if site:
        return "site", _name(m, "site", i) or f"site{i}"
    return "body", "world" if i == 0 else (_name(m, "body", i) or f"body{i}")


def _equality_remedy(m, e: int, kind: str) -> str:
    """What rbdgen offers for equality ``e`` of MuJoCo type ``kind``: a loop closure for
    a connect (3D) or a weld (6D), nothing for the others."""
    if kind not in ("connect", "weld"):
        return "no rbdgen equivalent"
    t = "3D" if kind == "connect" else "6D"
    (k1, a), (k2, b) = _object(m, e, 1), _object(m, e, 2)
    if k1 == k2 == "site":            # MuJoCo makes the two sites coincide: the same constraint
        return f"give it as {t}:site:{a}~site:{b}"
    where = "at the anchor" if kind == "connect" else "that coincide when welded"
    if b == "world":
        return f"give it as {t}:A with a frame A on {k1} '{a}' {where}"
    return f"give it as {t}:A~B with frames A on {k1} '{a}' and B on {k2} '{b}' {where}"


def _equalities(m) -> list[str]:
    """One description per equality constraint MuJoCo enforces in the compiled model
    (``eq_active0``; none under ``<flag equality="disable"/>`` or ``constraint="disable"``)."""
    mujoco = _mujoco()
    off = int(mujoco.mjtDisableBit.mjDSBL_EQUALITY) | int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    if int(m.opt.disableflags) & off:
        return []
    active = getattr(m, "eq_active0", None)
    out = []
    for e in range(m.neq):
        if active is not None and not active[e]:
            continue
        kind = mujoco.mjtEq(int(m.eq_type[e])).name.removeprefix("mjEQ_").lower()
        out.append(f"{kind} '{_name(m, 'equality', e) or f'#{e}'}' ({_equality_remedy(m, e, kind)})")
    return out


def _refuse(m, path: str) -> None:
    eqs = _equalities(m)
    if eqs:
        raise RbdgenError(f"{path}: {len(eqs)} equality constraint(s) change the dynamics and are not loaded: "
                          f"{'; '.join(eqs)}; remove them, or disable them "
                          f"(<option><flag equality=\"disable\"/></option>) to compute the model without them")
    if getattr(m, "nflex", 0):
        raise RbdgenError(f"{path}: flexes (deformable bodies) are not rigid-body dynamics; remove them")
    if m.njnt == 0:
        raise RbdgenError(f"{path}: no joint: every body is welded to the world")


def _joint(m, path: str, body: str, j: int, k: int, nj: int, parent_world: bool):
    """(kind, axis, head, tail) of joint j, the k-th of nj in its body: the joint frame
    in the body frame as moved by the joints before it (``head``) and the body frame in
    the joint frame (``tail``), see the module docstring."""
    t = int(m.jnt_type[j])
    name = _name(m, "joint", j) or f"{body}_joint{k}"
    a = np.array([float(x) for x in m.jnt_pos[j]])
    u = np.array([float(x) for x in m.jnt_axis[j]])
    ref = float(m.qpos0[m.jnt_qposadr[j]])
    if t == FREE:
        if not parent_world or nj != 1:
            raise RbdgenError(f"{path}: free joint '{name}' of body '{body}' must be the only joint of a "
                              f"child of the world body")
        if np.any(a):
            raise RbdgenError(f"{path}: free joint '{name}' has a nonzero pos; rbdgen's free joint is at "
                              f"the body origin")
        return name, "free", np.zeros(3), SE3.identity(), SE3.identity()
    if t == BALL:
        return name, "spherical", np.zeros(3), _translation(a), _translation(-a)
    if t == SLIDE:
        return name, "prismatic", u, _translation(-ref * u), SE3.identity()
    if t == HINGE:
        return name, "revolute", u, SE3(axis_angle_matrix(u, -ref), a), _translation(-a)
    raise RbdgenError(f"{path}: joint '{name}' has MuJoCo type {t}, not one of hinge, slide, ball, free")


def load_mjcf(path, *, name: str | None = None) -> Model:
    """Build the :class:`~gen.model.Model` of an MJCF file through MuJoCo's compiler
    (conventions in the module docstring).  ``name`` overrides ``<mujoco model>``."""
    path = os.fspath(path)
    m = compile_mjcf(path)
    _refuse(m, path)

    bodies: list[Body] = []
    frames: list[Frame] = [Frame(_name(m, "body", 0) or "world", -1, SE3.identity(), "body")]
    # where each MuJoCo body's frame lives: (rbdgen body or -1, pose in that body's frame)
    where: list[tuple[int, SE3]] = [(-1, SE3.identity())]
    for b in range(1, m.nbody):
        pb = int(m.body_parentid[b])
        bname = _name(m, "body", b) or f"body{b}"
        body, pose = where[pb]
        pose = pose * SE3(quat_matrix(*m.body_quat[b]), np.array([float(x) for x in m.body_pos[b]]))
        nj, j0 = int(m.body_jntnum[b]), int(m.body_jntadr[b])
        for k in range(nj):
            jname, kind, axis, head, tail = _joint(m, path, bname, j0 + k, k, nj, pb == 0)
            placement = SE3.identity() if kind == "free" else pose * head
            bodies.append(Body(jname, bname if k == nj - 1 else jname, body, kind, axis, placement,
                               Inertia.zero()))
            body, pose = len(bodies) - 1, tail
            frames.append(Frame(jname, body, SE3.identity(), "joint"))
        where.append((body, pose))
        frames.append(Frame(bname, body, pose, "body"))
        if body >= 0:
            bodies[body].inertia = bodies[body].inertia + _body_inertia(m, b).transformed(pose)
    for s in range(m.nsite):
        body, pose = where[int(m.site_bodyid[s])]
        placement = pose * SE3(quat_matrix(*m.site_quat[s]), np.array([float(x) for x in m.site_pos[s]]))
        frames.append(Frame(_name(m, "site", s) or f"site{s}", body, placement, "site"))
    model = Model(name or _model_name(path), bodies, frames, gravity=gravity(m), source=path)
    model.check_singular_inertia()
    return model


# --- coordinates -------------------------------------------------------------------------------

def _free_rotation(model: Model, b: Body, q_rbdgen: np.ndarray) -> np.ndarray:
    x, y, z, w = q_rbdgen[b.idx_q + 3:b.idx_q + 7]
    return quat_matrix(w, x, y, z)


def q_from_mujoco(model: Model, qpos) -> np.ndarray:
    """rbdgen's q from MuJoCo's ``qpos``: free and ball quaternions ``[w x y z]`` ->
    ``[x y z w]``."""
    q = np.array(qpos, dtype=float).reshape(-1)
    for b in model.bodies:
        s = b.idx_q + (3 if b.kind == "free" else 0)
        if b.kind in ("free", "spherical"):
            q[s:s + 4] = np.roll(q[s:s + 4], -1)
    return q


def q_to_mujoco(model: Model, q) -> np.ndarray:
    """MuJoCo's ``qpos`` from rbdgen's q (inverse of :func:`q_from_mujoco`)."""
    out = np.array(q, dtype=float).reshape(-1)
    for b in model.bodies:
        s = b.idx_q + (3 if b.kind == "free" else 0)
        if b.kind in ("free", "spherical"):
            out[s:s + 4] = np.roll(out[s:s + 4], 1)
    return out


def v_from_mujoco(model: Model, q, qvel) -> np.ndarray:
    """rbdgen's v (or a generalized force) from MuJoCo's at rbdgen's configuration q: the
    free joint's world-axes linear part rotated into the body frame, ``R^T v``."""
    v = np.array(qvel, dtype=float).reshape(-1)
    q = np.asarray(q, dtype=float).reshape(-1)
    for b in model.bodies:
        if b.kind == "free":
            v[b.idx_v:b.idx_v + 3] = _free_rotation(model, b, q).T @ v[b.idx_v:b.idx_v + 3]
    return v


def v_to_mujoco(model: Model, q, v) -> np.ndarray:
    """MuJoCo's ``qvel`` (or ``qfrc``) from rbdgen's at q: ``R v_local`` for a free joint."""
    out = np.array(v, dtype=float).reshape(-1)
    q = np.asarray(q, dtype=float).reshape(-1)
    for b in model.bodies:
        if b.kind == "free":
            out[b.idx_v:b.idx_v + 3] = _free_rotation(model, b, q) @ out[b.idx_v:b.idx_v + 3]
    return out


def acceleration_to_mujoco(model: Model, q, v, a) -> np.ndarray:
    """MuJoCo's ``qacc`` from rbdgen's (q, v, a): for a free joint
    ``d/dt (R v_lin) = R (a_lin + w x v_lin)`` (``dR/dt = R [w]x``, w local)."""
    out = np.array(a, dtype=float).reshape(-1)
    q, v = np.asarray(q, dtype=float).reshape(-1), np.asarray(v, dtype=float).reshape(-1)
    for b in model.bodies:
        if b.kind == "free":
            s = b.idx_v
            out[s:s + 3] = _free_rotation(model, b, q) @ (out[s:s + 3] + np.cross(v[s + 3:s + 6], v[s:s + 3]))
    return out


__all__ = ["load_mjcf", "compile_mjcf", "q_from_mujoco", "q_to_mujoco", "v_from_mujoco", "v_to_mujoco",
           "acceleration_to_mujoco"]
