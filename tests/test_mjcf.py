"""MJCF loading (gen/mjcf.py) against MuJoCo's own dynamics and Pinocchio's MJCF parser.

Models: Gymnasium's MuJoCo environments (shipped offline by the ``gymnasium`` package) and
two small files written here for what they lack: ball joints with anchors (``pos``), a
body with a hinge, a ball and a slide (chained through massless bodies), ``ref`` on a
hinge and a slide, a welded child body, sites, a rotated body welded to the world.

MuJoCo: ``mj_fullM`` includes ``dof_armature`` on the diagonal, rbdgen's crba does not
(armature is not rigid-body inertia, gen/mjcf.py), so the armature is subtracted;
``qfrc_bias`` is ``C(q, qvel) qvel + g`` in MuJoCo's coordinates, where a free joint's
linear velocity is in world axes: with ``qvel = T v`` (``T = diag(R, 1, ...)``), rbdgen's
``nle(q, v) = T^T (qfrc_bias + M Tdot v)`` and ``rnea(q, v, a) = T^T mj_rne(qacc = T a +
Tdot v)`` (``Tdot v = R (w x v_lin)``, :func:`gen.mjcf.acceleration_to_mujoco`).

Pinocchio 4.1's ``buildModelFromMJCF`` is compared where it reads the same model: it does
not apply ``settotalmass`` (half_cheetah), builds no inertia for swimmer's geoms, parses
only the first tree of ``<worldbody>`` (reacher, pusher), reads ``ref`` differently and
places a rotated joint-less root body differently (rbdgen follows MuJoCo in both, checked
above against MuJoCo).  Its ``armature`` is zeroed and its gravity set to ``opt.gravity``.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import gen
from gen.backend import NUMPY
from gen.errors import RbdgenError
from gen.kinematics import frame_placement

mujoco = pytest.importorskip("mujoco")
from gen.mjcf import (  # noqa: E402
    acceleration_to_mujoco,
    load_mjcf,
    q_from_mujoco,
    q_to_mujoco,
    v_from_mujoco,
    v_to_mujoco,
)

RTOL = 1e-9              # relative: max|rbdgen - ref| / max(1, max|ref|)
STATES = 3

_gym = importlib.util.find_spec("gymnasium")
GYM = Path(_gym.origin).parent / "envs" / "mujoco" / "assets" if _gym else None
GYM_MODELS = ["ant", "half_cheetah", "hopper", "humanoid", "walker2d", "inverted_double_pendulum",
              "swimmer", "reacher", "pusher"]
PIN_GYM_MODELS = ["ant", "hopper", "humanoid", "walker2d", "inverted_double_pendulum"]

BALL_ARM = """<mujoco model="{name}">
  <compiler angle="degree"/>
  <worldbody>
    <body name="base" pos="0 0 1" {base_rot}>
      {root}
      <geom type="box" size=".2 .1 .05" mass="4"/>
      <site name="base_site" pos="0.1 0 0.05" euler="0 90 0"/>
      <body name="upper" pos="0.2 0.05 0" quat="0.9 0.1 0.3 0.2">
        <joint name="shoulder" type="ball" pos="0 0 0.05"/>
        <inertial pos="0.02 0.01 -0.15" quat="0.8 0.2 0.1 0.4" mass="1.5" diaginertia="0.03 0.02 0.01"/>
        <body name="lower" pos="0 0 -0.3" euler="5 -10 20">
          <joint name="elbow" type="hinge" axis="0.3 1 0.2" pos="0 0.01 0.02" {ref_hinge}/>
          <joint name="wrist" type="ball" pos="0.01 0 -0.2"/>
          <joint name="extend" type="slide" axis="0.1 0 1" {ref_slide}/>
          <geom type="capsule" fromto="0 0 0 0 0.02 -0.25" size="0.03" mass="0.8"/>
          <site name="tip" pos="0 0 -0.25"/>
          <body name="hand" pos="0 0 -0.27" euler="0 30 0">
            <geom type="box" size="0.03 0.02 0.01" pos="0.01 0 0" mass="0.2"/>
          </body>
        </body>
      </body>
      <body name="leg" pos="-0.2 0 0">
        <joint name="hip" type="ball"/>
        <geom type="sphere" size="0.05" pos="0 0 -0.1" mass="0.5"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
LOCAL = {
    # floating, with ref on the hinge and the slide
    "ballarm": dict(base_rot='euler="10 20 30"', root='<freejoint name="root"/>',
                    ref_hinge='ref="15"', ref_slide='ref="0.05"'),
    # fixed base: a rotated body welded to the world carries the ball joints
    "ballarm_fixed": dict(base_rot='euler="10 20 30"', root="", ref_hinge='ref="15"', ref_slide='ref="0.05"'),
    # what Pinocchio's parser reads as MuJoCo does: no ref
    "ballarm_noref": dict(base_rot='euler="10 20 30"', root='<freejoint name="root"/>', ref_hinge="", ref_slide=""),
}


@pytest.fixture(autouse=True)
def _mujoco_log_elsewhere(tmp_path, monkeypatch):
    """MuJoCo appends its warnings (e.g. half_cheetah's deprecated settotalmass) to
    MUJOCO_LOG.TXT in the working directory: keep it out of the repository."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mjcf")
    for name, fields in LOCAL.items():
        (d / f"{name}.xml").write_text(BALL_ARM.format(name=name, **fields))
    return d


def model_path(name, local_dir) -> str:
    if name in LOCAL:
        return str(local_dir / f"{name}.xml")
    if GYM is None:
        pytest.skip("gymnasium (MuJoCo assets) is not installed")
    return str(GYM / f"{name}.xml")



def full_inertia(m, d) -> np.ndarray:
    """MuJoCo's dense M (armature included), as gen.mujocoref reads it."""
    import mujoco
    from gen.mujocoref import _full_inertia
    return _full_inertia(mujoco, m, d)


def velocity_map(model, q) -> np.ndarray:
    """T with MuJoCo's ``qvel = T v`` (rbdgen's v)."""
    return np.column_stack([v_to_mujoco(model, q, e) for e in np.eye(model.nv)])


@pytest.mark.parametrize("name", GYM_MODELS + ["ballarm", "ballarm_fixed"])
def test_against_mujoco(name, local_dir):
    """crba = MuJoCo's M (armature removed) and nle = its qfrc_bias, rnea = mj_rne, all
    through the velocity map T of a free joint (module docstring)."""
    path = model_path(name, local_dir)
    model = load_mjcf(path)
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    rng = np.random.default_rng(16)
    for _ in range(STATES):
        q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        d.qpos[:], d.qvel[:] = q_to_mujoco(model, q), v_to_mujoco(model, q, v)
        mujoco.mj_forward(m, d)
        T = velocity_map(model, q)
        M_mj = full_inertia(m, d) - np.diag(m.dof_armature)
        M = gen.run(model, "crba", q)
        assert rel_err(M, T.T @ M_mj @ T) < RTOL, f"{name}: crba vs MuJoCo's mj_fullM"
        drift = acceleration_to_mujoco(model, q, v, np.zeros(model.nv))
        nle_mj = T.T @ (d.qfrc_bias + M_mj @ drift)
        assert rel_err(gen.run(model, "nle", q, v).ravel(), nle_mj) < RTOL, f"{name}: nle vs MuJoCo's qfrc_bias"
        d.qacc[:] = acceleration_to_mujoco(model, q, v, a)
        tau_mj = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 1, tau_mj)
        assert rel_err(gen.run(model, "rnea", q, v, a).ravel(), T.T @ tau_mj) < RTOL, f"{name}: rnea vs mj_rne"


@pytest.mark.parametrize("name", PIN_GYM_MODELS + ["ballarm_noref"])
def test_against_pinocchio_mjcf_parser(name, local_dir):
    """rnea, crba and aba = Pinocchio's on the model of ``pinocchio.buildModelFromMJCF``
    (same q and v: Pinocchio's conventions are rbdgen's)."""
    pin = pytest.importorskip("pinocchio")
    path = model_path(name, local_dir)
    model = load_mjcf(path)
    pm = pin.buildModelFromMJCF(path)
    pm.armature[:] = 0.0
    pm.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
    pd = pm.createData()
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    rng = np.random.default_rng(16)
    for _ in range(STATES):
        q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        tau = gen.run(model, "rnea", q, v, a).ravel()
        assert rel_err(tau, pin.rnea(pm, pd, q, v, a)) < RTOL, f"{name}: rnea vs Pinocchio"
        Mp = pin.crba(pm, pd, q)
        assert rel_err(gen.run(model, "crba", q), np.triu(Mp) + np.triu(Mp, 1).T) < RTOL, f"{name}: crba vs Pinocchio"
        assert rel_err(gen.run(model, "aba", q, v, tau).ravel(), pin.aba(pm, pd, q, v, tau)) < RTOL, \
            f"{name}: aba vs Pinocchio"


def test_structure_and_frames(local_dir):
    """Joint kinds, chaining of a multi-joint body, frames of bodies, joints and sites."""
    model = load_mjcf(model_path("ballarm", local_dir))
    assert [(b.name, b.kind) for b in model.bodies] == [
        ("root", "free"), ("shoulder", "spherical"), ("elbow", "revolute"), ("wrist", "spherical"),
        ("extend", "prismatic"), ("hip", "spherical")]
    assert (model.nq, model.nv) == (7 + 4 + 1 + 4 + 1 + 4, 6 + 3 + 1 + 3 + 1 + 3)
    chain = model.bodies[2:5]
    assert [b.inertia.mass for b in chain[:2]] == [0.0, 0.0], "intermediate bodies of 'lower' are massless"
    assert chain[2].inertia.mass == pytest.approx(1.0), "'lower' carries its geom and the welded 'hand'"
    kinds = {f.name: (f.kind, model.bodies[f.body].name if f.body >= 0 else None) for f in model.frames}
    assert kinds["tip"] == ("site", "extend") and kinds["base_site"] == ("site", "root")
    assert kinds["hand"] == ("body", "extend") and kinds["world"] == ("body", None)
    assert gen.parse_constraints(model, "6D:tip,3D:base_site").m == 9


def test_site_placement_matches_mujoco(local_dir):
    """A site's world position from rbdgen's frame placement = MuJoCo's site_xpos."""
    path = model_path("ballarm", local_dir)
    model = load_mjcf(path)
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    q = model.random_q(np.random.default_rng(3))
    d.qpos[:] = q_to_mujoco(model, q)
    mujoco.mj_kinematics(m, d)
    for s in range(m.nsite):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s)
        R, p = frame_placement(model, name, q.reshape(-1, 1), be=NUMPY)
        assert np.allclose(p.ravel(), d.site_xpos[s], rtol=0, atol=1e-12), name
        assert np.allclose(R, d.site_xmat[s].reshape(3, 3), rtol=0, atol=1e-12), name


def test_coordinate_conversions(local_dir):
    model = load_mjcf(model_path("ballarm", local_dir))
    rng = np.random.default_rng(1)
    q, v = model.random_q(rng), rng.normal(size=model.nv)
    qpos = q_to_mujoco(model, q)
    assert np.array_equal(qpos[3:7], np.roll(q[3:7], 1)), "free quaternion [w x y z] in MuJoCo"
    assert np.array_equal(qpos[7:11], np.roll(q[7:11], 1)), "ball quaternion [w x y z] in MuJoCo"
    assert np.array_equal(q_from_mujoco(model, qpos), q)
    assert np.allclose(v_from_mujoco(model, q, v_to_mujoco(model, q, v)), v, rtol=0, atol=1e-15)
    assert np.array_equal(v_to_mujoco(model, q, v)[3:], v[3:])


def test_compiled_c_equals_numpy(local_dir, tmp_path):
    """gen.build on an MJCF robot with free, ball, hinge and slide joints: C = NumPy."""
    model = load_mjcf(model_path("ballarm", local_dir))
    kernel = gen.build(model, "aba", cache=str(tmp_path))
    rng = np.random.default_rng(2)
    for _ in range(STATES):
        q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        ref = gen.run(model, "aba", q, v, tau)
        assert rel_err(kernel(q, v, tau), ref) < 1e-12


def test_load_robot_and_refusals(local_dir, tmp_path):
    path = model_path("ballarm", local_dir)
    assert gen.load_robot(path).nv == 17
    with pytest.raises(RbdgenError, match="apply to URDF"):
        gen.load_robot(path, floating_base=True)
    with pytest.raises(RbdgenError, match="not found"):
        load_mjcf(str(tmp_path / "missing.xml"))
    eq = tmp_path / "eq.xml"
    eq.write_text('<mujoco><worldbody><body name="a"><joint name="j" type="hinge"/><geom size=".1"/></body>'
                  '<body name="b"><joint name="k" type="hinge"/><geom size=".1"/></body></worldbody>'
                  '<equality><connect name="link" body1="a" body2="b" anchor="0 0 0"/></equality></mujoco>')
    with pytest.raises(RbdgenError, match=r"1 equality constraint\(s\) .*: connect 'link' \(give it as 3D:A~B"):
        load_mjcf(str(eq))
    nested = tmp_path / "nested.xml"
    nested.write_text('<mujoco><worldbody><body name="a"><joint type="hinge"/><geom size=".1"/>'
                      '<body name="b"><joint type="ball"/><joint name="h" type="slide" axis="0 1 0"/>'
                      '<geom size=".1" pos=".2 0 0"/></body></body></worldbody></mujoco>')
    model = load_mjcf(str(nested))
    assert [b.name for b in model.bodies] == ["a_joint0", "b_joint0", "h"], "names of unnamed joints"


def test_cli_bad_mjcf_one_line(tmp_path):
    """A file MuJoCo's compiler rejects: exit 2, one line naming the file, no traceback."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<mujoco><worldbody><body><joint type="hinge" axis="0 0"/></body></worldbody></mujoco>')
    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "gen.cli", "opcount", str(bad), "-a", "rnea"],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(bad) in lines[0] and "MuJoCo's compiler" in lines[0]


def test_cli_opcount_mjcf(local_dir, capsys):
    from gen.cli import main
    assert main(["opcount", model_path("ballarm", local_dir), "-a", "crba", "--format", "csv"]) == 0
    assert "crba" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_builds_and_verifies_every_algorithm_on_mjcf(local_dir, capsys):
    """Issue 16's "a user loads an MJCF robot and builds every algorithm on it": ``rbdgen
    verify`` on the floating ball-joint arm, every registered algorithm (constrained ones
    with a 6D site weld and a 3D site point), compiled C against NumPy and Pinocchio
    where it has the algorithm, within the registry's tolerances."""
    from gen.algorithms import ALGORITHMS
    from gen.cli import main
    import json
    assert main(["verify", model_path("ballarm", local_dir), "-a", "all", "-c", "3D:tip,6D:base_site",
                 "--quiet", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert [r["algorithm"] for r in json.loads(out) if r["status"] == "ok"] == list(ALGORITHMS), out


# --- issue 32: MJCF as MuJoCo computes it -----------------------------------------------------

PENDULUM = """<mujoco{model}>
  <option gravity="0.5 -1 -9.81">{flag}</option>
  <worldbody>
    <body name="link1" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.3" armature="0.02"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
      <body name="link2" pos="0.4 0 0">
        <joint name="j2" type="slide" axis="1 0 0.2" stiffness="5"/>
        <geom type="box" size="0.1 0.05 0.05" pos="0.1 0 0" mass="0.7"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
GRAVITY_RTOL = 1e-12    # nle against qfrc_bias: the same products, a few ulps apart


def _bias_mujoco(path, q, v):
    """MuJoCo's qfrc_bias at (q, v) for a model of hinges and slides (q, v unchanged)."""
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, v
    mujoco.mj_forward(m, d)
    return d.qfrc_bias.copy()


def test_gravity_flag_disable(tmp_path):
    """``<flag gravity="disable"/>``: the model's gravity is zero, nle equals MuJoCo's
    qfrc_bias of that file, and differs from the gravity-on file's (which equals its own)."""
    off, on = tmp_path / "off.xml", tmp_path / "on.xml"
    off.write_text(PENDULUM.format(model="", flag='<flag gravity="disable"/>'))
    on.write_text(PENDULUM.format(model="", flag=""))
    m_off, m_on = load_mjcf(off), load_mjcf(on)
    assert np.array_equal(m_off.gravity, np.zeros(3)) and np.array_equal(m_on.gravity, [0.5, -1, -9.81])
    rng = np.random.default_rng(32)
    q, v = m_off.random_q(rng), rng.normal(size=m_off.nv)
    nle_off, nle_on = gen.run(m_off, "nle", q, v), gen.run(m_on, "nle", q, v)
    assert rel_err(nle_off, _bias_mujoco(off, q, v)) < GRAVITY_RTOL, "nle vs qfrc_bias, gravity disabled"
    assert rel_err(nle_on, _bias_mujoco(on, q, v)) < GRAVITY_RTOL, "nle vs qfrc_bias, gravity on"
    assert rel_err(nle_off, nle_on) > 0.1, "the flag changes the bias force"


def test_model_named_after_the_file(tmp_path):
    """No ``model`` attribute: MuJoCo calls it "MuJoCo Model", rbdgen the file's stem, so two
    such files get different kernel symbols; ``model="..."`` is kept."""
    from gen.emit import symbol_prefix
    a, b, named = tmp_path / "left_arm.xml", tmp_path / "right_arm.xml", tmp_path / "c.xml"
    a.write_text(PENDULUM.format(model="", flag=""))
    b.write_text(PENDULUM.format(model="", flag=""))
    named.write_text(PENDULUM.format(model=' model="pendulum"', flag=""))
    m = mujoco.MjModel.from_xml_path(str(a))
    assert bytes(m.names).split(b"\0")[0] == b"MuJoCo Model", "MuJoCo's own name of such a file"
    assert [load_mjcf(p).name for p in (a, b, named)] == ["left_arm", "right_arm", "pendulum"]
    assert symbol_prefix(load_mjcf(a).name, "aba") != symbol_prefix(load_mjcf(b).name, "aba")


CLASH = """<mujoco model="clash">
  <worldbody>
    <body name="torso" pos="0 0 1" euler="0.1 0.2 0.3">
      <freejoint name="root"/>
      <geom type="box" size=".2 .1 .05" mass="4"/>
      <site name="torso" pos="0.1 0 0.05" euler="0.3 0 0"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="arm" type="hinge" axis="0 1 0" pos="0.01 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
        <site name="hand" pos="0 0 -0.3"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_qualified_frame_names(tmp_path):
    """A body and a site named ``torso`` (as in dm_control's humanoid): the plain name is
    refused naming both qualified spellings; ``body:torso``, ``site:torso``, ``joint:arm``
    select one each, at MuJoCo's placement; specs round-trip; unique names stay plain."""
    from gen.constraint_spec import spec_names
    path = tmp_path / "clash.xml"
    path.write_text(CLASH)
    model = load_mjcf(path)
    with pytest.raises(RbdgenError, match=r"'torso' is ambiguous .*; write body:torso or site:torso$"):
        gen.parse_constraints(model, "6D:torso")
    with pytest.raises(RbdgenError, match="write joint:arm or body:arm"):
        gen.parse_constraints(model, "3D:arm")
    cset = gen.parse_constraints(model, "6D:site:torso,3D:body:arm~site:torso,6D:joint:arm,3D:hand")
    assert cset.spec == "6D:site:torso,3D:body:arm~site:torso,6D:joint:arm,3D:hand"
    assert gen.parse_constraints(model, cset.spec).spec == cset.spec, "the spec selects the same frames again"
    assert cset.m == 6 + 3 + 6 + 3
    with pytest.raises(RbdgenError, match="unknown frame 'site:arm'"):
        gen.parse_constraints(model, "6D:site:arm")
    names = dict(zip(spec_names(model), [f.kind for f in model.frames]))
    assert names == {"world": "body", "root": "joint", "body:torso": "body", "joint:arm": "joint",
                     "body:arm": "body", "site:torso": "site", "hand": "site"}
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    q = model.random_q(np.random.default_rng(5))
    d.qpos[:] = q_to_mujoco(model, q)
    mujoco.mj_kinematics(m, d)
    for name, pos, mat in (("site:torso", d.site_xpos[0], d.site_xmat[0]), ("body:torso", d.xpos[1], d.xmat[1]),
                           ("body:arm", d.xpos[2], d.xmat[2])):
        R, p = frame_placement(model, name, q.reshape(-1, 1), be=NUMPY)
        assert np.allclose(p.ravel(), pos, rtol=0, atol=1e-12), name
        assert np.allclose(R, mat.reshape(3, 3), rtol=0, atol=1e-12), name


def test_qualified_names_on_other_robots():
    """Robots without clashes keep their plain names; a qualified name selects the same
    frame and is stored plain, so the kernel (its symbol) is the same."""
    model = gen.load_robot("humanoid30")
    assert gen.parse_constraints(model, "6D:body:torso,3D:left_foot").spec == "6D:torso,3D:left_foot"
    assert gen.parse_constraints(model, "6D:joint:root_joint").spec == "6D:root_joint"
    from gen.constraint_spec import spec_names
    assert spec_names(model) == model.frame_names


EQUALITIES = """<mujoco model="eq">
  <option>{flag}</option>
  <worldbody>
    <body name="a"><joint name="ja" type="hinge"/><geom size=".1"/><site name="sa" pos=".1 0 0"/></body>
    <body name="b" pos="0 .5 0"><joint name="jb" type="hinge"/><geom size=".1"/><site name="sb"/></body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="ja" coef="1"/><joint joint="jb" coef="-1"/></fixed></tendon>
  <equality>
    <connect name="c" body1="a" body2="b" anchor="0 0 0"/>
    <weld name="w" site1="sa" site2="sb"/>
    <joint name="j" joint1="ja" joint2="jb"/>
    <tendon name="tt" tendon1="t"/>
    <weld name="off" body1="b" active="false"/>
    <connect body1="b" anchor="0 0 0"/>
  </equality>
</mujoco>
"""


def test_equality_refusal_names_types_and_remedies(tmp_path):
    """Each active equality named with its type and only the remedy that applies: a loop
    closure for connect (3D) and weld (6D, exact between sites), none for joint and tendon;
    an inactive one is not listed; with the equality flag disabled the file loads."""
    path = tmp_path / "eq.xml"
    path.write_text(EQUALITIES.format(flag=""))
    with pytest.raises(RbdgenError) as e:
        load_mjcf(path)
    msg = str(e.value)
    assert "\n" not in msg and "5 equality constraint(s)" in msg
    assert "connect 'c' (give it as 3D:A~B with frames A on body 'a' and B on body 'b' at the anchor)" in msg
    assert "weld 'w' (give it as 6D:site:sa~site:sb)" in msg
    assert "joint 'j' (no rbdgen equivalent)" in msg and "tendon 'tt' (no rbdgen equivalent)" in msg
    assert "connect '#5' (give it as 3D:A with a frame A on body 'b' at the anchor)" in msg
    assert "'off'" not in msg, "an inactive equality changes nothing"
    for flag in ('<flag equality="disable"/>', '<flag constraint="disable"/>'):
        path.write_text(EQUALITIES.format(flag=flag))
        assert load_mjcf(path).nv == 2


def test_mujoco_warnings_not_logged(tmp_path):
    """A compiler warning becomes a Python warning; no MUJOCO_LOG.TXT in the working
    directory (MuJoCo's default handler appends there)."""
    from gen.mjcf import mujoco_warnings
    path = tmp_path / "total.xml"
    path.write_text(PENDULUM.format(model="", flag="").replace("<option", '<compiler settotalmass="3"/><option'))
    with mujoco_warnings() as said:
        mujoco.MjModel.from_xml_path(str(path))
    if not said:
        pytest.skip(f"MuJoCo {mujoco.__version__} does not warn about settotalmass")
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    with pytest.warns(UserWarning, match="settotalmass"):
        model = load_mjcf(path)
    assert sum(b.inertia.mass for b in model.bodies) == pytest.approx(3.0)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists(), "the log file left in the working directory"
