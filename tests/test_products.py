"""Outputs formed by ``be.product`` (gen/products.py): the SX form against NumPy and its
op count, which outputs the trace defers to C loops, and the compiled kernels (locals,
avoid_stack, split head) against NumPy."""
import ctypes
import platform
import subprocess

import casadi as ca
import numpy as np
import pytest

import gen
from gen import cwriter
from gen import trace as trace_module
from gen.backend import NUMPY, SXBackend
from gen.codegen.config import CodegenConfig
from gen.products import (LOOP_WIDTH, LOOP_WIDTHS, VECTOR_WIDTHS, column_loop, head_function, loop_name,
                          nonfinite_tests)
from gen.robots import load_robot
from gen.trace import _products, same_nodes, trace
from opcount.counter import count_expr
from conftest import compile_shared, rel_err

C_TOL = 1e-12           # the loops sum the same terms as the trace, in another association


def _sparse(rng, rows, cols, density):
    X = rng.normal(size=(rows, cols))
    X[rng.random(size=(rows, cols)) > density] = 0.0
    return X


def test_sx_product_equals_numpy_and_counts_one_multiply_add_per_nonzero_and_row():
    rng = np.random.default_rng(3)
    base = _sparse(rng, 4, 5, 0.3)
    A1, A2 = rng.normal(size=(4, 6)), rng.normal(size=(4, 3))
    X1, X2 = _sparse(rng, 6, 5, 0.4), _sparse(rng, 3, 5, 0.5)
    be = SXBackend()
    syms = [ca.SX.sym(n, *M.shape) for n, M in (("b", base), ("a1", A1), ("a2", A2))]
    x1 = ca.SX.sym("x1", int(np.count_nonzero(X1)))
    X1s = ca.SX.zeros(*X1.shape)
    for i, (k, c) in enumerate(zip(*np.nonzero(X1.T)[::-1])):
        X1s[k, c] = x1[i]
    Y = be.product(syms[0], [(1.0, syms[1], X1s), (-1.0, syms[2], ca.SX(X2))])
    f = ca.Function("f", [*syms, x1], [Y])
    got = np.array(f(base, A1, A2, X1.T[X1.T != 0]))
    assert rel_err(got, NUMPY.product(base, [(1.0, A1, X1), (-1.0, A2, X2)])) <= 1e-14
    assert rel_err(got, base + A1 @ X1 - A2 @ X2) <= 1e-14
    counts = count_expr([*syms, x1], [Y])
    assert counts["mul"] == 4 * np.count_nonzero(X1) + 4 * np.count_nonzero(X2)     # rows x nonzeros
    with pytest.raises(ValueError, match="product"):
        be.product(syms[0], [(2.0, syms[1], X1s)])


def test_only_unchanged_product_outputs_are_deferred():
    be = SXBackend()
    A, x = ca.SX.sym("a", 3, 3), ca.SX.sym("x", 2)
    X = ca.SX.zeros(3, 2)
    X[0, 0], X[2, 1] = x[0], x[1]
    kept = be.product(ca.SX.zeros(3, 2), [(-1.0, A, X)])
    changed = be.product(ca.SX.zeros(3, 2), [(1.0, A, X)])
    changed[0, 0] = changed[0, 0] + 1.0
    found = _products([A, kept, changed], be)
    assert [o for o, *_ in found] == [1]
    (sign, _, nz, k, c), = found[0][3]
    assert sign == -1.0 and k == [0, 2] and c == [0, 1] and nz.numel() == 2


def test_aba_derivatives_defers_its_products_and_reads_minv_from_its_output():
    tr = trace(load_robot("solo12"), "aba_derivatives", route="analytical")
    assert [p.output for p in tr.products] == [2, 0, 1]             # M^-1 = V V^T first
    f, plan = head_function("head", tr)
    assert [p["Y"] for p in plan] == [("output", 2), ("output", 0), ("output", 1)]
    assert [t["A"] for p in plan[1:] for t in p["terms"]] == [("output", 2), ("output", 2)]
    V = plan[0]["terms"][0]["A"]
    # outputs (the three products and ddq) + V, the nonzeros of each X and the bases'
    # entries of dddq/dq and dddq/dv
    assert V[0] == "scratch" and f.n_out() == 4 + 4 + 2
    assert [f.nnz_out(o) for o in range(3)] == [0, 0, 0]      # the loops write every entry of the outputs
    assert plan[0]["base"] is None                             # M^-1: a zero base
    q, v, tau = (np.random.default_rng(0).normal(size=n) for n in (19, 18, 18))
    q[3:7] /= np.linalg.norm(q[3:7])
    head = f(q, v, tau)
    ref = gen.run("solo12", "aba_derivatives", q, v, tau)
    # the bases hold the free-flyer's closed-form entries: dddq/dq's rows 0:3 of columns 3:6
    at, positions = plan[1]["base"]
    assert sorted({p // 18 for p in positions}) == [3, 4, 5] and all(p % 18 < 3 for p in positions)
    assert rel_err(np.array(head[4 + at]).ravel(), ref[0].ravel(order="F")[positions]) <= 1e-12
    Vh = np.array(head[4 + V[1]]).reshape(18, 18, order="F")
    assert rel_err(Vh @ Vh.T, ref[2]) <= 1e-12


def test_the_route_cost_counts_loop_operations_at_a_tenth():
    """gen.trace.estimated_cost: the emitted C's operations, the products' loops' (a
    multiply and an add per row and nonzero of X, the manifest's nonzeros, and an add per
    nonzero entry of a base: dddq/dq's and dddq/dv's closed-form free-flyer columns, 6 each)
    at the config's loop_op_cost."""
    from gen.trace import estimated_cost, loop_operations, operations
    loop_op_cost = CodegenConfig().loop_op_cost
    tr = trace(load_robot("solo12"), "aba_derivatives", route="analytical")
    # all three 18-row products, M^-1 = V V^T (symmetric) from each column's diagonal block of 8 rows down
    minv, *rest = tr.products
    loops = sum(2 * (18 - 8 * (c // 8)) for c in minv.terms[0][4]) + sum(2 * 18 * len(t[3]) for p in rest
                                                                          for t in p.terms) + 6 + 6
    assert loop_operations(tr) == loops > operations(tr) / 2
    assert estimated_cost(tr) == pytest.approx(operations(tr) - (1 - loop_op_cost) * loops)
    ur5 = trace(load_robot("ur5"), "aba_derivatives", route="analytical")  # 6 rows: straight-line
    assert loop_operations(ur5) == 0 and estimated_cost(ur5) == operations(ur5)


@pytest.mark.parametrize("algorithm,spec", [("aba_derivatives", None),
                                            ("constrained_derivatives", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT")])
def test_the_op_count_is_what_the_c_executes_head_and_loops(algorithm, spec):
    """With products as loops the C runs the head's straight-line code (one statement per
    SX instruction) and, per product, a multiply and an add per row of A and nonzero of X,
    zeros of A included (V = W sqrt(d) is zero above W's ancestors, which the SX of
    M^-1 = V V^T skips), the rows of a symmetric product's diagonal blocks and below only:
    not the SX graph of the outputs (solo12 aba_derivatives: 23375 against the outputs'
    SX 23394; constrained_derivatives more than its SX).  The phases still partition the
    total, the loops in the phase that marks their result."""
    from gen.trace import loop_operations, operations
    from opcount import count_trace
    tr = trace(load_robot("solo12"), algorithm, spec, route="analytical")
    f, _ = head_function("head", tr)
    head = sum(1 for k in range(f.n_instructions()) if f.instruction_id(k) not in trace_module.FREE_OPS)
    counts = count_trace(tr)
    assert counts["total"]["total"] == operations(tr) == head + loop_operations(tr)
    outputs_only = ca.Function("o", [s for _, s in tr.inputs], [ca.densify(e) for _, e in tr.outputs])
    sx = sum(1 for k in range(outputs_only.n_instructions())
             if outputs_only.instruction_id(k) not in trace_module.FREE_OPS)
    assert operations(tr) != sx
    for cls in ("total", "add", "mul", "neg", "sqrt"):
        assert sum(ph[cls] for ph in counts["phases"]) == counts["total"][cls], cls
    assert "output" not in [ph["name"] for ph in counts["phases"]]


def test_constrained_derivatives_reads_p_and_qn_t_from_their_products():
    """``Q_n^T`` (an intermediate: no output) and ``P`` (ddq_dtau) are products whose
    loops run first; the products of ``dddq/dx`` read them from there, the head never
    forms them (nor ``M^-1``)."""
    model = load_robot("solo12")
    tr = trace(model, "constrained_derivatives", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT")
    f, plan = head_function("head", tr)
    names = ["Q_n^T" if kind == "scratch" else tr.outputs[at][0] for kind, at in (p["Y"] for p in plan)]
    assert names == ["dlam_dtau", "Q_n^T", "ddq_dtau", "ddq_dq", "dlam_dq", "ddq_dv", "dlam_dv"]
    qnt = plan[1]["Y"]
    assert [t["A"] for t in plan[2]["terms"]][1] == qnt                 # P = W (W D^-1)^T + Q_n^T (J M^-1)
    for ddq, dlam in ((3, 4), (5, 6)):      # dddq/dx = Q_n^T dac - P dtau,  dlam/dx = S_n dac - Q_n dtau
        assert [t["A"] for t in plan[ddq]["terms"]] == [qnt, ("output", 2)]
        assert [t["A"] for t in plan[dlam]["terms"]][1] == ("output", 5)
    rng = np.random.default_rng(2)
    q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    head = f(q, v, tau)
    for base in (head[2], head[5], head[len(tr.outputs) + qnt[1]]):     # P, Q_n, Q_n^T: formed by loops only
        assert np.all(np.array(base) == 0)


def test_an_intermediate_product_is_found_only_when_a_later_product_reads_it():
    be = SXBackend()
    A, x = ca.SX.sym("a", 3, 3), ca.SX.sym("x", 3, 3)
    unused = be.product(ca.SX.zeros(3, 3), [(1.0, A, x)])
    inner = be.product(ca.SX.zeros(3, 3), [(1.0, x, A)])
    outer = be.product(ca.SX.zeros(3, 3), [(-1.0, inner, x)])
    found = _products([outer, unused + 1.0], be)
    assert [o for o, *_ in found] == [None, 0]
    assert same_nodes(found[0][1], inner)


def test_a_product_a_times_its_transpose_on_a_zero_base_is_symmetric():
    be = SXBackend()
    A, B = ca.SX.sym("a", 4, 3), ca.SX.sym("b", 4, 3)
    products = [be.product(ca.SX.zeros(4, 4), [(1.0, A, A.T)]),
                be.product(ca.SX.zeros(4, 4), [(1.0, A, B.T)]),
                be.product(ca.SX.eye(4), [(1.0, A, A.T)]),
                be.product(ca.SX.zeros(4, 4), [(1.0, A, A.T), (1.0, B, B.T)])]
    assert [symmetric for *_, symmetric in _products(products, be)] == [True, False, False, False]
    tr = trace(load_robot("solo12"), "aba_derivatives", route="analytical")
    assert [p.symmetric for p in tr.products] == [True, False, False]          # M^-1, dddq/dq, dddq/dv
    minv = tr.products[0]
    assert minv.madds == sum(18 - 8 * (c // 8) for c in minv.terms[0][4]) < 18 * len(minv.terms[0][3])


@pytest.mark.parametrize("variant", ["locals", "avoid_stack", "split", "every_product"])
@pytest.mark.parametrize("robot, algorithm, spec", [
    ("solo12", "aba_derivatives", None),
    ("solo12", "constrained_derivatives", "3D:FL_FOOT,3D:HR_FOOT"),
    ("ur5", "constrained_derivatives", "6D:tool0"),
])
def test_compiled_product_kernels_equal_numpy(tmp_path, variant, robot, algorithm, spec):
    # every_product: loops also for the short (m-row, ur5) products
    config = {"split": CodegenConfig(split_above=1500), "every_product": CodegenConfig(loop_rows=1)}.get(variant)
    model = load_robot(robot)
    kernel = gen.build(model, algorithm, spec, avoid_stack=variant == "avoid_stack", out_dir=tmp_path / "k",
                       config=config)
    names = [p["output"] for p in kernel.manifest["codegen"].get("products", [])]
    if variant == "every_product":
        assert names == (["Minv", "ddq_dq", "ddq_dv"] if algorithm == "aba_derivatives" else
                         ["dlam_dtau", "intermediate", "ddq_dtau", "ddq_dq", "dlam_dq", "ddq_dv", "dlam_dv"])
    else:                                            # loop_rows: solo12's 18 rows, not its 6 or ur5's 6
        assert names == ([] if robot == "ur5" else ["Minv", "ddq_dq", "ddq_dv"] if algorithm == "aba_derivatives"
                         else ["intermediate", "ddq_dtau", "ddq_dq", "ddq_dv"])
    assert all(p["nonzeros"] > 0 for p in kernel.manifest["codegen"].get("products", []))
    assert kernel.manifest["codegen"]["parts"][0] > 1 or variant != "split"
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        ref = gen.run(model, algorithm, q, v, tau, constraints=spec)
        out = kernel(q, v, tau)
        for got, r in zip(out, ref):
            assert rel_err(got, r) <= C_TOL
        if algorithm == "aba_derivatives":          # M^-1 = V V^T by loops: exactly symmetric
            assert np.array_equal(out[2], out[2].T)


def _loop_library(tmp_path, flags: str, loops: list[tuple[int, int, bool]], width: int = 8):
    """The product loops ``(rows, ld, assign)`` of gen.products on vectors of ``width``,
    each exported as ``int t_<rows>_<ld>_<assign>(...)``, compiled with ``flags``."""
    code = [cwriter.vector_types(VECTOR_WIDTHS), nonfinite_tests()]
    for rows, ld, assign in loops:
        code += [column_loop(rows, ld, assign, width),
                 f"int t_{rows}_{ld}_{int(assign)}(int cols, const int *start, const int *k, const double *x, "
                 "double sign, const double *A, double *Y)",
                 f"{{ return {loop_name(rows, ld, assign)}(cols, start, k, x, sign, A, Y); }}"]
    return compile_shared(tmp_path, "\n".join(code) + "\n", f"loops{width}",
                          ["-std=c99", "-Wall", "-Wextra", "-Werror", *flags.split()])


def _run_loop(lib, rows, ld, assign, X, sign, A, Y):
    """Call loop ``(rows, ld, assign)`` on the sparse ``X`` (its nonzeros column by column,
    k ascending); ``Y`` (ld x cols, column-major) in place; its return value."""
    c, k = np.nonzero(X.T)                             # column by column, rows ascending
    start = np.searchsorted(c, np.arange(X.shape[1] + 1)).astype(np.int32)
    x = X[k, c].copy()
    k = k.astype(np.int32)
    dp, ip = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
    fn = getattr(lib, f"t_{rows}_{ld}_{int(assign)}")
    return fn(X.shape[1], start.ctypes.data_as(ip), k.ctypes.data_as(ip), x.ctypes.data_as(dp), ctypes.c_double(sign),
              A.ctypes.data_as(dp), Y.ctypes.data_as(dp))


@pytest.mark.parametrize("width", LOOP_WIDTHS)
@pytest.mark.parametrize("flags", ["-O2", "-O3 -march=native", "-O3 -march=native -ffast-math"])
def test_the_loops_assign_or_add_and_flag_every_non_finite_value_they_store(tmp_path, flags, width):
    """Each loop, at each machine width, forms ``Y[:rows, c] (+)= sign A[:rows] X[:, c]``
    (assign: an empty column zero), leaves the rows below ``rows`` of its ``ld``-row
    columns alone, and returns 1 exactly when a value it stored is inf or NaN, in a vector
    piece or a scalar row (15 rows: pieces of 8, 4, 2, 1 at width 8; 50: six of 8, one of
    2; 42 of 50: a symmetric block's, five of 8, one of 2), also under -ffast-math (the
    test is on the bits)."""
    shapes = [(15, 15), (50, 50), (42, 50)]
    lib = _loop_library(tmp_path, flags, [(r, ld, a) for r, ld in shapes for a in (False, True)], width)
    rng = np.random.default_rng(11)
    for rows, ld in shapes:
        inner, cols = 9, 7
        A = rng.normal(size=(ld, inner))
        X = _sparse(rng, inner, cols, 0.4)
        X[:, 2] = 0.0                                  # an empty column
        X[1, 3] = 0.5                                  # a column with a nonzero at row 1
        for assign in (False, True):
            for sign in (1.0, -1.0):
                Y0 = rng.normal(size=(ld, cols))
                Y = np.asfortranarray(Y0.copy())
                assert _run_loop(lib, rows, ld, assign, X, sign, np.asfortranarray(A), Y) == 0
                want = (0.0 if assign else Y0[:rows]) + sign * (A[:rows] @ X)
                if not assign:                         # an empty column is left as it was
                    want[:, 2] = Y0[:rows, 2]
                assert rel_err(Y[:rows], want) <= C_TOL
                assert np.array_equal(Y[rows:], Y0[rows:]), "rows below the loop's are not written"
                for row in (0, 9, rows - 3, rows - 1):     # in each kind of piece
                    for bad in (np.inf, -np.inf, np.nan):
                        Ab = np.asfortranarray(A.copy())
                        Ab[row, 1] = bad
                        assert _run_loop(lib, rows, ld, assign, X, sign, Ab, np.asfortranarray(Y0.copy())) == 1
                Ab = np.asfortranarray(A.copy())
                Ab[rows:, 1] = np.nan                  # rows the loop does not form: not its values
                assert _run_loop(lib, rows, ld, assign, X, sign, Ab, np.asfortranarray(Y0.copy())) == 0
                huge = np.asfortranarray(np.full((ld, inner), 1e300))
                got = _run_loop(lib, rows, ld, assign, np.abs(X) * 1e10, 1.0, huge, np.asfortranarray(Y0.copy()))
                assert got == 1                        # finite operands, an overflow to inf


def test_a_kernel_with_products_returns_a_non_finite_output_error():
    """The wrapper of a kernel with products leaves the check of their outputs to the loops
    (the header's RBDGEN_ERR_NONFINITE_OUTPUT): finite outputs give 0, an overflow -2."""
    model = load_robot("solo12")
    kernel = gen.build(model, "aba_derivatives")
    wrapper = next(p for p in kernel.sources if not p.name.endswith("_kernel.c")).read_text()
    assert "the kernel's loops check the outputs they form (Minv, ddq_dq, ddq_dv)" in wrapper
    assert "all_finite(Minv" not in wrapper
    q, v = model.neutral(), np.zeros(model.nv)
    for tau, rc in ((1e300, 0), (1e305, -2)):
        outs = [np.zeros(model.nv * model.nv) for _ in range(3)] + [np.zeros(model.nv)]     # ..., Minv, ddq
        assert kernel.call_raw([q, v, np.full(model.nv, tau)], outs) == rc
        assert all(np.all(np.isfinite(o)) for o in outs) == (rc == 0)


#: x86-64 targets and the loop width each must select (one register: SSE2 2, AVX 4, AVX-512 8)
TARGETS = [("-march=x86-64", 2), ("-march=x86-64-v3", 4), ("-march=x86-64-v4", 8)]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 targets")
@pytest.mark.parametrize("march, width", TARGETS)
def test_the_loops_take_one_register_of_the_target(tmp_path, march, width):
    """RBDGEN_LOOP_WIDTH is one vector register of the compiler's target: a vector wider
    than the registers is kept in memory by gcc (talos aba_derivatives 5.4x slower at
    x86-64-v3 with vectors of 8 than at -march=native on AVX-512)."""
    src = tmp_path / "width.c"
    src.write_text(LOOP_WIDTH + "\nint width(void) { return RBDGEN_LOOP_WIDTH; }\n")
    lib = tmp_path / f"libwidth{width}.so"
    subprocess.run(["cc", march, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True, capture_output=True)
    assert ctypes.CDLL(str(lib)).width() == width


@pytest.mark.parametrize("flags", ["-O2", "-O2 -march=x86-64-v3"])
def test_a_products_kernel_at_each_loop_width_equals_numpy(flags):
    """solo12 aba_derivatives built without -march (vectors of 2 in the loops) and for
    AVX2 (4): the values of the loops at each width (at -march=native: the other tests)."""
    if "x86-64" in flags and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86-64 target")
    model = load_robot("solo12")
    kernel = gen.build(model, "aba_derivatives", flags=flags)
    rng = np.random.default_rng(8)
    q, v, tau = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    for got, ref in zip(kernel(q, v, tau), gen.run(model, "aba_derivatives", q, v, tau)):
        assert rel_err(got, ref) <= C_TOL
