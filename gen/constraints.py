"""Kinematic constraints: the :class:`ConstraintSet` and its rows (docs/DESIGN.md §4); the spec
parser is :mod:`gen.constraint_spec`.

Spec syntax: comma-separated tokens ``TYPE:FRAME`` (the frame is held fixed in the world)
or ``TYPE:FRAME_A~FRAME_B`` (a loop closure between two frames), TYPE ``3D`` (the frame
origin's position) or ``6D`` (position and orientation), e.g.
``6D:left_sole_link,6D:right_sole_link`` or ``3D:tip~anchor``.

Conventions are those of Pinocchio's ``RigidConstraintModel`` with ``reference_frame =
LOCAL``, ``joint1 = frame A``, ``joint2 = frame B`` (the world for anchored constraints),
so ``J``, ``gamma`` and ``lam`` move between rbdgen and Pinocchio unchanged:

* velocity rows, expressed in frame A's LOCAL axes (c1 = frame A, c2 = frame B,
  ``c1Mc2`` their relative placement, ``v1``, ``v2`` their LOCAL spatial velocities):

  - 3D: ``J v = lin(v1) - c1R2 lin(v2)``  (``= R1^T (dp1/dt - dp2/dt)``)
  - 6D: ``J v = v1 - c1Xc2 v2``           (columns of joints supporting both frames are 0)

* drift ``gamma`` (constraint acceleration at ``ddq = 0``, no gravity), with ``a1``, ``a2``
  the frames' LOCAL spatial acceleration drifts:

  - 3D, the points' *classical* accelerations:
    ``gamma = (lin(a1) + w1 x lin(v1)) - c1R2 (lin(a2) + w2 x lin(v2))``
  - 6D, the *spatial* accelerations plus the transport term of ``c1Xc2``:
    ``gamma = a1 - c1Xc2 a2 + (v1 - c1Xc2 v2) x (c1Xc2 v2)``

  (For 3D this is Pinocchio's convention: it differs from ``d(J v)/dt`` by
  ``-w1 x (J v)``, which vanishes once the velocity constraint holds.)

* desired constraint acceleration (Tedrake 2012 §1, Carpentier 2021 eq. 3b, written as
  the right-hand side of ``J ddq = a_c*``)::

      a_c* = -gamma - Kd (J v) - Kp e

  with the position error ``e = -c1Mc2.translation`` (3D) or ``e = -log6(c1Mc2)`` (6D),
  exactly Pinocchio's Baumgarte corrector; for anchored constraints ``c2`` is the
  anchor placement in the world (the identity, as in Pinocchio, unless ``reference_q``
  is given to :func:`parse_constraints`).

* forces: ``M ddq + b = tau + J^T lam`` (Pinocchio's ``constraintDynamics`` sign).

Weights (Sathya 2024, Remark 2): a constraint with weight ``w`` gets the proximal damping
``mu / w`` on its rows (``R_E^{-1}`` of the paper), i.e. ``w`` multiplies Sathya's penalty
``1/mu``.  The solution of a feasible problem does not depend on the weights.

Maximal-coordinate view (Sathya 2024 eq. 20c/22): each constraint is a sum of *terms*
``(body, K)`` with ``K`` (size x 6) acting on the body's LOCAL spatial velocity or
acceleration: ``J v = sum_t K_t v_body(t)``, and the constraint force on that body is
``K_t^T lam``.  Anchored constraints have one term with a constant ``K``.

Velocity constraints (Tedrake 2012 §2): a TYPE ending in ``v`` (``3Dv:FRAME``,
``6Dv:FRAME``, ``3Dv:A~B``) is the *velocity* constraint ``psi(q, v) = J v = 0`` (the
frame's velocity, or the two frames' relative velocity, held at zero) rather than the
position constraint whose derivative it is: it has no position anchor and no ``Kp``
feedback, and is stabilised by ``psi' = -Kv psi`` (Tedrake's ``1/epsilon``), i.e.
``a_c* = -gamma - Kv (J v)`` on its rows, with the set's gain ``Kv`` (default 0: the plain
``psi' = 0``).  Position constraints keep ``Kp``, ``Kd``.  Its Jacobian ``d psi / d v = J``
and forces are those of the position constraint, so every solver handles it; a velocity
constraint with gain ``Kv`` equals Pinocchio's constraint with corrector ``(Kp, Kd) =
(0, Kv)``.

Unilateral rows (Tedrake 2012 §3.1): a TYPE ending in ``+`` (``3D+:FL_FOOT``,
``6D+:left_sole_link``, ``3D+:A~B``) marks the constraint's *normal row* as one-sided:
the row along frame A's LOCAL z axis (the contact normal of a contact frame; the linear
z row of a 6D constraint), ``J_n ddq - a_n* >= 0`` complementary to ``lam_n >= 0``.  Its
other rows stay bilateral.  Only ``prox_lcp`` reads the flag
(:meth:`ConstraintSet.unilateral_rows`); the other solvers treat every row as bilateral.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .errors import RbdgenError
from .kinematics import dof_columns, forward_velocities, subspaces
from .model import SE3, Model
from .portable import matmul
from .spatial import (
    act_motion,
    ang,
    compose,
    cross3,
    cross_motion,
    inv_motion,
    lin,
    skew3,
    snap,
)

TYPES = {"3D": 3, "6D": 6}


@dataclass(frozen=True)
class Constraint:
    """One 3D or 6D constraint between frame A (``frame1``) and frame B (``frame2``, None
    for the world).  ``body1``/``body2`` are the bodies carrying them (-1: the world);
    ``placement1``/``placement2`` the frames in those bodies (in the world for -1)."""

    kind: str
    frame1: str
    frame2: str | None
    body1: int
    body2: int
    placement1: SE3
    placement2: SE3
    weight: float = 1.0
    token: str = ""
    unilateral: bool = False          # the normal row (frame A's LOCAL z) is one-sided
    velocity: bool = False            # psi = J v = 0 (Tedrake 2012 §2), no position anchor

    @property
    def size(self) -> int:
        return TYPES[self.kind]

    @property
    def moving(self) -> list[int]:
        """Sides (1, 2) whose frame moves."""
        return [s for s, b in ((1, self.body1), (2, self.body2)) if b >= 0]

    @property
    def anchored(self) -> bool:
        """Exactly one moving side: a constraint relative to the world (Sathya 2024's
        maximal-coordinate algorithms handle only these)."""
        return len(self.moving) == 1

    def __str__(self) -> str:
        suffix = ("v" if self.velocity else "") + ("+" if self.unilateral else "")
        return f"{self.kind}{suffix}:{self.frame1}" + (f"~{self.frame2}" if self.frame2 else "")


@dataclass
class ConstraintSet:
    """An ordered list of constraints with Baumgarte gains ``Kp``, ``Kd`` of the position
    constraints and ``Kv`` of the velocity constraints (default 0).  Rows are stacked in
    list order; ``offsets[c]`` is the first row of constraint c.  ``runtime``: the gains
    are backend values (the symbolic inputs of a run-time-parameters kernel,
    :meth:`with_gains`), so every gain term enters ``a_c*`` whatever its value."""

    model: Model = field(repr=False)
    constraints: list[Constraint]
    Kp: float = 0.0
    Kd: float = 0.0
    Kv: float = 0.0
    runtime: bool = False

    def __post_init__(self) -> None:
        for name, g in (("Kp", self.Kp), ("Kd", self.Kd), ("Kv", self.Kv)):
            if not self.runtime:
                check_gain(name, g)
        self.offsets, m = [], 0
        for c in self.constraints:
            self.offsets.append(m)
            m += c.size
        self.m = m

    def with_gains(self, Kp, Kd, Kv, *, runtime: bool = False) -> "ConstraintSet":
        """The same constraints with the gains ``(Kp, Kd, Kv)``: numbers (checked), or with
        ``runtime`` backend values (a run-time-parameters kernel; the C checks them)."""
        return ConstraintSet(self.model, self.constraints, Kp, Kd, Kv, runtime)

    def with_weights(self, weights) -> "ConstraintSet":
        """The same constraints and gains with one weight per constraint (each positive
        and finite)."""
        for con, w in zip(self.constraints, weights):
            if not (np.isfinite(w) and w > 0):
                raise RbdgenError(f"constraint '{con}': weight {w} must be positive and finite")
        cons = [dataclasses.replace(con, weight=float(w)) for con, w in zip(self.constraints, weights)]
        return ConstraintSet(self.model, cons, self.Kp, self.Kd, self.Kv, self.runtime)

    # --- structure (plain ints, resolved at trace time) ------------------------------
    def __len__(self) -> int:
        return len(self.constraints)

    @property
    def spec(self) -> str:
        return ",".join(str(c) for c in self.constraints)

    def __str__(self) -> str:
        return self.spec or "(no constraints)"

    def rows(self, c: int) -> range:
        return range(self.offsets[c], self.offsets[c] + self.constraints[c].size)

    def gains(self, c: int) -> tuple[float, float]:
        """``(Kp, Kd)`` acting on constraint c's position error and velocity ``J v``:
        the set's Baumgarte pair for a position constraint, ``(0, Kv)`` for a velocity
        constraint (Pinocchio's corrector that reproduces it)."""
        return (0.0, self.Kv) if self.constraints[c].velocity else (self.Kp, self.Kd)

    def unilateral_rows(self) -> list[int]:
        """Rows of the unilateral constraints' normals (frame A's LOCAL z, row 2 of the
        constraint), ascending."""
        return [self.offsets[c] + 2 for c, con in enumerate(self.constraints) if con.unilateral]

    def damping(self, mu: float) -> np.ndarray:
        """Per-row proximal damping ``rho = mu / weight`` (Pinocchio's sense of mu)."""
        if not mu > 0:
            raise RbdgenError(f"proximal parameter mu={mu} must be positive (Pinocchio's damping, "
                              f"e.g. 1e-6; Sathya's penalty is 1/mu)")
        return np.concatenate([np.full(c.size, mu / c.weight) for c in self.constraints]) \
            if self.constraints else np.zeros(0)

    def support(self, model: Model, c: int) -> list[int]:
        """Dofs whose Jacobian columns may be non-zero for constraint c (ascending): the
        supports of the moving frames; for a 6D loop, joints supporting both frames
        cancel and are left out."""
        con = self.constraints[c]
        sets = [set(model.ancestors(b)) for b in (con.body1, con.body2) if b >= 0]
        bodies = set().union(*sets)
        if con.kind == "6D" and len(sets) == 2:     # common supports cancel, body by body
            bodies -= sets[0] & sets[1]
        return sorted(_dofs(model, bodies))

    def require_anchored(self, algorithm: str) -> None:
        """The generic C library's articulated sweeps (registry ``GenericC.anchored_only``)
        take constraints relative to the world only."""
        for con in self.constraints:
            if not con.anchored:
                raise RbdgenError(
                    f"the generic C library's {algorithm} handles constraints relative to the world only; "
                    f"'{con}' closes a loop between two moving bodies: use a joint-space algorithm "
                    f"(prox_ltl, prox_ltls, ltl_osim or kkt_osim)")

    # --- numbers, over the backend -----------------------------------------------------
    def evaluate(self, model: Model, q, v, *, be, kin=None, jacobian: bool = True,
                 drift: bool = True) -> "ConstraintEval":
        """Constraint quantities at (q, v).  ``kin = (liMi, vel, c)`` from
        ``gen.kinematics.forward_velocities`` may be passed to share the forward pass.
        ``jacobian``/``drift`` skip J (m x nv) and the drift pass when not needed (the
        maximal-coordinate solvers need neither)."""
        S = subspaces(model, be, mimic=True)
        if kin is None:
            kin = forward_velocities(model, q, v, S, be)
        return _evaluate(self, model, S, kin, be, jacobian, drift)

    def jacobian(self, model: Model, q, *, be):
        """The stacked LOCAL constraint Jacobian J (m x nv)."""
        return self.evaluate(model, q, be.zeros(model.nv, 1), be=be, drift=False).J

    def body_forces(self, model: Model, ev: "ConstraintEval", lam, be) -> list:
        """External spatial forces per body (LOCAL frames, ABA's ``fext``) exerted by the
        constraint forces ``lam``: ``sum_t K_t^T lam_c``; None for untouched bodies."""
        f = [None] * model.nbodies
        for ci, terms in enumerate(ev.terms):
            r = self.rows(ci)
            lc = lam[r.start:r.stop, 0:1]
            for body, K in terms:
                fb = K.T @ lc
                f[body] = fb if f[body] is None else f[body] + fb
        return f


@dataclass
class ConstraintEval:
    """Constraint quantities at one state (backend values, columns m x 1):
    ``J`` (m x nv or None), ``Jv``, ``gamma`` (None without drift), ``a_star``
    (``a_c*``, None without drift), ``a_rest = -gamma_x - Kd Jv - Kp e`` where
    ``gamma_x`` is the part of gamma not of the form ``K a_body`` (so that, in maximal
    coordinates, ``K a_body = k`` with ``k = K a0_body + a_rest``, ``a0`` the body's
    acceleration at ddq = 0 including the gravity offset), ``terms[c] = [(body, K)]``."""

    J: object
    Jv: object
    gamma: object
    a_star: object
    a_rest: object
    terms: list


def _dofs(model: Model, bodies) -> set[int]:
    return {d for b in bodies for d, _ in dof_columns(model, b)}


def _inverse(M):
    R, p = M
    return R.T, -(R.T @ p)


def _const(M: SE3, be):
    return be.asarray(snap(M.R)), be.asarray(snap(M.p).reshape(3, 1))


def motion_matrix(M, be):
    """6x6 matrix of ``act_motion(M, .)``: ``[[R, [p]x R], [0, R]]``."""
    R, p = M
    X = be.zeros(6, 6)
    X[0:3, 0:3] = R
    X[0:3, 3:6] = skew3(p, be) @ R
    X[3:6, 3:6] = R
    return X


def _placements(model: Model, liMi, bodies, be) -> dict:
    """World placements oMi of the listed bodies and their ancestors."""
    oM: dict[int, tuple] = {}

    def get(i):
        if i not in oM:
            p = model.bodies[i].parent
            oM[i] = liMi[i] if p == -1 else compose(get(p), liMi[i])
        return oM[i]

    for b in bodies:
        get(b)
    return oM


def _evaluate(cset: ConstraintSet, model: Model, S, kin, be, want_J: bool, want_drift: bool):
    liMi, vel, c = kin
    acc = None
    if want_drift:                       # a_i = liMi[i]^-1 a_parent + c_i, no gravity
        acc = []
        for i, b in enumerate(model.bodies):
            acc.append(c[i] if b.parent == -1 else inv_motion(liMi[i], acc[b.parent], be) + c[i])
    need_oM = [b for con in cset.constraints for b in (con.body1, con.body2)
               if b >= 0 and (con.body2 >= 0 or _position_feedback(cset, con))]
    oM = _placements(model, liMi, need_oM, be)

    J = be.zeros(cset.m, model.nv) if want_J else None
    Jv, gam, ast, rest, terms = [], [], [], [], []
    for ci, con in enumerate(cset.constraints):
        F1, F2 = _const(con.placement1, be), _const(con.placement2, be)
        rel = None
        if con.body2 >= 0 or _position_feedback(cset, con):         # c1Mc2 = oMc1^-1 oMc2
            oMc1 = F1 if con.body1 < 0 else compose(oM[con.body1], F1)
            oMc2 = F2 if con.body2 < 0 else compose(oM[con.body2], F2)
            rel = compose(_inverse(oMc1), oMc2)
        v1 = inv_motion(F1, vel[con.body1], be) if con.body1 >= 0 else None
        v2 = inv_motion(F2, vel[con.body2], be) if con.body2 >= 0 else None
        a1 = inv_motion(F1, acc[con.body1], be) if want_drift and con.body1 >= 0 else None
        a2 = inv_motion(F2, acc[con.body2], be) if want_drift and con.body2 >= 0 else None
        if con.kind == "3D":
            jv, gk, gx = _rows3(rel, v1, v2, a1, a2, be)
            err = -rel[1] if _position_feedback(cset, con) else None
        else:
            jv, gk, gx = _rows6(rel, v1, v2, a1, a2, be)
            err = -log6(rel[0], rel[1], be) if _position_feedback(cset, con) else None
        r = -gx if gx is not None else be.zeros(con.size, 1)
        kd = cset.gains(ci)[1]                         # velocity rows: psi' = -Kv psi
        if cset.runtime or kd != 0.0:
            r = r - kd * jv
        if err is not None:
            r = r - cset.Kp * err
        Jv.append(jv)
        rest.append(r)
        if want_drift:
            g = gk if gx is None else gk + gx
            gam.append(g)
            ast.append(r - gk)
        terms.append(_terms(con, rel, be))
        if want_J:
            _fill_jacobian(model, cset, ci, con, rel, liMi, S, J, be)
    cat = (lambda xs: be.vcat(xs) if xs else be.zeros(0, 1))
    return ConstraintEval(J, cat(Jv), cat(gam) if want_drift else None,
                          cat(ast) if want_drift else None, cat(rest), terms)


def _position_feedback(cset: ConstraintSet, con: Constraint) -> bool:
    """The position error enters ``a_c*`` (``Kp != 0`` or a run-time ``Kp``; never for
    velocity constraints)."""
    return (cset.runtime or cset.Kp != 0.0) and not con.velocity


def check_gain(name: str, g) -> float:
    """A Baumgarte gain as a float, or an :class:`RbdgenError` unless finite and >= 0."""
    if not np.isfinite(g) or g < 0:
        raise RbdgenError(f"Baumgarte gain {name}={g} must be finite and non-negative")
    return float(g)


def _rows3(rel, v1, v2, a1, a2, be):
    """3D: (J v, K-part of gamma, quadratic part of gamma)."""
    jv = gk = gx = None
    if v1 is not None:
        jv = lin(v1)
        gx = cross3(ang(v1), lin(v1), be)
        gk = lin(a1) if a1 is not None else None
    if v2 is not None:
        R12 = rel[0]
        jv2 = -(R12 @ lin(v2))
        gx2 = -(R12 @ cross3(ang(v2), lin(v2), be))
        jv = jv2 if jv is None else jv + jv2
        gx = gx2 if gx is None else gx + gx2
        if a2 is not None:
            gk2 = -(R12 @ lin(a2))
            gk = gk2 if gk is None else gk + gk2
    return jv, gk, gx


def _rows6(rel, v1, v2, a1, a2, be):
    """6D: (J v, K-part of gamma, quadratic part of gamma)."""
    jv, gk, gx = v1, a1, None
    if v2 is not None:
        v2p = act_motion(rel, v2, be)
        jv = -v2p if jv is None else jv - v2p
        if a2 is not None:
            a2p = act_motion(rel, a2, be)
            gk = -a2p if gk is None else gk - a2p
        if v1 is not None:                 # (v1 - v2') x v2'; zero when frame A is fixed
            gx = cross_motion(jv, v2p, be)
    return jv, gk, gx


def _terms(con: Constraint, rel, be):
    """[(body, K)]: K maps the body's LOCAL spatial motion to the constraint rows."""
    out = []
    if con.body1 >= 0:
        X = _motion_matrix_np(con.placement1.inverse())
        out.append((con.body1, be.asarray(snap(X[:con.size]))))
    if con.body2 >= 0:
        X2 = _motion_matrix_np(con.placement2.inverse())          # c2 <- body2, constant
        if con.kind == "3D":
            K = -(rel[0] @ be.asarray(snap(X2[:3])))
        else:
            K = -(motion_matrix(rel, be) @ be.asarray(snap(X2)))
        out.append((con.body2, K))
    return out


def _motion_matrix_np(M: SE3) -> np.ndarray:
    X = np.zeros((6, 6))
    P = np.array([[0, -M.p[2], M.p[1]], [M.p[2], 0, -M.p[0]], [-M.p[1], M.p[0], 0]])
    X[:3, :3] = M.R
    X[:3, 3:] = matmul(P, M.R)
    X[3:, 3:] = M.R
    return X


def _side_columns(model: Model, body: int, start, stop: set[int], liMi, S, be, rows: int):
    """LOCAL Jacobian columns ``fXj S_j`` of the frame whose body->frame transform is
    ``start``, for the joints j supporting ``body`` and not in ``stop``.  The transform
    is walked up the chain (Featherstone 2008 §8.1), so axis-aligned joints give
    columns of rotation entries directly."""
    cols = {}
    fMj = start
    j = body
    while j != -1 and j not in stop:
        b = model.bodies[j]
        for k, (d, s) in enumerate(dof_columns(model, j)):   # a mimic joint adds to its primary's
            col = act_motion(fMj, S[j][:, k:k + 1], be)[0:rows, 0:1]
            col = col if s == 1.0 else s * col
            cols[d] = cols[d] + col if d in cols else col
        fMj = compose(fMj, _inverse(liMi[j]))
        j = b.parent
    return cols


def _fill_jacobian(model, cset, ci, con, rel, liMi, S, J, be):
    size = con.size
    common: set[int] = set()
    if con.kind == "6D" and con.body1 >= 0 and con.body2 >= 0:
        common = set(model.ancestors(con.body1)) & set(model.ancestors(con.body2))
    cols: dict[int, object] = {}
    if con.body1 >= 0:
        start = _const(con.placement1.inverse(), be)
        cols = _side_columns(model, con.body1, start, common, liMi, S, be, size)
    if con.body2 >= 0:
        if con.kind == "6D":       # c1Xj S_j through c1Mb2 = c1Mc2 c2Mb2
            start = compose(rel, _const(con.placement2.inverse(), be))
            cols2 = _side_columns(model, con.body2, start, common, liMi, S, be, 6)
        else:                      # c1R2 lin(c2Xj S_j): the point c2's velocity, rotated
            start = _const(con.placement2.inverse(), be)
            cols2 = {d: rel[0] @ col for d, col in
                     _side_columns(model, con.body2, start, set(), liMi, S, be, 3).items()}
        for d, col in cols2.items():
            cols[d] = -col if d not in cols else cols[d] - col
    r0 = cset.offsets[ci]
    for d, col in cols.items():
        J[r0:r0 + size, d:d + 1] = col


# --- SE(3) logarithm (Baumgarte position error of 6D constraints) --------------------------

SMALL_ANGLE = 1e-4


def _atan2(y, x, be):
    fn = getattr(be, "atan2", None)
    if fn is not None:
        return fn(y, x)
    if not be.symbolic:
        return np.arctan2(y, x)
    raise RbdgenError("6D Baumgarte position feedback (Kp > 0, or a run-time Kp) needs atan2, which this "
                      "backend does not provide; build Kp = 0 in or use 3D constraints")


def log3(R, be):
    """``w`` with ``exp([w]x) = R`` and its angle ``theta`` in [0, pi) (Pinocchio's log3;
    a Taylor branch for ``theta < 1e-4``; not meant for theta near pi)."""
    s3 = be.vcat([0.5 * (R[2, 1] - R[1, 2]), 0.5 * (R[0, 2] - R[2, 0]), 0.5 * (R[1, 0] - R[0, 1])])
    s = be.sqrt(s3[0, 0] * s3[0, 0] + s3[1, 0] * s3[1, 0] + s3[2, 0] * s3[2, 0])
    co = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    theta = _atan2(s, co, be)
    small = theta < SMALL_ANGLE
    ratio = be.if_else(small, 1.0 + theta * theta / 6.0, theta / be.fmax(s, 1e-300))
    return ratio * s3, theta, s, co


def log6(R, p, be):
    """Twist ``[v; w]`` with ``exp6([v; w]) = (R, p)`` (Pinocchio's log6)."""
    w, theta, s, co = log3(R, be)
    small = theta < SMALL_ANGLE
    t2 = theta * theta
    alpha = be.if_else(small, 1.0 / 12.0 + t2 / 720.0,
                       (1.0 - theta * s / be.fmax(2.0 * (1.0 - co), 1e-300)) / be.fmax(t2, 1e-300))
    W = skew3(w, be)
    Wp = W @ p
    v = p - 0.5 * Wp + alpha * (W @ Wp)
    return be.vcat([v, w])
