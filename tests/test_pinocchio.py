"""Pinocchio as the reference on every named robot (DESIGN §6e): topology, frames,
RNEA, NLE, CRBA, ABA and the LOCAL frame kinematics (placement, Jacobian, velocity,
spatial and classical drift) at random states with nonzero velocity."""
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

import gen  # noqa: E402
from gen.algorithms.kinematics import (classical_drift, frame_jacobian, frame_placement,  # noqa: E402
                                       frame_velocity_and_drift)
from gen.backend import NUMPY  # noqa: E402
from gen.robots.named import NAMED_ROBOTS, load_named  # noqa: E402
from pin_models import pin_model  # noqa: E402

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


def rel_err(x, ref):
    ref = np.asarray(ref)
    return float(np.max(np.abs(np.asarray(x) - ref)) / max(1.0, np.max(np.abs(ref))))


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
