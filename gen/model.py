"""The robot model: topology as plain ints, physics as NumPy constants.

Conventions are Pinocchio's (docs/DESIGN.md §4) so arrays move between rbdgen and Pinocchio
unchanged:

* bodies are numbered in Pinocchio's joint order (depth-first as its URDF loader
  gives it); ``parent[i] < i`` and ``-1`` is the world ("universe");
* body ``i`` moves with joint ``i``; the joint frame *is* the body frame;
  ``placement`` is the joint frame in the parent body frame when ``q_i`` is neutral
  (Pinocchio's ``jointPlacements``): ``parentMi(q) = placement * joint_motion(q_i)``;
* an SE3 ``(R, p)`` maps child coordinates to parent coordinates, ``x_p = R x_c + p``;
* spatial vectors are ``[linear; angular]``; gravity is ``(0, 0, -9.81)``;
* joint kinds and their coordinates:

  ============== ==== ==== =====================================================
  kind            nq   nv  q / v
  ============== ==== ==== =====================================================
  revolute         1    1  angle about ``axis`` (bounded, URDF ``revolute``)
  revolute_unb     2    1  ``[cos, sin]`` of the angle (URDF ``continuous``)
  prismatic        1    1  displacement along ``axis``
  spherical        4    3  unit quaternion ``[qx qy qz qw]`` / angular velocity in the
                           LOCAL frame (Pinocchio's ``JointModelSpherical``, MJCF ``ball``)
  planar           4    3  ``[x y cos sin]`` in the joint frame's xy plane (normal +z) /
                           ``[vx vy wz]`` in the LOCAL frame (Pinocchio's
                           ``JointModelPlanar``, URDF ``planar``)
  helical          1    1  angle about ``axis`` with translation ``pitch * angle`` along it
                           (Pinocchio's ``JointModelHelicalUnaligned``; no file format)
  free             7    6  ``[x y z qx qy qz qw]`` / ``[v_lin v_ang]`` in the LOCAL frame
  ============== ==== ==== =====================================================

* a **universal** joint (Pinocchio's ``JointModelUniversal(axis1, axis2)``: rotation
  ``R(axis1, q1) R(axis2, q2)``, ``nq = nv = 2``; no file format has one) is built by
  :func:`universal_joint` as two revolute bodies, the first massless, sharing one origin.
  That is the same mechanism (same ``q``, ``v``, ``M``, ``tau``), so every algorithm,
  solver, derivative and the generic C take it unchanged, and each half keeps the
  constant, possibly axis-aligned motion subspace the recursions exploit, where
  Pinocchio's joint carries a q-dependent ``S(q)`` and its bias ``dS/dt v``;
* a **mimic** joint (URDF ``<mimic>``, Pinocchio 3's ``JointModelMimic``) is a revolute
  or prismatic body whose coordinate is ``multiplier * q_primary + offset`` of an earlier
  revolute or prismatic joint: it has ``nq = nv = 0`` and the primary's ``idx_q`` /
  ``idx_v``; its motion subspace enters the primary's dof scaled by ``multiplier``
  (velocity ``multiplier * v_primary``, generalised force ``multiplier * S^T f`` added
  to the primary's).  With mimic joints ``M`` loses its branch-induced sparsity, so
  :meth:`Model.dof_parents` is the chain ``k - 1`` (a dense factorisation);
* fixed joints are merged into their parent body (inertia lumped), and every link
  and fixed joint is kept as a named :class:`Frame`.

The constants are computed with :mod:`gen.portable` (products of small matrices in a
fixed order, never NumPy's ``@``, which calls a CPU-dependent BLAS kernel) so that they,
and the C emitted from them, have the same bits on every machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import RbdgenError
from .portable import matmul

JOINT_KINDS = {"revolute": (1, 1), "revolute_unb": (2, 1), "prismatic": (1, 1), "spherical": (4, 3),
               "planar": (4, 3), "helical": (1, 1), "free": (7, 6)}
#: kinds a mimic joint may have and mimic (Pinocchio's URDF parser: revolute and prismatic)
MIMIC_KINDS = ("revolute", "prismatic")
GRAVITY = np.array([0.0, 0.0, -9.81])


@dataclass(frozen=True)
class SE3:
    """Rigid transform ``x_parent = R @ x_child + p`` (R 3x3, p shape (3,)).  ``traced``:
    backend values ``(R, p)`` a trace uses instead of the numbers (a joint placement
    whose entries are symbols, :func:`gen.lanes.lane_constants`); products and inverses
    are of the numbers."""

    R: np.ndarray
    p: np.ndarray
    traced: tuple | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def identity() -> "SE3":
        return SE3(np.eye(3), np.zeros(3))

    def __mul__(self, other: "SE3") -> "SE3":
        return SE3(matmul(self.R, other.R), matmul(self.R, other.p) + self.p)

    def inverse(self) -> "SE3":
        return SE3(self.R.T, -matmul(self.R.T, self.p))


@dataclass(frozen=True)
class Inertia:
    """Rigid-body inertia: mass, centre of mass ``com`` and rotational inertia ``I_c``
    about the centre of mass, all in the body frame (Pinocchio's ``Inertia``)."""

    mass: float
    com: np.ndarray
    I_c: np.ndarray

    @staticmethod
    def zero() -> "Inertia":
        return Inertia(0.0, np.zeros(3), np.zeros((3, 3)))

    def transformed(self, M: SE3) -> "Inertia":
        """This inertia, given in frame c, expressed in frame p where ``M = pMc``."""
        return Inertia(self.mass, matmul(M.R, self.com) + M.p, matmul(matmul(M.R, self.I_c), M.R.T))

    def __add__(self, other: "Inertia") -> "Inertia":
        m = self.mass + other.mass
        if m <= 0.0:
            return Inertia(0.0, np.zeros(3), self.I_c + other.I_c)
        c = (self.mass * self.com + other.mass * other.com) / m

        def shift(I: Inertia) -> np.ndarray:  # parallel-axis term m (|d|^2 1 - d d^T)
            d = I.com - c
            return I.mass * (matmul(d, d) * np.eye(3) - np.outer(d, d))

        return Inertia(m, c, self.I_c + other.I_c + shift(self) + shift(other))

    def matrix(self) -> np.ndarray:
        """6x6 spatial inertia about the body origin, ``[linear; angular]`` ordering."""
        C = skew(self.com)
        out = np.zeros((6, 6))
        out[:3, :3] = self.mass * np.eye(3)
        out[:3, 3:] = -self.mass * C
        out[3:, :3] = self.mass * C
        Ib = self.I_c - matmul(self.mass * C, C)
        out[3:, 3:] = 0.5 * (Ib + Ib.T)        # exactly symmetric
        return out


def skew(x) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


@dataclass(frozen=True)
class Mimic:
    """``q = multiplier * q[primary] + offset`` (``primary``: a body index, earlier)."""

    primary: int
    multiplier: float
    offset: float


@dataclass
class Body:
    """One moving body and the joint that moves it (Pinocchio's joint ``i+1``)."""

    name: str            # the joint's name (Pinocchio ``model.names``)
    link: str            # the URDF link carried by the joint (its body frame)
    parent: int          # parent body index, -1 for the world
    kind: str            # one of JOINT_KINDS
    axis: np.ndarray     # unit axis in the joint frame (unused for "free", "spherical", "planar")
    placement: SE3       # joint frame in the parent body frame at q neutral
    inertia: Inertia     # lumped inertia in the body frame
    idx_q: int = 0
    idx_v: int = 0
    pitch: float = 0.0   # helical: translation along the axis per radian
    mimic: Mimic | None = None
    #: revolute, revolute_unb, helical: a constant angle added to the joint's rotation,
    #: ``jMi(q) = Rot(axis, q + angle_offset)`` (helical translation ``pitch q``), with the
    #: placement holding ``Rot(axis, -angle_offset)``: set by :mod:`gen.canonical_frames`
    #: for the trace only (0 in every loaded model; Pinocchio's joints have none)
    angle_offset: float = 0.0

    @property
    def nq(self) -> int:
        """Configuration size, 0 for a mimic joint (Pinocchio's ``JointModelMimic``)."""
        return 0 if self.mimic is not None else JOINT_KINDS[self.kind][0]

    @property
    def nv(self) -> int:
        """Velocity size, 0 for a mimic joint; its motion subspace has
        ``JOINT_KINDS[kind][1]`` columns all the same."""
        return 0 if self.mimic is not None else JOINT_KINDS[self.kind][1]


def universal_joint(name: str, link: str, parent: int, index: int, axis1, axis2, placement: SE3,
                    inertia: Inertia) -> list[Body]:
    """Pinocchio's ``JointModelUniversal(axis1, axis2)`` named ``name`` at ``placement``
    in body ``parent``, moving ``link`` (``inertia``), as the bodies ``index`` and
    ``index + 1`` of a model: a massless body turning about ``axis1`` (named
    ``<name>_axis1``, link ``<link>_axis1``) and ``link`` turning about ``axis2`` in its
    frame, so the joint frame rotates by ``R(axis1, q1) R(axis2, q2)`` (module docstring).
    Axes in the joint frame; they need not be orthogonal but must not be parallel."""
    a1, a2 = (np.asarray(a, dtype=float) for a in (axis1, axis2))
    for what, a in (("axis1", a1), ("axis2", a2)):
        if a.shape != (3,) or not np.all(np.isfinite(a)) or abs(float(np.linalg.norm(a)) - 1.0) > 1e-12:
            raise RbdgenError(f"universal joint '{name}': {what} {a.tolist()} is not a finite unit 3-vector")
    if float(np.linalg.norm(np.cross(a1, a2))) < 1e-9:
        raise RbdgenError(f"universal joint '{name}': axis1 and axis2 are parallel (one degree of freedom)")
    return [Body(f"{name}_axis1", f"{link}_axis1", parent, "revolute", a1, placement, Inertia.zero()),
            Body(name, link, index, "revolute", a2, SE3.identity(), inertia)]


@dataclass(frozen=True)
class Frame:
    """A named frame rigidly attached to ``body`` (-1 = world) at ``placement``
    (frame in body coordinates).  ``kind`` is ``body`` (a link), ``fixed_joint``,
    ``joint`` or ``site`` (an MJCF site)."""

    name: str
    body: int
    placement: SE3
    kind: str


@dataclass
class Model:
    name: str
    bodies: list[Body]
    frames: list[Frame] = field(default_factory=list)
    gravity: np.ndarray = field(default_factory=lambda: GRAVITY.copy())
    source: str = ""     # URDF/MJCF path or synthetic spec: messages, and the file verify's reference reads
    locked: tuple[str, ...] = ()   # joints of ``source`` locked at q = 0 when loading

    def __post_init__(self) -> None:
        iq = iv = 0
        for i, b in enumerate(self.bodies):
            if b.kind not in JOINT_KINDS:
                raise RbdgenError(f"{self.name}: joint '{b.name}' has unknown kind '{b.kind}' "
                                  f"(expected one of {', '.join(JOINT_KINDS)})")
            if not -1 <= b.parent < i:
                raise RbdgenError(f"{self.name}: joint '{b.name}' has parent {b.parent}, "
                                  f"bodies must be numbered parents first")
            if b.mimic is not None:
                self._check_mimic(i, b)
                p = self.bodies[b.mimic.primary]
                b.idx_q, b.idx_v = p.idx_q, p.idx_v
                continue
            b.idx_q, b.idx_v = iq, iv
            iq += b.nq
            iv += b.nv
        self.nq, self.nv = iq, iv

    def _check_mimic(self, i: int, b: Body) -> None:
        p = b.mimic.primary
        primary = self.bodies[p] if 0 <= p < i else None
        if primary is None or primary.mimic is not None or primary.kind not in MIMIC_KINDS \
                or b.kind not in MIMIC_KINDS:
            raise RbdgenError(
                f"{self.source or self.name}: mimic joint '{b.name}' ({b.kind}) must mimic a revolute or "
                f"prismatic joint that is not itself a mimic and comes before it in the tree (Pinocchio's "
                f"JointModelMimic)" + (f"; '{primary.name}' is {'a mimic' if primary.mimic else primary.kind}"
                                        if primary is not None else ""))

    @property
    def has_mimic(self) -> bool:
        return any(b.mimic is not None for b in self.bodies)

    # --- topology --------------------------------------------------------------------
    @property
    def nbodies(self) -> int:
        return len(self.bodies)

    @property
    def parents(self) -> list[int]:
        return [b.parent for b in self.bodies]

    @property
    def frame_names(self) -> list[str]:
        return [f.name for f in self.frames]

    @property
    def joint_names(self) -> list[str]:
        return [b.name for b in self.bodies]

    def ancestors(self, i: int) -> list[int]:
        """Bodies from ``i`` up to the root, ``i`` included."""
        out = []
        while i != -1:
            out.append(i)
            i = self.bodies[i].parent
        return out

    def dof_parents(self) -> list[int]:
        """Featherstone 2005's expanded parent array λ over velocity coordinates: the
        dofs of a multi-DoF joint form a chain, the first hanging from the last dof of
        the parent joint (-1 for the world).  With mimic joints a dof also couples to the
        dofs of the mimic's ancestors, so λ is the chain ``k - 1``: factorisations over it
        are dense and exact."""
        if self.has_mimic:
            return list(range(-1, self.nv - 1))
        lam = []
        for b in self.bodies:
            up = -1 if b.parent == -1 else self.bodies[b.parent].idx_v + self.bodies[b.parent].nv - 1
            for k in range(b.nv):
                lam.append(up if k == 0 else b.idx_v + k - 1)
        return lam

    def frame(self, name: str) -> Frame:
        """The frame called ``name``, or ``KIND:NAME`` with KIND ``body``, ``site`` or
        ``joint`` (``joint`` also names a URDF fixed joint): the frame of that kind called
        NAME (MJCF gives bodies, sites and joints separate namespaces, so a body and a site
        may share a name).  A frame whose own name is ``name`` comes first, so a name
        containing ``:`` keeps working.  Several frames of one name are the same frame when
        they sit on one body at one placement (a URDF link and a joint may share it);
        otherwise the name is ambiguous and refused, naming the qualified choices."""
        qualifiers = {"body": ("body",), "site": ("site",), "joint": ("joint", "fixed_joint")}
        found = [f for f in self.frames if f.name == name]
        kind, colon, plain = name.partition(":")
        qualified = not found and bool(colon) and kind in qualifiers
        if qualified:
            found = [f for f in self.frames if f.name == plain and f.kind in qualifiers[kind]]
        if found:
            f0 = found[0]
            if any(f.body != f0.body or not np.allclose(f.placement.R, f0.placement.R, rtol=0, atol=1e-12)
                   or not np.allclose(f.placement.p, f0.placement.p, rtol=0, atol=1e-12) for f in found[1:]):
                where = "; ".join(f"{f.kind} on {'world' if f.body < 0 else repr(self.bodies[f.body].link)} at "
                                  f"p = {np.round(np.asarray(f.placement.p, float), 6).tolist()}" for f in found)
                kinds = [next((q for q, ks in qualifiers.items() if f.kind in ks), None) for f in found]
                fix = (f"write {' or '.join(f'{q}:{f0.name}' for q in kinds)}"
                       if not qualified and None not in kinds and len(set(kinds)) == len(kinds)
                       else f"rename one in {self.source or 'the model'}")
                raise RbdgenError(f"{self.name}: frame name '{name}' is ambiguous ({len(found)} frames: {where}); "
                                  f"{fix}")
            return f0
        key = plain if qualified else name
        close = [n for n in self.frame_names if key.lower() in n.lower()][:8]
        hint = f"; similar: {', '.join(close)}" if close else f"; {len(self.frames)} frames, see `rbdgen robots --frames {self.name}`"
        raise RbdgenError(f"{self.name}: unknown frame '{name}'{hint}")

    # --- configurations ----------------------------------------------------------------
    def neutral(self) -> np.ndarray:
        q = np.zeros(self.nq)
        for b in self.bodies:
            if b.kind == "free":
                q[b.idx_q + 6] = 1.0
            elif b.kind == "spherical":
                q[b.idx_q + 3] = 1.0
            elif b.kind == "planar":
                q[b.idx_q + 2] = 1.0
            elif b.kind == "revolute_unb" and b.mimic is None:
                q[b.idx_q] = 1.0
        return q

    def random_q(self, rng: np.random.Generator) -> np.ndarray:
        """A random configuration: angles and displacements uniform in [-pi, pi] (or
        [-0.5, 0.5] for prismatic), uniformly random unit quaternions (free and spherical
        joints), a random base position in [-1, 1]^3 (planar: [-1, 1]^2)."""
        q = np.zeros(self.nq)
        for b in self.bodies:
            s = b.idx_q
            if b.mimic is not None:
                continue
            if b.kind == "free":
                quat = rng.normal(size=4)
                q[s:s + 3] = rng.uniform(-1, 1, 3)
                q[s + 3:s + 7] = quat / np.linalg.norm(quat)
            elif b.kind == "spherical":
                quat = rng.normal(size=4)
                q[s:s + 4] = quat / np.linalg.norm(quat)
            elif b.kind == "revolute_unb":
                a = rng.uniform(-np.pi, np.pi)
                q[s:s + 2] = np.cos(a), np.sin(a)
            elif b.kind == "planar":
                a = rng.uniform(-np.pi, np.pi)
                q[s:s + 4] = *rng.uniform(-1, 1, 2), np.cos(a), np.sin(a)
            elif b.kind == "prismatic":
                q[s] = rng.uniform(-0.5, 0.5)
            else:
                q[s] = rng.uniform(-np.pi, np.pi)
        return q

    def check_physical_inertias(self) -> None:
        """Raise, naming the link, if a moving body's inertia (its link and the links
        fixed to it, merged) is not physical: negative mass, mass 0 with rotational
        inertia, a rotational inertia about the centre of mass that is not positive
        semi-definite, or principal moments violating the triangle inequality
        ``I1 + I2 >= I3`` (a rigid body's moments satisfy it; MuJoCo's compiler refuses
        it too).  Rounding of the file's decimals is tolerated: ``1e-9`` of the largest
        moment plus ``1e-14``.  A massless, inertia-free body is physical (two revolute
        joints with a massless link between them); :meth:`check_singular_inertia` refuses
        it only when its whole subtree is massless."""
        for b in self.bodies:
            m = float(b.inertia.mass)
            I = np.asarray(b.inertia.I_c, dtype=float)
            moments = np.linalg.eigvalsh(0.5 * (I + I.T))
            tol = 1e-9 * max(float(moments[-1]), 0.0) + 1e-14
            what = f"{self.source or self.name}: link '{b.link}' (moved by joint '{b.name}')"
            if m < 0.0:
                raise RbdgenError(f"{what} has negative mass {m:g}")
            if m == 0.0 and moments[-1] > tol:
                raise RbdgenError(f"{what} has mass 0 but rotational inertia (principal moments "
                                  f"{', '.join(f'{x:.3g}' for x in moments)}): give it a mass")
            if moments[0] < -tol:
                raise RbdgenError(f"{what}: rotational inertia is not positive semi-definite (principal "
                                  f"moments {', '.join(f'{x:.3g}' for x in moments)})")
            if moments[0] + moments[1] < moments[2] - tol:
                raise RbdgenError(f"{what}: principal moments {', '.join(f'{x:.3g}' for x in moments)} violate "
                                  f"the triangle inequality I1 + I2 >= I3 of a rigid body")

    def check_singular_inertia(self) -> None:
        """Raise if some joint moves only massless, inertia-free bodies: the joint-space
        inertia matrix is then singular (real URDFs contain such links)."""
        subtree_mass = [b.inertia.mass for b in self.bodies]
        subtree_rot = [float(np.trace(b.inertia.I_c)) for b in self.bodies]
        for i in reversed(range(self.nbodies)):
            p = self.bodies[i].parent
            if p >= 0:
                subtree_mass[p] += subtree_mass[i]
                subtree_rot[p] += subtree_rot[i]
        bad = [b.name for i, b in enumerate(self.bodies)
               if subtree_mass[i] <= 1e-12 and subtree_rot[i] <= 1e-12]
        if bad:
            raise RbdgenError(
                f"{self.source or self.name}: joint(s) {', '.join(repr(n) for n in bad)} move links "
                f"with zero mass and inertia, so the joint-space inertia matrix is singular; "
                f"lock them (lock_joints=[...], CLI --lock) or give the links inertia")

    def describe(self) -> str:
        return f"{self.name}: nq={self.nq} nv={self.nv} bodies={self.nbodies} frames={len(self.frames)}"
