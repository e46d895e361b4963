"""gen.canonical_frames: the body frames the trace is made in (modified Denavit-Hartenberg)
change no value.  Every registered row, NumPy backend, on the original model and on the
transformed one (its constraint set mapped by ``gen.canonical_frames.constraints``, as the
trace maps it) at the same random state: icub, anymal_c, talos and a random tree with
every joint kind and two mimic joints.  Compiled kernels (traced in the new frames, the
default) against Pinocchio, and against NumPy on the original model for the mimic tree.
The rules themselves: axes turned to +z, frames of free / spherical / planar joints and of
traced placements kept, the placement rotations sparser, angle offsets where they apply."""
import dataclasses

import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, row_floor
from random_trees import ALL_KINDS, random_tree

import gen
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.canonical_frames import OFFSET_KINDS, REFRAMABLE, apply, canonical, choose, nontrivial, zxz
from gen.codegen.config import CodegenConfig
from gen.errors import RbdgenError
from gen.kinematics import body_placements
from gen.model import Body, Mimic, Model
from gen.spatial import compose, snap
from gen.trace import operations, trace
from gen.verify import passed, random_inputs, relerr, verify_kernel

#: the transformed model's constants are products of the original ones with rotations
#: (a few ulps each); the algorithms then round differently, as C and NumPy do: a row's
#: own rounding floor at the state (conftest.row_floor) where larger than this
ROUNDING = 1e-12
#: compiled kernel against Pinocchio / NumPy: gen verify's tolerance (gen.verify.passed,
#: floored by each row's conditioning)
VERIFY_RTOL = 1e-9

#: the contacts of the constrained rows: a 6D sole and a 3D one (a point on each side)
CONTACTS = {"icub": "6D:l_sole,3D:r_sole", "anymal_c": "3D:LF_FOOT,3D:RH_FOOT",
            "talos": "6D:left_sole_link,3D:right_sole_link", "every_kind_mimic": "6D:tip3,3D:tip9~tip6"}


def every_kind_mimic() -> Model:
    """A random tree of every joint kind (free-flyer root, free, spherical, planar,
    helical, revolute about random and coordinate axes, revolute_unb, prismatic) with a
    revolute and a prismatic joint turned into mimics of earlier joints."""
    base = random_tree(14, 0, kinds=ALL_KINDS)
    rng = np.random.default_rng(7)
    bodies = list(base.bodies)
    for b in bodies:
        if b.kind == "helical":
            b.pitch = float(rng.uniform(-0.5, 0.5))
    for kind in ("revolute", "prismatic"):
        i = max(k for k, b in enumerate(bodies) if b.kind == kind)
        prim = next(k for k, b in enumerate(bodies) if k < i and b.kind in ("revolute", "prismatic")
                    and b.mimic is None)
        bodies[i] = dataclasses.replace(bodies[i], mimic=Mimic(prim, float(rng.uniform(-2, 2)),
                                                                float(rng.uniform(-0.5, 0.5))))
    model = Model("every_kind_mimic", bodies, base.frames, source="random tree of every kind with mimics")
    assert model.has_mimic and {b.kind for b in model.bodies} == set(ALL_KINDS)
    return model


def _model(name):
    return every_kind_mimic() if name == "every_kind_mimic" else load_or_skip(name)


MODELS = ("icub", "anymal_c", "talos", "every_kind_mimic")


@pytest.fixture(scope="module", params=MODELS)
def pair(request):
    """(name, original, transformed, constraint set on each)."""
    model = _model(request.param)
    cset = ALGORITHMS["prox_ltl"].constraint_set(model, CONTACTS[request.param])
    moved, moved_cset, _ = canonical(model, cset)
    return request.param, model, moved, cset, moved_cset


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_every_row_gives_the_same_values(pair, algorithm):
    name, model, moved, cset, moved_cset = pair
    row = ALGORITHMS[algorithm]
    if name == "talos" and algorithm in ("rnea_second_order", "aba_hessian_product"):
        pytest.skip("the second-order rows in NumPy on talos take minutes; icub and anymal_c cover them")
    rng = np.random.default_rng(5)
    ins = random_inputs(model, algorithm, rng, cset if row.constrained else None)
    given = {"constraints": cset} if row.constrained else {}
    try:
        ref = gen.run(model, algorithm, *ins, **given)
    except RbdgenError as e:                     # a row that refuses the model refuses both
        with pytest.raises(RbdgenError) as again:
            gen.run(moved, algorithm, *ins, **({"constraints": moved_cset} if row.constrained else {}))
        assert str(again.value) == str(e)
        return
    got = gen.run(moved, algorithm, *ins, **({"constraints": moved_cset} if row.constrained else {}))
    tol = row_floor(algorithm, model, cset if row.constrained else None, ins[0], tol=ROUNDING)
    err = relerr(got, ref)
    assert err <= tol, f"{name} {algorithm}: {err:.1e} between the frames (tolerance {tol:.1e})"


def test_every_frame_has_the_same_world_placement(pair):
    _, model, moved, _, _ = pair
    q = NUMPY.asarray(model.random_q(np.random.default_rng(2)))
    bodies0, bodies1 = body_placements(model, q, NUMPY), body_placements(moved, q, NUMPY)
    for f, g in zip(model.frames, moved.frames):
        assert (f.name, f.body, f.kind) == (g.name, g.body, g.kind)
        R0, p0 = _world(bodies0, f)
        R1, p1 = _world(bodies1, g)
        assert np.max(np.abs(np.asarray(R1) - np.asarray(R0))) <= ROUNDING, f.name
        assert np.max(np.abs(np.asarray(p1) - np.asarray(p0))) <= ROUNDING * max(1.0, np.abs(p0).max()), f.name


def _world(oM, f):
    iMf = (f.placement.R, f.placement.p.reshape(3, 1))
    return iMf if f.body < 0 else compose(oM[f.body], iMf)


def test_the_rules(pair):
    """Axes +z, kept frames where the rule does not apply, offsets only where they may, and
    fewer non-trivial rotation entries (talos': its six are already x-rotations by
    pi - 9.8e-12 between parallel-axis joints, as sparse as a rotation gets)."""
    name, model, moved, _, _ = pair
    choice = choose(model)
    before = after = 0
    for i, (b, m) in enumerate(zip(model.bodies, moved.bodies)):
        if b.kind in REFRAMABLE:
            assert np.array_equal(m.axis, [0.0, 0.0, 1.0]), b.name
        else:
            assert np.array_equal(choice.G[i], np.eye(3)), f"{b.name} ({b.kind}) keeps its frame"
            assert np.array_equal(m.placement.R, b.placement.R) or b.parent >= 0, b.name
        if b.kind not in OFFSET_KINDS:
            assert choice.theta[i] == 0.0 and m.angle_offset == 0.0, b.name
        if b.mimic is not None:
            assert m.angle_offset == 0.0 and m.mimic.offset == pytest.approx(b.mimic.offset + choice.theta[i])
        before += nontrivial(snap(b.placement.R))
        after += nontrivial(snap(m.placement.R))
    assert after < before if name != "talos" else after <= before, \
        f"{name}: {after} non-trivial rotation entries, {before} before"   # talos' are Rx(alpha) already


def test_two_revolute_joints_in_a_chain_become_an_x_rotation():
    """The modified DH case: child and grandchild of a revolute joint, axes and placement
    general: the grandchild's placement rotation is ``Rx(alpha)`` with alpha the angle
    between the two axes, and the angle offsets carry the rest."""
    rng = np.random.default_rng(0)
    model = random_tree(3, 1, kinds=("revolute",))
    bodies = [dataclasses.replace(b, parent=i - 1, kind="revolute") for i, b in enumerate(model.bodies)]
    model = Model("chain3", bodies, model.frames)
    moved = apply(model, choose(model))
    R = snap(moved.bodies[2].placement.R)
    alpha = np.arccos(np.clip(model.bodies[1].axis @ (model.bodies[2].placement.R @ model.bodies[2].axis), -1, 1))
    assert R[0, 0] == 1.0 and not R[0, 1:].any() and not R[1:, 0].any()
    assert abs(abs(np.arctan2(R[2, 1], R[1, 1])) - alpha) < 1e-12
    q = model.random_q(rng)
    for a in ("crba", "rnea"):
        ins = [q] + [rng.normal(size=model.nv) for _ in ALGORITHMS[a].inputs(model, None)[1:]]
        assert relerr(gen.run(moved, a, *ins), gen.run(model, a, *ins)) <= ROUNDING


def test_zxz_reconstructs():
    from gen.canonical_frames import rz
    rx = lambda a: np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])  # noqa: E731
    for phi, alpha, psi in ((0.3, 1.2, -2.0), (1.0, 3.67e-6, 0.5), (0.2, 0.0, 0.7), (0.0, np.pi, 0.4)):
        M = rz(phi) @ rx(alpha) @ rz(psi)
        p, a, s = zxz(M)
        if a is None:                            # parallel axes: M Rz(-psi) is 1 or Rx(pi)
            assert np.allclose(M @ rz(-s), rx(alpha), atol=1e-14)
        else:
            assert np.allclose(rz(p) @ rx(a) @ rz(s), M, atol=1e-14)


def test_traced_placements_keep_their_frames():
    """A placement traced as run-time symbols (gen.lanes) keeps its body's frame and its
    parent's: the rule does not apply there."""
    import casadi as ca
    model = load_or_skip("anymal_c")
    b = 2
    plc = model.bodies[b].placement
    traced = dataclasses.replace(plc, traced=(ca.SX.sym("R", 3, 3), ca.SX.sym("p", 3, 1)))
    bodies = [dataclasses.replace(x, placement=traced) if i == b else x for i, x in enumerate(model.bodies)]
    choice = choose(dataclasses.replace(model, bodies=bodies))
    assert np.array_equal(choice.G[b], np.eye(3)) and np.array_equal(choice.G[model.bodies[b].parent], np.eye(3))


def test_trace_uses_the_frames_and_keeps_the_model():
    """The option: on, the trace counts fewer operations, computes the same function, and
    records the caller's model and constraint set (the kernel's references)."""
    model = load_or_skip("icub")
    on = trace(model, "crba", config=CodegenConfig(canonical_frames=True))
    off = trace(model, "crba", config=CodegenConfig(canonical_frames=False))
    assert on.model is model and on.frames is not None and off.frames is None
    assert operations(on) < 0.7 * operations(off)
    q = model.random_q(np.random.default_rng(1))
    assert relerr(np.asarray(on.function()(q)), np.asarray(off.function()(q))) <= ROUNDING
    assert CodegenConfig(canonical_frames=False).request()["tuned"] == {"canonical_frames": False}
    assert "tuned" not in CodegenConfig(canonical_frames=True).request()


@needs_pin
@pytest.mark.parametrize("robot,algorithm", [("icub", "crba"), ("icub", "aba"), ("anymal_c", "rnea_derivatives"),
                                             ("talos", "aba_derivatives"), ("icub", "constrained_aba"),
                                             ("anymal_c", "impulse"), ("every_kind_mimic", "aba")])
def test_compiled_kernels_against_references(robot, algorithm, kernel_cache):
    """Kernels traced in the new frames (the default config) against Pinocchio (the mimic
    tree: against NumPy on the original model, Pinocchio lacking mimic joints there)."""
    model = _model(robot)
    row = ALGORITHMS[algorithm]
    kernel = gen.build(model, algorithm, CONTACTS[robot] if row.constrained else None, cache=kernel_cache,
                       quiet=True, config=CodegenConfig(canonical_frames=True))
    worst = verify_kernel(kernel, samples=3, seed=4)
    if robot != "every_kind_mimic":
        assert worst["c_pinocchio"] is not None or worst["numpy_pinocchio"] is not None, "no Pinocchio reference"
    assert passed(algorithm, worst, VERIFY_RTOL), f"{robot} {algorithm}: {worst}"


@pytest.mark.parametrize("robot", ["icub", "talos"])
def test_lane_traces_in_the_frames_compute_the_same_function(robot):
    """gen.lanes retraces with some placements as symbols (its lane constants), of the
    caller's model or of the model traced on (``Trace.traced_model``): either way in the
    trace's frames, the same function at the constants' values."""
    from gen import lanes
    from gen.trace import retrace
    model = load_or_skip(robot)
    tr = trace(model, "crba")
    q = model.random_q(np.random.default_rng(3))
    want = np.asarray(tr.function()(q))
    for base in (tr.model, tr.traced_model):
        consts = lanes.lane_constants(base)
        assert consts is not None, f"{robot}: no lane constants"
        g = retrace(tr, consts.model, ("lane_constants", consts.symbols))
        assert g.frames is tr.frames and g.model is model
        got = np.asarray(g.function()(q, consts.values))
        assert relerr(got, want) <= ROUNDING


def test_atan2_is_correctly_rounded():
    """The angles become literals of the C: gen.canonical_frames.atan2 is the double
    nearest the exact value (libm's is 1 ulp off on ~1 argument in 2000, and CPU-dependent)."""
    mpmath = pytest.importorskip("mpmath")
    from gen.canonical_frames import atan2
    rng = np.random.default_rng(9)
    pairs = [tuple(x) for x in rng.uniform(-3, 3, size=(3000, 2))] + [(1.0, 0.0), (-1.0, 0.0), (0.0, -1.0),
                                                                       (3.67e-6, -1.0), (-2.0, -2.0), (1e-300, 1.0)]
    with mpmath.workdps(60):
        for y, x in pairs:
            assert atan2(y, x) == float(mpmath.atan2(y, x)), (y, x)
