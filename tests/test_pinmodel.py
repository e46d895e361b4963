"""gen.load_robot(pinocchio.Model) (gen/pinmodel.py): against rbdgen's own URDF loader on the
same files, round trips rbdgen -> Pinocchio -> rbdgen over every joint kind (mimic and
universal included), and dynamics of the loaded models against Pinocchio's."""
from __future__ import annotations

import numpy as np
import pytest

import gen
from gen.errors import RbdgenError
from gen.model import Body, Mimic, Model
from tests.random_trees import every_kind_tree, random_inertia, random_rotation, random_state

pin = pytest.importorskip("pinocchio", reason="gen.load_robot(pinocchio.Model) needs the pin wheel")
pinref = pytest.importorskip("gen.pinref")

#: constants copied from Pinocchio's doubles: equal to the last bit, or to a few ulps where
#: the URDF loader composes placements in another order than Pinocchio (rpy -> R)
EXACT = 1e-15
#: ABA / RNEA of rbdgen (gen.run, NumPy) and Pinocchio on one model: rounding of two
#: different recursions, relative to the largest entry (measured 2e-15 panda .. 3e-14 talos)
DYN_RTOL = 1e-12


def assert_same_bodies(a: Model, b: Model, tol: float = EXACT) -> None:
    assert (a.nq, a.nv, a.nbodies) == (b.nq, b.nv, b.nbodies)
    for x, y in zip(a.bodies, b.bodies):
        assert (x.name, x.parent, x.kind, x.idx_q, x.idx_v) == (y.name, y.parent, y.kind, y.idx_q, y.idx_v)
        if x.kind not in ("free", "spherical", "planar"):
            np.testing.assert_allclose(x.axis, y.axis, rtol=0, atol=tol, err_msg=x.name)
        assert abs(x.pitch - y.pitch) <= tol
        np.testing.assert_allclose(x.placement.R, y.placement.R, rtol=0, atol=tol, err_msg=x.name)
        np.testing.assert_allclose(x.placement.p, y.placement.p, rtol=0, atol=tol, err_msg=x.name)
        assert abs(x.inertia.mass - y.inertia.mass) <= tol * max(1.0, x.inertia.mass)
        np.testing.assert_allclose(x.inertia.com, y.inertia.com, rtol=0, atol=tol, err_msg=x.name)
        np.testing.assert_allclose(x.inertia.I_c, y.inertia.I_c, rtol=0, atol=tol, err_msg=x.name)
        assert (x.mimic is None) == (y.mimic is None)
        if x.mimic is not None:
            assert x.mimic.primary == y.mimic.primary
            assert abs(x.mimic.multiplier - y.mimic.multiplier) <= tol
            assert abs(x.mimic.offset - y.mimic.offset) <= tol


def assert_dynamics_match(model: Model, pm, seed: int = 0) -> None:
    data = pm.createData()
    rng = np.random.default_rng(seed)
    for _ in range(3):
        q, v, tau = random_state(model, rng)
        ours = gen.run(model, "rnea", q, v, tau)
        ref = pin.rnea(pm, data, q, v, tau)
        assert np.abs(ours - ref).max() <= DYN_RTOL * max(1.0, np.abs(ref).max())
        if not model.has_mimic:                   # Pinocchio's aba refuses mimic joints
            ours, ref = gen.run(model, "aba", q, v, tau), pin.aba(pm, data, q, v, tau)
            assert np.abs(ours - ref).max() <= DYN_RTOL * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("robot", ["panda", "solo12", "talos"])
def test_named_robot_as_its_urdf_loader(robot):
    """The Pinocchio model of a named robot's URDF loads as rbdgen's URDF loader loads the
    file: same bodies, every rbdgen frame present on the same body at the same placement,
    and the same dynamics as Pinocchio."""
    ours = gen.load_robot(robot)
    pm = pinref.pin_model(ours)
    loaded = gen.load_robot(pm)
    assert_same_bodies(ours, loaded, tol=1e-12)
    by_name = {f.name: f for f in loaded.frames}
    for f in ours.frames:
        g = by_name[f.name]
        assert g.body == f.body, f.name
        np.testing.assert_allclose(g.placement.p, f.placement.p, rtol=0, atol=1e-12, err_msg=f.name)
        np.testing.assert_allclose(g.placement.R, f.placement.R, rtol=0, atol=1e-12, err_msg=f.name)
    assert_dynamics_match(loaded, pm)


@pytest.mark.parametrize("seed", range(4))
def test_round_trip_every_kind(seed):
    """rbdgen -> Pinocchio (gen.pinref) -> rbdgen keeps every body exactly: free, spherical,
    planar, helical (unaligned, pitched), revolute, continuous, prismatic, aligned or not."""
    model = every_kind_tree(12, seed)
    pm = pinref.pin_model(model)
    loaded = gen.load_robot(pm)
    assert_same_bodies(model, loaded)
    assert_dynamics_match(loaded, pm, seed)


def test_round_trip_mimic():
    """Mimic joints (Pinocchio's JointModelMimic, negative multipliers included) come back
    with their primary, multiplier and offset."""
    rng = np.random.default_rng(3)
    bodies = []
    for i, kind in enumerate(["revolute", "prismatic", "revolute", "prismatic", "revolute"]):
        axis = rng.normal(size=3)
        bodies.append(Body(f"j{i}", f"l{i}", i - 1, kind, axis / np.linalg.norm(axis),
                           gen.model.SE3(random_rotation(rng), rng.normal(size=3)), random_inertia(rng)))
    bodies[2].mimic = Mimic(0, -1.7, 0.3)
    bodies[3].mimic = Mimic(1, 0.6, -0.2)
    model = Model("mimic5", bodies, source="mimic test")
    pm = pinref.pin_model(model)
    loaded = gen.load_robot(pm)
    assert_same_bodies(model, loaded)
    assert_dynamics_match(loaded, pm)


def test_universal_joint():
    """Pinocchio's JointModelUniversal becomes rbdgen's two-body universal joint, with the
    same dynamics (Pinocchio's joint carries S(q) and its bias; rbdgen's halves do not)."""
    rng = np.random.default_rng(5)
    pm = pin.Model()
    a1, a2 = np.array([1.0, 0, 0]), np.array([0, 0.6, 0.8])
    j1 = pm.addJoint(0, pin.JointModelRX(), pin.SE3.Random(), "base")
    j2 = pm.addJoint(j1, pin.JointModelUniversal(a1, a2), pin.SE3.Random(), "wrist")
    j3 = pm.addJoint(j2, pin.JointModelRZ(), pin.SE3.Random(), "tool")
    for j in (j1, j2, j3):
        I = random_inertia(rng)
        pm.appendBodyToJoint(j, pin.Inertia(I.mass, I.com, I.I_c), pin.SE3.Identity())
    model = gen.load_robot(pm)
    assert [b.name for b in model.bodies] == ["base", "wrist_axis1", "wrist", "tool"]
    assert [b.parent for b in model.bodies] == [-1, 0, 1, 2]
    assert_dynamics_match(model, pm)


def test_operational_frame_is_a_constraint_frame():
    """An OP_FRAME added to the Pinocchio model is a frame rbdgen's constraints can name,
    on the body of its parent joint; its Jacobian is Pinocchio's."""
    pm = pinref.pin_model(gen.load_robot("panda"))
    placement = pin.SE3(random_rotation(np.random.default_rng(0)), np.array([0.0, 0.0, 0.1]))
    fid = pm.addFrame(pin.Frame("tcp", 7, pm.getFrameId("panda_link7"), placement, pin.FrameType.OP_FRAME))
    model = gen.load_robot(pm)
    frame = model.frame("tcp")
    assert (frame.body, frame.kind) == (6, "site")
    q = model.random_q(np.random.default_rng(1))
    cset = gen.parse_constraints(model, "6D:tcp")
    from gen.backend import NUMPY
    J = np.asarray(cset.jacobian(model, NUMPY.asarray(q), be=NUMPY), dtype=float)
    data = pm.createData()
    ref = pin.computeFrameJacobian(pm, data, q, fid, pin.LOCAL)
    np.testing.assert_allclose(J, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("joint, message", [
    (lambda: pin.JointModelSphericalZYX(), "not representable"),
    (lambda: pin.JointModelTranslation(), "not representable"),
])
def test_refused_joints(joint, message):
    pm = pin.Model()
    j = pm.addJoint(0, joint(), pin.SE3.Identity(), "odd")
    pm.appendBodyToJoint(j, pin.Inertia.Random(), pin.SE3.Identity())
    with pytest.raises(RbdgenError, match=f"joint 'odd'.*{message}"):
        gen.load_robot(pm)


def test_refused_armature_and_urdf_options():
    pm = pinref.pin_model(gen.load_robot("panda"))
    with pytest.raises(RbdgenError, match="floating_base, lock_joints and mimic apply to URDF paths"):
        gen.load_robot(pm, floating_base=True)
    pm.armature[:] = 0.1
    with pytest.raises(RbdgenError, match="non-zero armature"):
        gen.load_robot(pm)
