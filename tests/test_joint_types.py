"""The planar and helical joint kinds and mimic joints (gen/model.py) against Pinocchio
(``JointModelPlanar``, ``JointModelHelicalUnaligned``, Pinocchio 3's ``JointModelMimic``
through ``buildModelFromUrdf(path, mimic=True)`` and ``transformJointIntoMimic``):
rnea / crba / aba / minv on random states, the derivatives and the constrained solvers
where they apply, integrate vs ``pinocchio.integrate``, traced SX = NumPy, compiled C =
NumPy for one kernel per kind, the generic C = NumPy on planar and helical trees, the
RNEA/ABA derivatives on mimic models (against Richardson differences: Pinocchio's
derivative functions refuse mimic), and the one-line refusals (mimic in the generic C,
a planar axis Pinocchio cannot express).  The articulated solvers, the OSIM rows and
the constrained / impulse derivatives on mimic models: tests/test_mimic_solvers.py.

Pinocchio's ``aba``, ``computeMinverse``, Cholesky and constrained dynamics refuse mimic
joints: there the reference is its ``crba`` and ``nonLinearEffects`` solved densely, and
for the constrained solvers the KKT system built from its ``crba``, ``nonLinearEffects``,
frame Jacobian and classical acceleration."""
import numpy as np
import pytest
from conftest import row_floor, rel_err, richardson
from random_trees import random_state, random_tree

import gen
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.errors import RbdgenError
from gen.model import Body, Mimic, Model
from gen.pinref import depth_first
from gen.simulate import integrate
from gen.trace import trace
from gen.urdf import load_urdf

pin = pytest.importorskip("pinocchio")
from gen.generic import GenericModel  # noqa: E402
from gen.pinref import pin_model, reference  # noqa: E402

RTOL = 1e-10             # relative: max|rbdgen - pinocchio| / max(1, max|pinocchio|)
SX_TOL = 1e-12
#: prox_ltl / constrained_aba, 4 proximal iterations: each iterate re-solves with the last
#: multipliers, which carries the factorisations' rounding into lam (generic C with gcc's
#: FMA contraction on AVX-512 against NumPy: 2.2e-12 on constrained_aba's lam at mu = 1e-3)
ITERATED_TOL = 1e-10
KINDS = ("revolute", "helical", "free", "planar", "prismatic")
SEEDS = [0, 2, 10]       # depth-first trees with planar and helical joints (Pinocchio's crba applies)



def kinds_tree(seed, n=6):
    """A random tree with planar and helical joints, helical pitches in [-0.5, 0.5]."""
    model = random_tree(n, seed, kinds=KINDS[:4])
    rng = np.random.default_rng(100 + seed)
    for b in model.bodies:
        if b.kind == "helical":
            b.pitch = float(rng.uniform(-0.5, 0.5))
    assert {"planar", "helical"} <= {b.kind for b in model.bodies}
    return model


def mimic_tree(seed, n=7):
    """A random tree of revolute/prismatic joints in which some joints mimic earlier ones
    (random multipliers and offsets), on several branches."""
    base = random_tree(n, seed, kinds=("revolute", "prismatic"))
    rng = np.random.default_rng(200 + seed)
    bodies = []
    for i, b in enumerate(base.bodies):
        mimic = None
        if i >= 2 and rng.random() < 0.5:
            prim = [k for k in range(i) if bodies[k].mimic is None]
            mimic = Mimic(int(rng.choice(prim)), float(rng.uniform(-2, 2)), float(rng.uniform(-0.5, 0.5)))
        bodies.append(Body(b.name, b.link, b.parent, b.kind, b.axis, b.placement, b.inertia, mimic=mimic))
    model = Model(f"mimic{seed}", bodies, base.frames, source=f"random mimic tree seed {seed}")
    assert model.has_mimic and model.nv < model.nbodies
    return model


MIMIC_URDF = """<robot name="gripper">
 <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
 <link name="cart"><inertial><origin xyz="0.1 0 0.05"/><mass value="1.5"/><inertia ixx="0.1" ixy="0.01" ixz="0" iyy="0.2" iyz="0" izz="0.25"/></inertial></link>
 <link name="palm"><inertial><origin xyz="0.1 0 0.2"/><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.25"/></inertial></link>
 <link name="left"><inertial><origin xyz="0.1 0.05 0.2"/><mass value="0.5"/><inertia ixx="0.1" ixy="0" ixz="0.02" iyy="0.2" iyz="0" izz="0.15"/></inertial></link>
 <link name="right"><inertial><origin xyz="0 0.05 0.1"/><mass value="0.7"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.15"/></inertial></link>
 <link name="slider"><inertial><origin xyz="0 0.05 0.1"/><mass value="0.3"/><inertia ixx="0.05" ixy="0" ixz="0" iyy="0.06" iyz="0" izz="0.07"/></inertial></link>
 <link name="tip"/>
 <joint name="a_plane" type="planar"><parent link="base"/><child link="cart"/><origin xyz="0 0 0.1" rpy="0.2 0 0"/><axis xyz="0 0 1"/></joint>
 <joint name="b_wrist" type="revolute"><parent link="cart"/><child link="palm"/><origin xyz="0.1 0 0.1"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
 <joint name="c_left" type="revolute"><parent link="palm"/><child link="left"/><origin xyz="0 0.1 0.3" rpy="0.1 0.2 0.3"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
 <joint name="d_right" type="revolute"><parent link="palm"/><child link="right"/><origin xyz="0 -0.1 0.3"/><axis xyz="0 0 1"/><mimic joint="c_left" multiplier="-1" offset="0.1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
 <joint name="e_slide" type="prismatic"><parent link="right"/><child link="slider"/><origin xyz="0.1 0 0.1"/><axis xyz="0.6 0 0.8"/><mimic joint="b_wrist" multiplier="0.5" offset="-0.2"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
 <joint name="f_tip" type="fixed"><parent link="slider"/><child link="tip"/><origin xyz="0 0.05 0.1"/></joint>
</robot>"""


@pytest.fixture(scope="module")
def mimic_urdf(tmp_path_factory):
    path = tmp_path_factory.mktemp("urdf") / "gripper.urdf"
    path.write_text(MIMIC_URDF)
    return str(path)


def check_dynamics(model, pm, rng, states=3):
    """rnea, aba, crba, minv against Pinocchio (aba/minv through crba/nle on mimic models)."""
    pd = pm.createData()
    for _ in range(states):
        q, v, a = random_state(model, rng)
        tau = gen.run(model, "rnea", q, v, a)
        assert rel_err(tau, pin.rnea(pm, pd, q, v, a)) < RTOL, "rnea"
        assert rel_err(gen.run(model, "aba", q, v, tau), reference(model, "aba", q, v, tau, pmodel=pm)) < RTOL, "aba"
        assert rel_err(gen.run(model, "aba", q, v, tau), a) < 1e-8, "aba(rnea(a)) = a"
        Mp = np.array(pin.crba(pm, pm.createData(), q))   # fresh Data: pin 4.1's crba adds the mimic
        assert rel_err(gen.run(model, "crba", q), np.triu(Mp) + np.triu(Mp, 1).T) < RTOL, "crba"  # terms to data.M
        assert rel_err(gen.run(model, "minv", q), reference(model, "minv", q, pmodel=pm)) < RTOL, "minv"
        L, D = gen.run(model, "ltdl", q)
        assert rel_err(L.T @ np.diag(D) @ L, gen.run(model, "crba", q)) < RTOL, "L^T D L = M"


@pytest.mark.parametrize("seed", SEEDS)
def test_planar_helical_against_pinocchio(seed):
    model = kinds_tree(seed)
    assert depth_first(model)
    check_dynamics(model, pin_model(model), np.random.default_rng(seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_planar_helical_derivatives(seed):
    model = kinds_tree(seed)
    rng = np.random.default_rng(7 + seed)
    q, v, a = random_state(model, rng)
    for algorithm in ("rnea_derivatives", "aba_derivatives"):
        got, ref = gen.run(model, algorithm, q, v, a), reference(model, algorithm, q, v, a)
        assert ref is not None
        for g, r, what in zip(got, ref, ALGORITHMS[algorithm].outputs(model, None)):
            assert rel_err(g, r) < 1e-9, f"{algorithm} {what[0]}"


@pytest.mark.parametrize("algorithm", ["prox_ltl", "constrained_aba", "prox_pv"])
def test_planar_helical_constrained(algorithm):
    model = kinds_tree(0)
    spec = f"6D:tip{model.nbodies - 1},3D:tip2"
    q, v, tau = random_state(model, np.random.default_rng(5))
    got = gen.run(model, algorithm, q, v, tau, constraints=spec)
    ref = reference(model, algorithm, q, v, tau, cset=spec)
    assert ref is not None
    for g, r, what in zip(got, ref, ("ddq", "lam")):
        assert rel_err(g, r) < row_floor(algorithm, model, spec, q, tol=1e-9), f"{algorithm} {what}"


def test_mimic_urdf_model(mimic_urdf):
    model = load_urdf(mimic_urdf, mimic=True)
    pm = pin.buildModelFromUrdf(mimic_urdf, mimic=True)
    assert (model.nq, model.nv) == (pm.nq, pm.nv) == (6, 5)        # planar 4/3 + two revolute
    assert [b.name for b in model.bodies] == list(pm.names)[1:]
    assert [b.mimic is not None for b in model.bodies] == [False, False, False, True, True]
    plain = load_urdf(mimic_urdf)                # <mimic> ignored by default, as Pinocchio
    assert (plain.nq, plain.nv) == (8, 7) and not plain.has_mimic
    check_dynamics(model, pin_model(model), np.random.default_rng(1))


@pytest.mark.parametrize("seed", [0, 1])
def test_mimic_tree_against_pinocchio(seed):
    model = mimic_tree(seed)
    assert depth_first(model)                    # Pinocchio's crba (and the aba/minv references)
    pm = pin_model(model)
    assert pm.nv == model.nv and len(pm.mimicking_joints) == sum(b.mimic is not None for b in model.bodies)
    check_dynamics(model, pm, np.random.default_rng(seed))


def test_mimic_frame_jacobian(mimic_urdf):
    model = load_urdf(mimic_urdf, mimic=True)
    pm = pin_model(model)
    pd = pm.createData()
    q = model.random_q(np.random.default_rng(3))
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    from gen.kinematics import frame_jacobian
    for frame in ("tip", "left", "slider"):
        J = pin.getFrameJacobian(pm, pd, pm.getFrameId(frame), pin.LOCAL)
        assert rel_err(frame_jacobian(model, frame, q.reshape(-1, 1), be=NUMPY), J) < RTOL, frame


@pytest.mark.parametrize("algorithm", ["prox_ltl", "prox_ltls"])
def test_mimic_constrained_kkt(mimic_urdf, algorithm):
    """Converged solvers on a mimic model = the KKT solution from Pinocchio's M, b, J and
    classical drift (its constraintDynamics refuses mimic joints)."""
    model = load_urdf(mimic_urdf, mimic=True)
    pm = pin_model(model)
    pd = pm.createData()
    q, v, tau = random_state(model, np.random.default_rng(4))
    ddq, lam = gen.run(model, algorithm, q, v, tau, constraints="3D:tip", iterations=60)[:2]
    M = np.array(pin.crba(pm, pm.createData(), q))
    M = np.triu(M) + np.triu(M, 1).T
    b = pin.nonLinearEffects(pm, pd, q, v)
    pin.forwardKinematics(pm, pd, q, v, np.zeros(model.nv))
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    fid = pm.getFrameId("tip")
    J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)[:3]
    gamma = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL).linear
    K = np.block([[M, -J.T], [J, np.zeros((3, 3))]])
    sol = np.linalg.solve(K, np.concatenate([tau - b, -gamma]))
    assert rel_err(ddq, sol[:model.nv]) < 1e-8, "ddq"
    assert rel_err(lam, sol[model.nv:]) < 1e-8, "lam"


@pytest.mark.parametrize("which", ["urdf", "tree0", "tree1"])
def test_mimic_derivatives(mimic_urdf, which):
    """rnea/aba derivatives with mimic joints (Pinocchio's derivative functions refuse
    them: "does not support Joint Mimic"): against Richardson differences, on the manifold,
    of Pinocchio's rnea and of the dense solve of its crba and nonLinearEffects; the
    identities dddq_dq = -Minv dtau_dq (a = ddq), Minv M = I; the AD route = the
    analytical one (traced)."""
    model = load_urdf(mimic_urdf, mimic=True) if which == "urdf" else mimic_tree(int(which[-1]))
    pm = pin_model(model)
    pd = pm.createData()
    with pytest.raises(Exception, match="does not support Joint Mimic"):
        pin.computeRNEADerivatives(pm, pd, *random_state(model, np.random.default_rng(0)))

    def pin_aba(q, v, tau):
        M = np.array(pin.crba(pm, pm.createData(), q))     # fresh Data (pin 4.1 mimic crba)
        return np.linalg.solve(np.triu(M) + np.triu(M, 1).T, tau - pin.nonLinearEffects(pm, pd, q, v))

    rng = np.random.default_rng(11)
    for _ in range(2):
        q, v, a = random_state(model, rng)
        dq, dv, M, tau_value = gen.run(model, "rnea_derivatives", q, v, a)
        assert rel_err(tau_value, pin.rnea(pm, pd, q, v, a)) < RTOL      # the value, G^T tau_ext
        assert rel_err(dq, richardson(lambda d: pin.rnea(pm, pd, pin.integrate(pm, q, d), v, a), np.zeros(model.nv), 1e-4)) < 1e-8
        assert rel_err(dv, richardson(lambda d: pin.rnea(pm, pd, q, v + d, a), np.zeros(model.nv), 1e-4)) < 1e-8
        assert rel_err(M, gen.run(model, "crba", q)) < RTOL
        tau = pin.rnea(pm, pd, q, v, a)
        ddq_dq, ddq_dv, Minv, ddq_value = gen.run(model, "aba_derivatives", q, v, tau)
        assert rel_err(ddq_dq, richardson(lambda d: pin_aba(pin.integrate(pm, q, d), v, tau), np.zeros(model.nv), 1e-4)) < 1e-8
        assert rel_err(ddq_dv, richardson(lambda d: pin_aba(q, v + d, tau), np.zeros(model.nv), 1e-4)) < 1e-8
        assert rel_err(Minv @ M, np.eye(model.nv)) < RTOL
        ddq = gen.run(model, "aba", q, v, tau)
        assert rel_err(ddq_value, ddq) < RTOL                           # the value: the same dense solve
        assert rel_err(ddq_dq, -Minv @ gen.run(model, "rnea_derivatives", q, v, ddq)[0]) < RTOL
    q, v, x = random_state(model, rng)
    for algorithm in ("rnea_derivatives", "aba_derivatives"):
        want = gen.run(model, algorithm, q, v, x)
        for route in ("analytical", "ad"):
            got = trace(model, algorithm, route=route).function().call([np.reshape(t, (-1, 1)) for t in (q, v, x)])
            for g, w in zip(got, want):
                assert rel_err(np.array(g), w) < SX_TOL, (algorithm, route)


def test_integrate_matches_pinocchio(mimic_urdf):
    rng = np.random.default_rng(2)
    for model in (kinds_tree(0), load_urdf(mimic_urdf, mimic=True)):
        pm = pin_model(model)
        for scale in (1.0, 1e-3, 1e-16):            # the exact and the Taylor branches
            q, dv = model.random_q(rng), scale * rng.normal(size=model.nv)
            got = integrate(model, q.reshape(-1, 1), dv.reshape(-1, 1), be=NUMPY).ravel()
            assert rel_err(got, pin.integrate(pm, q, dv)) < 1e-12, (model.name, scale)
            from gen.configuration import integrate as integrate_np
            assert rel_err(integrate_np(model, q, dv), pin.integrate(pm, q, dv)) < 1e-12


def test_tangent_map_matches_pinocchio():
    """d integrate(q, d)/dd at 0 against central differences of pinocchio.integrate."""
    from gen.configuration import tangent_map
    model = kinds_tree(2)
    pm = pin_model(model)
    q = model.random_q(np.random.default_rng(8))
    T = tangent_map(model, q.reshape(-1, 1), NUMPY)
    h = 1e-6
    fd = np.array([(pin.integrate(pm, q, h * e) - pin.integrate(pm, q, -h * e)) / (2 * h)
                   for e in np.eye(model.nv)]).T
    assert rel_err(T, fd) < 1e-8


def test_traced_sx_equals_numpy(mimic_urdf):
    rng = np.random.default_rng(3)
    for model in (kinds_tree(10), load_urdf(mimic_urdf, mimic=True)):
        for algorithm in ("rnea", "crba", "aba", "minv"):
            tr = trace(model, algorithm)
            q, v, x = random_state(model, rng)
            args = [{"q": q, "v": v}.get(name, x) for name, _ in tr.inputs]
            got = np.array(tr.function().call([np.reshape(a, (-1, 1)) for a in args])[0])
            ref = gen.run(model, algorithm, *args)
            assert rel_err(got.reshape(np.shape(ref)), ref) < SX_TOL, (model.name, algorithm)


@pytest.mark.parametrize("which", ["planar", "helical", "mimic"])
def test_compiled_c_equals_numpy(which, mimic_urdf, tmp_path):
    if which == "mimic":
        model, algorithm = load_urdf(mimic_urdf, mimic=True), "aba"
    else:
        model = random_tree(4, 0, kinds=(which, "revolute"))
        for b in model.bodies:
            b.pitch = 0.25 if b.kind == "helical" else 0.0
        assert any(b.kind == which for b in model.bodies)
        algorithm = "aba" if which == "planar" else "rnea"
    k = gen.build(model, algorithm, out_dir=tmp_path / which)
    rng = np.random.default_rng(6)
    q, v, x = random_state(model, rng)
    args = (q,) if algorithm == "crba" else (q, v, x)
    assert rel_err(k(*args), gen.run(model, algorithm, *args)) < 1e-12


@pytest.mark.parametrize("seed", SEEDS)
def test_generic_c_equals_numpy(seed):
    """The generic C library (gen.generic) on planar and helical trees: the dynamics to
    1e-12, the derivatives to 1e-10, prox_ltl and constrained_aba with a 3D frame to
    ITERATED_TOL."""
    model = kinds_tree(seed)
    g = GenericModel(model)
    rng = np.random.default_rng(seed)
    q, v, a = random_state(model, rng)
    for algorithm, args in (("rnea", (q, v, a)), ("crba", (q,)), ("aba", (q, v, a)), ("crba_solve", (q, a))):
        assert rel_err(g.call(algorithm, *args), gen.run(model, algorithm, *args)) < SX_TOL, algorithm
    for algorithm in ("rnea_derivatives", "aba_derivatives"):
        for got, ref in zip(g.call(algorithm, q, v, a), gen.run(model, algorithm, q, v, a)):
            assert rel_err(got, ref) < 1e-10, algorithm
    tip = f"3D:tip{model.nbodies - 1}"
    g = GenericModel(model, tip)
    for algorithm, mu in (("prox_ltl", 1e-6), ("constrained_aba", 1e-3)):
        got = g.call(algorithm, q, v, a, mu=mu, iterations=4)
        ref = gen.run(model, algorithm, q, v, a, constraints=tip, mu=mu, iterations=4)
        for x, y, what in zip(got, ref, ("ddq", "lam")):
            assert rel_err(x, y) < ITERATED_TOL, f"{algorithm} {what}"


def test_refusals(mimic_urdf, tmp_path):
    model = load_urdf(mimic_urdf, mimic=True)
    with pytest.raises(RbdgenError, match="generic C library has no mimic joints \\(joint 'd_right'\\)"):
        GenericModel(model)                     # planar and mimic joints: the mimic one is refused
    with pytest.raises(RbdgenError, match="generic C library has no mimic joints"):
        GenericModel(mimic_tree(0))
    bad = tmp_path / "bad_planar.urdf"
    bad.write_text(MIMIC_URDF.replace('<axis xyz="0 0 1"/></joint>', '<axis xyz="1 0 0"/></joint>', 1))
    with pytest.raises(RbdgenError, match="joint 'a_plane' <axis>: planar joint with normal .*xy plane only"):
        load_urdf(str(bad))
    late = tmp_path / "late.urdf"        # the mimicked joint comes after the mimic in the walk
    late.write_text(MIMIC_URDF.replace('mimic joint="c_left"', 'mimic joint="e_slide"'))
    with pytest.raises(RbdgenError, match="'d_right' mimics 'e_slide', which is not a moving joint before it"):
        load_urdf(str(late), mimic=True)
    with pytest.raises(RbdgenError, match="mimics locked joint 'c_left'"):
        load_urdf(mimic_urdf, mimic=True, lock_joints=["c_left"])
