"""Constraint specs and constraint kinematics (gen/constraints.py): parsing and its
one-line errors; the stacked LOCAL Jacobian J, the drift and a_c* = -gamma - Kd J v - Kp e
against Pinocchio's RigidConstraintModel (LOCAL, joint1 = frame A, joint2 = frame B) at
non-zero velocity, anchored and loop closures, with and without Baumgarte gains; the SE(3)
log; the SX trace of the constraint quantities equals NumPy.

Also holds the helpers the solver tests share: a Pinocchio twin of a synthetic model and
the Pinocchio constraint models of a ConstraintSet."""
import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, rel_err
from random_trees import random_rotation, random_tree

import gen
from gen import RbdgenError
from gen.backend import NUMPY, SXBackend
from gen.constraint_spec import parse_constraints
from gen.constraints import ConstraintSet, log6
from gen.model import SE3, Frame, Model
from gen.robots.synthetic import fourbar, humanoid30

try:
    import pinocchio as pin
except ImportError:          # the test extra installs it; skip only when absent (needs_pin)
    pin = None

KIN_TOL = 1e-11        # J, drift, a_c*: exact kinematics in float64 (relative; log6 of far placements)
SX_TOL = 1e-12

HUMANOID_CONTACTS = "6D:left_foot,6D:right_foot,3D:left_hand,3D:right_hand"
HUMANOID_LOOPS = "3D:left_hand~right_hand,6D:left_foot~right_hand,6D:torso~left_foot"


# --- shared helpers --------------------------------------------------------------------

def named(name):
    """A named robot and its Pinocchio model, skipping when example-robot-data is absent."""
    model = load_or_skip(name)
    if pin is None:
        return model, None
    from pin_models import pin_model
    return model, pin_model(name)


def depth_first(model: Model) -> bool:
    """Pinocchio needs each subtree's joints numbered contiguously."""
    for i in range(model.nbodies):
        sub = [j for j in range(model.nbodies) if i in model.ancestors(j)]
        if sub != list(range(i, i + len(sub))):
            return False
    return True


def to_pinocchio(model: Model):
    """The Pinocchio twin of a synthetic/random model (same joint order, frames)."""
    pm = pin.Model()
    for b in model.bodies:
        joint = {"revolute": lambda a: pin.JointModelRevoluteUnaligned(*a),
                 "revolute_unb": lambda a: [pin.JointModelRUBX, pin.JointModelRUBY, pin.JointModelRUBZ][
                     int(np.argmax(a))](),               # the binding has no unaligned axis
                 "prismatic": lambda a: pin.JointModelPrismaticUnaligned(*a),
                 "free": lambda a: pin.JointModelFreeFlyer()}[b.kind](b.axis)
        jid = pm.addJoint(b.parent + 1, joint, pin.SE3(b.placement.R, b.placement.p), b.name)
        pm.appendBodyToJoint(jid, pin.Inertia(b.inertia.mass, b.inertia.com, b.inertia.I_c), pin.SE3.Identity())
    for f in model.frames:
        pm.addFrame(pin.Frame(f.name, f.body + 1, pin.SE3(f.placement.R, f.placement.p), pin.FrameType.OP_FRAME))
    return pm


def pin_constraints(pm, cset: ConstraintSet):
    """pin.RigidConstraintModel list, LOCAL, joint1 = frame A, joint2 = frame B / world."""
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for ci, c in enumerate(cset.constraints):
        f1 = pm.frames[pm.getFrameId(c.frame1)]
        if c.frame2 is None:
            j2, P2 = 0, pin.SE3(c.placement2.R, c.placement2.p)
        else:
            f2 = pm.frames[pm.getFrameId(c.frame2)]
            j2, P2 = f2.parentJoint, f2.placement
        kind = pin.ContactType.CONTACT_3D if c.kind == "3D" else pin.ContactType.CONTACT_6D
        cm = pin.RigidConstraintModel(kind, pm, f1.parentJoint, f1.placement, j2, P2, pin.ReferenceFrame.LOCAL)
        cm.m_baumgarte_parameters.Kp, cm.m_baumgarte_parameters.Kd = cset.gains(ci)
        cms.append(cm)
        cds.append(cm.createData())
    return cms, cds


def pin_constraint_dynamics(pm, cset, q, v, tau, mu=1e-6, accuracy=1e-14, max_iter=200):
    """Pinocchio's converged proximal solution: (ddq, lam, J, a_c*)."""
    data = pm.createData()
    cms, cds = pin_constraints(pm, cset)
    pin.initConstraintDynamics(pm, data, cms, cds)
    ddq = pin.constraintDynamics(pm, data, q, v, tau, cms, cds, pin.ProximalSettings(accuracy, mu, max_iter))
    J = np.vstack([pin.getConstraintJacobian(pm, data, cm, cd) for cm, cd in zip(cms, cds)])
    return ddq.copy(), data.lambda_c.copy(), J, data.primal_rhs_contact[:cset.m].copy()


def loop_tree(seed: int) -> Model:
    """A random depth-first branched tree (revolute about any axis, prismatic, free-flyers
    mid-tree) with a frame on a world-fixed anchor, for loop closures between two moving
    bodies and to the world."""
    model = random_tree(10, seed, kinds=("revolute", "prismatic", "free"))
    order = sorted(range(model.nbodies), key=lambda i: list(reversed(model.ancestors(i))))
    if order != list(range(model.nbodies)):      # renumber depth-first (Pinocchio's order)
        new = {old: k for k, old in enumerate(order)}
        bodies = []
        for old in order:
            b = model.bodies[old]
            bodies.append(type(b)(b.name, b.link, -1 if b.parent == -1 else new[b.parent], b.kind, b.axis,
                                  b.placement, b.inertia))
        frames = [Frame(f.name, new[f.body], f.placement, f.kind) for f in model.frames]
        model = Model(model.name, bodies, frames, source=model.source)
    rng = np.random.default_rng(seed)
    anchor = Frame("anchor", -1, SE3(random_rotation(rng), rng.normal(size=3)), "fixed_joint")
    return Model(model.name, model.bodies, model.frames + [anchor], source=model.source)


def random_state(model, rng):
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


# --- parsing ---------------------------------------------------------------------------

def test_parse_builds_the_stacked_set():
    model = humanoid30()
    cset = gen.parse_constraints(model, " 6D:left_foot, 6D:right_foot,3d:left_hand ,3D:left_hand~right_hand")
    assert [c.size for c in cset.constraints] == [6, 6, 3, 3]
    assert cset.m == 18 and cset.offsets == [0, 6, 12, 15]
    assert cset.spec == "6D:left_foot,6D:right_foot,3D:left_hand,3D:left_hand~right_hand"
    assert [c.anchored for c in cset.constraints] == [True, True, True, False]
    assert (cset.Kp, cset.Kd) == (0.0, 0.0)
    assert [c.weight for c in cset.constraints] == [1.0] * 4
    foot = model.frame("left_foot")
    assert cset.constraints[0].body1 == foot.body and cset.constraints[0].body2 == -1
    assert np.array_equal(cset.constraints[0].placement1.p, foot.placement.p)
    assert np.allclose(cset.damping(1e-6), 1e-6)
    weighted = parse_constraints(model, "6D:left_foot,3D:left_hand", weights=[2.0, 0.5])
    assert np.allclose(weighted.damping(1e-6), [0.5e-6] * 6 + [2e-6] * 3), "damping = mu / weight"


@pytest.mark.parametrize("robot, spec, kwargs, fragments", [
    ("humanoid30", "", {}, ["empty constraint spec", "3D or 6D"]),
    ("humanoid30", " , ", {}, ["empty constraint spec"]),
    ("humanoid30", "4D:left_foot", {}, ["'4D:left_foot'", "unknown type '4D'", "3D, 6D"]),
    ("humanoid30", "left_foot", {}, ["'left_foot'", "TYPE:FRAME", "3D or 6D"]),
    ("humanoid30", "3D:left_fot", {}, ["'3D:left_fot'", "unknown frame 'left_fot'", "left_foot"]),
    ("humanoid30", "3D:left_foot,,6D:right_foot", {}, ["constraint #2 is empty"]),
    ("humanoid30", "3D:left_foot~left_foot", {}, ["'3D:left_foot~left_foot'", "two different frames"]),
    ("humanoid30", "6D:left_leg6~left_foot", {}, ["both fixed to", "left_leg6"]),
    ("humanoid30", "3D:a~b~c", {}, ["exactly two frames"]),
    ("fourbar", "3D:anchor", {}, ["'3D:anchor'", "fixed to the world"]),
    ("fourbar", "3D:nowhere", {}, ["unknown frame 'nowhere'", "choose from", "tip", "anchor"]),
    ("humanoid30", "3D:left_foot", {"Kp": -1.0}, ["Kp=-1.0", "non-negative"]),
    ("humanoid30", "3D:left_foot", {"weights": [1.0, 2.0]}, ["2 constraint weights", "1 constraints"]),
    ("humanoid30", "3D:left_foot", {"weights": [0.0]}, ["'3D:left_foot'", "weight 0.0"]),
])
def test_parse_errors_name_the_token_and_the_choices(robot, spec, kwargs, fragments):
    with pytest.raises(RbdgenError) as err:
        parse_constraints(gen.load_robot(robot), spec, **kwargs)
    msg = str(err.value)
    assert "\n" not in msg, "one-line error"
    for frag in fragments:
        assert frag in msg, f"error {msg!r} should mention {frag!r}"


def test_unknown_frame_on_a_large_robot_suggests_similar_names():
    model, _ = named("talos")
    with pytest.raises(RbdgenError, match="similar: .*left_sole_link"):
        parse_constraints(model, "6D:left_sole")


def test_damping_rejects_non_positive_mu():
    cset = parse_constraints(humanoid30(), "3D:left_foot")
    with pytest.raises(RbdgenError, match="mu=0"):
        cset.damping(0.0)


# --- kinematics against Pinocchio ---------------------------------------------------------

SYNTHETIC_CASES = [
    (humanoid30, HUMANOID_CONTACTS, 0.0, 0.0),
    (humanoid30, HUMANOID_LOOPS, 0.0, 0.0),
    (humanoid30, HUMANOID_CONTACTS + "," + HUMANOID_LOOPS, 4.0, 3.0),
    (fourbar, "3D:tip~anchor", 0.0, 0.0),
    (fourbar, "3D:tip~anchor", 10.0, 2.0),
    (fourbar, "6D:tip~anchor,3D:anchor~tip,6D:anchor~tip", 10.0, 2.0),
    (lambda: loop_tree(3), "6D:tip4,3D:tip7~tip2,6D:tip5~tip8,3D:anchor~tip9,6D:tip6~anchor", 5.0, 1.5),
    (lambda: loop_tree(8), "3D:tip3,6D:l9~tip1,3D:tip6~anchor", 0.0, 0.0),
]


def check_kinematics(model, pm, cset, q, v, tau):
    _, _, Jp, ap = pin_constraint_dynamics(pm, cset, q, v, tau)
    ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    assert rel_err(ev.J, Jp) < KIN_TOL, f"{cset}: J vs Pinocchio"
    assert rel_err(ev.a_star, ap) < KIN_TOL, f"{cset}: a_c* vs Pinocchio primal_rhs_contact"
    assert rel_err(ev.Jv, Jp @ v) < KIN_TOL, f"{cset}: J v from frame velocities vs J @ v"
    assert rel_err(cset.jacobian(model, NUMPY.asarray(q), be=NUMPY), Jp) < KIN_TOL, "jacobian()"
    if cset.Kp == 0 and cset.Kd == 0:
        assert rel_err(ev.gamma, -ap) < KIN_TOL, f"{cset}: gamma = -a_c* without Baumgarte"


@needs_pin
@pytest.mark.parametrize("make, spec, Kp, Kd", SYNTHETIC_CASES,
                         ids=[f"{i}:{c[1][:30]}:Kp{c[2]}" for i, c in enumerate(SYNTHETIC_CASES)])
def test_jacobian_and_drift_match_pinocchio_on_synthetic_trees(make, spec, Kp, Kd):
    model = make()
    assert depth_first(model)
    pm = to_pinocchio(model)
    cset = parse_constraints(model, spec, Kp=Kp, Kd=Kd)
    rng = np.random.default_rng(21)
    for _ in range(3):
        check_kinematics(model, pm, cset, *random_state(model, rng))


NAMED_CASES = [("ur5", "3D:tool0"), ("ur5", "6D:tool0"),
               ("solo12", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"),
               ("talos", "6D:left_sole_link,6D:right_sole_link"),
               ("talos", "3D:left_sole_link~right_sole_link,6D:gripper_left_base_link~right_sole_link")]


@needs_pin
@pytest.mark.parametrize("robot, spec", NAMED_CASES)
@pytest.mark.parametrize("gains", [(0.0, 0.0), (8.0, 3.0)])
def test_jacobian_and_drift_match_pinocchio_on_named_robots(robot, spec, gains):
    model, pm = named(robot)
    cset = parse_constraints(model, spec, Kp=gains[0], Kd=gains[1])
    rng = np.random.default_rng(22)
    for _ in range(2):
        q = pin.randomConfiguration(pm, -np.pi * np.ones(pm.nq), np.pi * np.ones(pm.nq)) \
            if model.bodies[0].kind != "free" else model.random_q(rng)
        check_kinematics(model, pm, cset, q, rng.normal(size=model.nv), rng.normal(size=model.nv))


def test_anchored_6d_jacobian_is_the_local_frame_jacobian():
    from gen.kinematics import frame_jacobian

    model = random_tree(9, 4)
    rng = np.random.default_rng(5)
    q = NUMPY.asarray(model.random_q(rng))
    cset = parse_constraints(model, "6D:tip6,3D:tip8")
    J = cset.jacobian(model, q, be=NUMPY)
    assert rel_err(J[0:6], frame_jacobian(model, "tip6", q, be=NUMPY)) < KIN_TOL
    assert rel_err(J[6:9], frame_jacobian(model, "tip8", q, be=NUMPY)[0:3]) < KIN_TOL


def test_jacobian_columns_vanish_outside_the_support():
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS + "," + HUMANOID_LOOPS)
    rng = np.random.default_rng(6)
    J = cset.jacobian(model, NUMPY.asarray(model.random_q(rng)), be=NUMPY)
    for c in range(len(cset)):
        outside = sorted(set(range(model.nv)) - set(cset.support(model, c)))
        r = cset.rows(c)
        assert np.all(J[r.start:r.stop, outside] == 0.0), f"{cset.constraints[c]}: structural zeros"
    torso_loop = cset.support(model, len(cset) - 1)         # 6D:torso~left_foot
    assert torso_loop == list(range(6, 12)), "6D loop: joints supporting both frames cancel"


def test_reference_configuration_zeroes_the_position_error():
    model = humanoid30()
    rng = np.random.default_rng(7)
    q0 = model.random_q(rng)
    cset = parse_constraints(model, "6D:left_foot,3D:right_hand", Kp=50.0, reference_q=q0)
    ev = cset.evaluate(model, NUMPY.asarray(q0), NUMPY.zeros(model.nv), be=NUMPY)
    assert np.max(np.abs(ev.a_star)) < 1e-12, "at v = 0 and q = reference_q, a_c* = 0"
    moved = cset.evaluate(model, NUMPY.asarray(model.random_q(rng)), NUMPY.zeros(model.nv), be=NUMPY)
    assert np.max(np.abs(moved.a_star)) > 1.0, "elsewhere Kp pulls back"


@needs_pin
@pytest.mark.parametrize("angle", [0.0, 1e-7, 1e-3, 0.5, 2.0, 3.0])
def test_log6_matches_pinocchio(angle):
    rng = np.random.default_rng(8)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    M = pin.exp6(pin.Motion(rng.normal(size=3), angle * axis))
    got = log6(NUMPY.asarray(M.rotation), NUMPY.asarray(M.translation), NUMPY)
    assert rel_err(got, pin.log6(M).vector) < 1e-10, f"log6 at angle {angle}"


def test_sx_trace_of_constraint_quantities_equals_numpy():
    import casadi as ca

    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS + ",3D:left_hand~right_hand,6D:torso~left_foot", Kd=2.0)
    be = SXBackend()
    q, v = be.sym("q", model.nq), be.sym("v", model.nv)
    ev = cset.evaluate(model, q, v, be=be)
    f = ca.Function("c", [q, v], [ev.J, ev.a_star, ev.Jv])
    rng = np.random.default_rng(9)
    for _ in range(3):
        qn, vn = model.random_q(rng), rng.normal(size=model.nv)
        ref = cset.evaluate(model, NUMPY.asarray(qn), NUMPY.asarray(vn), be=NUMPY)
        for name, got, want in zip(["J", "a_c*", "Jv"], f(qn, vn), [ref.J, ref.a_star, ref.Jv]):
            assert rel_err(np.array(got), want) < SX_TOL, f"SX vs NumPy: {name}"


def test_body_forces_are_J_transpose_lambda():
    """sum over bodies of J_body^T f_body = J^T lam, checked through RNEA: tau_ext = J^T lam."""
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS + "," + HUMANOID_LOOPS)
    rng = np.random.default_rng(10)
    q, v, tau = random_state(model, rng)
    lam = rng.normal(size=(cset.m, 1))
    ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    fext = cset.body_forces(model, ev, lam, NUMPY)
    ddq = gen.run(model, "aba", q, v, tau)
    from gen.algorithms.aba import aba
    (with_f,) = aba(model, NUMPY.asarray(q), NUMPY.asarray(v), NUMPY.asarray(tau), be=NUMPY, fext=fext)
    M = gen.run(model, "crba", q)
    assert rel_err(M @ (with_f.ravel() - ddq), (ev.J.T @ lam).ravel()) < 1e-10, "M (ddq_f - ddq) = J^T lam"
