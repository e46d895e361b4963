"""Constrained simulation over the generated C (issue 7): ``rbdgen simulate ROBOT``.

**Integrator.**  Semi-implicit (symplectic) Euler over a compiled constrained kernel
``(q, v, tau) -> (ddq, lam, iterations, residual)`` (:func:`gen.build`)::

    ddq_k = FD(q_k, v_k, tau_k)           the proximal solver, Carpentier 2021 eq. 3
    v_{k+1} = v_k + dt ddq_k
    q_{k+1} = q_k (+) dt v_{k+1}

``(+)`` is Pinocchio's ``integrate``: ``q += dt v`` for revolute and prismatic joints, a
rotation of ``(cos, sin)`` for continuous joints, and for the free-flyer the right
multiplication by the SE(3) exponential of the LOCAL twist, ``oM+ = oM exp6(dt v)``
(:func:`integrate`).  The constraints act at the acceleration level,
``J ddq = -gamma - Kd J v - Kp e`` (Tedrake 2012 §1, Baumgarte; Pinocchio's corrector,
see :mod:`gen.constraints`): with ``Kp = Kd = 0`` the position and velocity errors of the
discrete trajectory drift; the critically damped pair ``Kp = 1/eps^2, Kd = 2/eps``
(Tedrake's ``epsilon``, i.e. ``Kd = 2 sqrt(Kp)``) pulls them back with time constant
``eps``.  The default ``eps = 0.02 s`` (``Kp = 2500, Kd = 100``) keeps the discrete
error dynamics well inside the stability region of the step at ``dt = 1e-3``
(``Kd dt = 0.1``, ``Kp dt^2 = 0.0025``).

**Scenario** (:func:`scenario`).  World-anchored constraints hold each frame at its
placement in the initial posture (``reference_q = q0``); other constraints (loops, or
a frame held to a world frame such as the four-bar's ``3D:tip~anchor``) are closed by
Gauss-Newton on ``q`` (``q <- q (+) -J^+ e``).  Initial postures: the example-robot-data
SRDF group states (solo12 ``standing``, talos ``half_sitting``), a hand-chosen
assembly guess for the four-bar, the neutral configuration otherwise.  The initial
velocity is a seeded standard normal vector scaled by ``v0`` (default 0.3, rad/s and
m/s) projected on the constraint null space with the dense pseudo-inverse,
``v0 <- (I - J^+ J) v0``.  Torques:

* floating-base robots are held by a PD around the initial posture with a static
  feed-forward, ``tau = tau_ff + Kp_j (q_ref - q) - Kd_j v`` on every actuated joint
  (zero on the free-flyer).  ``tau_ff`` is the least-norm joint torque that holds
  ``q0`` at rest with the constraints (``g(q0) = S^T tau_ff + J^T lam``).  The gains
  make each joint a critically damped oscillator of the inertia it sees *in the
  constrained system*, ``m_j = 1 / G_jj`` with ``G = M^-1 - M^-1 J^T (J M^-1 J^T)^+ J
  M^-1`` at ``q0``: ``Kp_j = w^2 m_j``, ``Kd_j = 2 w m_j``, ``w = 50 rad/s`` (``--hold``).
  (``M_jj`` instead of ``m_j`` is far too soft on a closed chain: solo12 collapses.
  At ``w = 20`` talos' upper body still topples, gravity's negative stiffness at the
  torso being ``~ w^2 m_j``; from 30 on it holds.)  ``Kd_j dt / m_j = 2 w dt = 0.1``
  keeps the explicit damping stable, even on talos' light gripper joints.  Energy is
  not conserved (the PD dissipates): it is reported, not checked;
* fixed-base mechanisms are passive (``tau = 0``).  The four-bar lies in the xy plane
  and its joints turn about z, so the default gravity ``(0, 0, -9.81)`` does no work on
  it: its default gravity is in-plane, ``(0, -9.81, 0)`` (``--gravity``), and it falls
  from its closed initial posture.

**Metrics** (on every ``stride``-th state): constraint position drift (the largest
distance between a constrained frame and its target: the loop gap, or a foot's
displacement from its initial placement), rotation drift (the largest angle of
``c1Mc2`` over 6D constraints), velocity drift ``|J v|_2`` (all rows; m/s and rad/s
mixed), kinetic energy ``0.5 v^T M v``, potential ``-sum_i m_i g . c_i`` and their sum.

**C loop** (:func:`build_loop`, ``--c-loop``).  The integrator and the PD law are
written once over the backend ``be`` (:func:`integrate`, :func:`advance`,
:func:`hold_torque`): NumPy in the Python loop, traced with CasADi and written by gen.cwriter for the C
loop, which calls the kernel ``nsteps`` times in one C function
(``templates/simulate.c.j2``, layout only) compiled with cffi together with the kernel's
sources.  Both loops store every state; they agree to rounding (tested to 1e-12).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import casadi as ca
import numpy as np

from .api import run
from .backend import NUMPY, SXBackend
from .bench.harness import machine_info
from .build import build, cache_dir, compile_cached, compile_flags
from .constraint_spec import parse_constraints
from .constraints import log3, log6
from .cwriter import write_functions
from .emit import STAMP, _environment, inert_text, sanitize, timed, write
from .errors import RbdgenError
from .kinematics import body_placements, frame_placement
from .model import Model
from .robots import load_robot
from .robots.named import robots_dir
from .spatial import quat_rotation, skew3
from .table import render_table

DEFAULT_CONSTRAINTS = {"fourbar": "3D:tip~anchor",
                       "talos": "6D:left_sole_link,6D:right_sole_link",
                       "solo12": "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"}
# SRDF group states of example-robot-data: (SRDF path under robots/, state name)
POSTURES = {"solo12": ("solo_description/srdf/solo.srdf", "standing"),
            "talos": ("talos_data/srdf/talos.srdf", "half_sitting")}
# A rough assembly of the four-bar (crank up, coupler and rocker folded back), closed by
# Gauss-Newton in scenario().
FOURBAR_GUESS = (math.pi / 2, -1.2, -1.9)
IN_PLANE_GRAVITY = {"fourbar": (0.0, -9.81, 0.0)}
BAUMGARTE_EPS = 0.02                                     # s, Tedrake's epsilon
DEFAULT_BAUMGARTE = (1.0 / BAUMGARTE_EPS ** 2, 2.0 / BAUMGARTE_EPS)   # (Kp, Kd) = (2500, 100)
HOLD_OMEGA = 50.0                                        # rad/s, PD natural frequency
V0_SCALE = 0.3
C_REPEATS = 5                                            # timed runs of the C loop
SAMPLES = 400                                            # metric samples per run
JSON_POINTS = 100                                        # time-series points per run in the json
SMALL_ANGLE = 1e-2                                       # Taylor branch of the exponentials
CLOSE_TOL = 1e-13                                        # Gauss-Newton closure of the initial posture
REPORT_DIR = Path(__file__).resolve().parent.parent / "bench" / "reports" / "simulation"


# --- the integrator, over the backend --------------------------------------------------------

def _exp_free(qi, dv, be):
    """Free-flyer ``q (+) dv``: ``oM+ = oM exp6(dv)`` with ``dv = [u; w]`` the LOCAL twist
    (Pinocchio's ``JointModelFreeFlyer::integrate``).  With ``th = |w|``:
    ``exp3(w)`` is the quaternion ``(sin(th/2)/th w, cos(th/2))`` composed on the right,
    ``p+ = p + R V(w) u`` with ``V = I + (1 - cos th)/th^2 [w]x + (th - sin th)/th^3 [w]x^2``
    (Murray-Li-Sastry eq. 2.36), ``(1 - cos th) = 2 sin^2(th/2)`` to avoid cancellation, and
    Taylor series below ``SMALL_ANGLE``.  As in Pinocchio, the quaternion is renormalised
    to first order, ``q *= (3 - |q|^2)/2``, and its sign chosen so that ``q . q+ >= 0``
    (``= cos(th/2) |q|^2``)."""
    x, y, z, w = qi[3, 0], qi[4, 0], qi[5, 0], qi[6, 0]
    u, om = dv[0:3, 0:1], dv[3:6, 0:1]
    th2 = om[0, 0] * om[0, 0] + om[1, 0] * om[1, 0] + om[2, 0] * om[2, 0]
    th = be.sqrt(th2)
    small = th < SMALL_ANGLE
    sh, ch = be.sin(0.5 * th), be.cos(0.5 * th)
    thg = be.fmax(th, SMALL_ANGLE)                       # guards the branch not taken
    k = be.if_else(small, 0.5 - th2 / 48.0 + th2 * th2 / 3840.0, sh / thg)     # sin(th/2)/th
    a = be.if_else(small, 0.5 - th2 / 24.0 + th2 * th2 / 720.0, 2.0 * sh * sh / (thg * thg))
    b = be.if_else(small, 1.0 / 6.0 - th2 / 120.0 + th2 * th2 / 5040.0,
                   (thg - be.sin(thg)) / (thg * thg * thg))
    W = skew3(om, be)
    Wu = W @ u
    p = qi[0:3, 0:1] + quat_rotation(x, y, z, w, be) @ (u + a * Wu + b * (W @ Wu))
    return be.vcat([p, _quat_times_exp(x, y, z, w, om, k, ch, be)])


def _exp_spherical(qi, dv, be):
    """Spherical joint ``q (+) w``: the quaternion composed on the right with ``exp3(w)``,
    ``w`` the LOCAL angular step (Pinocchio's ``JointModelSpherical::integrate``), as the
    rotation part of :func:`_exp_free`."""
    om = dv[0:3, 0:1]
    th2 = om[0, 0] * om[0, 0] + om[1, 0] * om[1, 0] + om[2, 0] * om[2, 0]
    th = be.sqrt(th2)
    sh, ch = be.sin(0.5 * th), be.cos(0.5 * th)
    thg = be.fmax(th, SMALL_ANGLE)
    k = be.if_else(th < SMALL_ANGLE, 0.5 - th2 / 48.0 + th2 * th2 / 3840.0, sh / thg)
    return _quat_times_exp(qi[0, 0], qi[1, 0], qi[2, 0], qi[3, 0], om, k, ch, be)


def _quat_times_exp(x, y, z, w, om, k, ch, be):
    """``q (x) (k w, ch)`` with ``k = sin(th/2)/th``, ``ch = cos(th/2)``, renormalised to
    first order with the sign that keeps ``q . q+ >= 0`` (see :func:`_exp_free`)."""
    ex, ey, ez = k * om[0, 0], k * om[1, 0], k * om[2, 0]              # q (x) exp3(w)
    nx = w * ex + ch * x + (y * ez - z * ey)
    ny = w * ey + ch * y + (z * ex - x * ez)
    nz = w * ez + ch * z + (x * ey - y * ex)
    nw = w * ch - (x * ex + y * ey + z * ez)
    s = 0.5 * (3.0 - (nx * nx + ny * ny + nz * nz + nw * nw))
    s = be.if_else(ch < 0.0, -s, s)                      # the sign with q . q+ >= 0
    return be.vcat([s * nx, s * ny, s * nz, s * nw])


def _rotate_circle(qi, dv, be):
    """Continuous joint ``(cos, sin) (+) dv``: rotation by the angle ``dv``, renormalised to
    first order (Pinocchio's ``JointModelRevoluteUnbounded::integrate``)."""
    c, s = qi[0, 0], qi[1, 0]
    cw, sw = be.cos(dv[0, 0]), be.sin(dv[0, 0])
    nc, ns = c * cw - s * sw, s * cw + c * sw
    f = 0.5 * (3.0 - (nc * nc + ns * ns))
    return be.vcat([f * nc, f * ns])


def _exp_planar(qi, dv, be):
    """Planar joint ``q (+) (vx, vy, w)``: SE(2) ``M exp(dv)`` (Pinocchio's
    ``SpecialEuclideanOperationTpl<2>::integrate``, see :mod:`gen.configuration`), the
    translation step ``V(w) (vx, vy)`` by its Taylor series below ``SMALL_ANGLE`` and the
    ``(cos, sin)`` pair renormalised to first order as :func:`_rotate_circle`."""
    c, s = qi[2, 0], qi[3, 0]
    vx, vy, w = dv[0, 0], dv[1, 0], dv[2, 0]
    cw, sw = be.cos(w), be.sin(w)
    w2 = w * w
    small = w2 < SMALL_ANGLE * SMALL_ANGLE
    wg = be.if_else(small, SMALL_ANGLE, w)                                  # guards the branch not taken
    a = be.if_else(small, 1.0 - w2 / 6.0 + w2 * w2 / 120.0, sw / wg)                     # sin(w)/w
    b = be.if_else(small, w * (0.5 - w2 / 24.0 + w2 * w2 / 720.0), (1.0 - cw) / wg)      # (1 - cos w)/w
    tx, ty = a * vx - b * vy, b * vx + a * vy
    rot = _rotate_circle(qi[2:4, 0:1], dv[2:3, 0:1], be)
    return be.vcat([qi[0, 0] + c * tx - s * ty, qi[1, 0] + s * tx + c * ty, rot[0, 0], rot[1, 0]])


def integrate(model: Model, q, dv, *, be):
    """``q (+) dv`` on the configuration manifold (Pinocchio's ``integrate``); q (nq x 1),
    dv (nv x 1)."""
    parts = []
    for b in model.bodies:
        if b.mimic is not None:                          # no coordinate of its own
            continue
        qi, di = q[b.idx_q:b.idx_q + b.nq, 0:1], dv[b.idx_v:b.idx_v + b.nv, 0:1]
        if b.kind == "free":
            parts.append(_exp_free(qi, di, be))
        elif b.kind == "spherical":
            parts.append(_exp_spherical(qi, di, be))
        elif b.kind == "planar":
            parts.append(_exp_planar(qi, di, be))
        elif b.kind == "revolute_unb":
            parts.append(_rotate_circle(qi, di, be))
        else:
            parts.append(qi + di)
    return be.vcat(parts)


def advance(model: Model, q, v, ddq, dt, *, be):
    """One semi-implicit Euler step: ``v+ = v + dt ddq``, ``q+ = q (+) dt v+``."""
    v1 = v + dt * ddq
    return integrate(model, q, dt * v1, be=be), v1


def hold_torque(model: Model, q, v, q_ref, tau_ff, kp, kd, *, be):
    """PD hold ``tau_j = tau_ff_j + kp_j (q_ref - q)_j - kd_j v_j`` on the 1-DoF joints
    (for a continuous joint the angle difference is ``atan2`` of the two unit complex
    numbers), zero on free-flyers, spherical and planar joints."""
    tau = []
    for b in model.bodies:
        j, iq = b.idx_v, b.idx_q
        if b.mimic is not None:                          # no dof of its own
            continue
        if b.kind in ("free", "spherical", "planar"):
            tau.append(be.zeros(b.nv, 1))
            continue
        if b.kind == "revolute_unb":
            c, s, cr, sr = q[iq, 0], q[iq + 1, 0], q_ref[iq, 0], q_ref[iq + 1, 0]
            err = be.atan2(sr * c - cr * s, cr * c + sr * s)
        else:
            err = q_ref[iq, 0] - q[iq, 0]
        tau.append(be.vcat([tau_ff[j, 0] + kp[j, 0] * err - kd[j, 0] * v[j, 0]]))
    return be.vcat(tau)


# --- scenario ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Scenario:
    """What a simulation starts from: the model (gravity included), the constraint spec,
    the initial state, and the PD hold (``q_ref``, ``tau_ff``, ``kp``, ``kd``; all zero
    for a passive mechanism)."""

    model: Model
    spec: str
    q0: np.ndarray
    v0: np.ndarray
    q_ref: np.ndarray
    tau_ff: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    notes: list

    def constraints(self, Kp: float = 0.0, Kd: float = 0.0):
        """The constraint set with Baumgarte gains, anchored at the initial posture."""

        return parse_constraints(self.model, self.spec, Kp=Kp, Kd=Kd, reference_q=self.q0)


def srdf_posture(model: Model, srdf: Path, state: str) -> np.ndarray:
    """The neutral configuration with the joints of an SRDF ``group_state`` set."""
    q = model.neutral()
    try:
        root = ET.parse(srdf).getroot()
    except (OSError, ET.ParseError) as e:
        raise RbdgenError(f"cannot read the posture '{state}' from {srdf}: {e}") from None
    found = [g for g in root.iter("group_state") if g.get("name") == state]
    if not found:
        raise RbdgenError(f"{srdf} has no group_state '{state}'")
    by_name = {b.name: b for b in model.bodies}
    for j in found[0].iter("joint"):
        b = by_name.get(j.get("name"))
        vals = [float(x) for x in j.get("value", "").split()]
        if b is None or len(vals) != b.nq:
            continue
        q[b.idx_q:b.idx_q + b.nq] = vals
    return q


def _initial_posture(model: Model, notes: list) -> np.ndarray:
    if model.name in POSTURES:

        rel, state = POSTURES[model.name]
        notes.append(f"initial posture: SRDF group state '{state}' ({rel})")
        return srdf_posture(model, robots_dir() / rel, state)
    if model.name == "fourbar":
        notes.append(f"initial posture: assembly guess {FOURBAR_GUESS} closed by Gauss-Newton")
        return np.array(FOURBAR_GUESS)
    notes.append("initial posture: neutral configuration")
    return model.neutral()


def constraint_errors(model: Model, cset, q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per constraint: the Baumgarte error ``e`` (:mod:`gen.constraints`; stacked, m),
    the distance between frame A and its target and, for 6D, the angle of ``c1Mc2``
    (0 for 3D)."""

    q = np.asarray(q, dtype=float).reshape(-1, 1)
    e, dist, angle = [], [], []
    for con in cset.constraints:
        R1, p1 = frame_placement(model, con.frame1, q, be=NUMPY)
        if con.body2 >= 0:
            R2, p2 = frame_placement(model, con.frame2, q, be=NUMPY)
        else:
            R2, p2 = con.placement2.R, con.placement2.p.reshape(3, 1)
        R, p = R1.T @ R2, R1.T @ (p2 - p1)                     # c1Mc2
        dist.append(float(np.linalg.norm(p)))
        if con.kind == "3D":
            e.append(-p)
            angle.append(0.0)
        else:
            e.append(-log6(R, p, NUMPY))
            angle.append(float(log3(R, NUMPY)[1]))
    return (np.concatenate(e).ravel() if e else np.zeros(0)), np.array(dist), np.array(angle)


def _close(model: Model, cset, q, notes: list) -> np.ndarray:
    """Gauss-Newton ``q <- q (+) -J^+ e`` until ``|e|_inf <= CLOSE_TOL``."""
    for _ in range(50):
        e = constraint_errors(model, cset, q)[0]
        if np.max(np.abs(e), initial=0.0) <= CLOSE_TOL:
            return q
        J = cset.jacobian(model, q.reshape(-1, 1), be=NUMPY)
        q = integrate(model, q.reshape(-1, 1), -np.linalg.pinv(J) @ e.reshape(-1, 1), be=NUMPY).ravel()
    raise RbdgenError(f"could not close the constraints '{cset.spec}' from the initial posture of "
                      f"{model.name} (|e| = {np.max(np.abs(e)):.1e} after 50 Gauss-Newton steps)")


def scenario(robot, constraints=None, *, gravity=None, hold: float | None = None,
             v0: float = V0_SCALE, seed: int = 0, floating_base: bool = False) -> Scenario:
    """The initial state and torque law of a simulation (module docstring).  ``gravity``:
    3 numbers (default: in-plane for the four-bar, the model's otherwise); ``hold``: the
    PD frequency in rad/s (default ``HOLD_OMEGA`` for floating-base robots, 0 = passive
    otherwise); ``v0``: the initial velocity scale."""

    model = load_robot(robot, floating_base=floating_base)
    spec = constraints or DEFAULT_CONSTRAINTS.get(model.name)
    if not spec:
        raise RbdgenError(f"give the constraints to simulate {model.name} with, e.g. --constraints 6D:FRAME "
                          f"(defaults exist for {', '.join(DEFAULT_CONSTRAINTS)})")
    notes = []
    if gravity is None:
        gravity = IN_PLANE_GRAVITY.get(model.name)
    if gravity is not None:
        g = np.asarray(gravity, dtype=float).ravel()
        if g.size != 3 or not np.all(np.isfinite(g)):
            raise RbdgenError(f"gravity must be 3 finite numbers, got {gravity}")
        model = dataclasses.replace(model, gravity=g)
        notes.append(f"gravity ({g[0]:g}, {g[1]:g}, {g[2]:g})")
    if not (np.isfinite(v0) and v0 >= 0):
        raise RbdgenError(f"the initial velocity scale must be finite and non-negative, got {v0}")
    floating = any(b.kind == "free" for b in model.bodies)
    omega = (HOLD_OMEGA if floating else 0.0) if hold is None else float(hold)
    if not (np.isfinite(omega) and omega >= 0):
        raise RbdgenError(f"the PD hold frequency must be finite and non-negative, got {hold}")
    q0 = _initial_posture(model, notes)
    cset = parse_constraints(model, spec, reference_q=q0)
    q0 = _close(model, cset, q0, notes)
    cset = parse_constraints(model, cset.spec, reference_q=q0)
    J = cset.jacobian(model, q0.reshape(-1, 1), be=NUMPY)
    r = np.random.default_rng(seed).normal(size=model.nv) * v0
    vel = r - np.linalg.pinv(J) @ (J @ r)                 # projection on the null space of J
    notes.append(f"initial velocity: N(0, {v0:g}^2) (seed {seed}) projected on null(J), |J v0| = "
                 f"{np.linalg.norm(J @ vel):.1e}")
    zeros = np.zeros(model.nv)
    if omega == 0.0:
        notes.append("torque: zero (passive)")
        return Scenario(model, cset.spec, q0, vel, q0.copy(), zeros, zeros, zeros.copy(), notes)
    act = np.array([b.kind != "free" for b in model.bodies for _ in range(b.nv)])
    Minv = np.linalg.inv(run(model, "crba", q0))
    MJ = Minv @ J.T                                        # G = M^-1 - M^-1 J^T (J M^-1 J^T)^+ J M^-1
    G = np.diag(Minv - MJ @ np.linalg.pinv(J @ MJ) @ MJ.T)
    free = G > 1e-9 * np.max(G)                            # joints the constraints leave movable
    m_eff = np.where(act & free, 1.0 / np.where(free, G, 1.0), 0.0)
    kp, kd = omega ** 2 * m_eff, 2.0 * omega * m_eff
    g0 = run(model, "rnea", q0, zeros, zeros)              # g(q0) = S^T tau_ff + J^T lam
    A = np.hstack([np.diag(act.astype(float)), J.T])
    sol = np.linalg.lstsq(A, g0, rcond=None)[0]
    tau_ff = np.where(act, sol[:model.nv], 0.0)
    notes.append(f"torque: PD hold, Kp_j = {omega:g}^2 m_j, Kd_j = 2*{omega:g} m_j with m_j = 1/G_jj(q0) the "
                 f"constrained inertia of joint j, plus the least-norm static feed-forward "
                 f"(|g - S^T tau_ff - J^T lam| = {np.linalg.norm(A @ sol - g0):.1e}); the energy below "
                 f"leaves out the PD's spring energy and is not conserved")
    return Scenario(model, cset.spec, q0, vel, q0.copy(), tau_ff, kp, kd, notes)


# --- metrics -------------------------------------------------------------------------------------

def energy(model: Model, q, v) -> tuple[float, float]:
    """(kinetic ``0.5 v^T M v``, potential ``-sum_i m_i g . c_i``) at (q, v)."""

    M = run(model, "crba", q)
    kinetic = 0.5 * float(v @ M @ v)
    potential = 0.0
    for b, (R, p) in zip(model.bodies, body_placements(model, np.asarray(q, dtype=float).reshape(-1, 1), be=NUMPY)):
        c = R @ b.inertia.com.reshape(3, 1) + p
        potential -= b.inertia.mass * float(model.gravity @ c.ravel())
    return kinetic, potential


def metrics(model: Model, cset, qs, vs, dt: float, stride: int) -> dict:
    """Time series of the drift and energy on every ``stride``-th state and the last one."""
    idx = list(range(0, len(qs), stride))
    if idx[-1] != len(qs) - 1:
        idx.append(len(qs) - 1)
    out = {k: [] for k in ("t", "pos", "rot", "vel", "kinetic", "potential", "energy")}
    for k in idx:
        _, dist, angle = constraint_errors(model, cset, qs[k])
        Jv = cset.evaluate(model, qs[k].reshape(-1, 1), vs[k].reshape(-1, 1), be=NUMPY, jacobian=False, drift=False).Jv
        T, U = energy(model, qs[k], vs[k])
        for key, val in (("t", k * dt), ("pos", dist.max(initial=0.0)), ("rot", angle.max(initial=0.0)),
                         ("vel", float(np.linalg.norm(Jv))), ("kinetic", T), ("potential", U),
                         ("energy", T + U)):
            out[key].append(float(val))
    return out


# --- the loops ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Trajectory:
    """Every state of a run: ``qs`` (nsteps+1 x nq), ``vs`` (nsteps+1 x nv), the proximal
    iterations per step and the wall time of the loop."""

    qs: np.ndarray
    vs: np.ndarray
    iterations: np.ndarray
    seconds: float

    @property
    def steps_per_second(self) -> float:
        return (len(self.qs) - 1) / self.seconds if self.seconds > 0 else float("inf")


def _check_run(dt: float, nsteps: int) -> None:
    if not (math.isfinite(dt) and dt > 0):
        raise RbdgenError(f"the time step dt must be a positive number, got {dt}")
    if int(nsteps) != nsteps or nsteps < 1:
        raise RbdgenError(f"the number of steps must be a positive integer, got {nsteps}")


def python_loop(kernel, sc: Scenario, dt: float, nsteps: int) -> Trajectory:
    """Semi-implicit Euler in Python (NumPy :func:`advance` and :func:`hold_torque`) over
    the compiled ``kernel``."""
    _check_run(dt, nsteps)
    model = sc.model
    qs, vs = np.empty((nsteps + 1, model.nq)), np.empty((nsteps + 1, model.nv))
    its = np.empty(nsteps)
    qs[0], vs[0] = sc.q0, sc.v0
    col = (lambda a: np.asarray(a, dtype=float).reshape(-1, 1))
    q_ref, tau_ff, kp, kd = col(sc.q_ref), col(sc.tau_ff), col(sc.kp), col(sc.kd)
    outs = [np.empty(o["size"]) for o in kernel.function["outputs"]]
    work = np.empty(max(1, kernel.work_size))
    t0 = time.perf_counter()
    for k in range(nsteps):
        q, v = qs[k].reshape(-1, 1), vs[k].reshape(-1, 1)
        tau = hold_torque(model, q, v, q_ref, tau_ff, kp, kd, be=NUMPY)
        rc = kernel.call_raw([qs[k], vs[k], tau.ravel()], outs, work)
        if rc != 0:
            raise RbdgenError(f"{kernel.symbol} returned {rc} at step {k} (t = {k * dt:g} s): the simulation "
                              f"diverged; try a smaller --dt")
        its[k] = outs[2][0]
        q1, v1 = advance(model, q, v, outs[0].reshape(-1, 1), dt, be=NUMPY)
        qs[k + 1], vs[k + 1] = q1.ravel(), v1.ravel()
    return Trajectory(qs, vs, its, time.perf_counter() - t0)


class CLoop:
    """The compiled C simulation loop of a kernel (:func:`build_loop`)."""

    def __init__(self, kernel, module, symbol: str, folder: Path):
        self.kernel, self.module, self.symbol, self.folder = kernel, module, symbol, folder
        self.ffi, self._c = module.ffi, getattr(module.lib, symbol)
        self.work_size = int(getattr(module.lib, f"{symbol.upper()}_WORK_SIZE"))

    def __call__(self, sc: Scenario, dt: float, nsteps: int) -> Trajectory:
        _check_run(dt, nsteps)
        model = sc.model
        qs, vs = np.empty((nsteps + 1, model.nq)), np.empty((nsteps + 1, model.nv))
        its = np.empty(nsteps)
        ins = [np.ascontiguousarray(a, dtype=float) for a in (sc.q0, sc.v0, sc.q_ref, sc.tau_ff, sc.kp, sc.kd)]
        work = np.empty(max(1, self.work_size))
        ptr = (lambda a: self.ffi.cast("double *", a.ctypes.data))
        t0 = time.perf_counter()
        rc = self._c(*[ptr(a) for a in ins], float(dt), int(nsteps), ptr(qs), ptr(vs), ptr(its), ptr(work))
        seconds = time.perf_counter() - t0
        if rc != 0:
            raise RbdgenError(f"{self.symbol} returned {rc} (the kernel failed during the C loop: the "
                              f"simulation diverged; try a smaller --dt)")
        return Trajectory(qs, vs, its, seconds)


def _loop_context(kernel, prefix: str) -> dict:
    """Trace :func:`advance` and :func:`hold_torque` and lay out the loop's context."""

    model = kernel.model
    be = SXBackend()
    q, v, ddq = be.sym("q", model.nq), be.sym("v", model.nv), be.sym("ddq", model.nv)
    dt = be.sym("dt", 1)
    q_ref, tau_ff, kp, kd = (be.sym(n, k) for n, k in (("q_ref", model.nq), ("tau_ff", model.nv),
                                                      ("kp", model.nv), ("kd", model.nv)))
    q1, v1 = advance(model, q, v, ddq, dt, be=be)
    tau = hold_torque(model, q, v, q_ref, tau_ff, kp, kd, be=be)
    fa = ca.Function(f"{prefix}_advance", [q, v, ddq, dt], [ca.densify(ca.cse(q1)), ca.densify(ca.cse(v1))])
    fc = ca.Function(f"{prefix}_control", [q, v, q_ref, tau_ff, kp, kd], [ca.densify(ca.cse(tau))])
    outs = {o["name"]: o["size"] for o in kernel.function["outputs"]}
    m = outs["lam"]
    scratch = 2 * model.nv + m + 2                       # tau | ddq | lam | iterations | residual
    return {"stamp": STAMP, "prefix": prefix, "PREFIX": prefix.upper(), "kernel": kernel.symbol,
            "kernel_header": kernel.manifest["header"], "robot": inert_text(model.name), "nq": model.nq,
            "nv": model.nv, "m": m, "constraints": inert_text(kernel.manifest["constraints"]),
            "solver": kernel.manifest["algorithm"], "tolerance": kernel.manifest.get("tolerance"),
            "max_iter": kernel.manifest.get("max_iter"), "iterations": kernel.manifest.get("iterations"),
            "advance": fa.name(), "control": fc.name(),
            "sz_arg": max(fa.sz_arg(), fc.sz_arg()), "sz_res": max(fa.sz_res(), fc.sz_res()),
            "off_ddq": model.nv, "off_lam": 2 * model.nv, "off_it": 2 * model.nv + m,
            "off_res": 2 * model.nv + m + 1, "off_kernel": scratch,
            "work_size": scratch + kernel.work_size,
            "files": {"header": f"{prefix}.h", "source": f"{prefix}.c", "cdef": f"{prefix}.cdef"},
            "math_code": write_functions([fa, fc])[0]}


def build_loop(kernel, *, flags=None, cache=None, progress=None) -> CLoop:
    """Emit the C simulation loop of ``kernel`` (a constrained :class:`gen.build.Kernel`)
    into ``<kernel folder>/sim`` and compile it with the kernel's sources (cffi, cached by
    content like :func:`gen.build.compile_folder`)."""

    prefix = f"{kernel.symbol}_sim"
    with timed(progress, f"codegen {prefix}"):
        ctx = _loop_context(kernel, prefix)
        env = _environment()
        files = {ctx["files"][k]: env.get_template(t).render(ctx)
                 for k, t in (("header", "simulate.h.j2"), ("source", "simulate.c.j2"),
                              ("cdef", "simulate.cdef.j2"))}
        folder = write(files, kernel.path / "sim")
    data = {n: (folder / n).read_bytes() for n in files}
    data.update({n: (kernel.path / n).read_bytes() for n in (kernel.manifest["header"], *kernel.manifest["sources"])})
    module = compile_cached(f"_rbdgen_{prefix}", data, files[ctx["files"]["cdef"]], ctx["files"]["header"],
                            [ctx["files"]["source"], *kernel.manifest["sources"]], compile_flags(flags),
                            cache=cache, what=f"compiling the simulation loop {prefix}", progress=progress)
    return CLoop(kernel, module, prefix, folder)


# --- the study ---------------------------------------------------------------------------------

def parse_pair(text: str, what: str) -> tuple[float, float]:
    """``"KP,KD"`` -> (Kp, Kd), finite and non-negative."""
    try:
        kp, kd = (float(x) for x in str(text).split(","))
    except ValueError:
        raise RbdgenError(f"{what} expects KP,KD (two numbers), got '{text}'") from None
    if not all(math.isfinite(x) and x >= 0 for x in (kp, kd)):
        raise RbdgenError(f"{what} gains must be finite and non-negative, got '{text}'")
    return kp, kd


def kernel_for(sc: Scenario, Kp: float, Kd: float, algorithm: str = "constrained_aba", *,
               flags=None, cache=None, progress=None, **options):
    """The compiled constrained kernel of the scenario with Baumgarte gains (Kp, Kd); its
    build folder is keyed by everything that changes the C (gravity, anchors, gains)."""

    cset = sc.constraints(Kp, Kd)
    key = hashlib.sha256(json.dumps([sc.model.name, list(sc.model.gravity), cset.spec, Kp, Kd, list(sc.q0),
                                     algorithm, sorted(options.items())]).encode()).hexdigest()[:12]
    out = cache_dir(cache) / "build" / f"sim_{sanitize(sc.model.name)}_{key}"
    return build(sc.model, algorithm, cset, out_dir=out, flags=flags, cache=cache, progress=progress, **options)


def simulate(robot, constraints=None, *, algorithm: str = "constrained_aba", dt: float = 1e-3,
             duration: float = 2.0, gains=(DEFAULT_BAUMGARTE,), c_loop: bool = False, gravity=None,
             hold=None, v0: float = V0_SCALE, seed: int = 0, floating_base: bool = False,
             flags=None, cache=None, progress=None, **options) -> dict:
    """Simulate ``robot`` for each Baumgarte pair in ``gains``; returns the summary and
    the time series (see :func:`metrics`).  ``options`` go to the solver (``tol``,
    ``max_iter``, ``iterations``, ``mu``)."""
    say = progress or (lambda s: None)
    if not (math.isfinite(duration) and duration > 0):
        raise RbdgenError(f"the duration must be a positive number of seconds, got {duration}")
    _check_run(dt, 1)
    nsteps = max(1, int(round(duration / dt)))
    sc = scenario(robot, constraints, gravity=gravity, hold=hold, v0=v0, seed=seed, floating_base=floating_base)
    for n in sc.notes:
        say(n)
    if c_loop:

        mi = machine_info()
        sc.notes.append(f"machine: {mi['cpu']}, {mi['cores']} cores, load {mi.get('loadavg')}; {mi['cc']} "
                        f"{' '.join(compile_flags(flags))}; steps/s: Python loop one run, C loop median of "
                        f"{C_REPEATS} runs")
    stride = max(1, nsteps // SAMPLES)
    runs = []
    for Kp, Kd in gains:
        label = "no Baumgarte" if Kp == Kd == 0 else f"Baumgarte Kp={Kp:g}, Kd={Kd:g}"
        k = kernel_for(sc, Kp, Kd, algorithm, flags=flags, cache=cache, progress=progress, **options)
        say(f"{label}: {nsteps} steps of {dt:g} s, Python loop ...")
        tr = python_loop(k, sc, dt, nsteps)
        run = {"label": label, "Kp": Kp, "Kd": Kd, "python_steps_per_s": tr.steps_per_second,
               "mean_iterations": float(tr.iterations.mean())}
        if c_loop:
            loop = build_loop(k, flags=flags, cache=cache, progress=progress)
            say(f"{label}: C loop ({C_REPEATS} runs) ...")
            ct = loop(sc, dt, nsteps)
            seconds = [ct.seconds] + [loop(sc, dt, nsteps).seconds for _ in range(C_REPEATS - 1)]
            run["c_steps_per_s"] = nsteps / float(np.median(seconds))
            run["c_vs_python"] = float(max(np.max(np.abs(ct.qs - tr.qs)), np.max(np.abs(ct.vs - tr.vs))))
            tr = ct
        series = metrics(sc.model, sc.constraints(), tr.qs, tr.vs, dt, stride)
        e = np.array(series["energy"])
        run.update({"final_pos": series["pos"][-1], "max_pos": max(series["pos"]),
                    "final_rot": series["rot"][-1], "max_rot": max(series["rot"]),
                    "final_vel": series["vel"][-1], "max_vel": max(series["vel"]),
                    "energy_0": float(e[0]), "energy_final": float(e[-1]),
                    "max_energy_error": float(np.max(np.abs(e - e[0]))), "series": series})
        say(f"{label}: final drift {run['final_pos']:.2e} m, {run['final_rot']:.2e} rad, |Jv| "
            f"{run['final_vel']:.2e}; energy error {run['max_energy_error']:.2e} J; "
            f"{run['python_steps_per_s']:.0f} steps/s (Python)"
            + (f", {run['c_steps_per_s']:.0f} steps/s (C)" if c_loop else ""))
        runs.append(run)
    return {"robot": sc.model.name, "constraints": sc.spec, "algorithm": algorithm,
            "solver_options": {k: v for k, v in options.items() if v is not None},
            "dt": dt, "duration": nsteps * dt, "steps": nsteps, "gravity": list(sc.model.gravity),
            "notes": sc.notes, "runs": runs}


# --- reports -----------------------------------------------------------------------------------

SUMMARY_COLUMNS = ["run", "final_pos_m", "max_pos_m", "final_rot_rad", "max_rot_rad", "final_Jv", "max_Jv",
                   "energy_0_J", "max_energy_err_J", "mean_iter", "python_steps_s", "c_steps_s", "c_vs_python"]


def summary_rows(result: dict) -> list[dict]:
    return [{"run": r["label"], "final_pos_m": r["final_pos"], "max_pos_m": r["max_pos"],
             "final_rot_rad": r["final_rot"], "max_rot_rad": r["max_rot"], "final_Jv": r["final_vel"],
             "max_Jv": r["max_vel"], "energy_0_J": r["energy_0"], "max_energy_err_J": r["max_energy_error"],
             "mean_iter": r["mean_iterations"], "python_steps_s": r["python_steps_per_s"],
             "c_steps_s": r.get("c_steps_per_s"), "c_vs_python": r.get("c_vs_python")} for r in result["runs"]]


def _decimate(series: dict, points: int) -> dict:
    n = len(series["t"])
    idx = sorted(set(np.linspace(0, n - 1, min(points, n)).round().astype(int).tolist()))
    return {k: [float(f"{v[i]:.6g}") for i in idx] for k, v in series.items()}


def to_json(result: dict) -> dict:
    """The result with decimated time series (``JSON_POINTS`` per run), 6 significant digits."""
    out = {k: v for k, v in result.items() if k != "runs"}
    out["runs"] = [{**{k: v for k, v in r.items() if k != "series"}, "series": _decimate(r["series"], JSON_POINTS)}
                   for r in result["runs"]]
    return out


def markdown(result: dict, plots: dict | None = None) -> str:
    opts = ", ".join(f"{k}={v}" for k, v in result["solver_options"].items()) or "defaults"
    lines = [f"# Simulation: {result['robot']} / {result['constraints']}", "",
             f"Semi-implicit Euler over the compiled `{result['algorithm']}` kernel ({opts}), "
             f"dt = {result['dt']:g} s, {result['steps']} steps ({result['duration']:g} s). "
             "Drift: largest distance of a constrained frame from its target (m), largest 6D angle "
             "(rad), |J v|_2; energy = kinetic + gravity potential (J).", ""]
    if result.get("command"):
        lines += [f"`{result['command']}`", ""]
    lines += [f"- {n}" for n in result["notes"]] + [""]
    lines.append(render_table(summary_rows(result), SUMMARY_COLUMNS, "md"))
    for name in (plots or {}).values():
        lines += ["", f"![{name}]({name})"]
    return "\n".join(lines) + "\n"


def plot(result: dict, out: Path) -> dict:
    """drift vs time (position, velocity) and energy vs time, one line per run (PNG);
    no plots (an empty dict) when matplotlib is not installed (``pip install rbdgen[plots]``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}

    stem = result["robot"].replace(":", "")
    paths = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for r in result["runs"]:
        s = r["series"]
        axes[0].semilogy(s["t"], np.maximum(s["pos"], 1e-17), label=r["label"])
        axes[1].semilogy(s["t"], np.maximum(s["vel"], 1e-17), label=r["label"])
    axes[0].set(xlabel="t [s]", ylabel="position drift [m]", title="constraint position drift")
    axes[1].set(xlabel="t [s]", ylabel="|J v| [m/s, rad/s]", title="constraint velocity drift")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result['robot']} / {result['constraints']}, dt = {result['dt']:g} s", fontsize=9)
    fig.tight_layout()
    paths["drift"] = f"{stem}_drift.png"
    fig.savefig(out / paths["drift"], dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for r in result["runs"]:
        s = r["series"]
        ax.plot(s["t"], np.array(s["energy"]) - s["energy"][0], label=f"{r['label']} (E0 = {s['energy'][0]:.4g} J)")
    ax.set(xlabel="t [s]", ylabel="E(t) - E(0) [J]", title=f"{result['robot']}: total energy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["energy"] = f"{stem}_energy.png"
    fig.savefig(out / paths["energy"], dpi=110)
    plt.close(fig)
    return paths


def write_report(result: dict, out) -> dict:
    """``<robot>.md``, ``<robot>.json`` and the two PNGs into ``out``; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pngs = plot(result, out)
    stem = result["robot"].replace(":", "")
    (out / f"{stem}.md").write_text(markdown(result, pngs), encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps(to_json(result), indent=1) + "\n", encoding="utf-8")
    return {"md": out / f"{stem}.md", "json": out / f"{stem}.json", **{k: out / v for k, v in pngs.items()}}


# --- CLI -----------------------------------------------------------------------------------------

def add_parser(subparsers):
    p = subparsers.add_parser("simulate", help="constrained simulation over the generated C: drift with and "
                                               "without Baumgarte, energy, steps per second")
    p.add_argument("robot", help="named robot, synthetic spec or URDF path")
    p.add_argument("--floating-base", action="store_true", help="add a free-flyer root (URDF paths)")
    p.add_argument("--constraints", "-c", help=f"constraint spec (defaults: {DEFAULT_CONSTRAINTS})")
    p.add_argument("--algorithm", "-a", default="constrained_aba", help="constrained solver (default constrained_aba)")
    p.add_argument("--dt", type=float, default=1e-3, help="time step in s (default 1e-3)")
    p.add_argument("--duration", type=float, default=2.0, help="simulated time in s (default 2)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--baumgarte", metavar="KP,KD", help="Baumgarte gains of a single run (0,0: none; default "
                   f"{DEFAULT_BAUMGARTE[0]:g},{DEFAULT_BAUMGARTE[1]:g})")
    g.add_argument("--compare-baumgarte", metavar="KP,KD", nargs="?", const=True,
                   help="two runs: without Baumgarte and with KP,KD (default the critically damped pair above)")
    p.add_argument("--c-loop", action="store_true", help="also run the loop in C and report its steps per second")
    p.add_argument("--tol", type=float, default=1e-10, help="solver tolerance of the early-exit driver (default 1e-10)")
    p.add_argument("--max-iter", type=int, default=50, help="iteration cap of the driver (default 50)")
    p.add_argument("--iterations", type=int, help="a fixed number of proximal iterations instead of --tol/--max-iter")
    p.add_argument("--mu", type=float, default=1e-6, help="proximal damping (Pinocchio's sense; default 1e-6)")
    p.add_argument("--gravity", metavar="GX,GY,GZ", help="gravity (default: the model's; fourbar: 0,-9.81,0)")
    p.add_argument("--hold", type=float, help=f"PD hold frequency in rad/s (0: passive; default {HOLD_OMEGA:g} "
                   "for floating-base robots, 0 otherwise)")
    p.add_argument("--v0", type=float, default=V0_SCALE, help=f"initial velocity scale (default {V0_SCALE:g})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", "-o", default="rbdgen-simulation",
                   help="report folder: <robot>.md, .json, drift and energy PNGs (default ./rbdgen-simulation)")
    p.add_argument("--flags", help="compiler flags (default: -O3 -march=native or $RBDGEN_CFLAGS)")
    p.add_argument("--format", choices=("md", "json"), default="md", help="what to print (default md)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.set_defaults(func=run_cli)
    return p


def _floats(text: str, n: int, what: str) -> list[float]:
    try:
        vals = [float(x) for x in str(text).split(",")]
    except ValueError:
        vals = []
    if len(vals) != n or not all(math.isfinite(x) for x in vals):
        raise RbdgenError(f"{what} expects {n} comma-separated finite numbers, got '{text}'")
    return vals


def _command(args, solver: dict) -> str:
    """The ``rbdgen simulate`` command line that reproduces a run."""
    parts = ["rbdgen simulate", args.robot] + (["--floating-base"] if args.floating_base else [])
    if args.constraints:
        parts += ["--constraints", args.constraints]
    parts += ["--algorithm", args.algorithm, "--dt", f"{args.dt:g}", "--duration", f"{args.duration:g}"]
    if args.baumgarte is not None:
        parts += ["--baumgarte", args.baumgarte]
    elif args.compare_baumgarte is not None:
        parts += ["--compare-baumgarte"] + ([] if args.compare_baumgarte is True else [args.compare_baumgarte])
    parts += [f"--{k.replace('_', '-')} {v:g}" for k, v in solver.items()]
    for flag, val in (("--gravity", args.gravity), ("--hold", args.hold)):
        if val is not None:
            parts += [flag, str(val)]
    parts += ["--v0", f"{args.v0:g}", "--seed", str(args.seed)] + (["--c-loop"] if args.c_loop else [])
    return " ".join(parts)


def run_cli(args) -> int:
    progress = None if args.quiet else (lambda s: print(f"rbdgen: {s}", file=sys.stderr, flush=True))
    for name, val in (("--dt", args.dt), ("--duration", args.duration), ("--tol", args.tol), ("--mu", args.mu)):
        if not (math.isfinite(val) and val > 0):
            raise RbdgenError(f"{name} must be a positive number, got {val}")
    for name, val in (("--max-iter", args.max_iter), ("--iterations", args.iterations)):
        if val is not None and val < 1:
            raise RbdgenError(f"{name} must be at least 1, got {val}")
    solver = {"iterations": args.iterations, "mu": args.mu} if args.iterations else \
        {"tol": args.tol, "max_iter": args.max_iter, "mu": args.mu}
    if args.baumgarte is not None:
        gains = [parse_pair(args.baumgarte, "--baumgarte")]
    elif args.compare_baumgarte is not None:
        pair = DEFAULT_BAUMGARTE if args.compare_baumgarte is True else parse_pair(args.compare_baumgarte,
                                                                                   "--compare-baumgarte")
        gains = [(0.0, 0.0), pair]
    else:
        gains = [DEFAULT_BAUMGARTE]
    gravity = _floats(args.gravity, 3, "--gravity") if args.gravity else None
    result = simulate(args.robot, args.constraints, algorithm=args.algorithm, dt=args.dt, duration=args.duration,
                      gains=gains, c_loop=args.c_loop, gravity=gravity, hold=args.hold, v0=args.v0,
                      seed=args.seed, floating_base=args.floating_base, flags=args.flags, progress=progress,
                      **solver)
    result["command"] = _command(args, solver)
    paths = write_report(result, args.out)
    if progress:
        progress("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.format == "json":
        print(json.dumps({k: v for k, v in to_json(result).items()}, indent=1))
    else:
        print(markdown(result, None), end="")
    return 0
