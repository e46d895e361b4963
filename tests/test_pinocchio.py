"""Pinocchio as the reference on every named robot (docs/DESIGN.md §6e): topology, frames,
RNEA, NLE, CRBA, ABA and the LOCAL frame kinematics (placement, Jacobian, velocity,
spatial and classical drift) at random states with nonzero velocity."""
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

from conftest import SOLVERS, load_or_skip, rel_err  # noqa: E402
from pin_models import pin_model  # noqa: E402
from random_trees import random_tree  # noqa: E402
from test_constrained import states  # noqa: E402

import gen  # noqa: E402
from gen import RbdgenError, pinref  # noqa: E402
from gen.algorithms import ALGORITHMS  # noqa: E402
from gen.backend import NUMPY  # noqa: E402
from gen.constraint_spec import parse_constraints  # noqa: E402
from gen.kinematics import (  # noqa: E402
    classical_drift,
    frame_jacobian,
    frame_placement,
    frame_velocity_and_drift,
)
from gen.robots.named import NAMED_ROBOTS, load_named  # noqa: E402

REL_TOL = 1e-9         # float64 algorithms vs Pinocchio, relative to max(1, |reference|)
N_STATES = 20
SEED = 20240611

# Frames that constraints use (feet, soles, tools), plus a joint frame, a locked joint
# and a world-attached link where a robot has them.
FRAMES = {
    "ur5": ["tool0", "ee_link", "wrist_3_joint", "world"],
    "panda": ["panda_hand_tcp", "panda_hand", "panda_finger_joint1", "panda_link0"],
    "solo12": ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT", "base_link"],
    "anymal_c": ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"],
    "go1": ["FL_foot", "FR_foot", "RL_foot", "RR_foot"],
    "talos": ["left_sole_link", "right_sole_link", "arm_left_7_link", "arm_right_7_link"],
    "icub": ["l_sole", "r_sole", "l_gripper", "r_hand"],
    "g1": ["left_ankle_roll_link", "right_ankle_roll_link", "left_rubber_hand", "right_rubber_hand"],
}


FRAME_KINDS = {pin.FrameType.BODY: "body", pin.FrameType.FIXED_JOINT: "fixed_joint",
               pin.FrameType.JOINT: "joint"}


class Robot:
    """Our model, Pinocchio's, and fixed random states, built once per robot."""

    def __init__(self, name):
        self.model = load_named(name)
        self.pmodel = pin_model(name)
        self.pdata = self.pmodel.createData()
        rng = np.random.default_rng(SEED)
        nv = self.model.nv
        self.states = [(self.model.random_q(rng), rng.normal(size=nv), rng.normal(size=nv),
                        rng.normal(size=nv)) for _ in range(N_STATES)]


_ROBOTS = {}


@pytest.fixture(scope="module", params=list(NAMED_ROBOTS))
def robot(request):
    if request.param not in _ROBOTS:
        _ROBOTS[request.param] = Robot(request.param)
    return _ROBOTS[request.param]


def test_topology_matches_pinocchio(robot):
    m, pm = robot.model, robot.pmodel
    assert (m.nq, m.nv) == (pm.nq, pm.nv)
    assert m.joint_names == list(pm.names)[1:], "joint order"
    assert m.parents == [p - 1 for p in pm.parents[1:]], "parent array"


def test_frames_match_pinocchio(robot):
    """Same frames in the same order, with the same kind, body and placement (so
    ``Model.frame(name)`` finds the frame Pinocchio lists first under that name)."""
    m, pm = robot.model, robot.pmodel
    assert m.frame_names == [f.name for f in pm.frames][1:], "frame names and order"
    for f, ref in zip(m.frames, list(pm.frames)[1:]):
        assert f.kind == FRAME_KINDS[ref.type], f"frame {f.name}: kind"
        assert f.body == ref.parentJoint - 1, f"frame {f.name}: body"
        assert rel_err(f.placement.R, ref.placement.rotation) < REL_TOL, f"frame {f.name}: rotation"
        assert rel_err(f.placement.p, ref.placement.translation) < REL_TOL, f"frame {f.name}: translation"


def dynamics_errors(robot):
    """Worst relative error of rnea, nle, crba and aba over the states."""
    m, pm, pd = robot.model, robot.pmodel, robot.pdata
    worst = dict.fromkeys(["rnea", "nle", "crba", "aba"], 0.0)
    for q, v, a, tau in robot.states:
        M = pin.crba(pm, pd, q)
        refs = {"rnea": (pin.rnea(pm, pd, q, v, a), (q, v, a)),
                "nle": (pin.nonLinearEffects(pm, pd, q, v), (q, v)),
                "crba": (np.triu(M) + np.triu(M, 1).T, (q,)),
                "aba": (pin.aba(pm, pd, q, v, tau), (q, v, tau))}
        for name, (ref, inputs) in refs.items():
            worst[name] = max(worst[name], rel_err(gen.run(m, name, *inputs), ref))
    return worst


def kinematics_errors(robot, frame):
    """Worst relative error of the LOCAL frame kinematics over the states."""
    m, pm, pd = robot.model, robot.pmodel, robot.pdata
    fid = pm.getFrameId(frame)
    worst = dict.fromkeys(["placement", "jacobian", "velocity", "drift", "classical_drift"], 0.0)
    for q, v, _, _ in robot.states:
        pin.computeJointJacobians(pm, pd, q)
        pin.forwardKinematics(pm, pd, q, v, np.zeros(pm.nv))   # ddq = 0, no gravity involved
        pin.updateFramePlacements(pm, pd)
        qc, vc = q.reshape(-1, 1), v.reshape(-1, 1)
        R, p = frame_placement(m, frame, qc, be=NUMPY)
        vf, af = frame_velocity_and_drift(m, frame, qc, vc, be=NUMPY)
        oMf = pd.oMf[fid]
        got = {"placement": (np.hstack([R, p]), np.hstack([oMf.rotation, oMf.translation.reshape(3, 1)])),
               "jacobian": (frame_jacobian(m, frame, qc, be=NUMPY),
                            pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)),
               "velocity": (vf.ravel(), pin.getFrameVelocity(pm, pd, fid, pin.LOCAL).vector),
               "drift": (af.ravel(), pin.getFrameAcceleration(pm, pd, fid, pin.LOCAL).vector),
               "classical_drift": (classical_drift(m, frame, qc, vc, be=NUMPY).ravel(),
                                   pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).linear)}
        for name, (x, ref) in got.items():
            worst[name] = max(worst[name], rel_err(x, ref))
    return worst


def test_dynamics_match_pinocchio(robot):
    for name, err in dynamics_errors(robot).items():
        assert err < REL_TOL, f"{robot.model.name}: {name} relative error {err:.2e}"


def test_frame_kinematics_match_pinocchio(robot):
    for frame in FRAMES[robot.model.name]:
        for name, err in kinematics_errors(robot, frame).items():
            assert err < REL_TOL, f"{robot.model.name} frame {frame}: {name} relative error {err:.2e}"


# --- gen.pinref: references of the constrained algorithms (rbdgen verify) ---------------------

ITERATE_TOL = 1e-11      # K-th proximal iterate vs Pinocchio's K-th (mu = 1e-2: no 1/mu rounding)
ITERATE_GAP = 1e-8       # ... the (K-1)-th differs by more than this at mu = 1e-2
IMPULSE_TOL = 1e-8       # converged impact map (mu = 1e-4) vs impulseDynamics (tests/test_impact.py)
DELASSUS_TOL = 1e-11     # J M^-1 J^T vs computeDelassusMatrix (tests/test_delassus.py)
ITERATE = dict(mu=1e-2, iterations=3)
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"

# (robot, spec, gains): anchored 3D and 6D sets with and without Baumgarte feedback (6D:
# log6 of the anchor error), velocity constraints, loop closures both ways round on a
# synthetic tree (Pinocchio model built by gen.pinref from the rbdgen Model).
CONSTRAINED = [("solo12", FEET, {}),
               ("solo12", FEET, dict(Kp=10.0, Kd=2.0)),
               ("solo12", "3Dv:FL_FOOT,3D:FR_FOOT,3Dv:HL_FOOT,3D:HR_FOOT", dict(Kp=10.0, Kd=2.0, Kv=5.0)),
               ("ur5", "6D:tool0", dict(Kp=4.0, Kd=1.0)),
               ("talos", "6D:left_sole_link,6D:right_sole_link", dict(Kp=10.0, Kd=2.0)),
               ("humanoid30", "6D:left_foot,6D:right_foot,3D:left_hand", dict(Kp=1.0, Kd=3.0)),
               ("fourbar", "3D:tip~anchor", dict(Kp=3.0, Kd=1.0)),
               ("fourbar", "3D:anchor~tip", dict(Kp=3.0, Kd=1.0))]
CONSTRAINED_IDS = [f"{r}-{s.split(',')[0]}-{'K' if g else '0'}" for r, s, g in CONSTRAINED]


def leading_errors(got, ref):
    return [rel_err(g, r) for g, r in zip(got, ref)]


@pytest.mark.parametrize("robot, spec, gains", CONSTRAINED, ids=CONSTRAINED_IDS)
def test_solver_references_are_the_same_iterate(robot, spec, gains):
    """Pinocchio's constraintDynamics with accuracy 0 and max_iter K is rbdgen's K-th
    proximal iterate (ddq and lam), for every solver, gains and velocity constraints
    included; iterate K - 1 is measurably different (the comparison resolves it)."""
    model = load_or_skip(robot)
    cset = parse_constraints(model, spec, **gains)
    pm = pinref.pin_model(model)
    for q, v, tau in states(model, 61, cset=cset):
        ref = pinref.reference(model, "prox_ltl", q, v, tau, pmodel=pm, cset=cset, options=ITERATE)
        for alg in SOLVERS:
            if alg in ("constrained_aba", "prox_pv") and not all(c.anchored for c in cset.constraints):
                with pytest.raises(RbdgenError, match=f"{alg} handles constraints relative to the world only"):
                    gen.run(model, alg, q, v, tau, constraints=cset, **ITERATE)
                continue
            got = gen.run(model, alg, q, v, tau, constraints=cset, **ITERATE)
            for name, err in zip(("ddq", "lam"), leading_errors(got, ref)):
                assert err < ITERATE_TOL, f"{alg} {robot} {spec} {gains}: {name} vs Pinocchio, {err:.1e}"
        early = gen.run(model, "prox_ltl", q, v, tau, constraints=cset, mu=1e-2, iterations=2)
        assert max(leading_errors(early, ref)) > ITERATE_GAP, f"{robot} {spec}: iterate 2 equals iterate 3"


@pytest.mark.parametrize("robot, spec", [("ur5", "6D:tool0"), ("solo12", FEET),
                                         ("talos", "6D:left_sole_link,6D:right_sole_link"),
                                         ("fourbar", "3D:tip~anchor")])
def test_impulse_and_delassus_references(robot, spec):
    model = load_or_skip(robot)
    cset = parse_constraints(model, spec)
    pm = pinref.pin_model(model)
    for q, v, _ in states(model, 62, cset=cset):
        for e in (0.0, 0.6):
            ref = pinref.reference(model, "impulse", q, v, pmodel=pm, cset=cset, options={"restitution": e})
            got = gen.run(model, "impulse", q, v, constraints=cset, restitution=e, mu=1e-4,
                          **ALGORITHMS["impulse"].pinocchio.converged)
            for name, err in zip(("v_plus", "impulse"), leading_errors(got, ref)):
                assert err < IMPULSE_TOL, f"{robot} {spec} e={e}: {name} vs impulseDynamics, {err:.1e}"
        ref = pinref.reference(model, "delassus", q, pmodel=pm, cset=cset)
        for alg in ("delassus", "kkt_delassus"):
            err = rel_err(gen.run(model, alg, q, constraints=cset), ref)
            assert err < DELASSUS_TOL, f"{alg} {robot} {spec}: vs computeDelassusMatrix, {err:.1e}"


def test_what_has_no_reference():
    """n/a: weights (solvers, impulse), one-sided rows (prox_lcp has one only on bilateral
    sets), a tolerance-driven solver, frame A on the world (impulse, the Delassus matrix and
    its damped inverses), no set."""
    model = load_or_skip("fourbar")
    plain = parse_constraints(model, "3D:tip~anchor")
    weighted = parse_constraints(model, "3D:tip~anchor", weights=[2.0])
    reversed_loop = parse_constraints(model, "3D:anchor~tip")
    assert all(pinref.supports(model, a, plain) for a in SOLVERS + ("impulse", "delassus", "kkt_delassus"))
    assert not any(pinref.supports(model, a, weighted) for a in SOLVERS + ("impulse",))
    assert pinref.supports(model, "delassus", weighted), "the Delassus matrix does not depend on weights"
    assert not pinref.supports(model, "prox_ltl", plain, {"tol": 1e-10})
    assert pinref.supports(model, "prox_ltl", reversed_loop)
    assert not any(pinref.supports(model, a, reversed_loop) for a in ("impulse", "delassus", "kkt_delassus"))
    osim = ("caba_osim", "caba_osimf", "ltl_osim", "kkt_osim")
    assert all(pinref.supports(model, a, plain) for a in ("prox_lcp",) + osim)
    assert not any(pinref.supports(model, a, reversed_loop) for a in osim)
    assert not pinref.supports(model, "prox_ltl", None)
    solo = load_or_skip("solo12")
    assert not pinref.supports(solo, "prox_ltl", parse_constraints(solo, "3D+:FL_FOOT,3D:FR_FOOT"))
    q = model.random_q(np.random.default_rng(0))
    assert pinref.reference(model, "prox_ltl", q, np.zeros(3), np.zeros(3), cset=weighted) is None


def test_continuous_joints_build_in_pinocchio():
    """Continuous joints (q = (cos, sin)) about aligned and unaligned axes: the Pinocchio
    model gen.pinref assembles from the rbdgen Model has the same joints and matches RNEA,
    NLE and ABA (pin 4.1's JointModelRevoluteUnboundedUnaligned takes no axis; the tree
    is not numbered depth-first, so CRBA has no Pinocchio reference)."""
    model = random_tree(9, 11, kinds=("prismatic", "revolute_unb"))
    axes = [b.axis for b in model.bodies if b.kind == "revolute_unb"]
    assert any(np.count_nonzero(a) == 1 for a in axes) and any(np.count_nonzero(a) > 1 for a in axes)
    pm = pinref.pin_model(model)
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    kinds = [j.shortname() for j in pm.joints[1:]]
    assert "JointModelRevoluteUnboundedUnaligned" in kinds and "JointModelRUBY" in kinds
    rng = np.random.default_rng(SEED)
    for _ in range(N_STATES):
        q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        for alg, inputs in (("rnea", (q, v, a)), ("nle", (q, v)), ("aba", (q, v, a))):
            err = rel_err(gen.run(model, alg, *inputs), pinref.reference(model, alg, *inputs, pmodel=pm))
            assert err < REL_TOL, f"continuous joints: {alg} relative error {err:.2e}"
