"""The generic C Delassus matrix and damped Delassus inverses (gen/generic/rbg_delassus.c)
against the NumPy reference (docs/DESIGN.md §6c): rbg_delassus, rbg_ltl_osim, rbg_kkt_osim and
rbg_caba_osim (also bound as caba_osimf) give gen.run's m x m matrix, exactly symmetric, on
ur5 6D:tool0, solo12's four feet, talos' soles and humanoid30's feet and hands; with
weights, frames A held by the world, free-flyers mid-tree and loops between two moving
bodies (which cABA-OSIM refuses); NaN inputs, bad mu, singular models and loops return
their codes; the workspaces the API asks for are enough (canaries after them stay
untouched); constraints_to_c's work-size macros build in a strict C99 program.

mu: J M^-1 J^T and the joint-space inverses (ltl_osim, kkt_osim) are compared at
Pinocchio's damping 1e-6.  cABA-OSIM applies the inversion lemma Lambda_mu = W - L_0^A,
W = 1/mu, whose cancellation leaves ~eps W-sized rounding in any implementation
(gen/algorithms/caba_osim.py, "Accuracy"; measured C vs NumPy 2e-9 at 1e-6 on solo12): it
is compared at 1e-3, where both sit ~1e-12 from each other (worst seen 1.6e-12, solo12),
as tests/test_delassus.py compares it with dense NumPy."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from conftest import load_or_skip
from random_trees import every_kind_tree, random_rotation
from test_constraints import HUMANOID_CONTACTS, loop_tree

import gen
from gen.algorithms import ALGORITHMS as ROWS
from gen.constraint_spec import parse_constraints
from gen.errors import RbdgenError
from gen.generic import (
    INCLUDE_DIR,
    SOURCES,
    GenericModel,
    constraints_to_c,
    delassus_work_sizes,
    model_to_c,
)
from gen.generic.serialize import DELASSUS_ALGO_IDS
from gen.model import SE3, Frame, Inertia, Model
from gen.robots.synthetic import chain, humanoid30

REL_TOL = 1e-10          # max|C - NumPy| / max|NumPy|
MU = {"delassus": None, "ltl_osim": 1e-6, "kkt_osim": 1e-6, "caba_osim": 1e-3, "caba_osimf": 1e-3}
ALGORITHMS = tuple(MU)
CABA = ("caba_osim", "caba_osimf")
CANARY = -1.2345e300
RBG_EINPUT, RBG_ESINGULAR, RBG_ELOOP = 1, 2, 5
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLES = "6D:left_sole_link,6D:right_sole_link"
NAMED = [("ur5", "6D:tool0"), ("solo12", FEET), ("talos", SOLES)]
HUMANOID_LOOP = "6D:left_foot,6D:right_foot,3D:left_hand~right_hand"


def rel_err_unscaled(x, ref) -> float:
    """``max|x - ref| / max|ref|`` (not conftest.rel_err's ``max(1, max|ref|)``)."""
    return float(np.max(np.abs(np.asarray(x) - ref)) / np.max(np.abs(ref)))


def states(model, seed: int, n: int = 2):
    rng = np.random.default_rng(seed)
    return [model.random_q(rng) for _ in range(n)]


def applicable(alg: str, model, cset) -> bool:
    if alg in CABA and not all(c.anchored for c in cset.constraints):
        return False
    return alg != "caba_osimf" or all(b.kind == "free" for b in model.bodies if b.parent == -1)


def options(alg: str) -> dict:
    return {} if MU[alg] is None else {"mu": MU[alg]}


def check(model, cset, algorithms=ALGORITHMS, seed: int = 0, n_states: int = 2) -> None:
    """Generic C = gen.run, shapes equal, the C output exactly symmetric."""
    g = GenericModel(model, cset)
    for q in states(model, seed, n_states):
        for alg in algorithms:
            if not applicable(alg, model, cset):
                continue
            ref = gen.run(model, alg, q, constraints=cset, **options(alg))
            out = g.call(alg, q, **options(alg))
            assert out.shape == ref.shape == (cset.m, cset.m), f"{alg}: output shape"
            err = rel_err_unscaled(out, ref)
            assert err < REL_TOL, f"{model.name} {cset} {alg}: generic C vs NumPy rel. error {err:.2e}"
            assert np.array_equal(out, out.T), f"{alg}: not exactly symmetric"


# --- C = NumPy ----------------------------------------------------------------------------

@pytest.mark.parametrize("robot,spec", NAMED, ids=[r for r, _ in NAMED])
def test_named_robots_match_numpy(robot, spec):
    load_or_skip(robot)
    model = gen.load_robot(robot)
    check(model, parse_constraints(model, spec))


def test_humanoid30_feet_and_hands_match_numpy():
    model = humanoid30()
    check(model, parse_constraints(model, HUMANOID_CONTACTS), seed=1)


def test_weights_frames_in_the_world_and_free_joints_mid_tree():
    """Weights scale the damping per constraint (rho = mu / weight); a frame A held by the
    world (3D: a constant augmented inertia; 6D: W K^T K from c1Mc2) and free-flyers in
    the middle of a random tree (P_i = 0 there)."""
    model = humanoid30()
    check(model, parse_constraints(model, HUMANOID_CONTACTS, weights=[1.0, 4.0, 0.5, 2.0]), seed=2)
    tree = loop_tree(3)
    assert any(b.kind == "free" and b.parent != -1 for b in tree.bodies), "no free-flyer mid-tree"
    check(tree, parse_constraints(tree, "6D:tip4,3D:tip9,3D:tip2,3D:anchor~tip7", weights=[1.0, 0.5, 2.0, 1.0]),
          seed=3)
    check(tree, parse_constraints(tree, "3D:tip9,6D:anchor~tip4"), seed=4)


@pytest.mark.parametrize("seed,spec", [(8, "3D:tip11,3D:tip10,6D:anchor~tip4"), (11, "3D:tip11,6D:tip10,3D:tip6")],
                         ids=["every_kind8", "every_kind11"])
def test_spherical_planar_helical_match_numpy(seed, spec):
    """The 3-DoF joint blocks (cABA-OSIM's backward sweep) and the helical subspace."""
    tree = every_kind_tree(12, seed)
    anchor = Frame("anchor", -1, SE3(random_rotation(np.random.default_rng(seed)), np.ones(3)), "fixed_joint")
    tree = Model(tree.name, tree.bodies, tree.frames + [anchor], source=tree.source)
    check(tree, parse_constraints(tree, spec), seed=seed)


def test_weights_reach_the_c():
    """A weighted set gives another damped inverse than the unweighted one."""
    model = humanoid30()
    q = states(model, 5, 1)[0]
    plain = GenericModel(model, HUMANOID_CONTACTS)
    heavy = GenericModel(model, parse_constraints(model, HUMANOID_CONTACTS, weights=[1.0, 1e-3, 1.0, 1.0]))
    for alg in ("ltl_osim", "kkt_osim", "caba_osim"):
        assert rel_err_unscaled(heavy.call(alg, q, mu=1e-3), plain.call(alg, q, mu=1e-3)) > 1e-6, f"{alg} ignores weights"


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_LOOP), (lambda: loop_tree(3), "3D:tip7~tip2,6D:tip5~tip8")],
                         ids=["humanoid30-hands", "random-tree"])
def test_loops_between_moving_bodies(make, spec):
    """The joint-space methods close loops between two moving bodies; cABA-OSIM refuses
    them, in Python (naming the alternatives) and in C (RBG_ELOOP)."""
    model = make()
    cset = parse_constraints(model, spec)
    check(model, cset, ("delassus", "ltl_osim", "kkt_osim"), seed=6)
    g = GenericModel(model, cset)
    q = states(model, 7, 1)[0]
    for alg in CABA:
        with pytest.raises(RbdgenError, match="ltl_osim or kkt_osim"):
            g.call(alg, q)
    rc, _ = _raw(g, "caba_osim", q, np.zeros(g.work_size("caba_osim")))
    assert rc == RBG_ELOOP, f"caba_osim on a loop returned {rc}, expected RBG_ELOOP"


def test_caba_osimf_needs_a_floating_base():
    g = GenericModel(gen.load_robot("chain:4"), "6D:link4_tip")
    with pytest.raises(RbdgenError, match="floating base"):
        g.caba_osimf(np.zeros(4))


# --- return codes, workspaces ------------------------------------------------------------------

def _raw(g: GenericModel, alg: str, q, work, mu=1e-3, pad=0):
    """Call rbg_<alg> directly; returns (rc, the m x m output followed by ``pad`` canaries)."""
    ffi = g.ffi
    ptr = lambda a: ffi.from_buffer("double[]", a)
    out = np.full(g.m * g.m + pad, CANARY)
    qp = ptr(np.ascontiguousarray(q, dtype=float))
    fn = getattr(g.lib, ROWS[alg].generic.entry)
    if alg == "delassus":
        rc = fn(g.c_model, g.c_constraints, qp, ptr(out), ptr(work))
    else:
        rc = fn(g.c_model, g.c_constraints, mu, qp, ptr(out), ptr(work))
    return rc, out


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_and_bad_mu_return_einput(bad):
    model = humanoid30()
    g = GenericModel(model, HUMANOID_CONTACTS)
    q = states(model, 8, 1)[0]
    for alg in DELASSUS_ALGO_IDS:
        work = np.zeros(g.work_size(alg))
        for pos in (0, 5, -1):
            spoiled = np.array(q)
            spoiled[pos] = bad
            rc = _raw(g, alg, spoiled, work)[0]
            assert rc == RBG_EINPUT, f"{alg}: {bad} in q[{pos}] returned {rc}"
        if alg != "delassus":
            for mu in (0.0, -1e-6, np.inf, np.nan):
                rc = _raw(g, alg, q, work, mu=mu)[0]
                assert rc == RBG_EINPUT, f"{alg} with mu={mu} returned {rc}"
    with pytest.raises(RbdgenError, match="NaN or inf"):
        g.caba_osim(np.full(model.nq, np.nan))
    with pytest.raises(RbdgenError, match="mu"):
        g.ltl_osim(q, mu=0.0)


def test_no_constraints_is_a_user_error():
    g = GenericModel(humanoid30())
    for alg in ALGORITHMS:
        with pytest.raises(RbdgenError, match="give constraints"):
            g.call(alg, humanoid30().neutral())


def test_singular_model_returns_esingular():
    """A massless, inertia-free leaf: its pivot is 0 in M, in the KKT matrix and in the
    augmented articulated inertia (the constraint sits on its parent)."""
    model = chain(3)
    model.bodies[2].inertia = Inertia.zero()
    model.frames.append(Frame("mid", 1, SE3.identity(), "fixed_joint"))
    g = GenericModel(model, "3D:mid")
    for alg in DELASSUS_ALGO_IDS:
        if alg == "caba_osimf":        # caba_osim's C entry, refused on a fixed base (tested above)
            continue
        with pytest.raises(RbdgenError, match="singular"):
            g.call(alg, np.zeros(3))


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_CONTACTS), (lambda: loop_tree(3), "6D:tip4,3D:tip9,3D:anchor~tip7")],
                         ids=["humanoid30", "random-tree"])
def test_workspace_size_is_enough(make, spec):
    """Exactly rbg_constrained_work_size doubles (= the Python mirror = the RBG_WORK_*
    macros' formula), followed by canaries, give the reference matrix and leave the
    canaries after the workspace and after the output untouched."""
    model = make()
    cset = parse_constraints(model, spec)
    g = GenericModel(model, cset)
    pad = 32
    sizes = delassus_work_sizes(model, cset)
    q = states(model, 9, 1)[0]
    for alg, algo_id in DELASSUS_ALGO_IDS.items():
        n = g.work_size(alg)
        assert n == sizes[alg] == g.lib.rbg_constrained_work_size(g.c_model, g.c_constraints, algo_id)
        work = np.full(n + pad, CANARY)
        rc, out = _raw(g, alg, q, work, pad=pad)
        assert rc == 0, f"{alg} returned {rc}"
        assert np.all(work[n:] == CANARY), f"{alg} wrote past its {n}-double workspace"
        assert np.all(out[cset.m * cset.m:] == CANARY), f"{alg} wrote past its output"
        ref = gen.run(model, alg, q, constraints=cset, **({} if alg == "delassus" else {"mu": 1e-3}))
        got = out[:cset.m * cset.m].reshape(cset.m, cset.m)
        assert rel_err_unscaled(got, ref) < REL_TOL, f"{alg} with the exact workspace: {rel_err_unscaled(got, ref):.2e}"
    assert g.lib.rbg_work_size(g.c_model, DELASSUS_ALGO_IDS["caba_osim"]) == 0


# --- C-level: an embedded constraint set ----------------------------------------------------------

CC = shutil.which("cc") or shutil.which("gcc")

PROGRAM = r"""
#include <stdio.h>
#include "model.h"
#include "cons.h"
int main(void) {
    static const double q[] = {%(q)s};
    static double work[%(work)d], G[%(m)d * %(m)d];
    int (*damped[3])(const rbg_model *, const rbg_constraints *, double, const double *, double *, double *) =
        {rbg_ltl_osim, rbg_kkt_osim, rbg_caba_osim};
    if (rbg_constraints_init(&robot, &cons, cons_iwork)) return 10;
    if (rbg_constrained_work_size(&robot, &cons, RBG_ALGO_CABA_OSIM) != CONS_WORK_CABA_OSIM) return 11;
    if (CONS_WORK_KKT_OSIM != RBG_WORK_KKT_OSIM(%(nb)d, %(nv)d, %(m)d)) return 12;
    if (rbg_delassus(&robot, &cons, q, G, work)) return 1;
    for (int k = 0; k < %(m)d * %(m)d; ++k) printf("%%.17g\n", G[k]);
    for (int s = 0; s < 3; ++s) {
        if (damped[s](&robot, &cons, %(mu)s, q, G, work)) return 2 + s;
        for (int k = 0; k < %(m)d * %(m)d; ++k) printf("%%.17g\n", G[k]);
    }
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_delassus_in_a_standalone_program(tmp_path):
    """model_to_c + constraints_to_c + the library build as strict C99 and reproduce
    NumPy for the four functions (solo12's feet, mu = 1e-3)."""
    load_or_skip("solo12")
    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    q = states(model, 10, 1)[0]
    (tmp_path / "model.h").write_text(model_to_c(model, "robot"))
    (tmp_path / "cons.h").write_text(constraints_to_c(model, cset, "cons"))
    work = max(delassus_work_sizes(model, cset).values())
    (tmp_path / "main.c").write_text(PROGRAM % {"q": ", ".join(repr(float(t)) for t in q), "work": work,
                                                "nv": model.nv, "m": cset.m, "nb": model.nbodies, "mu": "1e-3"})
    exe = tmp_path / "prog"
    subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-I", str(INCLUDE_DIR), "-I",
                    str(tmp_path), str(tmp_path / "main.c"), *map(str, SOURCES), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"program exited {run.returncode}"
    vals = np.array([float(x) for x in run.stdout.split()]).reshape(4, cset.m, cset.m)
    for got, alg in zip(vals, ("delassus", "ltl_osim", "kkt_osim", "caba_osim")):
        ref = gen.run(model, alg, q, constraints=cset, **({} if alg == "delassus" else {"mu": 1e-3}))
        assert rel_err_unscaled(got, ref) < REL_TOL, f"embedded {alg}: {rel_err_unscaled(got, ref):.2e}"
