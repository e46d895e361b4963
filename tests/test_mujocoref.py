"""gen/mujocoref.py: MuJoCo's own computation as the reference of MJCF models, and the
bench's MuJoCo peer (gen/bench/peers/mujoco.py) on a model with armature.

The reference must equal rbdgen's NumPy path and compiled kernels on Gymnasium's models
and on a small file with every joint kind and everything rbdgen leaves out of the
rigid-body equations (armature, damping, stiffness, friction loss, limits, contacts,
actuators, gravity compensation, fluid forces); the same file through MuJoCo without
:func:`gen.mujocoref.prepare` must not (so the comparison can fail).
"""
import importlib.util
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import rel_err

import gen
from gen.algorithms import ALGORITHMS

mujoco = pytest.importorskip("mujoco")
from gen import mujocoref  # noqa: E402
from gen.mjcf import acceleration_to_mujoco, load_mjcf, q_from_mujoco, q_to_mujoco  # noqa: E402

# Products (rnea, nle, crba) are the same sums in another order: a few hundred ulps.
PRODUCT_RTOL = 1e-12
# Solves (aba, crba_solve, minv) lose eps * cond(M): cond(M) reaches 4e5 on Gymnasium's
# humanoid (random q), 8e-11; measured at most 6e-13.
SOLVE_RTOL = 1e-10
#: the registry rows with a MuJoCo reference
WITH_MUJOCO = [name for name, row in ALGORITHMS.items() if row.mujoco_ref is not None]
STATES = 3

_gym = importlib.util.find_spec("gymnasium")
GYM = Path(_gym.origin).parent / "envs" / "mujoco" / "assets" if _gym else None
GYM_MODELS = ["ant", "half_cheetah", "hopper", "humanoid", "walker2d", "inverted_double_pendulum", "swimmer",
              "reacher", "pusher"]

# free, ball, hinge and slide joints, a site, and everything rbdgen leaves out of M qacc + b = tau
EXTRAS = """<mujoco>
  <option density="1.2" viscosity="0.01" wind="1 0 0" integrator="implicitfast"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="base" pos="0 0 0.05" euler="10 20 30" gravcomp="0.3">
      <freejoint name="root"/>
      <geom type="box" size=".2 .1 .05" mass="4"/>
      <body name="upper" pos="0.2 0.05 0" quat="0.9 0.1 0.3 0.2">
        <joint name="shoulder" type="ball" pos="0 0 0.05" damping="0.2" armature="0.05" stiffness="3"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1.5"/>
        <body name="lower" pos="0 0 -0.3">
          <joint name="elbow" type="hinge" axis="0.3 1 0.2" range="-1 1" damping="0.4" armature="0.1"
                 frictionloss="0.5" stiffness="2" springref="0.3"/>
          <joint name="extend" type="slide" axis="0.1 0 1" armature="0.3" damping="1"/>
          <geom type="capsule" fromto="0 0 0 0 0.02 -0.25" size="0.03" mass="0.8"/>
          <site name="tip" pos="0 0 -0.25"/>
        </body>
      </body>
    </body>
    <body name="cart" pos="0 1 0.2">
      <joint name="rail" type="slide" axis="1 0 0" armature="0.5" damping="0.7"/>
      <geom type="box" size=".1 .1 .1" mass="2"/>
    </body>
  </worldbody>
  <actuator><motor joint="elbow" gear="3"/><position joint="rail" kp="10"/></actuator>
</mujoco>
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Run in a fresh folder, where a MUJOCO_LOG.TXT would show."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def extras(tmp_path_factory):
    path = tmp_path_factory.mktemp("mujocoref") / "extras.xml"
    path.write_text(EXTRAS)
    return str(path)


def gym(name) -> str:
    if GYM is None:
        pytest.skip("gymnasium (MuJoCo assets) is not installed")
    return str(GYM / f"{name}.xml")


def rtol(algorithm) -> float:
    return SOLVE_RTOL if mujocoref.solves(algorithm) else PRODUCT_RTOL


def inputs(model, algorithm, rng):
    """Random inputs of the row: a configuration, then normal vectors."""
    sizes = ALGORITHMS[algorithm].inputs(model, None)
    return [model.random_q(rng)] + [rng.normal(size=n) for _, n in sizes[1:]]


@pytest.mark.parametrize("name", GYM_MODELS + ["extras"])
def test_reference_equals_numpy(name, extras):
    """Every algorithm with a MuJoCo reference: MuJoCo's value in rbdgen's conventions =
    rbdgen's NumPy value, free joints, armature and passive forces included."""
    path = extras if name == "extras" else gym(name)
    model = gen.load_robot(path)
    rng = np.random.default_rng(32)
    assert {"rnea", "nle", "crba", "aba", "crba_solve", "minv"} <= set(WITH_MUJOCO)
    for algorithm in WITH_MUJOCO:
        assert mujocoref.supports(model, algorithm)
        for _ in range(STATES):
            xs = inputs(model, algorithm, rng)
            err = rel_err(mujocoref.reference(model, algorithm, *xs), gen.run(model, algorithm, *xs))
            assert err < rtol(algorithm), f"{name} {algorithm}: {err:.1e} against MuJoCo"
    assert not (Path.cwd() / "MUJOCO_LOG.TXT").exists()


def test_unprepared_mujoco_differs(extras):
    """The same file without prepare(): MuJoCo's M is the reference's plus the armature,
    and its qacc has the passive, actuator and constraint forces, so it is not rbdgen's."""
    model = load_mjcf(extras)
    m = mujoco.MjModel.from_xml_path(extras)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    T = mujocoref._velocity_map(model, q)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q_to_mujoco(model, q), T @ v, 1.0
    d.qfrc_applied[:] = T @ tau
    mujoco.mj_forward(m, d)
    M = T @ mujocoref.reference(model, "crba", q) @ T.T
    assert rel_err(mujocoref._full_inertia(mujoco, m, d), M + np.diag(m.dof_armature)) < PRODUCT_RTOL
    assert np.linalg.norm(d.qfrc_passive) > 0.1 and np.linalg.norm(d.qfrc_actuator) > 0.1
    qacc = T @ mujocoref.reference(model, "aba", q, v, tau) + acceleration_to_mujoco(model, q, v, np.zeros(model.nv))
    assert rel_err(d.qacc, qacc) > 1e-2, "unprepared, MuJoCo's qacc is not the rigid-body one"


def test_prepared_model_cached_and_set_const(extras):
    """One prepared MjModel per file, recompiled when the file changes; mj_setConst ran
    after the zeroing: dof_M0 is the diagonal of the rigid-body M at qpos0 (the cart, a
    "simple" dof hanging from the world, takes it from there)."""
    model = load_mjcf(extras)
    m, d = mujocoref.mujoco_model(model)
    assert mujocoref.mujoco_model(model)[0] is m
    assert not m.dof_armature.any() and not m.dof_damping.any() and not m.jnt_stiffness.any()
    q0 = q_from_mujoco(model, m.qpos0)
    T = mujocoref._velocity_map(model, q0)
    M0 = T @ gen.run(model, "crba", q0) @ T.T
    assert rel_err(m.dof_M0, np.diag(M0)) < PRODUCT_RTOL, "dof_M0 without the armature"
    os.utime(extras, ns=(1, 1))
    assert mujocoref.mujoco_model(model)[0] is not m, "a changed file is compiled again"


def test_gravity_disabled_reference(tmp_path):
    """MuJoCo's bias force with <flag gravity="disable"/> is rbdgen's nle, as with gravity."""
    path = tmp_path / "nograv.xml"
    path.write_text(EXTRAS.replace("<option ", '<option gravity="1 2 -3" ').replace(
        'integrator="implicitfast"/>', 'integrator="implicitfast"><flag gravity="disable"/></option>'))
    model = gen.load_robot(str(path))
    assert not model.gravity.any()
    rng = np.random.default_rng(3)
    q, v = model.random_q(rng), rng.normal(size=model.nv)
    assert rel_err(mujocoref.reference(model, "nle", q, v), gen.run(model, "nle", q, v)) < PRODUCT_RTOL


def test_supports():
    """A reference only for MJCF models, the listed algorithms, and no constraints."""
    hopper = gen.load_robot(gym("hopper"))
    assert mujocoref.supports(hopper, "aba") and not mujocoref.supports(hopper, "ltdl")
    assert not mujocoref.supports(hopper, "prox_ltl", "3D:foot")
    assert mujocoref.reference(hopper, "delassus", hopper.neutral()) is None
    assert not mujocoref.supports(gen.load_robot("chain:3"), "aba")


@pytest.mark.parametrize("name, algorithm", [("hopper", "aba"), ("ant", "crba"), ("ant", "nle"), ("walker2d", "rnea")])
def test_compiled_kernel_equals_mujoco(name, algorithm):
    """The compiled C kernel against MuJoCo directly (what ``rbdgen verify`` reports as its
    MuJoCo column)."""
    model = gen.load_robot(gym(name))
    kernel = gen.build(model, algorithm)
    rng = np.random.default_rng(7)
    for _ in range(STATES):
        xs = inputs(model, algorithm, rng)
        err = rel_err(kernel(*xs), mujocoref.reference(model, algorithm, *xs))
        assert err < rtol(algorithm), f"{name} {algorithm}: C against MuJoCo {err:.1e}"


# --- the bench's MuJoCo peer -------------------------------------------------------------------

SLIDER = """<mujoco model="armature_slider">
  <compiler settotalmass="2.3"/>
  <worldbody>
    <body name="cart">
      <joint name="slide" type="slide" axis="1 0 0" armature="0.5"/>
      <geom type="box" size=".1 .1 .1" mass="2"/>
    </body>
    <body name="arm" pos="0 1 0">
      <joint name="hinge" type="hinge" axis="0 1 0" armature="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02" mass="0.3"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_bench_peer_armature_slider(tmp_path):
    """A slider with armature, child of the world (a "simple" dof, M's diagonal from
    dof_M0): MuJoCo's CRBA + solve agrees with the specialised C once the peer calls
    mj_setConst after zeroing the armature (2.6e-3 apart before); MuJoCo's messages (here
    settotalmass's deprecation, where MuJoCo has it) leave no MUJOCO_LOG.TXT in the working
    directory."""
    from gen.bench import harness
    path = tmp_path / "slider.xml"
    path.write_text(SLIDER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = harness.benchmark(str(path), "crba_solve", against=("mujoco",), n_states=8, rounds=3, batch=10,
                              warmup=10, seed=0)
    assert r["verify"]["max_rel_diff"]["mujoco"] <= 1e-12
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
