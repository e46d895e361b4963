"""The generic C proximal solvers (gen/generic/rbg_constrained.c) against the NumPy
reference (docs/DESIGN.md §6c): rbg_prox_ltl, rbg_prox_ltls, rbg_constrained_aba and rbg_prox_pv
give gen.run's (ddq, lam, iterations, residual) with the same options, on the named
robots, humanoid30, the four-bar loop, loops between two moving bodies and random trees
with spherical, planar and helical joints among every kind; with
Baumgarte gains and weights; with a tolerance (same iteration counts); the patterns
rbg_constraints_init computes follow the tree (Carpentier 2021 eq. 26-27); NaN inputs,
bad options, bad constraint arrays, singular models and loops given to the
maximal-coordinate solvers return their codes; the workspaces the API asks for are
enough (canaries after them stay untouched); constraints_to_c embeds a set in a
standalone C program.

mu: the dual methods (prox_ltl, prox_pv) are compared at Pinocchio's damping 1e-6; the
augmented-Lagrangian ones add J^T J / rho to the inertia and round at
~eps / (mu lambda_min(M)) (gen/algorithms/proximal.py, "Accuracy"), so two correct
implementations agree to 1e-10 only at a larger mu: 1e-4 for constrained_aba (measured
C vs NumPy <= 6e-11 on 20 states of each named robot and humanoid30), 1e-3 for
prox_ltls, whose NumPy reference is itself up to 5e-10 from the exact iterate at 1e-4
on humanoid30's light limbs (<= 4e-12 at 1e-3; C vs NumPy <= 2.3e-11)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from conftest import row_floor, SOLVERS, load_or_skip, rel_err
from random_trees import every_kind_tree
from test_constrained import states
from test_constraints import HUMANOID_CONTACTS, loop_tree

import gen
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.errors import RbdgenError
from gen.generic import (
    INCLUDE_DIR,
    SOURCES,
    GenericModel,
    constrained_work_sizes,
    constraints_to_c,
    model_to_c,
)
from gen.generic.serialize import CONSTRAINED_ALGO_IDS, constraints_iwork_size
from gen.model import SE3, Frame, Inertia
from gen.robots.synthetic import chain, fourbar, humanoid30

REL_TOL = 1e-10          # max|x - ref| / max(1, max|ref|), generic C vs NumPy
WORLD_ONLY = ("constrained_aba", "prox_pv")          # Sathya 2024 §II-E
MU = {"prox_ltl": 1e-6, "prox_ltls": 1e-3, "constrained_aba": 1e-4, "prox_pv": 1e-6}
ITERATIONS = 4
CANARY = -1.2345e300
RBG_EINPUT, RBG_ESINGULAR, RBG_EMODEL, RBG_ELOOP = 1, 2, 4, 5
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
NAMED = [("ur5", "6D:tool0"), ("solo12", FEET), ("talos", "6D:left_sole_link,6D:right_sole_link")]
HUMANOID_LOOP = "6D:left_foot,6D:right_foot,3D:left_hand~right_hand"


def applicable(alg: str, cset) -> bool:
    return alg not in WORLD_ONLY or all(c.anchored for c in cset.constraints)


def check(model, cset, algorithms=SOLVERS, seed: int = 0, n_states: int = 2, tol: float = REL_TOL, mu=None,
          **options):
    """Generic C = gen.run on every output (to ``tol``; ``mu`` replaces :data:`MU`);
    iteration counts equal."""
    g = GenericModel(model, cset)
    for q, v, tau in states(model, seed, n_states, cset):
        for alg in algorithms:
            if not applicable(alg, cset):
                continue
            opts = {"mu": (mu or MU)[alg], "iterations": ITERATIONS, **options}
            ref = gen.run(model, alg, q, v, tau, constraints=cset, **opts)
            out = g.call(alg, q, v, tau, **opts)
            assert [o.shape for o in out] == [np.shape(r) or (1,) for r in ref], f"{alg}: output shapes"
            for name, o, r in zip(("ddq", "lam"), out, ref):
                err = rel_err(o, r)
                assert err < tol, f"{model.name} {cset} {alg} {name}: generic C vs NumPy rel. error {err:.2e}"
            assert out[2][0] == ref[2], f"{alg}: {out[2][0]} iterations, NumPy {ref[2]}"
            scale = max(1.0, float(np.max(np.abs(ref[1]), initial=0.0)))
            assert abs(out[3][0] - ref[3]) <= 1e-9 * scale, f"{alg}: residual {out[3][0]} vs {ref[3]}"


# --- C = NumPy ----------------------------------------------------------------------------

@pytest.mark.parametrize("robot,spec", NAMED, ids=[r for r, _ in NAMED])
def test_named_robots_match_numpy(robot, spec):
    load_or_skip(robot)
    model = gen.load_robot(robot)
    check(model, parse_constraints(model, spec))


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_CONTACTS), (fourbar, "3D:tip~anchor")],
                         ids=["humanoid30", "fourbar"])
def test_synthetic_match_numpy(make, spec):
    model = make()
    check(model, parse_constraints(model, spec), seed=1)


# frames below spherical (seed 8: a spherical root), planar and helical joints
EVERY_KIND_SETS = [(8, "3D:tip11,3D:tip10"), (10, "3D:tip9,6D:tip7,3D:tip11"), (11, "3D:tip11,6D:tip10,3D:tip6")]


@pytest.mark.parametrize("seed,spec", EVERY_KIND_SETS, ids=[f"every_kind{s}" for s, _ in EVERY_KIND_SETS])
def test_spherical_planar_helical_match_numpy(seed, spec):
    """Every solver to 1e-12 through the 3-DoF joint blocks and the helical subspace (the
    augmented-Lagrangian ones at mu = 1e-3, where their rounding ~eps / (mu lambda_min(M))
    stays below it; worst seen 3e-13)."""
    model = every_kind_tree(12, seed)
    check(model, parse_constraints(model, spec), seed=seed, tol=1e-12, mu={**MU, "constrained_aba": 1e-3})


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_LOOP), (lambda: loop_tree(3), "3D:tip7~tip2,6D:tip5~tip8")],
                         ids=["humanoid30-hands", "random-tree"])
def test_loops_between_moving_bodies(make, spec):
    """prox_ltl and prox_ltls close loops between two moving bodies (fill-in outside the
    tree pattern); the maximal-coordinate solvers refuse them, in Python and in C."""
    model = make()
    cset = parse_constraints(model, spec)
    check(model, cset, ("prox_ltl", "prox_ltls"), seed=2)
    g = GenericModel(model, cset)
    q, v, tau = states(model, 3, 1)[0]
    for alg in WORLD_ONLY:
        with pytest.raises(RbdgenError, match="loop between two moving bodies"):
            g.call(alg, q, v, tau)
        rc = _raw(g, alg, q, v, tau, np.zeros(g.work_size(alg)))[0]
        assert rc == RBG_ELOOP, f"{alg} on a loop returned {rc}, expected RBG_ELOOP"


def test_baumgarte_and_weights():
    """Baumgarte gains (3D and 6D position errors, frames on either side, a frame A
    fixed to the world) and weights (rho = mu / weight per constraint)."""
    model = humanoid30()
    check(model, parse_constraints(model, HUMANOID_CONTACTS, Kp=20.0, Kd=5.0, weights=[1.0, 0.5, 0.25, 1.0]), seed=4)
    check(model, parse_constraints(model, HUMANOID_LOOP, Kp=20.0, Kd=5.0, weights=[0.5, 1.0, 0.25]),
          ("prox_ltl", "prox_ltls"), seed=5)
    tree = loop_tree(3)
    check(tree, parse_constraints(tree, "6D:tip4,3D:tip9,3D:anchor~tip7", Kp=5.0, Kd=1.5,
                                  weights=[1.0, 0.5, 0.75]), seed=6)
    check(tree, parse_constraints(tree, "3D:tip9,6D:anchor~tip4", Kp=5.0, Kd=1.5, weights=[0.5, 1.0]), seed=6)
    fb = fourbar()
    check(fb, parse_constraints(fb, "3D:tip~anchor", Kp=10.0, Kd=2.0), seed=7)


def test_weights_change_the_iterates():
    """The weights reach the C: a weighted set gives other iterates than the unweighted
    one (while both match NumPy, see above)."""
    model = gen.load_robot("fourbar")
    q, v, tau = states(model, 8, 1)[0]
    plain = GenericModel(model, parse_constraints(model, "3D:tip~anchor")).prox_ltl(q, v, tau, iterations=1)
    heavy = GenericModel(model, parse_constraints(model, "3D:tip~anchor", weights=[1e-3])).prox_ltl(
        q, v, tau, iterations=1)
    assert rel_err(plain[1], heavy[1]) > 1e-6, "a weight of 1e-3 left the first iterate unchanged"


@pytest.mark.parametrize("robot,spec", [("solo12", FEET), ("humanoid30", HUMANOID_CONTACTS)])
def test_tolerance_same_iteration_counts(robot, spec):
    """With tol, the run-time early exit takes as many iterations as the reference and
    returns the same iterate; the residual is below tol."""
    if robot != "humanoid30":
        load_or_skip(robot)
    model = gen.load_robot(robot)
    cset = parse_constraints(model, spec)
    check(model, cset, seed=9, tol=1e-8, max_iter=60)
    g = GenericModel(model, cset)
    q, v, tau = states(model, 10, 1)[0]
    ddq, lam, its, res = g.prox_pv(q, v, tau, tol=1e-8, max_iter=60)
    assert 1 < its[0] < 60 and res[0] <= 1e-8, f"prox_pv stopped after {its[0]} iterations at {res[0]:.1e}"


def test_no_constraints_is_aba():
    model = humanoid30()
    g = GenericModel(model)
    for q, v, tau in states(model, 11):
        ddq = g.aba(q, v, tau)
        for alg in SOLVERS:
            out = g.call(alg, q, v, tau, iterations=5)
            assert rel_err(out[0], ddq) < REL_TOL, f"{alg} without constraints vs ABA"
            assert out[1].shape == (0,) and out[2][0] == 0 and out[3][0] == 0.0


# --- structure ------------------------------------------------------------------------------

def _ints(g: GenericModel, field: str, n: int) -> list[int]:
    ptr = getattr(g.c_constraints, field)
    return [int(ptr[k]) for k in range(n)]


def _pattern(g: GenericModel, name: str, rows: int) -> list[list[int]]:
    ptr = _ints(g, f"{name}_ptr", rows + 1)
    idx = _ints(g, f"{name}_idx", ptr[-1])
    return [idx[ptr[k]:ptr[k + 1]] for k in range(rows)]


def test_patterns_follow_the_tree():
    """Anchored contacts: M_mu's factor has the tree's pattern (no fill, Featherstone 2005
    §4); K_mu's joint rows hold the ancestor dofs and the rows of the constraints that
    the joint's subtree supports (Carpentier 2021 eq. 26-27); the Delassus block is dense.
    A loop between two moving bodies adds fill-in to M_mu."""
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_CONTACTS)
    g = GenericModel(model, cset)
    nv, m = model.nv, cset.m
    lam = model.dof_parents()

    def chain_of(d):
        out, a = [], lam[d]
        while a >= 0:
            out.append(a)
            a = lam[a]
        return out

    subtree = [{e for e in range(nv) if d == e or d in chain_of(e)} for d in range(nv)]
    assert _pattern(g, "mmu", nv) == [chain_of(d) for d in range(nv)]
    kkt = _pattern(g, "kkt", m + nv)
    for d in range(nv):
        rows = sorted((r for c in range(len(cset)) if subtree[d] & set(cset.support(model, c))
                       for r in cset.rows(c)), reverse=True)
        assert kkt[m + d] == [m + a for a in chain_of(d)] + rows, f"K_mu row of dof {d}"
    assert [len(kkt[r]) for r in range(m)] == list(range(m)), "constraint block not dense"
    assert _pattern(g, "del", m) == [list(range(r - 1, -1, -1)) for r in range(m)]
    assert g.c_constraints.anchored == 1 and list(_ints(g, "row", len(cset) + 1)) == [*cset.offsets, m]

    looped = GenericModel(model, parse_constraints(model, HUMANOID_LOOP))
    mmu = _pattern(looped, "mmu", nv)
    fill = sum(len(r) for r in mmu) - sum(len(chain_of(d)) for d in range(nv))
    assert fill > 0 and looped.c_constraints.anchored == 0, "the hand loop couples the two arms in M_mu"


# --- return codes, workspaces ------------------------------------------------------------------

def _raw(g: GenericModel, alg: str, q, v, tau, work, mu=1e-6, max_iter=3, tol=-1.0, pad=0):
    """Call rbg_<alg> directly; returns (rc, outputs padded by ``pad`` canaries)."""
    ffi = g.ffi
    ptr = lambda a: ffi.from_buffer("double[]", a)
    outs = [np.full(n + pad, CANARY) for n in (g.nv, max(g.m, 1), 1, 1)]
    opts = ffi.new("rbg_prox_options *", {"mu": mu, "max_iter": max_iter, "tol": tol})
    fn = getattr(g.lib, f"rbg_{alg}")
    rc = fn(g.c_model, g.c_constraints, opts, *(ptr(np.ascontiguousarray(x, dtype=float)) for x in (q, v, tau)),
            *(ptr(o) for o in outs), ptr(work))
    return rc, outs


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_and_bad_options_return_einput(bad):
    model = humanoid30()
    g = GenericModel(model, parse_constraints(model, HUMANOID_CONTACTS))
    q, v, tau = states(model, 12, 1)[0]
    for alg in SOLVERS:
        work = np.zeros(g.work_size(alg))
        for k in range(3):
            for pos in (0, -1):
                spoiled = [np.array(x) for x in (q, v, tau)]
                spoiled[k][pos] = bad
                rc = _raw(g, alg, *spoiled, work)[0]
                assert rc == RBG_EINPUT, f"{alg}: {bad} in input {k}[{pos}] returned {rc}"
        for opts in ({"mu": 0.0}, {"mu": -1e-6}, {"mu": np.inf}, {"max_iter": 0}):
            rc = _raw(g, alg, q, v, tau, work, **opts)[0]
            assert rc == RBG_EINPUT, f"{alg} with {opts} returned {rc}"
    with pytest.raises(RbdgenError, match="NaN or inf"):
        g.prox_ltl(np.full(model.nq, np.nan), v, tau)
    for opts, msg in (({"mu": 0.0}, "mu"), ({"iterations": 0}, "positive integer"), ({"tol": -1.0}, "tol")):
        with pytest.raises(RbdgenError, match=msg):
            g.prox_pv(q, v, tau, **opts)


def test_singular_model_returns_esingular():
    """A massless, inertia-free leaf (its joint's pivot is 0 in M, K_mu, M_mu and ABA)."""
    model = chain(3)
    model.bodies[2].inertia = Inertia.zero()
    model.frames.append(Frame("mid", 1, SE3.identity(), "fixed_joint"))
    g = GenericModel(model, "3D:mid")
    q, v, tau = np.zeros(3), np.zeros(3), np.zeros(3)
    for alg in SOLVERS:
        with pytest.raises(RbdgenError, match="singular"):
            g.call(alg, q, v, tau)


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_CONTACTS), (humanoid30, HUMANOID_LOOP),
                                       (lambda: loop_tree(3), "6D:tip4,3D:tip9,3D:anchor~tip7")],
                         ids=["humanoid30", "humanoid30-loop", "random-tree"])
def test_workspace_size_is_enough(make, spec):
    """Exactly rbg_constrained_work_size doubles (= the Python mirror = the RBG_WORK_*
    macros' formula), followed by canaries, give the reference results and leave the
    canaries after the workspace and after each output untouched; rbg_constraints_init
    writes nothing past rbg_constraints_iwork_size ints."""
    model = make()
    cset = parse_constraints(model, spec, Kp=2.0, Kd=1.0)
    g = GenericModel(model, cset)
    pad = 32
    check_init_stays_within_iwork(g, model, cset)
    sizes = constrained_work_sizes(model, cset)
    q, v, tau = states(model, 13, 1, cset)[0]
    for alg, algo_id in CONSTRAINED_ALGO_IDS.items():
        n = g.work_size(alg)
        assert n == sizes[alg] == g.lib.rbg_constrained_work_size(g.c_model, g.c_constraints, algo_id)
        if not applicable(alg, cset):
            continue
        work = np.full(n + pad, CANARY)
        rc, outs = _raw(g, alg, q, v, tau, work, mu=MU[alg], max_iter=ITERATIONS, pad=pad)
        assert rc == 0, f"{alg} returned {rc}"
        assert np.all(work[n:] == CANARY), f"{alg} wrote past its {n}-double workspace"
        for k, o in enumerate(outs):
            assert np.all(o[len(o) - pad:] == CANARY), f"{alg} wrote past output {k}"
        ref = gen.run(model, alg, q, v, tau, constraints=cset, mu=MU[alg], iterations=ITERATIONS)
        for name, o, r in (("ddq", outs[0][:model.nv], ref[0]), ("lam", outs[1][:cset.m], ref[1])):
            assert rel_err(o, r) < REL_TOL, f"{alg} {name} with the exact workspace: {rel_err(o, r):.2e}"
    assert g.lib.rbg_constrained_work_size(g.c_model, g.c_constraints, 0) == 0, "rnea is not a proximal solver"
    assert g.lib.rbg_work_size(g.c_model, CONSTRAINED_ALGO_IDS["prox_ltl"]) == 0


def check_init_stays_within_iwork(g, model, cset, pad: int = 32):
    """rbg_constraints_iwork_size ints (= the Python mirror) are enough: rbg_constraints_init
    on a copy of the set leaves canaries after them untouched."""
    n_iwork = int(g.lib.rbg_constraints_iwork_size(g.c_model, g.c_constraints))
    assert n_iwork == constraints_iwork_size(model, cset) == g.iwork.size
    iwork = np.full(n_iwork + pad, -77, dtype=np.intc)
    c2 = g.ffi.new("rbg_constraints *", g.c_constraints[0])
    assert g.lib.rbg_constraints_init(g.c_model, c2, g.ffi.from_buffer("int[]", iwork)) == 0
    assert np.all(iwork[n_iwork:] == -77), "rbg_constraints_init wrote past its int workspace"


def test_init_rejects_inconsistent_constraints():
    model = humanoid30()
    g = GenericModel(model, parse_constraints(model, HUMANOID_CONTACTS))
    ffi, lib = g.ffi, g.lib
    a = g.constraint_arrays
    iwork = np.zeros(g.iwork.size + 64, dtype=np.intc)
    spoil = [("size", 0, 4), ("body1", 1, model.nbodies), ("body1", 2, -2), ("body1", 0, -1),
             ("weight", 0, 0.0), ("weight", 3, np.inf), ("M1", 5, np.nan), ("M2", 0, np.nan),
             ("kp", 1, -1.0), ("kd", 2, -1.0), ("kp", 0, np.nan), ("kd", 3, np.inf)]
    for field, k, value in spoil:
        arr = np.array(getattr(a, field))
        arr[k] = value
        c2 = ffi.new("rbg_constraints *", g.c_constraints[0])
        buf = ffi.from_buffer("int[]" if arr.dtype == np.intc else "double[]", arr)
        setattr(c2, field, buf)
        rc = lib.rbg_constraints_init(g.c_model, c2, ffi.from_buffer("int[]", iwork))
        assert rc == RBG_EMODEL, f"rbg_constraints_init accepted {field}[{k}] = {value}"


# --- C-level: an embedded constraint set ----------------------------------------------------------

CC = shutil.which("cc") or shutil.which("gcc")

PROGRAM = r"""
#include <stdio.h>
#include "model.h"
#include "cons.h"
int main(void) {
    static const double q[] = {%(q)s}, v[] = {%(v)s}, tau[] = {%(tau)s};
    static double work[%(work)d], ddq[%(nv)d], lam[%(m)d], its, res;
    const rbg_prox_options opt = {%(mu)s, %(iters)d, -1.0};
    int (*solvers[4])(const rbg_model *, const rbg_constraints *, const rbg_prox_options *, const double *,
                      const double *, const double *, double *, double *, double *, double *, double *) =
        {rbg_prox_ltl, rbg_prox_ltls, rbg_constrained_aba, rbg_prox_pv};
    if (rbg_constraints_init(&robot, &cons, cons_iwork)) return 10;
    if (rbg_constrained_work_size(&robot, &cons, RBG_ALGO_PROX_PV) != CONS_WORK_PROX_PV) return 11;
    if (CONS_WORK_PROX_LTL != RBG_WORK_PROX_LTL(%(nb)d, %(nv)d, %(m)d)) return 12;
    for (int s = 0; s < 4; ++s) {
        if (solvers[s](&robot, &cons, &opt, q, v, tau, ddq, lam, &its, &res, work)) return 1 + s;
        for (int k = 0; k < %(nv)d; ++k) printf("%%.17g\n", ddq[k]);
        for (int k = 0; k < %(m)d; ++k) printf("%%.17g\n", lam[k]);
    }
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_constraints_to_c_in_a_standalone_program(tmp_path):
    """model_to_c + constraints_to_c + the library build as strict C99 and reproduce
    NumPy for the four solvers (solo12's feet at mu = 1e-4, 5 iterations)."""
    load_or_skip("solo12")
    model = gen.load_robot("solo12")
    cset = parse_constraints(model, FEET)
    q, v, tau = states(model, 14, 1)[0]
    (tmp_path / "model.h").write_text(model_to_c(model, "robot"))
    (tmp_path / "cons.h").write_text(constraints_to_c(model, cset, "cons"))
    fmt = lambda x: ", ".join(repr(float(t)) for t in x)
    work = max(constrained_work_sizes(model, cset).values())
    (tmp_path / "main.c").write_text(PROGRAM % {"q": fmt(q), "v": fmt(v), "tau": fmt(tau), "work": work,
                                                "nv": model.nv, "m": cset.m, "nb": model.nbodies,
                                                "mu": "1e-4", "iters": 5})
    exe = tmp_path / "prog"
    subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Werror", "-O2", "-I", str(INCLUDE_DIR), "-I",
                    str(tmp_path), str(tmp_path / "main.c"), *map(str, SOURCES), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"program exited {run.returncode}"
    vals = np.array([float(x) for x in run.stdout.split()]).reshape(4, model.nv + cset.m)
    for row, alg in zip(vals, SOLVERS):
        ddq, lam = gen.run(model, alg, q, v, tau, constraints=cset, mu=1e-4, iterations=5)[:2]
        tol = row_floor(alg, model, cset, q, {"mu": 1e-4}, tol=REL_TOL)
        assert rel_err(row[:model.nv], ddq) < tol and rel_err(row[model.nv:], lam) < tol, f"embedded {alg}"


def test_constraint_evaluation_matches_numpy_jacobian():
    """The first proximal step from lam = 0 with one iteration has r = J ddq - a_c*: the C
    residual equals NumPy's |J ddq - a_c*|_inf with J, a_c* from gen.constraints."""
    model = humanoid30()
    cset = parse_constraints(model, HUMANOID_LOOP, Kp=3.0, Kd=1.0)
    g = GenericModel(model, cset)
    q, v, tau = states(model, 15, 1)[0]
    ddq, lam, its, res = g.prox_ltl(q, v, tau, iterations=1)
    ev = cset.evaluate(model, NUMPY.asarray(q), NUMPY.asarray(v), be=NUMPY)
    r = ev.J @ ddq - ev.a_star.ravel()
    assert abs(res[0] - np.max(np.abs(r))) <= 1e-10 * max(1.0, np.max(np.abs(r))), "residual vs J ddq - a_c*"


def test_velocity_constraints_and_per_constraint_gains():
    """``3Dv``/``6Dv`` rows get (kp, kd) = (0, Kv), position rows (Kp, Kd): the generic C
    reads the gains per constraint."""
    model = humanoid30()
    cset = parse_constraints(model, "6D:left_foot,3Dv:right_foot,6Dv:left_hand,3D:right_hand",
                             Kp=30.0, Kd=4.0, Kv=9.0)
    g = GenericModel(model, cset)
    assert list(g.constraint_arrays.kp) == [30.0, 0.0, 0.0, 30.0]
    assert list(g.constraint_arrays.kd) == [4.0, 9.0, 9.0, 4.0]
    check(model, cset, seed=8)
