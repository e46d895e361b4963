"""Issue 12 §3 and §5: verify's Pinocchio reference is built from the same file with the
same options, and physically invalid inertias are refused naming the link."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import HAVE_PIN, HAVE_ROBOTS, rel_err
from test_urdf import joint, link, robot, write

import gen
from gen import pinref
from gen.cli import main
from gen.errors import RbdgenError
from gen.robots.named import robots_dir

needs_robots_and_pin = pytest.mark.skipif(not (HAVE_ROBOTS and HAVE_PIN), reason="needs example-robot-data and pin")

REL_TOL = 1e-9
#: example-robot-data files whose <robot name> is a named robot's (or close to one) but
#: whose model is not that robot's: verify used to compare them with the named model
FILES = ["panda_description/urdf/panda.urdf", "go1_description/urdf/go1.urdf",
         "talos_data/robots/talos_left_arm.urdf", "ur_description/urdf/ur5_gripper.urdf",
         "talos_data/robots/talos_reduced.urdf"]


@needs_robots_and_pin
@pytest.mark.parametrize("rel", FILES)
@pytest.mark.parametrize("floating", [False, True])
def test_reference_is_built_from_the_same_file(rel, floating):
    model = gen.load_robot(str(robots_dir() / rel), floating_base=floating)
    pm = pinref.pin_model(model)
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    rng = np.random.default_rng(3)
    q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    for alg, xs in (("rnea", (q, v, a)), ("crba", (q,)), ("aba", (q, v, a))):
        err = rel_err(gen.run(model, alg, *xs), pinref.reference(model, alg, *xs, pmodel=pm))
        assert err < REL_TOL, f"{rel} floating={floating}: {alg} vs Pinocchio {err:.1e}"


@needs_robots_and_pin
def test_locked_joints_reach_the_reference():
    path = str(robots_dir() / FILES[0])
    fingers = ("panda_finger_joint1", "panda_finger_joint2")
    model = gen.load_robot(path, lock_joints=fingers)
    assert model.locked == fingers and pinref.pin_model(model).nv == model.nv == 7


@needs_robots_and_pin
def test_cli_verify_with_lock_and_floating_base(capsys):
    path = str(robots_dir() / FILES[0])
    rc = main(["verify", path, "--lock", "panda_finger_joint1,panda_finger_joint2", "--floating-base",
               "-a", "crba", "--samples", "2", "-q", "--format", "csv"])
    out, err = capsys.readouterr()
    assert rc == 0 and "PASS" in err, err
    assert main(["robots", "--frames", path, "--floating-base", "--format", "csv"]) == 0
    assert "root_joint" in capsys.readouterr().out


def test_lock_and_floating_base_apply_to_files_only(capsys):
    assert main(["opcount", "solo12", "--lock", "FL_KFE"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apply to URDF paths" in err


# --- physically invalid inertias (§5) --------------------------------------------------------

@pytest.mark.parametrize("mass, diag, words", [
    (1.0, (0.3, 0.25, -1.0), "not positive semi-definite"),
    (1.0, (0.1, 0.1, 0.5), "violate the triangle inequality"),
    (-1.0, (0.3, 0.25, 0.2), "negative mass -1"),
    (0.0, (0.3, 0.25, 0.2), "mass 0 but rotational inertia"),
])
def test_invalid_inertia_is_refused_naming_the_link(tmp_path, capsys, mass, diag, words):
    xml = robot(link("base"), link("upper_arm", mass=mass, diag=diag),
                joint("shoulder", "revolute", "base", "upper_arm", axis="0 0 1"))
    path = write(tmp_path, xml)
    with pytest.raises(RbdgenError, match=f"link 'upper_arm'.*{words}"):
        gen.load_robot(str(path))
    assert main(["opcount", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "upper_arm" in err and "Traceback" not in err


def test_inertia_merged_from_fixed_links_is_checked_as_one_body(tmp_path):
    """A fixed link whose own moments violate the triangle inequality (cameras in real
    URDFs) is fine once lumped with its parent: the check is on the moving body."""
    xml = robot(link("base"), link("arm"), link("camera", diag=(1e-5, 1e-5, 1e-3)),
                joint("shoulder", "revolute", "base", "arm", axis="0 1 0"),
                joint("camera_mount", "fixed", "arm", "camera"))
    assert gen.load_robot(str(write(tmp_path, xml))).nv == 1


def test_massless_link_between_two_joints_is_accepted(tmp_path):
    """Two revolute joints through a massless, inertia-free link (a universal joint)."""
    xml = robot(link("base"), '<link name="cross"/>', link("leg"),
                joint("hip_x", "revolute", "base", "cross", axis="1 0 0"),
                joint("hip_y", "revolute", "cross", "leg", axis="0 1 0"))
    model = gen.load_robot(str(write(tmp_path, xml)))
    M = gen.run(model, "crba", model.random_q(np.random.default_rng(0)))
    assert np.all(np.linalg.eigvalsh(M) > 0)


def test_cli_lock_fixes_a_massless_subtree(tmp_path, capsys):
    xml = robot(link("base"), link("arm"), '<link name="sensor"/>',
                joint("shoulder", "revolute", "base", "arm", axis="0 0 1"),
                joint("sensor_joint", "revolute", "arm", "sensor", axis="0 0 1"))
    path = str(write(tmp_path, xml))
    assert main(["opcount", path, "-a", "aba"]) == 2
    assert "--lock" in capsys.readouterr().err
    assert main(["opcount", path, "-a", "aba", "--lock", "sensor_joint", "--format", "csv"]) == 0
