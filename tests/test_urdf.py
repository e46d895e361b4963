"""URDF loader: every joint type, fixed-joint merging, arbitrary axes, child order and
locked joints against Pinocchio built from the same XML; one test per bad input."""
import importlib.metadata
import re

import numpy as np
import pytest
from conftest import rel_err

import gen
from gen.errors import RbdgenError
from gen.robots import named
from gen.urdf import load_urdf, rpy_matrix

REL_TOL = 1e-10        # same float64 arithmetic as Pinocchio up to operation order
SEED = 7

INERTIA = '<inertia ixx="{0}" ixy="0.01" ixz="-0.02" iyy="{1}" iyz="0.015" izz="{2}"/>'
LIMIT = '<limit lower="-3" upper="3" effort="10" velocity="10"/>'


def link(name, mass=1.0, com="0.1 -0.05 0.2", rpy="0.3 -0.2 0.5", diag=(0.3, 0.25, 0.2)):
    """A link with a full inertial block (rotated inertial origin)."""
    return (f'<link name="{name}"><inertial><origin xyz="{com}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'{INERTIA.format(*diag)}</inertial><visual><geometry><box size="1 1 1"/></geometry>'
            f'</visual></link>')


def joint(name, jtype, parent, child, xyz="0.1 0.2 -0.3", rpy="0.4 -0.7 1.1", axis=None):
    axis_el = "" if axis is None else f'<axis xyz="{axis}"/>'
    limit = LIMIT if jtype in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/>{axis_el}{limit}</joint>')


def robot(*elements, name="t"):
    return f'<?xml version="1.0"?>\n<robot name="{name}">\n' + "\n".join(elements) + "\n</robot>\n"


def write(tmp_path, xml, filename="robot.urdf"):
    path = tmp_path / filename
    path.write_text(xml)
    return path


# Every joint type; joint names sort differently from file order, so the joint order
# checks urdfdom's by-name child order and Pinocchio's depth-first walk.  Fixed joints
# sit between moving ones (placements compose) and at the leaves (frames only).
ALL_TYPES = robot(
    link("base"), *(link(f"l{k}", mass=0.5 + 0.1 * k) for k in range(1, 10)), '<link name="tip"/>',
    joint("b_rev", "revolute", "base", "l1", axis="0 0 1"),
    joint("c_fix", "fixed", "l1", "l2"),
    joint("d_cont", "continuous", "l2", "l3", axis="1 1 0"),
    joint("e_pris", "prismatic", "l3", "l4", axis="0 -2 0"),
    joint("a_float", "floating", "base", "l5"),
    joint("f_noaxis", "revolute", "l5", "l6"),
    joint("h_fix", "fixed", "l6", "l8"),
    joint("g_fix", "fixed", "l6", "l7", rpy="0 0 0"),
    joint("i_rev", "revolute", "l8", "l9", axis="0.3 -0.2 0.9"),
    joint("z_tip", "fixed", "l9", "tip"),
    '<transmission name="tr"><joint name="b_rev"/></transmission><gazebo reference="l1"/>',
)


@pytest.fixture(scope="module")
def pin():
    return pytest.importorskip("pinocchio")


def pin_from_xml(pin, xml, floating_base=False):
    if floating_base:
        return pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
    return pin.buildModelFromXML(xml)


def assert_matches_pin(model, pm, pin, states=5):
    """Topology, joint placements, lumped inertias, frames and dynamics equal Pinocchio's."""
    assert model.joint_names == list(pm.names)[1:], "joint order"
    assert model.parents == [p - 1 for p in pm.parents[1:]], "parents"
    assert (model.nq, model.nv) == (pm.nq, pm.nv)
    for i, b in enumerate(model.bodies):
        jp = pm.jointPlacements[i + 1]
        assert rel_err(b.placement.R, jp.rotation) < REL_TOL, f"{b.name}: placement rotation"
        assert rel_err(b.placement.p, jp.translation) < REL_TOL, f"{b.name}: placement translation"
        assert rel_err(b.inertia.matrix(), pm.inertias[i + 1].matrix()) < REL_TOL, f"{b.name}: lumped inertia"
    assert model.frame_names == [f.name for f in pm.frames][1:], "frame order"
    for f, ref in zip(model.frames, list(pm.frames)[1:]):
        assert f.body == ref.parentJoint - 1, f"frame {f.name}: body"
        assert rel_err(f.placement.R, ref.placement.rotation) < REL_TOL, f"frame {f.name}: rotation"
        assert rel_err(f.placement.p, ref.placement.translation) < REL_TOL, f"frame {f.name}: translation"
    pd = pm.createData()
    rng = np.random.default_rng(SEED)
    for _ in range(states):
        q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        assert rel_err(gen.run(model, "rnea", q, v, a), pin.rnea(pm, pd, q, v, a)) < REL_TOL, "rnea"
        assert rel_err(gen.run(model, "aba", q, v, a), pin.aba(pm, pd, q, v, a)) < REL_TOL, "aba"
        M = pin.crba(pm, pd, q)
        assert rel_err(gen.run(model, "crba", q), np.triu(M) + np.triu(M, 1).T) < REL_TOL, "crba"


# --- conventions ----------------------------------------------------------------------

def test_rpy_is_fixed_axis_zyx():
    def rot(axis, t):
        c, s = np.cos(t), np.sin(t)
        i, j = [(1, 2), (2, 0), (0, 1)][axis]
        R = np.eye(3)
        R[i, i] = R[j, j] = c
        R[j, i], R[i, j] = s, -s
        return R
    r, p, y = 0.3, -1.1, 2.4
    assert np.allclose(rpy_matrix(r, p, y), rot(2, y) @ rot(1, p) @ rot(0, r), atol=1e-15)


def test_all_joint_types(tmp_path):
    model = load_urdf(write(tmp_path, ALL_TYPES))
    assert model.name == "t"
    assert model.joint_names == ["a_float", "f_noaxis", "i_rev", "b_rev", "d_cont", "e_pris"]
    assert [b.kind for b in model.bodies] == ["free", "revolute", "revolute", "revolute",
                                              "revolute_unb", "prismatic"]
    assert model.parents == [-1, 0, 1, -1, 3, 4]
    assert np.allclose(model.bodies[1].axis, [1, 0, 0]), "URDF default axis"
    assert np.allclose(model.bodies[4].axis, np.array([1, 1, 0]) / np.sqrt(2)), "normalised axis"
    assert np.allclose(model.bodies[5].axis, [0, -1, 0]), "normalised axis"
    assert model.frame("base").body == -1 and model.frame("tip").body == 2
    assert [model.frame(n).kind for n in ("b_rev", "c_fix", "l2")] == ["joint", "fixed_joint", "body"]


def test_all_joint_types_match_pinocchio(tmp_path, pin):
    assert_matches_pin(load_urdf(write(tmp_path, ALL_TYPES)), pin_from_xml(pin, ALL_TYPES), pin)


def test_floating_base_matches_pinocchio(tmp_path, pin):
    model = load_urdf(write(tmp_path, ALL_TYPES), floating_base=True, name="flo")
    assert model.name == "flo"
    assert model.bodies[0].name == "root_joint" and model.bodies[0].kind == "free"
    assert model.frame("base").body == 0
    assert_matches_pin(model, pin_from_xml(pin, ALL_TYPES, floating_base=True), pin)


def test_fixed_joint_merging_matches_pinocchio(tmp_path, pin):
    """A world link fixed to the base (world inertia dropped), two fixed links lumped
    into one moving body, a moving joint hanging below them."""
    xml = robot(
        '<link name="world"/>', link("base"), link("arm"), link("m1", mass=2.0, com="0.3 0 0"),
        link("m2", mass=0.7, rpy="1 2 3"), link("hand"),
        joint("world_joint", "fixed", "world", "base"),
        joint("shoulder", "revolute", "base", "arm", axis="0 1 0"),
        joint("fix1", "fixed", "arm", "m1", xyz="0.5 0 0", rpy="0 0 1.5707963267948966"),
        joint("fix2", "fixed", "m1", "m2", xyz="0 0.2 0.1", rpy="0.2 0.3 0.4"),
        joint("wrist", "revolute", "m2", "hand", axis="0 0 1"))
    model = load_urdf(write(tmp_path, xml))
    assert model.joint_names == ["shoulder", "wrist"]
    assert [model.frame(n).body for n in ("world", "world_joint", "base", "m1", "m2")] == [-1, -1, -1, 0, 0]
    assert model.bodies[0].inertia.mass == pytest.approx(1.0 + 2.0 + 0.7)
    assert_matches_pin(model, pin_from_xml(pin, xml), pin)


def test_continuous_joints_match_pinocchio(tmp_path, pin):
    xml = robot(link("base"), link("a"), link("b"), link("c"),
                joint("j1", "continuous", "base", "a", axis="0 0 1"),
                joint("j2", "continuous", "a", "b", axis="0.6 0 -0.8"),
                joint("j3", "continuous", "a", "c", axis="0 1 0"))
    model = load_urdf(write(tmp_path, xml))
    assert (model.nq, model.nv) == (6, 3)
    assert_matches_pin(model, pin_from_xml(pin, xml), pin, states=20)


def test_lock_joints_matches_reduced_model(tmp_path, pin):
    locked = ["d_cont", "f_noaxis"]
    model = load_urdf(write(tmp_path, ALL_TYPES), lock_joints=locked)
    assert "d_cont" not in model.joint_names and model.frame("d_cont").kind == "fixed_joint"
    full = pin_from_xml(pin, ALL_TYPES)
    pm = pin.buildReducedModel(full, [full.getJointId(n) for n in locked], pin.neutral(full))
    assert_matches_pin(model, pm, pin)


def test_zero_mass_moving_link_is_singular_and_lock_fixes_it(tmp_path):
    xml = robot(link("base"), link("arm"), '<link name="sensor"/>',
                joint("shoulder", "revolute", "base", "arm"),
                joint("sensor_joint", "revolute", "arm", "sensor"))
    path = write(tmp_path, xml)
    with pytest.raises(RbdgenError, match=rf"{re.escape(str(path))}: joint\(s\) 'sensor_joint' .*lock"):
        load_urdf(path)
    model = load_urdf(path, lock_joints=["sensor_joint"])
    assert model.joint_names == ["shoulder"] and model.frame("sensor").body == 0


# --- bad input: one line naming the file and the element ----------------------------

def assert_error(tmp_path, xml, pattern, **kwargs):
    path = write(tmp_path, xml)
    with pytest.raises(RbdgenError, match=re.escape(str(path)) + ".*" + pattern) as info:
        load_urdf(path, **kwargs)
    assert "\n" not in str(info.value)


def test_file_not_found(tmp_path):
    with pytest.raises(RbdgenError, match=r"missing\.urdf: URDF file not found"):
        load_urdf(tmp_path / "missing.urdf")


def test_malformed_xml(tmp_path):
    assert_error(tmp_path, '<robot name="t">\n<link name="a">\n</robot>\n', r"malformed XML.*line 3")


def test_no_robot_element(tmp_path):
    assert_error(tmp_path, '<sdf><link name="a"/></sdf>', r"root element is <sdf>, expected <robot>")


def test_no_links(tmp_path):
    assert_error(tmp_path, robot(), r"no <link>")


def test_missing_link(tmp_path):
    assert_error(tmp_path, robot(link("a"), joint("j", "revolute", "a", "ghost")),
                 r"joint 'j': child link 'ghost' is not defined")


def test_missing_parent_element(tmp_path):
    assert_error(tmp_path, robot(link("a"), '<joint name="j" type="fixed"><child link="a"/></joint>'),
                 r"joint 'j': missing <parent link=...>")


def test_link_with_two_parents(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), link("c"),
                                 joint("j1", "revolute", "a", "c"), joint("j2", "revolute", "b", "c")),
                 r"link 'c' has two parent joints, 'j1' and 'j2'")


def test_cycle_without_root(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"),
                                 joint("j1", "revolute", "a", "b"), joint("j2", "revolute", "b", "a")),
                 r"no root link: the joints form a cycle")


def test_cycle_detached_from_root(tmp_path):
    assert_error(tmp_path, robot(link("r"), link("a"), link("b"), link("c"),
                                 joint("j0", "revolute", "r", "c"),
                                 joint("j1", "revolute", "a", "b"), joint("j2", "revolute", "b", "a")),
                 r"links a, b are not reachable from root link 'r'")


def test_several_roots(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b")), r"several root links \(a, b\)")


def test_duplicate_link(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("a")), r"link 'a': defined twice")


@pytest.mark.parametrize("jtype", ["ball", "spherical", None])
def test_unsupported_joint_type(tmp_path, jtype):
    xml = robot(link("a"), link("b"), joint("j", jtype, "a", "b").replace(' type="None"', ""))
    assert_error(tmp_path, xml, rf"joint 'j': unsupported type '{jtype}' \(supported: revolute, continuous, "
                                r"prismatic, floating, planar, fixed\)")


def test_non_numeric_origin(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), joint("j", "revolute", "a", "b", xyz="1 two 3")),
                 r"joint 'j' <origin>: xyz=\"1 two 3\" is not 3 number")


def test_wrong_count_axis(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), joint("j", "revolute", "a", "b", axis="0 1")),
                 r"joint 'j' <axis>: xyz=\"0 1\" is not 3 finite number")


def test_zero_axis(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), joint("j", "revolute", "a", "b", axis="0 0 0")),
                 r"joint 'j' <axis>: zero axis")


def test_non_numeric_mass(tmp_path):
    assert_error(tmp_path, robot(link("a").replace('value="1.0"', 'value="heavy"')),
                 r"link 'a' <inertial><mass>: value=\"heavy\" is not 1 number")


def test_missing_inertia_attribute(tmp_path):
    assert_error(tmp_path, robot(link("a").replace('izz="0.2"', "")),
                 r"link 'a' <inertial><inertia>: missing attribute 'izz'")


def test_negative_mass(tmp_path):
    assert_error(tmp_path, robot(link("a", mass=-1.0)), r"link 'a' <inertial><mass>: negative mass")


def test_no_moving_joint(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), joint("j", "fixed", "a", "b")), r"no moving joint")


def test_unknown_lock_joint(tmp_path):
    assert_error(tmp_path, ALL_TYPES, r"cannot lock unknown joint 'nope' \(moving joints: b_rev, ",
                 lock_joints=["nope"])


def test_duplicate_joint(tmp_path):
    assert_error(tmp_path, robot(link("a"), link("b"), joint("j", "revolute", "a", "b"),
                                 joint("j", "fixed", "a", "b")), r"joint 'j': defined twice")


def test_missing_mass_element(tmp_path):
    assert_error(tmp_path, robot(link("a").replace('<mass value="1.0"/>', "")),
                 r"link 'a' <inertial><mass>: missing element")


# --- named robots: locating example-robot-data ------------------------------------------

def test_robots_dir_env_override(tmp_path, monkeypatch):
    (tmp_path / "ur_description" / "urdf").mkdir(parents=True)
    write(tmp_path / "ur_description" / "urdf", ALL_TYPES, "ur5_robot.urdf")
    monkeypatch.setenv(named.ROBOTS_DIR_ENV, str(tmp_path))
    assert named.robots_dir() == tmp_path
    model = named.load_named("ur5")
    assert model.name == "ur5" and model.nv == 11
    monkeypatch.setenv(named.ROBOTS_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(RbdgenError, match="RBDGEN_ROBOTS_DIR=.*nowhere is not a directory"):
        named.robots_dir()


def test_robots_dir_without_package(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.delenv(named.ROBOTS_DIR_ENV, raising=False)
    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(RbdgenError, match="pip install example-robot-data"):
        named.robots_dir()


def test_unknown_named_robot():
    with pytest.raises(RbdgenError, match="unknown named robot 'ur10' \\(choose from ur5, panda, "):
        named.load_named("ur10")
