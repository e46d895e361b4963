"""The op counter (docs/DESIGN.md §3.8): op classes on toy expressions counted by hand, exact
phase attribution, and Featherstone 2005 Table 1 reproduced exactly by the traced
LTDL / LTL factorisations and substitutions on structural JSIMs."""
from types import SimpleNamespace

import casadi as ca
import numpy as np
import pytest
from conftest import load_or_skip
from random_trees import random_tree

import gen
from gen.algorithms import ALGORITHMS
from gen.algorithms.ltdl import (
    ltdl_factor,
    ltdl_solve,
    ltl_factor,
    mul_L,
    mul_Lt,
    solve_L,
    solve_Lt,
)
from gen.backend import SXBackend
from gen.errors import RbdgenError
from gen.robots.synthetic import bintree, chain, humanoid30
from gen.trace import trace
from opcount import (
    CLASSES,
    count_expr,
    count_function,
    count_trace,
    function_of,
    op_class,
)
from opcount.reference import (
    dense_ldlt,
    dense_ldlt_formula,
    depths,
    featherstone_D,
    ltdl_costs,
    structural_H,
    table1_ltdl,
)

x, y, z = ca.SX.sym("x"), ca.SX.sym("y"), ca.SX.sym("z")
UNCONSTRAINED = [a for a, alg in ALGORITHMS.items() if not alg.constrained]


def counts(outputs, inputs=(x, y, z)):
    c = count_expr(list(inputs), outputs if isinstance(outputs, list) else [outputs])
    return {k: v for k, v in c.items() if v}


def tape(f):
    names = {v: k for k, v in vars(ca).items() if k.startswith("OP_")}
    return [names[f.instruction_id(k)] for k in range(f.n_instructions())]


# --- op classes on toy expressions ---------------------------------------------------------

@pytest.mark.parametrize("expr, expected", [
    (lambda: x * y + z, {"mul": 1, "add": 1, "total": 2}),
    (lambda: x * y - z, {"mul": 1, "add": 1, "total": 2}),
    (lambda: ca.sin(x) * ca.cos(x), {"trig": 2, "mul": 1, "total": 3}),
    (lambda: ca.sqrt(x) / y, {"sqrt": 1, "div": 1, "total": 2}),
    (lambda: -x, {"neg": 1, "total": 1}),
    (lambda: x * x, {"mul": 1, "total": 1}),                       # OP_SQ
    (lambda: ca.atan2(y, x) + ca.tan(z), {"trig": 2, "add": 1, "total": 3}),
    (lambda: ca.fmax(x, y), {"other": 1, "total": 1}),
    (lambda: ca.fabs(x) + ca.exp(y), {"other": 2, "add": 1, "total": 3}),
    (lambda: x + x, {"other": 1, "total": 1}),                     # OP_TWICE
    (lambda: x * 0, {}),                                           # vanishes
    (lambda: x * 1 + 0, {}),                                       # SX shortcut: plain x
    (lambda: ca.SX(3.0), {}),                                      # a constant is free
    (lambda: x, {}),                                               # an input is free
    (lambda: x / 2.0, {"div": 1, "total": 1}),                     # not rewritten as a mul
], ids=["x*y+z", "x*y-z", "sin*cos", "sqrt/div", "neg", "x*x=sq", "atan2+tan", "fmax", "fabs+exp",
        "x+x=twice", "x*0", "x*1+0", "const", "input", "x/2"])
def test_op_classes_on_toy_expressions(expr, expected):
    assert counts(expr()) == expected


def test_x_times_x_is_an_sq_instruction_counted_as_mul():
    f = ca.Function("f", [x], [x * x])
    assert "OP_SQ" in tape(f)
    assert count_function(f)["mul"] == 1


def test_inputs_outputs_constants_are_free():
    f = ca.Function("f", [x, y], [x, ca.SX(2.5), ca.vertcat(y, 1.0)])
    ops = set(tape(f))
    assert ops <= {"OP_INPUT", "OP_OUTPUT", "OP_CONST"} and "OP_CONST" in ops
    assert count_function(f)["total"] == 0


def test_shared_subexpression_counted_once_after_cse():
    a = ca.sin(x) * y + 1                 # built twice: structurally equal, distinct nodes
    b = (ca.sin(x) * y) * 3
    raw = count_function(ca.Function("f", [x, y], [a, b]))
    assert (raw["trig"], raw["mul"], raw["add"]) == (2, 3, 1)     # without CSE: sin(x)*y twice
    assert counts([a, b], (x, y)) == {"trig": 1, "mul": 2, "add": 1, "total": 4}


def test_every_casadi_op_code_is_classified_and_unknown_codes_are_other():
    free = {"OP_INPUT", "OP_OUTPUT", "OP_CONST", "OP_PARAMETER"}
    for name, code in vars(ca).items():
        if name.startswith("OP_"):
            assert (op_class(code) is None) == (name in free), name
            assert op_class(code) in (None, *CLASSES), name
    assert op_class(10_000) == "other"
    assert op_class(ca.OP_IF_ELSE_ZERO) == "other" and op_class(ca.OP_INV) == "other"
    assert op_class(ca.OP_SQ) == "mul" and op_class(ca.OP_SUB) == "add"


def test_if_else_costs_comparison_and_selects():
    c = counts(ca.if_else(x > 0, y, z))
    assert c["total"] == c["other"] + c.get("add", 0) and c["other"] >= 2


# --- phase attribution ---------------------------------------------------------------------

def fake_trace(outputs, phases, inputs=(x, y, z)):
    return SimpleNamespace(inputs=[(str(s), s) for s in inputs], outputs=[(f"o{k}", o) for k, o in enumerate(outputs)],
                           phases=phases)


def phase_totals(c):
    return {p["name"]: p["total"] for p in c["phases"]}


def test_phases_by_hand():
    p = x * y                                  # phase "a": 1 mul
    q = ca.sqrt(p) + z                         # phase "b": sqrt + add (p already counted)
    out = q * ca.sin(x)                        # output: sin + mul
    c = count_trace(fake_trace([out], [("a", [p]), ("b", [q, p])]))
    assert phase_totals(c) == {"a": 1, "b": 2, "output": 2}
    assert c["phases"][1]["sqrt"] == 1 and c["phases"][2]["trig"] == 1
    assert c["total"]["total"] == 5


def test_marked_values_not_needed_by_outputs_are_not_counted():
    dead = ca.cos(x) * ca.cos(y) * ca.cos(z)   # marked but unused by the output
    p = x + y
    c = count_trace(fake_trace([p * z], [("a", [dead, p]), ("b", [dead * 2])]))
    assert phase_totals(c) == {"a": 1, "b": 0, "output": 1}
    assert c["total"] == count_expr([x, y, z], [p * z])


def test_mark_merged_with_output_by_cse():
    """A mark rebuilt separately from the output (equal structure, distinct nodes) is the
    same instruction after joint CSE: the op is the mark's, not counted twice."""
    out = ca.sin(x) * y + z
    c = count_trace(fake_trace([out], [("early", [ca.sin(x) * y])]))
    assert phase_totals(c) == {"early": 2, "output": 1} and c["total"]["total"] == 3


def test_repeated_phase_names_merge():
    a = x * y
    b = a * z
    d = b + a
    c = count_trace(fake_trace([d], [("it", [a]), ("other", []), ("it", [b])]))
    assert [p["name"] for p in c["phases"]] == ["it", "other", "output"]
    assert phase_totals(c) == {"it": 2, "other": 0, "output": 1}


@pytest.mark.parametrize("model", [random_tree(8, 3), bintree(9), humanoid30()], ids=lambda m: m.name)
@pytest.mark.parametrize("algorithm", UNCONSTRAINED)
def test_phases_partition_the_total(model, algorithm):
    tr = trace(model, algorithm)
    c = count_trace(tr)
    for cls in (*CLASSES, "total"):
        assert sum(p[cls] for p in c["phases"]) == c["total"][cls], f"{algorithm}/{model.name}: phases' {cls}"
    assert c["total"]["total"] == sum(c["total"][k] for k in CLASSES)
    # the straight-line code (the outputs, or with products as loops the head) and the loops
    exprs, loops, _ = tr.straight_line()
    ref = count_function(function_of([s for _, s in tr.inputs], exprs))
    ref["mul"] += sum(madds for _, madds, _ in loops)
    ref["add"] += sum(madds + adds for _, madds, adds in loops)          # and the bases' entries
    ref["total"] += sum(2 * madds + adds for _, madds, adds in loops)
    assert c["total"] == ref, f"{algorithm}/{model.name}: total vs Function(inputs -> cse(head)) + loops"
    marked = list(dict.fromkeys(n for n, _ in tr.phases))
    names = [p["name"] for p in c["phases"]]
    assert names in (marked, marked + ["output"]), f"{algorithm}: phases {names} vs marks {marked}"
    assert names == marked or c["phases"][-1]["total"] > 0, "an empty 'output' phase is dropped"


def test_aba_phases_are_forward_backward_acceleration():
    c = count_trace(trace(humanoid30(), "aba"))
    assert [p["name"] for p in c["phases"]] == ["forward", "backward", "acceleration"]
    assert all(p["total"] > 0 for p in c["phases"])


# --- gen.opcount -----------------------------------------------------------------------------

def test_gen_opcount_api():
    r = gen.opcount("humanoid30", "aba")
    assert (r["robot"], r["algorithm"], r["nq"], r["nv"]) == ("humanoid30", "aba", 31, 30)
    assert r["total"] == sum(r["classes"].values()) == sum(p["total"] for p in r["phases"])
    assert set(r["classes"]) == set(CLASSES)
    assert r["classes"]["trig"] == 2 * 24                   # one sin and one cos per revolute joint
    assert r["classes"]["sqrt"] == 0                        # the free-flyer uses the quaternion as given
    assert gen.opcount(chain(4), "rnea")["robot"] == "chain:4"


def test_gen_opcount_errors():
    with pytest.raises(RbdgenError, match="unknown algorithm"):
        gen.opcount("chain:3", "nope")
    with pytest.raises(RbdgenError, match="takes no constraints"):
        gen.opcount("chain:3", "aba", constraints="3D:link3_tip")


# --- Featherstone 2005 Table 1, exactly ------------------------------------------------------

def random_parents(n, seed):
    rng = np.random.default_rng(seed)
    return [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]


def balanced_binary(m):                      # n = 2^m - 1 nodes, one dof per node
    return [-1] + [(i - 1) // 2 for i in range(1, 2 ** m - 1)]


def short_side_branches(m):                  # a chain of m, a one-node branch on each
    lam = []
    for k in range(m):
        lam.append(-1 if k == 0 else 2 * (k - 1))
        lam.append(2 * k)
    return lam


TREES = {f"random{s}": random_parents(n, s) for s, n in [(1, 12), (2, 20), (3, 25), (4, 7)]}
TREES |= {"chain:1": [-1], "chain:12": chain(12).dof_parents(), "humanoid30": humanoid30().dof_parents(),
          "bintree:31": bintree(31).dof_parents(), "balanced:m4": balanced_binary(4),
          "side:m6": short_side_branches(6), "star:9": [-1] * 9}


def measured(fn, inputs):
    c = count_expr(inputs, fn())
    return {k: c[k] for k in ("div", "mul", "add")} | {"rest": c["total"] - c["div"] - c["mul"] - c["add"]}


@pytest.mark.parametrize("name", list(TREES))
def test_table1_ltdl_factorize_and_back_substitution_exact(name):
    lam = TREES[name]
    n, (D1, D2) = len(lam), featherstone_D(lam)
    be = SXBackend()
    H, syms = structural_H(lam)
    got = measured(lambda: list(ltdl_factor(lam, H, be)), syms)
    assert got == {"div": D1, "mul": D2, "add": D2, "rest": 0}, f"LTDL factorize on {name}: D1={D1}, D2={D2}"
    L, D, b = ca.SX.sym("L", n, n), ca.SX.sym("D", n), ca.SX.sym("b", n)
    got = measured(lambda: [ltdl_solve(lam, L, D, b, be)], [L, D, b])
    assert got == {"div": n, "mul": 2 * D1, "add": 2 * D1, "rest": 0}, f"LTDL back-substitution on {name}"
    # factor + solve in one graph: the costs simply add (nothing shared, nothing skipped)
    Lf, Df = ltdl_factor(lam, H, be)
    got = measured(lambda: [ltdl_solve(lam, Lf, Df, b, be)], syms + [b])
    assert got == {"div": D1 + n, "mul": D2 + 2 * D1, "add": D2 + 2 * D1, "rest": 0}


@pytest.mark.parametrize("name", list(TREES))
def test_table1_products_and_ltl_exact(name):
    lam = TREES[name]
    n, (D1, D2) = len(lam), featherstone_D(lam)
    be = SXBackend()
    L, xv = ca.SX.sym("L", n, n), ca.SX.sym("x", n)
    for f in (mul_L, mul_Lt, solve_L, solve_Lt):             # unit L: D1 (m + a)
        assert measured(lambda: [f(lam, L, xv, be)], [L, xv]) == {"div": 0, "mul": D1, "add": D1, "rest": 0}, f.__name__
    for f in (mul_L, mul_Lt):                                # general L: n m + D1 (m + a)
        assert measured(lambda: [f(lam, L, xv, be, unit=False)], [L, xv]) == \
            {"div": 0, "mul": n + D1, "add": D1, "rest": 0}, f.__name__
    for f in (solve_L, solve_Lt):                            # general L: n div + D1 (m + a)
        assert measured(lambda: [f(lam, L, xv, be, unit=False)], [L, xv]) == \
            {"div": n, "mul": D1, "add": D1, "rest": 0}, f.__name__
    # LTL back-substitution L^-1 L^-T b: 2n div + 2 D1 (m + a)
    got = measured(lambda: [solve_L(lam, L, solve_Lt(lam, L, xv, be, unit=False), be, unit=False)], [L, xv])
    assert got == {"div": 2 * n, "mul": 2 * D1, "add": 2 * D1, "rest": 0}
    # LTL factorize: n sqrt + D1 div + D2 (m + a)
    H, syms = structural_H(lam)
    c = count_expr(syms, [ltl_factor(lam, H, be)])
    assert (c["sqrt"], c["div"], c["mul"], c["add"], c["total"]) == (n, D1, D2, D2, n + D1 + 2 * D2)


def test_table1_helper_and_paper_closed_forms():
    """§4.2's topology formulas and §6's humanoid figures."""
    for n in (1, 5, 30):
        assert featherstone_D(list(range(-1, n - 1))) == ((n * n - n) // 2, (n ** 3 - n) // 6)
    for m in (2, 3, 5):
        assert featherstone_D(balanced_binary(m)) == (sum(i * 2 ** i for i in range(1, m)),
                                                      sum(i * (i + 1) * 2 ** (i - 1) for i in range(1, m)))
        assert featherstone_D(short_side_branches(m)) == (m * m, (2 * m ** 3 + 3 * m ** 2 + m) // 6)
    lam = humanoid30().dof_parents()
    assert sorted(depths(lam)) == list(range(1, 7)) + sorted(list(range(7, 13)) * 4)
    assert featherstone_D(lam) == (219, 1039)
    t = table1_ltdl(lam)
    assert t["factorize"]["div"] + t["factorize"]["mul"] == 1258 and t["factorize"]["add"] == 1039
    bs = t["back_substitution"]
    assert (bs["div"] + bs["mul"], bs["add"]) == (468, 438)
    d = dense_ldlt_formula(30)
    assert (d["div"] + d["mul"], d["add"]) == (4930, 4495)


@pytest.mark.parametrize("name", ["humanoid30", "bintree:31", "random2", "chain:12", "side:m6"])
def test_dense_ldlt_reference(name):
    """The dense LDLᵀ costs n(n−1)/2 div + (n³−n)/6 (m + a) on a full matrix; on the
    structural H in reversed order it does exactly LTDL's work (no fill-in, §3); in the
    natural (root-first) order it fills in."""
    lam = TREES[name]
    r = ltdl_costs(lam)
    f = dense_ldlt_formula(len(lam))
    assert {k: r["dense"][k] for k in f} == f and r["dense"]["rest"] == 0
    assert r["dense_reversed_order_on_H"] == r["factor"]
    assert r["factor_table1"] == {k: r["factor"][k] for k in ("div", "mul", "add")}
    nat = r["dense_natural_order_on_H"]
    assert nat["total"] >= r["factor"]["total"]
    if featherstone_D(lam)[0] < len(lam) * (len(lam) - 1) // 2:          # branched
        assert nat["total"] > r["factor"]["total"]


def test_dense_ldlt_numerically_correct():
    from gen.backend import NUMPY

    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 6))
    A = A @ A.T + 6 * np.eye(6)
    L, D = dense_ldlt(A, NUMPY)
    assert np.allclose(L @ np.diag(D.ravel()) @ L.T, A, atol=1e-12)


def test_table1_on_named_robot_talos():
    lam = load_or_skip("talos").dof_parents()
    r = ltdl_costs(lam)
    D1, D2 = featherstone_D(lam)
    assert r["factor"] == {"div": D1, "mul": D2, "add": D2, "total": D1 + 2 * D2, "rest": 0}
    assert r["solve"] == {"div": 50, "mul": 2 * D1, "add": 2 * D1, "total": 50 + 4 * D1, "rest": 0}
