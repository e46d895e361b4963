"""The generic C for events (gen/generic/rbg_events.c) against the NumPy reference (DESIGN
§6c): rbg_prox_lcp (unilateral normal rows, gen/algorithms/prox_lcp.py) and rbg_impulse
(the impact map, gen/algorithms/impulse.py) give gen.run's outputs with the same options,
at a fixed iteration count and with a tolerance (same iteration counts); prox_lcp on the
cases of tests/test_unilateral.py (random trees with and without loops, solo12's feet, a
joint-limit row, humanoid30) over states where some unilateral rows separate and others
push, and without unilateral rows equal to rbg_prox_ltl; the impulse on the named robots,
humanoid30 and frames A fixed to the world, with restitution; rbg_constraints_init orders
proxLCP's rows (unilateral first) and computes its KKT pattern as the Python reference
does; NaN inputs, bad options and restitutions, loops and one-sided rows given to the
bilateral solvers return their codes; the workspaces the API asks for are enough
(canaries); constraints_to_c embeds a unilateral set in a strict C99 program.

mu: prox_lcp is a dual method (the sparse KKT factorisation) and is compared at
Pinocchio's damping 1e-6; the impulse runs constrainedABA's augmented-Lagrangian sweeps,
whose rounding is ~eps / (mu lambda_min(M)), so it is compared at mu = 1e-4 as
tests/test_impact.py does (measured C vs NumPy <= 3e-11)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from conftest import SOLVERS, load_or_skip, rel_err
from random_trees import every_kind_tree
from test_constraints import HUMANOID_CONTACTS, loop_tree
from test_generic_constrained import (
    CANARY,
    check_init_stays_within_iwork,
    states,
)
from test_unilateral import CASES

import gen
from gen.algorithms.prox_ltl import kkt_pattern
from gen.backend import NUMPY
from gen.constraint_spec import parse_constraints
from gen.errors import RbdgenError
from gen.generic import (
    INCLUDE_DIR,
    SOURCES,
    GenericModel,
    constraints_to_c,
    event_work_sizes,
    model_to_c,
)
from gen.generic.serialize import EVENT_ALGO_IDS
from gen.robots.synthetic import humanoid30

REL_TOL = 1e-10               # max|x - ref| / max(1, max|ref|), generic C vs NumPy
RESIDUAL_TOL = 1e-9           # |residual - ref| / max(1, max|lam|)
IMPULSE_MU = 1e-4
RBG_EINPUT, RBG_EMODEL, RBG_ELOOP, RBG_EUNILATERAL = 1, 4, 5, 6
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLES = "6D:left_sole_link,6D:right_sole_link"
HUMANOID_UNILATERAL = "6D+:left_foot,6D:right_foot,3D+:left_hand,3D+:right_hand"
WORLD_FRAME_A = "3D:tip9,6D:anchor~tip4,3D:anchor~tip7"     # frames A fixed to the world


def compare(name: str, out, ref, kkt_tol: float | None = None) -> None:
    """Generic C = NumPy: outputs, iterations, residual.  ``kkt_tol``: an impact map with
    that tol, where NumPy tests the KKT residual (the dynamics residual too, gen.algorithms
    .proximal) and the generic library the constraint residual: the library may stop
    earlier, converged to its own test, and the residuals are not compared."""
    assert [np.shape(o) for o in out] == [np.shape(r) or (1,) for r in ref], f"{name}: output shapes"
    for label, o, r in zip(("first output", "second output"), out, ref):
        err = rel_err(o, r)
        assert err < REL_TOL, f"{name} {label}: generic C vs NumPy rel. error {err:.2e}"
    if kkt_tol is not None:
        assert out[2][0] <= ref[2] and out[3][0] <= kkt_tol, f"{name}: {out[2][0]} iterations, NumPy {ref[2]}"
        return
    assert out[2][0] == ref[2], f"{name}: {out[2][0]} iterations, NumPy {ref[2]}"
    scale = max(1.0, float(np.max(np.abs(ref[1]), initial=0.0)))
    assert abs(out[3][0] - ref[3]) <= RESIDUAL_TOL * scale, f"{name}: residual {out[3][0]} vs {ref[3]}"


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, spec, Kp, Kd, scale = request.param
    model = make()                     # skips solo12 without example-robot-data (load_or_skip)
    return model, parse_constraints(model, spec, Kp=Kp, Kd=Kd), scale


# --- proxLCP: C = NumPy -------------------------------------------------------------------------

def test_prox_lcp_matches_numpy(case):
    """Fixed K and a tolerance; the samples exercise both sides of the complementarity
    (a unilateral row projected to lam = 0, another pushing)."""
    model, cset, scale = case
    g = GenericModel(model, cset)
    U = cset.unilateral_rows()
    signs = set()
    for q, v, tau in states(model, 61, 6, cset):
        tau = scale * tau
        for opts in ({"iterations": 4}, {"tol": 1e-10, "max_iter": 300}):
            ref = gen.run(model, "prox_lcp", q, v, tau, constraints=cset, **opts)
            out = g.prox_lcp(q, v, tau, **opts)
            compare(f"{model.name} {cset} prox_lcp {opts}", out, ref)
            signs.update("zero" if x == 0.0 else "push" for x in out[1][U])
    assert signs == {"zero", "push"}, f"{cset}: the samples should both separate and push, got {signs}"


def test_prox_lcp_without_unilateral_rows_is_prox_ltl(case):
    model, cset, scale = case
    bilateral = parse_constraints(model, cset.spec.replace("+", ""), Kp=cset.Kp, Kd=cset.Kd)
    g = GenericModel(model, bilateral)
    assert g.c_constraints.nu == 0
    for q, v, tau in states(model, 62, 2, cset):
        for iterations in (1, 3):
            a = g.prox_lcp(q, v, scale * tau, iterations=iterations)
            b = g.prox_ltl(q, v, scale * tau, iterations=iterations)
            for name, x, y in zip(("ddq", "lam", "iterations", "residual"), a, b):
                assert rel_err(x, y) < REL_TOL, f"{cset} {name} after {iterations} iterations vs rbg_prox_ltl"


def test_lcp_row_order_and_pattern(case):
    """rbg_constraints_init puts the unilateral rows (the normals, ascending) first, then
    the others, and computes the fill-in of K_mu in that order as
    gen.algorithms.prox_ltl.kkt_pattern does."""
    model, cset, _ = case
    g = GenericModel(model, cset)
    U = cset.unilateral_rows()
    order = U + [r for r in range(cset.m) if r not in U]
    c = g.c_constraints
    assert c.nu == len(U) and [c.lcp_order[i] for i in range(cset.m)] == order
    q = model.random_q(np.random.default_rng(0))
    M = gen.run(model, "crba", q)
    J = cset.jacobian(model, NUMPY.asarray(q), be=NUMPY)
    pattern = kkt_pattern(model, cset, M, J, [-1.0] * cset.m, order)[0]
    n = cset.m + model.nv
    ptr = [c.lcp_ptr[k] for k in range(n + 1)]
    got = [[c.lcp_idx[e] for e in range(ptr[k], ptr[k + 1])] for k in range(n)]
    assert got == [list(p) for p in pattern], f"{cset}: proxLCP's K_mu pattern"


# --- impulse: C = NumPy --------------------------------------------------------------------------

IMPULSE_SETS = [("ur5", "6D:tool0"), ("solo12", FEET), ("talos", SOLES), ("humanoid30", HUMANOID_CONTACTS),
                ("loop_tree", WORLD_FRAME_A), ("every_kind10", "3D:tip9,6D:tip7,3D:tip11")]


@pytest.mark.parametrize("robot,spec", IMPULSE_SETS, ids=[r for r, _ in IMPULSE_SETS])
def test_impulse_matches_numpy(robot, spec):
    """The impact map; every_kind10 has frames below spherical, planar and helical joints."""
    model = {"loop_tree": lambda: loop_tree(3), "every_kind10": lambda: every_kind_tree(12, 10)}.get(
        robot, lambda: load_or_skip(robot))()
    cset = parse_constraints(model, spec)
    g = GenericModel(model, cset)
    for q, v, _ in states(model, 51, 2, cset):
        for opts in ({"iterations": 3, "restitution": 0.0}, {"iterations": 1, "restitution": 0.5},
                     {"tol": 1e-11, "max_iter": 100, "restitution": 0.3}):
            ref = gen.run(model, "impulse", q, v, constraints=cset, mu=IMPULSE_MU, **opts)
            out = g.impulse(q, v, mu=IMPULSE_MU, **opts)
            compare(f"{robot} {spec} impulse {opts}", out, ref, opts.get("tol"))


def test_without_constraints():
    """No constraints: prox_lcp is ABA, the impact leaves the velocity unchanged; no
    iteration is taken."""
    model = humanoid30()
    g = GenericModel(model)
    for q, v, tau in states(model, 11):
        ddq, lam, its, res = g.prox_lcp(q, v, tau, iterations=3)
        assert rel_err(ddq, g.aba(q, v, tau)) < REL_TOL and lam.shape == (0,) and its[0] == 0 and res[0] == 0
        v_plus, imp, its, res = g.impulse(q, v, restitution=0.5)
        assert np.array_equal(v_plus, v) and imp.shape == (0,) and its[0] == 0 and res[0] == 0


# --- return codes, workspaces ---------------------------------------------------------------------

def _raw(g: GenericModel, alg: str, inputs, work, mu=1e-6, max_iter=3, tol=-1.0, restitution=0.0, pad=0):
    """Call rbg_<alg> directly; returns (rc, outputs padded by ``pad`` canaries)."""
    ffi = g.ffi
    ptr = lambda a: ffi.from_buffer("double[]", a)
    outs = [np.full(n + pad, CANARY) for n in (g.nv, max(g.m, 1), 1, 1)]
    opts = ffi.new("rbg_prox_options *", {"mu": mu, "max_iter": max_iter, "tol": tol})
    extra = (restitution,) if alg == "impulse" else ()
    fn = getattr(g.lib, f"rbg_{alg}")
    rc = fn(g.c_model, g.c_constraints, opts, *extra, *(ptr(np.ascontiguousarray(x, dtype=float)) for x in inputs),
            *(ptr(o) for o in outs), ptr(work))
    return rc, outs


def _inputs(alg, q, v, tau):
    return (q, v) if alg == "impulse" else (q, v, tau)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_inputs_and_bad_options_return_einput(bad):
    model = humanoid30()
    for alg, spec in (("prox_lcp", HUMANOID_UNILATERAL), ("impulse", HUMANOID_CONTACTS)):
        g = GenericModel(model, parse_constraints(model, spec))
        q, v, tau = states(model, 12, 1)[0]
        work = np.zeros(g.work_size(alg))
        inputs = _inputs(alg, q, v, tau)
        for k in range(len(inputs)):
            for pos in (0, -1):
                spoiled = [np.array(x) for x in inputs]
                spoiled[k][pos] = bad
                rc = _raw(g, alg, spoiled, work)[0]
                assert rc == RBG_EINPUT, f"{alg}: {bad} in input {k}[{pos}] returned {rc}"
        for opts in ({"mu": 0.0}, {"mu": -1e-6}, {"mu": np.inf}, {"max_iter": 0}):
            rc = _raw(g, alg, inputs, work, **opts)[0]
            assert rc == RBG_EINPUT, f"{alg} with {opts} returned {rc}"
    for e in (-0.1, 1.5, bad):
        assert _raw(g, "impulse", (q, v), work, restitution=e)[0] == RBG_EINPUT, f"restitution {e}"
    with pytest.raises(RbdgenError, match=r"restitution coefficient 1\.5 must lie in \[0, 1\]"):
        g.impulse(q, v, restitution=1.5)
    with pytest.raises(RbdgenError, match="NaN or inf"):
        g.impulse(np.full(model.nq, bad), v)


def test_loops_and_one_sided_rows_return_their_codes():
    """The impulse handles constraints relative to the world only (RBG_ELOOP); the solvers
    of bilateral constraints and the impulse refuse a unilateral row (RBG_EUNILATERAL) with
    the reference's message; rbg_constraints_init rejects a flag other than 0 or 1."""
    model = humanoid30()
    q, v, tau = states(model, 13, 1)[0]
    g = GenericModel(model, "6D:left_foot,3D:left_hand~right_hand")
    assert _raw(g, "impulse", (q, v), np.zeros(g.work_size("impulse")))[0] == RBG_ELOOP
    with pytest.raises(RbdgenError, match="'3D:left_hand~right_hand' closes a loop between two moving bodies"):
        g.impulse(q, v)
    g = GenericModel(model, parse_constraints(model, HUMANOID_UNILATERAL))
    for alg in (*SOLVERS, "impulse"):
        rc = _raw(g, alg, _inputs(alg, q, v, tau), np.zeros(g.work_size(alg)))[0]
        assert rc == RBG_EUNILATERAL, f"{alg} on one-sided rows returned {rc}"
        with pytest.raises(RbdgenError, match=f"{alg} solves bilateral constraints only; 6D\\+:left_foot.*prox_lcp"):
            g.call(alg, *_inputs(alg, q, v, tau))
    flags = np.array(g.constraint_arrays.unilateral)
    flags[1] = 2
    c2 = g.ffi.new("rbg_constraints *", g.c_constraints[0])
    c2.unilateral = g.ffi.from_buffer("int[]", flags)
    iwork = np.zeros(g.iwork.size, dtype=np.intc)
    assert g.lib.rbg_constraints_init(g.c_model, c2, g.ffi.from_buffer("int[]", iwork)) == RBG_EMODEL


@pytest.mark.parametrize("make,spec", [(humanoid30, HUMANOID_UNILATERAL), (lambda: loop_tree(3), WORLD_FRAME_A),
                                       (lambda: loop_tree(4), "3D+:tip9~tip8,3D+:tip5,6D:tip3")],
                         ids=["humanoid30", "frame-A-world", "unilateral-loop"])
def test_workspace_size_is_enough(make, spec):
    """Exactly rbg_constrained_work_size doubles (= the Python mirror), followed by
    canaries, give the reference results and leave the canaries after the workspace and
    after each output untouched; rbg_constraints_init stays within its ints."""
    model = make()
    cset = parse_constraints(model, spec, Kp=2.0, Kd=1.0)
    g = GenericModel(model, cset)
    pad = 32
    check_init_stays_within_iwork(g, model, cset)
    sizes = event_work_sizes(model, cset)
    q, v, tau = states(model, 14, 1, cset)[0]
    anchored = all(c.anchored for c in cset.constraints)
    for alg, algo_id in EVENT_ALGO_IDS.items():
        n = g.work_size(alg)
        assert n == sizes[alg] == g.lib.rbg_constrained_work_size(g.c_model, g.c_constraints, algo_id)
        if alg == "impulse" and (cset.unilateral_rows() or not anchored):
            continue
        mu = IMPULSE_MU if alg == "impulse" else 1e-6
        work = np.full(n + pad, CANARY)
        rc, outs = _raw(g, alg, _inputs(alg, q, v, tau), work, mu=mu, max_iter=4, restitution=0.5, pad=pad)
        assert rc == 0, f"{alg} returned {rc}"
        assert np.all(work[n:] == CANARY), f"{alg} wrote past its {n}-double workspace"
        for k, o in enumerate(outs):
            assert np.all(o[len(o) - pad:] == CANARY), f"{alg} wrote past output {k}"
        opts = {"restitution": 0.5} if alg == "impulse" else {}
        ref = gen.run(model, alg, *_inputs(alg, q, v, tau), constraints=cset, mu=mu, iterations=4, **opts)
        for name, o, r in (("first", outs[0][:model.nv], ref[0]), ("second", outs[1][:cset.m], ref[1])):
            assert rel_err(o, r) < REL_TOL, f"{alg} {name} output with the exact workspace: {rel_err(o, r):.2e}"


# --- C-level: an embedded unilateral set ------------------------------------------------------------

CC = shutil.which("cc") or shutil.which("gcc")

PROGRAM = r"""
#include <stdio.h>
#include "model.h"
#include "cons.h"
#include "imp.h"
int main(void) {
    static const double q[] = {%(q)s}, v[] = {%(v)s}, tau[] = {%(tau)s};
    static double work[%(work)d], out[%(nv)d], lam[%(m)d], its, res;
    const rbg_prox_options opt = {1e-4, 5, -1.0};
    if (rbg_constraints_init(&robot, &cons, cons_iwork) || rbg_constraints_init(&robot, &imp, imp_iwork)) return 10;
    if (CONS_WORK_PROX_LCP != RBG_WORK_PROX_LCP(%(nb)d, %(nv)d, %(m)d)) return 11;
    if (rbg_constrained_work_size(&robot, &imp, RBG_ALGO_IMPULSE) != IMP_WORK_IMPULSE) return 12;
    if (cons.nu != %(nu)d) return 13;
    if (rbg_prox_lcp(&robot, &cons, &opt, q, v, tau, out, lam, &its, &res, work)) return 1;
    for (int k = 0; k < %(nv)d; ++k) printf("%%.17g\n", out[k]);
    for (int k = 0; k < %(m)d; ++k) printf("%%.17g\n", lam[k]);
    if (rbg_impulse(&robot, &imp, &opt, 0.5, q, v, out, lam, &its, &res, work)) return 2;
    for (int k = 0; k < %(nv)d; ++k) printf("%%.17g\n", out[k]);
    for (int k = 0; k < %(m)d; ++k) printf("%%.17g\n", lam[k]);
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_events_in_a_standalone_program(tmp_path):
    """model_to_c + constraints_to_c (with the unilateral flags) + the library build as
    strict C99 and reproduce NumPy for prox_lcp and the impulse (solo12's feet, mu = 1e-4,
    5 iterations)."""
    model = load_or_skip("solo12")
    lcp = parse_constraints(model, FEET.replace("3D:", "3D+:"))
    imp = parse_constraints(model, FEET)
    q, v, tau = states(model, 15, 1, imp)[0]
    (tmp_path / "model.h").write_text(model_to_c(model, "robot"))
    (tmp_path / "cons.h").write_text(constraints_to_c(model, lcp, "cons"))
    (tmp_path / "imp.h").write_text(constraints_to_c(model, imp, "imp"))
    fmt = lambda x: ", ".join(repr(float(t)) for t in x)
    work = max(event_work_sizes(model, lcp).values())
    (tmp_path / "main.c").write_text(PROGRAM % {"q": fmt(q), "v": fmt(v), "tau": fmt(3.0 * tau), "work": work,
                                                "nv": model.nv, "m": lcp.m, "nb": model.nbodies, "nu": 4})
    exe = tmp_path / "prog"
    subprocess.run([CC, "-std=c99", "-pedantic", "-Wall", "-Werror", "-O2", "-I", str(INCLUDE_DIR), "-I",
                    str(tmp_path), str(tmp_path / "main.c"), *map(str, SOURCES), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"program exited {run.returncode}"
    vals = np.array([float(x) for x in run.stdout.split()]).reshape(2, model.nv + lcp.m)
    refs = (gen.run(model, "prox_lcp", q, v, 3.0 * tau, constraints=lcp, mu=1e-4, iterations=5),
            gen.run(model, "impulse", q, v, constraints=imp, mu=1e-4, iterations=5, restitution=0.5))
    for row, ref, alg in zip(vals, refs, ("prox_lcp", "impulse")):
        assert rel_err(row[:model.nv], ref[0]) < REL_TOL and rel_err(row[model.nv:], ref[1]) < REL_TOL, \
            f"embedded {alg}"
