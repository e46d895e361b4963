"""Delassus and OSIM algorithms (delassus, kkt_delassus, caba_osim, caba_osimf, ltl_osim,
kkt_osim): against dense NumPy (``J M^-1 J^T`` and ``(J M^-1 J^T + R)^-1``) and each other;
against Pinocchio's computeDelassusMatrix (Python) and computeDampedDelassusMatrixInverse
(the C++ shim, through a small C program: the shim must not be loaded into a process that
imported pinocchio, see gen/bench/pinshim.py); SX trace = NumPy; compiled C = NumPy;
redundant sets; weights; loop closures; the registry rows; the op-count target of the
issue (cABA-OSIM below LTL-OSIM on humanoid-size trees).

mu: the joint-space methods (ltl_osim, kkt_osim) are compared at the default damping 1e-6.
The cABA methods apply the inversion lemma, Lambda_mu = W - L_0^A with W = 1/mu, whose
cancellation leaves ~eps W-sized rounding (gen/algorithms/caba_osim.py, "Accuracy"): their
1e-9 comparisons run at mu = 1e-3, and at the default mu they are held to their floor."""
import os
import subprocess

import numpy as np
import pytest
from conftest import load_or_skip, needs_pin
from pin_models import shim_part_ready
from test_constraints import (
    HUMANOID_CONTACTS,
    HUMANOID_LOOPS,
    loop_tree,
    pin,
    to_pinocchio,
)

import gen
from gen import RbdgenError
from gen.algorithms import ALGORITHMS
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.model import SE3, Body, Frame, Inertia, Model
from gen.robots.synthetic import humanoid30
from gen.trace import trace

DELASSUS = ["delassus", "kkt_delassus"]
OSIM = ["ltl_osim", "kkt_osim", "caba_osim", "caba_osimf"]
CABA = {"caba_osim", "caba_osimf"}
DEFAULT_MU = 1e-6
CABA_MU = 1e-3

DENSE_TOL = 1e-9          # Lambda_mu vs dense NumPy, relative to max |Lambda_mu|
DELASSUS_TOL = 1e-12      # J M^-1 J^T vs dense NumPy (exact sparse algebra)
PIN_DELASSUS_TOL = 1e-11  # vs pin.computeDelassusMatrix
SHIM_MU = 1e-2            # Pinocchio's own lemma rounding is ~1e-9..1e-5 below mu = 1e-4
SHIM_TOL = 1e-9
CABA_FLOOR = 1e-8         # cABA at mu = 1e-6, every branching body in constraint space (worst seen 3e-9, solo12)
CABA_FRAME_FLOOR = 1e-5   # ... with Algorithm 5's 6 x 6 form on long chains (trunk tree: worst seen 3.5e-6)
REDUNDANT_TOL = 1e-6      # (G + R) has condition |G| / mu ~ 1e7: eps * 1e7 in any method that inverts it
IDENTITY_TOL = 1e-9       # Lambda_mu (Delassus + R) = I
SX_TOL = 1e-10
C_TOL = 1e-10

def trunk_tree() -> Model:
    """A floating base, a 5-joint trunk splitting into two 5-joint arms with two 3-joint
    fingers each: long chains carrying many rows, where caba_osim keeps Algorithm 5's
    6 x 6 form for the trunk and the arms (the fingers in constraint space)."""
    rod = Inertia(1.0, np.array([0.15, 0.0, 0.0]), np.diag([2e-4, 8e-3, 8e-3]))
    bodies = [Body("base", "base", -1, "free", np.zeros(3), SE3.identity(),
                   Inertia(8.0, np.zeros(3), np.diag([0.2, 0.3, 0.1])))]
    frames = []

    def chain(parent, n, name, offset):
        for k in range(n):
            placement = SE3(np.eye(3), np.array(offset if k == 0 else [0.3, 0.0, 0.0]))
            axis = np.eye(3)[[2, 1, 0][len(bodies) % 3]]
            bodies.append(Body(f"{name}{k}", f"{name}{k}", parent, "revolute", axis, placement, rod))
            parent = len(bodies) - 1
        return parent

    top = chain(0, 5, "trunk", [0.0, 0.0, 0.2])
    for side, y in (("a", 0.1), ("b", -0.1)):
        hand = chain(top, 5, f"arm{side}", [0.3, y, 0.0])
        for k, z in enumerate((-0.1, 0.1)):
            finger = chain(hand, 3, f"finger{side}{k}_", [0.3, 0.0, z])
            frames.append(Frame(f"tip{side}{k}", finger, SE3(np.eye(3), np.array([0.3, 0.0, 0.0])), "fixed_joint"))
    return Model("trunk", bodies, frames, source="trunk")


FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLES = "6D:left_sole_link,6D:right_sole_link"
ARMS = "6D:arm_left_7_link,6D:arm_right_7_link"
# (id, robot name or model factory, spec); every constraint relative to the world
SETS = [("ur5", "ur5", "6D:tool0"), ("solo12", "solo12", FEET), ("talos", "talos", SOLES),
        ("talos-arms", "talos", SOLES + "," + ARMS), ("humanoid30", humanoid30, HUMANOID_CONTACTS),
        ("random", lambda: loop_tree(3), "6D:tip4,3D:tip9,3D:tip2,3D:anchor~tip7"),
        ("trunk", trunk_tree, "6D:tipa0,6D:tipa1,6D:tipb0,6D:tipb1"),
        # the rest of the constrained-dynamics issue's sets (opcount.constrained.CONSTRAINED_SETS)
        ("ur5-3d", "ur5", "3D:tool0"), ("panda-3d", "panda", "3D:panda_hand_tcp"),
        ("panda-6d", "panda", "6D:panda_hand_tcp"), ("solo12-2feet", "solo12", "3D:FL_FOOT,3D:HR_FOOT"),
        ("anymal_c", "anymal_c", "3D:LF_FOOT,3D:RF_FOOT,3D:LH_FOOT,3D:RH_FOOT"),
        ("go1", "go1", "3D:FL_foot,3D:FR_foot,3D:RL_foot,3D:RR_foot"), ("icub", "icub", "6D:l_sole,6D:r_sole")]
LOOPS = [("humanoid30-loops", humanoid30, "6D:left_foot," + HUMANOID_LOOPS),
         ("random-loops", lambda: loop_tree(3), "3D:tip7~tip2,6D:tip5~tip8,6D:tip4")]


def rel(x, ref) -> float:
    return float(np.max(np.abs(np.asarray(x) - ref)) / np.max(np.abs(ref)))


def load(robot):
    return load_or_skip(robot) if isinstance(robot, str) else robot()


@pytest.fixture(scope="module", params=SETS, ids=[s[0] for s in SETS])
def case(request):
    _, robot, spec = request.param
    model = load(robot)
    return model, parse_constraints(model, spec)


def states(model, seed, n=2):
    rng = np.random.default_rng(seed)
    return [model.random_q(rng) for _ in range(n)]


def dense(model, cset, q, mu):
    """(J M^-1 J^T, (J M^-1 J^T + diag(rho))^-1) by dense NumPy."""
    M = gen.run(model, "crba", q)
    J = cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)
    G = J @ np.linalg.solve(M, J.T)
    return G, np.linalg.inv(G + np.diag(cset.damping(mu)))


def refusal(alg, model, cset):
    """The reason a cABA method refuses ``cset`` on ``model`` (a regex of its RbdgenError),
    or None when it applies."""
    if alg in CABA and not all(c.anchored for c in cset.constraints):
        return f"{alg} handles constraints relative to the world only.*closes a loop between two moving bodies"
    if alg == "caba_osimf" and model.bodies[0].kind != "free":
        return "caba_osimf splits the Delassus matrix at a floating base.*use caba_osim"
    return None


def applicable(alg, model, cset):
    return refusal(alg, model, cset) is None


def refused(model, alg, cset, q, mu=None) -> bool:
    """False when ``alg`` applies; else asserts that it refuses with a one-line
    RbdgenError naming the reason, and returns True."""
    reason = refusal(alg, model, cset)
    if reason is None:
        return False
    with pytest.raises(RbdgenError, match=reason) as e:
        run(model, alg, q, cset, mu)
    assert "\n" not in str(e.value), f"{alg}: a multi-line refusal: {e.value}"
    return True


def run(model, alg, q, cset, mu=None):
    opts = {} if alg in DELASSUS else {"mu": mu if mu is not None else (CABA_MU if alg in CABA else DEFAULT_MU)}
    return gen.run(model, alg, q, constraints=cset, **opts)


# --- dense NumPy and each other -----------------------------------------------------------

@pytest.mark.parametrize("alg", DELASSUS)
def test_delassus_equals_dense(case, alg):
    model, cset = case
    for q in states(model, 1):
        G, _ = dense(model, cset, q, DEFAULT_MU)
        out = run(model, alg, q, cset)
        assert out.shape == (cset.m, cset.m)
        assert rel(out, G) < DELASSUS_TOL, f"{alg} {model.name} {cset}: Delassus vs dense"
        assert np.array_equal(out, out.T), f"{alg}: not exactly symmetric"


@pytest.mark.parametrize("alg", OSIM)
def test_damped_inverse_equals_dense(case, alg):
    model, cset = case
    mu = CABA_MU if alg in CABA else DEFAULT_MU
    if refused(model, alg, cset, states(model, 2, n=1)[0], mu):
        return
    for q in states(model, 2):
        _, Lam = dense(model, cset, q, mu)
        out = run(model, alg, q, cset, mu)
        assert rel(out, Lam) < DENSE_TOL, f"{alg} {model.name} {cset} mu={mu}: Lambda_mu vs dense"
        assert np.array_equal(out, out.T), f"{alg}: not exactly symmetric"


def test_variants_agree_with_each_other(case):
    """At one mu every damped inverse equals every other, and each inverts Delassus + R."""
    model, cset = case
    for q in states(model, 3, n=1):
        G = {a: run(model, a, q, cset) for a in DELASSUS}
        assert rel(G["kkt_delassus"], G["delassus"]) < DELASSUS_TOL
        R = np.diag(cset.damping(CABA_MU))
        outs = {a: run(model, a, q, cset, CABA_MU) for a in OSIM if applicable(a, model, cset)}
        for a, out in outs.items():
            assert rel(out, outs["kkt_osim"]) < DENSE_TOL, f"{a} vs kkt_osim on {model.name}"
            assert rel(out @ (G["delassus"] + R), np.eye(cset.m)) < IDENTITY_TOL, f"{a}: Lambda (G + R) != I"


@pytest.mark.parametrize("alg", sorted(CABA))
def test_caba_at_the_default_mu_stays_within_its_floor(case, alg):
    model, cset = case
    if refused(model, alg, cset, states(model, 4, n=1)[0], DEFAULT_MU):
        return
    floor = CABA_FRAME_FLOOR if model.name == "trunk" else CABA_FLOOR
    for q in states(model, 4):
        _, Lam = dense(model, cset, q, DEFAULT_MU)
        assert rel(run(model, alg, q, cset, DEFAULT_MU), Lam) < floor, f"{alg} {model.name} mu=1e-6"


def test_weights_scale_the_damping_per_constraint():
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS, weights=[1.0, 4.0, 0.5, 2.0])
    assert list(cset.damping(1.0)[[0, 6, 12, 15]]) == [1.0, 0.25, 2.0, 0.5]
    for q in states(model, 5):
        for alg in OSIM:
            mu = CABA_MU if alg in CABA else DEFAULT_MU
            _, Lam = dense(model, cset, q, mu)
            assert rel(run(model, alg, q, cset, mu), Lam) < DENSE_TOL, f"{alg}: weighted damping"


@pytest.mark.parametrize("robot, spec", [("humanoid30", "6D:left_foot,6D:right_foot,6D:left_foot,6D:right_foot"),
                                         ("solo12", FEET + ",3D:FL_FOOT")])
def test_redundant_sets_give_a_finite_damped_inverse(robot, spec):
    """Duplicated contacts: J M^-1 J^T is singular, its damped inverse is finite."""
    model = load(robot)
    cset = parse_constraints(model, spec)
    for q in states(model, 6):
        G, Lam = dense(model, cset, q, DEFAULT_MU)
        assert np.linalg.cond(G) > 1e12, "the set should be redundant"
        for alg in OSIM:
            out = run(model, alg, q, cset, DEFAULT_MU)
            assert np.all(np.isfinite(out)), f"{alg}: non-finite damped inverse"
            assert rel(out, Lam) < REDUNDANT_TOL, f"{alg} {robot} redundant: vs dense"


@pytest.mark.parametrize("name, factory, spec", LOOPS, ids=[c[0] for c in LOOPS])
def test_loop_closures(name, factory, spec):
    """The joint-space methods handle loops between moving bodies; the cABA ones refuse
    them with a message naming the alternatives."""
    model = factory()
    cset = parse_constraints(model, spec)
    for q in states(model, 7):
        G, Lam = dense(model, cset, q, DEFAULT_MU)
        for alg in DELASSUS:
            assert rel(run(model, alg, q, cset), G) < DELASSUS_TOL, f"{alg} {name}"
        for alg in ("ltl_osim", "kkt_osim"):
            assert rel(run(model, alg, q, cset), Lam) < DENSE_TOL, f"{alg} {name}"
    for alg in sorted(CABA):
        with pytest.raises(RbdgenError, match="ltl_osim or kkt_osim"):
            run(model, alg, states(model, 7)[0], cset)


def test_user_errors():
    model = humanoid30()
    q = model.neutral()
    for alg in DELASSUS + OSIM:
        with pytest.raises(RbdgenError, match="give constraints"):
            gen.run(model, alg, q)
    with pytest.raises(RbdgenError, match="floating base"):
        gen.run("chain:4", "caba_osimf", np.zeros(4), constraints="6D:link4_tip")
    with pytest.raises(RbdgenError, match="mu=0"):
        gen.run(model, "caba_osim", q, constraints=HUMANOID_CONTACTS, mu=0.0)


# --- Pinocchio -------------------------------------------------------------------------------

def pin_reference_model(model):
    from gen.pinref import pin_model
    from gen.robots.named import NAMED_ROBOTS

    return pin_model(model.name) if model.name in NAMED_ROBOTS else to_pinocchio(model)


@needs_pin
def test_delassus_equals_pinocchio(case):
    from test_constraints import pin_constraints

    model, cset = case
    if any(c.body1 < 0 for c in cset.constraints):      # Pinocchio's Delassus reads joint1 only
        cset = parse_constraints(model, [c.token for c in cset.constraints if c.body1 >= 0])
    pm = pin_reference_model(model)
    for q in states(model, 8):
        cms, cds = pin_constraints(pm, cset)
        ref = pin.computeDelassusMatrix(pm, pm.createData(), q, cms, cds, 0.0)
        for alg in DELASSUS:
            assert rel(run(model, alg, q, cset), ref) < PIN_DELASSUS_TOL, f"{alg} {model.name}: vs Pinocchio"


SHIM_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
typedef struct pinshim pinshim;
const char *pinshim_last_error(void);
pinshim *pinshim_create(const char *archive, size_t len);
int pinshim_add_constraint(pinshim *s, int type, int joint1, const double *M1, int joint2,
                           const double *M2, double kp, double kd);
int pinshim_init_constraints(pinshim *s, double mu, int max_iter, double accuracy);
int pinshim_nq(const pinshim *s);
int pinshim_m(const pinshim *s);
int pinshim_delassus_inv(pinshim *s, const double *q, double *out);

/* model.txt constraints.txt mu q.bin n out.bin: computeDampedDelassusMatrixInverse at n
 * configurations, row-major m x m each */
int main(int argc, char **argv)
{
    if (argc != 7) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 3;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *archive = malloc(len);
    if (fread(archive, 1, len, f) != (size_t)len) return 3;
    fclose(f);
    pinshim *s = pinshim_create(archive, len);
    if (!s) { fprintf(stderr, "%s\n", pinshim_last_error()); return 4; }
    f = fopen(argv[2], "r");
    int type, j1, j2;
    while (fscanf(f, "%d %d %d", &type, &j1, &j2) == 3) {
        double M[24];
        for (int k = 0; k < 24; ++k) if (fscanf(f, "%lf", &M[k]) != 1) return 5;
        if (pinshim_add_constraint(s, type, j1, M, j2, M + 12, 0.0, 0.0)) return 6;
    }
    fclose(f);
    if (pinshim_init_constraints(s, atof(argv[3]), 1, 0.0)) return 7;
    int nq = pinshim_nq(s), m = pinshim_m(s), n = atoi(argv[5]);
    double *q = malloc(sizeof(double) * nq * n), *out = malloc(sizeof(double) * m * m);
    f = fopen(argv[4], "rb");
    if (fread(q, sizeof(double), (size_t)nq * n, f) != (size_t)nq * n) return 8;
    fclose(f);
    FILE *o = fopen(argv[6], "wb");
    for (int k = 0; k < n; ++k) {
        if (pinshim_delassus_inv(s, q + k * nq, out)) { fprintf(stderr, "%s\n", pinshim_last_error()); return 9; }
        fwrite(out, sizeof(double), (size_t)m * m, o);
    }
    fclose(o);
    return 0;
}
"""


@pytest.fixture(scope="module")
def shim_driver(tmp_path_factory):
    """A C program linking the shim's objects that prints computeDampedDelassusMatrixInverse."""
    from gen.bench import pinshim

    parts = ("core", "contact")
    build = pinshim.build_shim(parts)
    d = tmp_path_factory.mktemp("shim")
    (d / "driver.c").write_text(SHIM_DRIVER)
    subprocess.run([os.environ.get("CC", "gcc"), "-c", *pinshim.BENCH_FLAGS, str(d / "driver.c"),
                    "-o", str(d / "driver.o")], check=True)
    subprocess.run([pinshim.cxx(), *pinshim.BENCH_FLAGS, str(d / "driver.o"), *build.link_args(parts),
                    "-o", str(d / "driver")], check=True)
    return d / "driver"


def shim_damped_inverse(driver, model, cset, qs, mu):
    from gen.bench import pinshim

    d = driver.parent
    (d / "model.txt").write_bytes(pinshim.model_archive(pinshim.pin_model(model)))
    rows = [f"{t} {j1} {j2} " + " ".join(repr(float(x)) for x in (*M1, *M2))
            for t, j1, M1, j2, M2 in pinshim.constraint_rows(cset)]
    (d / "constraints.txt").write_text("\n".join(rows) + "\n")
    np.asarray(qs, dtype=np.float64).tofile(d / "q.bin")
    subprocess.run([str(driver), str(d / "model.txt"), str(d / "constraints.txt"), repr(mu), str(d / "q.bin"),
                    str(len(qs)), str(d / "out.bin")], check=True, capture_output=True)
    return np.fromfile(d / "out.bin").reshape(len(qs), cset.m, cset.m)


@pytest.mark.skipif(not shim_part_ready("contact"), reason="the Pinocchio shim's contact part is not compiled "
                    "(~5 min of g++); set RBDGEN_TEST_CONSTRAINED_SHIM=1 to build it here")
def test_damped_inverse_equals_pinocchio_shim(case, shim_driver):
    """computeDampedDelassusMatrixInverse (PV-OSIMr) at the same mu.  Pinocchio 4.1 fills
    only the blocks on and above the diagonal (the blocks below keep stale values), so
    the upper triangle is compared."""
    model, cset = case
    if any(c.body1 < 0 for c in cset.constraints):      # the PV Delassus reads joint1 only
        cset = parse_constraints(model, [c.token for c in cset.constraints if c.body1 >= 0])
    qs = states(model, 9)
    ref = shim_damped_inverse(shim_driver, model, cset, qs, SHIM_MU)
    up = np.triu_indices(cset.m)
    for q, R in zip(qs, ref):
        for alg in OSIM:
            if applicable(alg, model, cset):
                out = run(model, alg, q, cset, SHIM_MU)
                assert rel(out[up], R[up]) < SHIM_TOL, f"{alg} {model.name}: vs Pinocchio's damped inverse"


# --- tracing, compiled C, registry, op counts ---------------------------------------------------

@pytest.mark.parametrize("alg", DELASSUS + OSIM)
def test_sx_trace_equals_numpy(alg):
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    mu = {} if alg in DELASSUS else {"mu": CABA_MU if alg in CABA else DEFAULT_MU}
    tr = trace(model, alg, cset, **mu)
    assert [(n, e.shape) for n, e in tr.outputs] == [(ALGORITHMS[alg].outputs(model, cset)[0][0], (18, 18))]
    f = tr.function()
    for q in states(model, 10):
        assert rel(np.array(f(q)), run(model, alg, q, cset, mu.get("mu"))) < SX_TOL, f"{alg}: SX vs NumPy"


@pytest.mark.parametrize("alg", DELASSUS + OSIM)
def test_compiled_c_equals_numpy(alg, kernel_cache):
    model = humanoid30()
    spec = "6D:left_foot,3D:right_foot"
    cset = parse_constraints(model, spec)
    mu = {} if alg in DELASSUS else {"mu": CABA_MU if alg in CABA else DEFAULT_MU}
    kernel = gen.build(model, alg, spec, cache=kernel_cache, **mu)
    fn = kernel.manifest["functions"][0]
    assert [x["name"] for x in fn["inputs"]] == ["q"] and fn["outputs"][0]["size"] == 81
    for q in states(model, 11, n=3):
        got = kernel(q)
        assert got.shape == (9, 9)
        assert rel(got, run(model, alg, q, cset, mu.get("mu"))) < C_TOL, f"{alg}: compiled C vs NumPy"


def test_registry_rows():
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    for alg, out in [(a, "Delassus") for a in DELASSUS] + [(a, "Lambda") for a in OSIM]:
        row = ALGORITHMS[alg]
        assert row.constrained
        assert row.inputs(model, cset) == [("q", model.nq)]
        assert row.outputs(model, cset) == [(out, 18, 18)]


def test_each_branching_body_takes_the_cheaper_form():
    """caba_osim's estimate keeps Algorithm 5's 6 x 6 form where long chains carry many rows
    (the trunk tree's trunk and arms) and the constraint-space form elsewhere (limb ends,
    humanoid30 everywhere); caba_osimf always puts the floating base in constraint space."""
    import importlib

    from gen.algorithms.articulated import supporting_bodies

    caba = importlib.import_module("gen.algorithms.caba_osim")

    def forms(model, spec, split):
        cset = parse_constraints(model, spec)
        cons = [caba.OsimRow(list(cset.rows(i)), c.body1, None, None) for i, c in enumerate(cset.constraints)]
        nodes = caba.branching_bodies(model, supporting_bodies(model, cset), cons, split)
        return {model.bodies[d].name: n.rows for d, n in nodes.items()}

    trunk = trunk_tree()
    spec = "6D:tipa0,6D:tipa1,6D:tipb0,6D:tipb1"
    assert forms(trunk, spec, False) == {"trunk4": False, "arma4": False, "armb4": False, "fingera0_2": True,
                                         "fingera1_2": True, "fingerb0_2": True, "fingerb1_2": True}
    assert forms(trunk, spec, True)["base"] is True
    assert all(forms(humanoid30(), HUMANOID_CONTACTS, False).values())


def test_opcount_phases_partition_the_total():
    oc = gen.opcount("humanoid30", "caba_osim", HUMANOID_CONTACTS)
    assert oc["m"] == 18 and oc["total"] == sum(p["total"] for p in oc["phases"])
    assert [p["name"] for p in oc["phases"]] == ["articulated_inertia", "propagators", "inverse_inertia", "lambda"]
    assert all(p["total"] > 0 for p in oc["phases"] if p["name"] != "inverse_inertia")   # none: no 6 x 6 body


@pytest.mark.parametrize("robot, spec", [("humanoid30", HUMANOID_CONTACTS),
                                         ("bintree:30", None), ("talos", SOLES + "," + ARMS)])
def test_caba_osim_needs_fewer_operations_than_ltl_osim(robot, spec):
    """The issue's target, on trees of humanoid size and above (op counts are exact)."""
    model = load(robot)
    if spec is None:                                    # 6D on every leaf of the binary tree
        spec = ",".join(f"6D:{f.name}" for f in model.frames if f.name.startswith("leaf"))
    caba = gen.opcount(model, "caba_osim", spec)["total"]
    ltl = gen.opcount(model, "ltl_osim", spec)["total"]
    assert caba < ltl, f"{robot}: caba_osim {caba} ops, ltl_osim {ltl}"
