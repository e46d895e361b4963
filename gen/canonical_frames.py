"""Body frames that make the constant joint placements sparse (modified Denavit-Hartenberg).

A trace applies each body's parent transform as the joint's own motion (a rotation about
a coordinate axis, cheap) followed by the constant placement (:func:`gen.spatial._through_joint`).
A placement whose rotation is not a coordinate-axis rotation is a dense 3x3 and costs about
three axis rotations at every use.  The body frames are a free choice: the mechanism, and
everything observable (``q``, ``v``, ``tau``, ``M``, ``ddq``, derivatives, the world
placements of the operational frames, gravity), stays the same when body ``b``'s frame is
replaced by ``B G_b`` for a constant rotation ``G_b`` that the joint motion commutes with.
Khalil and Kleinfinger's modified DH convention (Khalil & Kleinfinger 1986, "A new geometric
notation for open and closed-loop robots", ICRA; Khalil & Dombre, *Modeling, Identification
and Control of Robots*, 2002, ch. 3) uses this freedom to reduce the rotation between two
consecutive joint axes to ``Rx(alpha)``.  The rules used here, body by body, parents first
(``P_b = (R_b, p_b)`` the placement, ``u_b`` the joint axis):

* *re-framable* bodies, revolute, ``revolute_unb``, prismatic and helical joints (mimic or
  not) whose placement is not traced as run-time symbols (``SE3.traced``), get
  ``G_b = A_b Rz(gamma_b)``: ``A_b`` turns the joint axis into +z (:func:`align`: a
  cyclic permutation when ``u_b`` is a coordinate axis, so exact), and ``Rz(gamma_b)``
  commutes with every motion about or along z.  Every other body (free, spherical, planar:
  their ``q``/``v`` are read in their own frame; traced placements) keeps its frame,
  ``G_b = 1``, and so do the frames of its children's placements on its side;
* a revolute, ``revolute_unb`` or helical joint also takes a constant angle offset
  ``theta_b`` (:attr:`gen.model.Body.angle_offset`; a mimic joint's is added to its
  ``Mimic.offset``): ``Rz(q) = Rz(-theta_b) Rz(q + theta_b)``, so the factor ``Rz(-theta_b)``
  moves into the placement; the helical translation ``pitch q`` along z commutes with it;
* the new placement is ``P'_b = G_p^-1 P_b G_b Rz(-theta_b)`` (``p``: the parent's ``G``,
  1 for the world), the new axis +z, inertias and the frames on ``b`` are expressed in the
  new frame (``G_b^-1 I`` and ``G_b^-1 F``); world frames and gravity are unchanged;
* writing the rotation ``G_p^-1 R_b G_b`` as ``Rz(phi) Rx(alpha) Rz(psi)`` (z-x-z Euler
  angles between the two joint axes), ``theta_b = psi`` removes the right factor (for
  parallel axes, ``alpha = 0`` or ``pi``, the whole ``Rz``; taken only where it leaves
  fewer non-trivial entries: an offset that merely permutes a sparse rotation costs an
  addition for nothing), and ``gamma_p = phi`` of the parent removes the left one;
* a parent has one ``gamma`` for all its children (and, when it takes no angle offset,
  for its own placement's right factor too): it is chosen among 0, the ``phi`` of each
  child and (no offset) ``-psi`` of its own placement, to minimise the non-trivial entries
  (not 0 or +-1) of the placements it affects, ties to the earliest (0 first, which leaves
  a sparse placement alone); the other children keep ``Rz(phi') Rx(alpha)``, and the
  children of a kept frame (a free-flyer's) ``Rz(phi) Rx(alpha)``.

The result computes the same values up to rounding: the constants are products of the
original ones with rotations built from the angles (at most a few ulps each); the angles
and their cos and sin are computed in software (:func:`atan2`, ``gen.portable.cos_sin``)
so the emitted C has the same bits on every machine.  A placement traced as run-time
symbols keeps its frame and its parent's when the choice is made on that model; a lane
trace's model (the caller's model with placements as symbols, :func:`gen.lanes.lane_constants`)
is transformed by :func:`apply` with the choice made on its numbers (``gen.trace.retrace``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from decimal import Decimal, localcontext

from .backend import SXBackend
from .model import SE3, Frame, Mimic, Model
from .portable import _half_pi, cos_sin, matmul

#: joint kinds whose body frame may turn about the joint axis (the motion commutes with Rz)
REFRAMABLE = ("revolute", "revolute_unb", "prismatic", "helical")
#: joint kinds that take an angle offset (a rotation about the axis driven by q)
OFFSET_KINDS = ("revolute", "revolute_unb", "helical")
#: below this, the Euler decomposition's sin(alpha) is zero (parallel or anti-parallel axes):
#: rounding of products of unit-norm rotations is ~1e-16; URDF rpy residues (3.7e-6) are real
PARALLEL_TOL = 1e-12
#: entries within this of 0 or +-1 are trivial (gen.spatial.snap rounds them when tracing)
TRIVIAL_TOL = 1e-14


@dataclass(frozen=True)
class Choice:
    """Per body: ``G[b]`` the new frame in the old one (a rotation), ``theta[b]`` the angle
    offset (revolute, ``revolute_unb``, helical; 0 otherwise)."""

    G: tuple
    theta: tuple


#: decimal digits of :func:`atan2` (as gen.portable.cos_sin: far beyond correct rounding)
ATAN_DIGITS = 60


def atan2(y: float, x: float) -> float:
    """The double nearest ``atan2(y, x)``, in decimal software arithmetic like
    :func:`gen.portable.cos_sin` (libm's ``atan2`` has CPU-dependent builds, and the angles
    become literals of the emitted C): ``atan z`` for ``0 <= z <= 1`` halved three times
    (``z / (1 + sqrt(1 + z^2))``) and summed as its Taylor series, then the octant."""
    if x == 0.0 and y == 0.0:
        return 0.0
    with localcontext() as ctx:
        ctx.prec = ATAN_DIGITS + 10
        Y, X = abs(Decimal(y)), abs(Decimal(x))
        z = min(Y, X) / max(Y, X)
        for _ in range(3):
            z = z / (1 + (1 + z * z).sqrt())
        total, term, n, z2 = z, z, 1, z * z
        while abs(term) > Decimal(10) ** -(ATAN_DIGITS + 5):
            term = -term * z2
            n += 2
            total += term / n
        a = 8 * total
        half_pi = _half_pi(ctx.prec)
        if Y > X:
            a = half_pi - a
        if x < 0:
            a = 2 * half_pi - a
        return float(-a if math.copysign(1.0, y) < 0 else a)


def rz(angle: float) -> np.ndarray:
    """Rotation about z (:func:`gen.portable.cos_sin`: the same bits everywhere), with
    cos and sin of multiples of pi/2 exact."""
    c, s = (0.0 if abs(x) < 1e-15 else x for x in cos_sin(angle))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _hypot(a: float, b: float) -> float:
    return math.sqrt(a * a + b * b)     # single IEEE operations: the same bits everywhere


def align(axis: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit ``axis`` ``u``: for ``u = +-e_k`` the
    cyclic permutation ``[e_k+1, e_k+2, e_k]`` (``[e_k+2, e_k+1, -e_k]``), 1 for +z; else
    ``[x, u x x, u]`` with ``x`` the coordinate axis least aligned with ``u`` made
    orthogonal to it.  (The cyclic choice keeps the frames of sparse models closest to
    theirs: solo12 crba traces 901 operations with it, 965 with ``[x, u x x, u]`` for
    every axis, 949 untransformed.)"""
    u = np.asarray(axis, dtype=float)
    k = next((k for k in range(3) if abs(abs(u[k]) - 1.0) == 0.0), None)
    if k is not None:                    # +-e_k: a cyclic permutation, 1 for +z
        e = np.eye(3)
        i, j = (k + 1) % 3, (k + 2) % 3
        return np.column_stack([e[i], e[j], e[k]] if u[k] > 0 else [e[j], e[i], -e[k]])
    j = int(np.argmin(np.abs(u)))
    x = -u[j] * u
    x[j] += 1.0
    x = x / math.sqrt(float(matmul(x, x)))
    y = np.cross(u, x)
    return np.column_stack([x, y, u])


def zxz(M: np.ndarray) -> tuple[float, float | None, float]:
    """``(phi, alpha, psi)`` with ``M = Rz(phi) Rx(alpha) Rz(psi)``; for parallel axes
    (``sin alpha`` below :data:`PARALLEL_TOL`) ``alpha`` is None, ``phi = 0`` and ``psi``
    the angle with ``M Rz(-psi)`` equal to 1 or ``Rx(pi)``."""
    if _hypot(M[0, 2], M[1, 2]) < PARALLEL_TOL:
        chi = atan2(M[1, 0], M[0, 0])
        return 0.0, None, chi if M[2, 2] > 0 else -chi
    return atan2(M[0, 2], -M[1, 2]), atan2(_hypot(M[0, 2], M[1, 2]), M[2, 2]), atan2(M[2, 0], M[2, 1])


def nontrivial(a: np.ndarray) -> int:
    """Entries that are not 0 or +-1 (each costs multiplications when applied)."""
    a = np.abs(np.asarray(a, dtype=float))
    return int(np.sum((a > TRIVIAL_TOL) & (np.abs(a - 1.0) > TRIVIAL_TOL)))


def offset_angle(M: np.ndarray) -> float:
    """The angle offset for a placement rotation ``M``: ``psi`` of :func:`zxz` when
    ``M Rz(-psi)`` has fewer non-trivial entries than ``M``, else 0 (an offset that only
    permutes a sparse rotation would cost an addition for nothing)."""
    t = zxz(M)[2]
    return t if abs(t) >= 1e-15 and nontrivial(matmul(M, rz(-t))) < nontrivial(M) else 0.0


def _residual(M: np.ndarray, absorbs: bool) -> np.ndarray:
    """``M`` after the angle offset, when the joint ``absorbs`` one."""
    return matmul(M, rz(-offset_angle(M))) if absorbs else M


def choose(model: Model) -> Choice:
    """The frame choice of the module docstring for ``model``."""
    n = model.nbodies
    bodies = model.bodies
    children = [[] for _ in range(n)]
    for i, b in enumerate(bodies):
        if b.parent >= 0:
            children[b.parent].append(i)
    free = [b.kind in REFRAMABLE and b.placement.traced is None
            and not any(bodies[c].placement.traced is not None for c in children[i]) for i, b in enumerate(bodies)]
    offset = [free[i] and b.kind in OFFSET_KINDS for i, b in enumerate(bodies)]
    A = [align(b.axis) if free[i] else np.eye(3) for i, b in enumerate(bodies)]
    G, theta = [np.eye(3)] * n, [0.0] * n
    for b, body in enumerate(bodies):
        Gp = np.eye(3) if body.parent < 0 else G[body.parent]
        in_parent = matmul(Gp.T, body.placement.R)                  # the placement's rotation in the new parent frame
        if free[b]:
            own = matmul(in_parent, A[b])                           # this body's rotation before gamma
            G[b] = matmul(A[b], rz(_gamma(b, own, A, children, bodies, free, offset)))
        if offset[b]:
            theta[b] = offset_angle(matmul(in_parent, G[b]))
    return Choice(tuple(G), tuple(theta))


def _gamma(b: int, own: np.ndarray, A: list, children: list, bodies: list, free: list, offset: list) -> float:
    """Body ``b``'s turn about its axis: among 0, each child's ``phi`` and (without an angle
    offset) ``-psi`` of its own placement, the one leaving the fewest non-trivial entries in
    the rotations and translations it changes (rotations weigh twice: each is applied to
    both halves of a spatial vector)."""
    Ab = A[b]
    kids = [(matmul(matmul(Ab.T, bodies[c].placement.R), A[c]), matmul(Ab.T, bodies[c].placement.p), c)
            for c in children[b]]
    candidates = [0.0] + [zxz(M)[0] for M, _, _ in kids]
    if not offset[b]:
        candidates.append(-zxz(own)[2])

    def cost(g: float) -> int:
        turn = rz(-g)
        total = 0 if offset[b] else 2 * nontrivial(matmul(own, rz(g)))
        for M, p, c in kids:
            total += 2 * nontrivial(_residual(matmul(turn, M), offset[c])) + nontrivial(matmul(turn, p))
        return total

    return min(candidates, key=cost)


def apply(model: Model, choice: Choice) -> Model:
    """``model`` in the frames of ``choice``: placements, axes, angle offsets (a mimic
    joint's in its ``Mimic.offset``), inertias and the frames on bodies.  A traced
    placement is transformed as symbols (its frames are 1 on both sides by :func:`choose`
    when the choice was made on that model)."""
    G, theta = choice.G, choice.theta
    bodies = []
    for b, body in enumerate(model.bodies):
        Gp = np.eye(3) if body.parent < 0 else G[body.parent]
        right = matmul(G[b], rz(-theta[b]))
        plc = body.placement
        new = SE3(matmul(matmul(Gp.T, plc.R), right), matmul(Gp.T, plc.p), _traced(plc.traced, Gp, right))
        changes = {"placement": new, "inertia": body.inertia.transformed(_turned(G[b]))}
        if body.kind in REFRAMABLE:
            changes["axis"] = _exact_axis(matmul(G[b].T, body.axis))
        if theta[b] and body.mimic is not None:
            changes["mimic"] = Mimic(body.mimic.primary, body.mimic.multiplier, body.mimic.offset + theta[b])
        elif theta[b]:
            changes["angle_offset"] = body.angle_offset + theta[b]
        bodies.append(dataclasses.replace(body, **changes))
    frames = [Frame(f.name, f.body, _in_new_frame(choice, f.body, f.placement), f.kind) for f in model.frames]
    return dataclasses.replace(model, bodies=bodies, frames=frames)


def _turned(G: np.ndarray) -> SE3:
    """The transform from a body's old frame to its new one ``G`` (a rotation)."""
    return SE3(G.T, np.zeros(3))


def _in_new_frame(choice: Choice, body: int, plc: SE3) -> SE3:
    """A placement in body ``body``'s frame (-1: the world, unchanged) in its new frame."""
    return plc if body < 0 else _turned(choice.G[body]) * plc


def _exact_axis(u: np.ndarray) -> np.ndarray:
    """+z when ``u`` is +z to rounding (it is, by construction of :func:`align`)."""
    if np.allclose(u, [0.0, 0.0, 1.0], rtol=0.0, atol=1e-12):
        return np.array([0.0, 0.0, 1.0])
    return u


def _traced(traced, Gp: np.ndarray, right: np.ndarray):
    """A traced placement's symbols through the same constant rotations (None: none)."""
    if traced is None:
        return None
    if np.array_equal(Gp, np.eye(3)) and np.array_equal(right, np.eye(3)):
        return traced
    be = SXBackend()
    R, p = traced
    return be.asarray(Gp.T) @ be.asarray(R) @ be.asarray(right), be.asarray(Gp.T) @ be.asarray(p)


def constraints(cset, choice: Choice, model: Model):
    """``cset`` (a :class:`gen.constraints.ConstraintSet` or None) on the transformed
    ``model``: each constraint's frame placement in its body's new frame (world sides
    unchanged)."""
    if cset is None or not hasattr(cset, "constraints"):
        return cset
    cons = [dataclasses.replace(c, placement1=_in_new_frame(choice, c.body1, c.placement1),
                                placement2=_in_new_frame(choice, c.body2, c.placement2)) for c in cset.constraints]
    return dataclasses.replace(cset, model=model, constraints=cons)


def canonical(model: Model, cset=None) -> tuple[Model, object, Choice]:
    """``(model', cset', choice)``: ``model`` and its constraint set in the frames of
    :func:`choose`."""
    choice = choose(model)
    out = apply(model, choice)
    return out, constraints(cset, choice, out), choice
