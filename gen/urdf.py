"""URDF loader producing a :class:`~gen.model.Model` in Pinocchio's conventions.

The result matches ``pinocchio.buildModelFromUrdf`` (docs/DESIGN.md §4) so arrays move between
rbdgen and Pinocchio unchanged:

* **tree and joint order** — urdfdom stores joints in a ``std::map`` keyed by name, so
  each link's children come in the order of their joints' names; Pinocchio then walks
  the tree depth-first (pre-order) from the unique root link.  Moving joints are
  numbered in that walk, so ``parent[i] < i``;
* **frames** — the body frame is the joint frame is the child link frame; a link's
  ``<inertial>`` origin (xyz, rpy) places its inertia; ``placement`` is the joint origin
  in the parent *body* frame, i.e. composed with the fixed joints above it;
* **fixed joints** are merged into the parent body (inertia lumped with
  ``Inertia.transformed`` / ``+``, as Pinocchio's ``appendBodyToJoint``); inertia merged
  into the world (a fixed-base robot's root links) is dropped.  Frames are created in
  Pinocchio's order: the root link, then per joint in the walk the joint frame followed
  by its child link frame (kinds ``joint`` / ``fixed_joint`` and ``body``);
* **joint types** — ``revolute`` -> ``revolute``, ``continuous`` -> ``revolute_unb``
  (q = [cos, sin], Pinocchio's RevoluteUnbounded), ``prismatic``, ``floating`` ->
  ``free``, ``fixed``; axes are normalised, default ``(1, 0, 0)`` (URDF spec); origins
  are ``xyz`` + ``rpy`` with ``R = Rz(yaw) Ry(pitch) Rx(roll)``; ``planar`` -> ``planar``
  (Pinocchio's JointModelPlanar, q = [x, y, cos, sin]): Pinocchio's URDF parser ignores
  the axis and always moves in the joint frame's xy plane, so an ``<axis>`` other than
  ``0 0 1`` is refused rather than silently replaced;
* ``<mimic joint multiplier offset>`` (defaults 1, 0) is ignored unless ``mimic=True``
  (Pinocchio's ``buildModelFromUrdf(path, mimic=...)``, default False); with it, a
  revolute or prismatic mimic joint becomes a Pinocchio 3 ``JointModelMimic`` of the
  named joint (:mod:`gen.model`: no coordinate of its own).  As Pinocchio, the mimicked
  joint must come before it in the walk; a mimic on another joint type, of a joint that
  is not a moving revolute/prismatic non-mimic joint, or with a locked primary is
  refused;
* ``floating_base=True`` adds a ``free`` joint named ``root_joint`` carrying the root
  link (``buildModelFromUrdf(path, JointModelFreeFlyer())``);
* ``lock_joints`` turns the named moving joints into fixed joints at q = 0, as
  ``pinocchio.buildReducedModel`` at the neutral configuration.

Meshes, materials, transmissions, gazebo tags and joint limits are ignored (urdfdom
requires ``<limit>`` on revolute and prismatic joints; rbdgen does not).  Every
malformed input raises :class:`~gen.errors.RbdgenError` with one line naming the file
and element.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from .errors import RbdgenError
from .model import SE3, Body, Frame, Inertia, Mimic, Model
from .portable import cos_sin, matmul, norm

JOINT_TYPES = {"revolute": "revolute", "continuous": "revolute_unb", "prismatic": "prismatic",
               "floating": "free", "planar": "planar", "fixed": "fixed"}


@dataclass
class _Joint:
    name: str
    kind: str          # a value of JOINT_TYPES
    parent: str
    child: str
    origin: SE3
    axis: np.ndarray
    mimic: tuple[str, float, float] | None = None    # (mimicked joint, multiplier, offset)


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: ``R = Rz(yaw) Ry(pitch) Rx(roll)``, from correctly
    rounded cosines and sines (:func:`gen.portable.cos_sin`, not the CPU-dependent libm):
    the same bits on every machine."""
    (cr, sr), (cp, sp), (cy, sy) = cos_sin(roll), cos_sin(pitch), cos_sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


class _Parser:
    """Reads the ``<link>`` and ``<joint>`` elements of one URDF file."""

    def __init__(self, path: str):
        self.path = path

    def error(self, what: str, msg: str) -> RbdgenError:
        return RbdgenError(f"{self.path}: {what}: {msg}")

    def numbers(self, elem, attr: str, n: int, what: str, default=None) -> np.ndarray:
        text = elem.get(attr) if elem is not None else None
        if text is None:
            if default is None:
                missing = f"missing attribute '{attr}'" if elem is not None else "missing element"
                raise self.error(what, missing)
            return np.array(default, dtype=float)
        try:
            vals = np.array([float(t) for t in text.split()])
        except ValueError:
            raise self.error(what, f"{attr}=\"{text}\" is not {n} number(s)") from None
        if vals.size != n or not np.all(np.isfinite(vals)):
            raise self.error(what, f"{attr}=\"{text}\" is not {n} finite number(s)")
        return vals

    def origin(self, parent_elem, what: str) -> SE3:
        o = parent_elem.find("origin")
        xyz = self.numbers(o, "xyz", 3, f"{what} <origin>", (0.0, 0.0, 0.0))
        rpy = self.numbers(o, "rpy", 3, f"{what} <origin>", (0.0, 0.0, 0.0))
        return SE3(rpy_matrix(*rpy), xyz)

    def inertia(self, link, what: str) -> Inertia:
        """Pinocchio's ``convertFromUrdf``: com = origin.xyz, I_c = R I R^T."""
        inertial = link.find("inertial")
        if inertial is None:
            return Inertia.zero()
        mass = float(self.numbers(inertial.find("mass"), "value", 1, f"{what} <inertial><mass>")[0])
        if mass < 0.0:
            raise self.error(f"{what} <inertial><mass>", f"negative mass {mass}")
        el = inertial.find("inertia")
        c = {k: float(self.numbers(el, k, 1, f"{what} <inertial><inertia>")[0])
             for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array([[c["ixx"], c["ixy"], c["ixz"]],
                      [c["ixy"], c["iyy"], c["iyz"]],
                      [c["ixz"], c["iyz"], c["izz"]]])
        M = self.origin(inertial, f"{what} <inertial>")
        return Inertia(mass, M.p, matmul(matmul(M.R, I), M.R.T))

    def joint(self, el, links) -> _Joint:
        name = el.get("name")
        if not name:
            raise self.error("<joint>", "missing attribute 'name'")
        what = f"joint '{name}'"
        jtype = el.get("type")
        if jtype not in JOINT_TYPES:
            raise self.error(what, f"unsupported type '{jtype}' "
                                   f"(supported: {', '.join(JOINT_TYPES)})")
        ends = []
        for tag in ("parent", "child"):
            e = el.find(tag)
            link = e.get("link") if e is not None else None
            if not link:
                raise self.error(what, f"missing <{tag} link=...>")
            if link not in links:
                raise self.error(what, f"{tag} link '{link}' is not defined")
            ends.append(link)
        axis = self.numbers(el.find("axis"), "xyz", 3, f"{what} <axis>", (1.0, 0.0, 0.0))
        length = norm(axis)
        if length == 0.0 and JOINT_TYPES[jtype] in ("revolute", "revolute_unb", "prismatic"):
            raise self.error(f"{what} <axis>", "zero axis")
        if jtype == "planar" and el.find("axis") is not None and \
                (length == 0.0 or not np.array_equal(axis / length, [0.0, 0.0, 1.0])):
            raise self.error(f"{what} <axis>", f"planar joint with normal {' '.join(map(repr, axis))}: Pinocchio's "
                                               f"JointModelPlanar moves in the xy plane only (normal 0 0 1)")
        return _Joint(name, JOINT_TYPES[jtype], ends[0], ends[1], self.origin(el, what),
                      axis / length if length > 0.0 else axis, self.mimic(el.find("mimic"), what))

    def mimic(self, el, what: str):
        """``(joint, multiplier, offset)`` of a ``<mimic>`` element (urdfdom's defaults 1, 0)."""
        if el is None:
            return None
        if not el.get("joint"):
            raise self.error(f"{what} <mimic>", "missing attribute 'joint'")
        mult = float(self.numbers(el, "multiplier", 1, f"{what} <mimic>", (1.0,))[0])
        off = float(self.numbers(el, "offset", 1, f"{what} <mimic>", (0.0,))[0])
        return el.get("joint"), mult, off


def _read(path: str):
    """Parse the file into (robot name, {link: Inertia}, {joint name: _Joint})."""
    p = _Parser(path)
    if not os.path.isfile(path):
        raise RbdgenError(f"{path}: URDF file not found")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:           # the message gives the line and column
        raise RbdgenError(f"{path}: malformed XML: {e}") from None
    if root.tag != "robot":
        raise RbdgenError(f"{path}: root element is <{root.tag}>, expected <robot>")
    links: dict[str, Inertia] = {}
    for el in root.findall("link"):
        name = el.get("name")
        if not name:
            raise p.error("<link>", "missing attribute 'name'")
        if name in links:
            raise p.error(f"link '{name}'", "defined twice")
        links[name] = p.inertia(el, f"link '{name}'")
    if not links:
        raise RbdgenError(f"{path}: <robot> has no <link>")
    joints: dict[str, _Joint] = {}
    for el in root.findall("joint"):
        j = p.joint(el, links)
        if j.name in joints:
            raise p.error(f"joint '{j.name}'", "defined twice")
        joints[j.name] = j
    return root.get("name") or os.path.splitext(os.path.basename(path))[0], links, joints


def _tree(path: str, links, joints):
    """urdfdom's tree: the root link and each link's child joints sorted by joint name."""
    parent_joint: dict[str, _Joint] = {}
    children: dict[str, list[_Joint]] = {name: [] for name in links}
    for name in sorted(joints):
        j = joints[name]
        if j.child in parent_joint:
            raise RbdgenError(f"{path}: link '{j.child}' has two parent joints, "
                              f"'{parent_joint[j.child].name}' and '{j.name}'")
        parent_joint[j.child] = j
        children[j.parent].append(j)
    roots = [name for name in links if name not in parent_joint]
    if len(roots) > 1:
        raise RbdgenError(f"{path}: several root links ({', '.join(roots)}); a URDF must be one tree")
    if not roots:
        raise RbdgenError(f"{path}: no root link: the joints form a cycle")
    return roots[0], children


def _mimic(path: str, j: _Joint, bodies: list[Body], locked) -> Mimic:
    """The :class:`~gen.model.Mimic` of joint ``j`` over the bodies built so far."""
    primary, mult, off = j.mimic
    index = {b.name: i for i, b in enumerate(bodies)}
    if j.kind not in ("revolute", "prismatic"):
        raise RbdgenError(f"{path}: joint '{j.name}': <mimic> on a {j.kind} joint; Pinocchio's mimic joints "
                          f"are revolute or prismatic")
    if primary in locked:
        raise RbdgenError(f"{path}: joint '{j.name}' mimics locked joint '{primary}': lock both or neither")
    if primary not in index:
        raise RbdgenError(f"{path}: joint '{j.name}' mimics '{primary}', which is not a moving joint before "
                          f"it in the tree (Pinocchio: the mimicked joint must already be in the model)")
    return Mimic(index[primary], mult, off)


def load_urdf(path, *, floating_base: bool = False, lock_joints=(), name: str | None = None,
              mimic: bool = False) -> Model:
    """Build the :class:`~gen.model.Model` of a URDF file (see the module docstring for
    the conventions).  ``lock_joints``: names of moving joints fixed at q = 0.  ``name``
    overrides the ``<robot name>`` attribute.  ``mimic``: honour ``<mimic>`` tags
    (Pinocchio's ``mimic=True``)."""
    path = os.fspath(path)
    lock_joints = set(lock_joints)
    robot_name, links, joints = _read(path)
    moving = [j for j in joints.values() if j.kind != "fixed"]
    for n in sorted(lock_joints):
        if n not in joints or joints[n].kind == "fixed":
            raise RbdgenError(f"{path}: cannot lock unknown joint '{n}' "
                              f"(moving joints: {', '.join(j.name for j in moving)})")
    root, children = _tree(path, links, joints)

    bodies: list[Body] = []
    frames: list[Frame] = []
    # where each link lives: (body index or -1 for the world, link frame in the body frame)
    link_frame: dict[str, tuple[int, SE3]] = {}
    if floating_base:
        bodies.append(Body("root_joint", root, -1, "free", np.zeros(3), SE3.identity(), links[root]))
        frames.append(Frame("root_joint", 0, SE3.identity(), "joint"))
        link_frame[root] = (0, SE3.identity())
    else:
        link_frame[root] = (-1, SE3.identity())
    frames.append(Frame(root, link_frame[root][0], SE3.identity(), "body"))

    stack = list(reversed(children[root]))          # depth-first, children in name order
    while stack:
        j = stack.pop()
        body, parent_pl = link_frame[j.parent]
        placement = parent_pl * j.origin
        if j.kind == "fixed" or j.name in lock_joints:
            frames.append(Frame(j.name, body, placement, "fixed_joint"))
            if body >= 0:
                bodies[body].inertia = bodies[body].inertia + links[j.child].transformed(placement)
            link_frame[j.child] = (body, placement)
        else:
            bodies.append(Body(j.name, j.child, body, j.kind, j.axis, placement, links[j.child],
                               mimic=_mimic(path, j, bodies, lock_joints) if mimic and j.mimic else None))
            link_frame[j.child] = (len(bodies) - 1, SE3.identity())
            frames.append(Frame(j.name, len(bodies) - 1, SE3.identity(), "joint"))
        frames.append(Frame(j.child, link_frame[j.child][0], link_frame[j.child][1], "body"))
        stack.extend(reversed(children[j.child]))

    unreached = [n for n in links if n not in link_frame]
    if unreached:
        raise RbdgenError(f"{path}: links {', '.join(unreached)} are not reachable from root link "
                          f"'{root}': the joints form a cycle")
    if not bodies:
        raise RbdgenError(f"{path}: no moving joint (all joints fixed or locked)")
    model = Model(name or robot_name, bodies, frames, source=path, locked=tuple(sorted(lock_joints)))
    model.check_physical_inertias()
    model.check_singular_inertia()
    return model
