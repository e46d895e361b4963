"""gen/cwriter.py, rbdgen's scalar C writer: the written C evaluates the SX function as
CasADi's own virtual machine does (the independent reference), whole or split into parts
(liveness across the parts' boundaries, CasADi's reused work slots, avoid_stack), exports
nothing but the entry points, and refuses operations it cannot write."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

import casadi as ca
import numpy as np
import pytest

import gen
from gen import cwriter
from gen.cwriter import c_double, write_functions
from gen.codegen.functions import kernel_function
from gen.emit import emit, trace_for
from gen.errors import RbdgenError
from conftest import compile_shared

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
#: the C and CasADi's VM perform the same IEEE operations in the same order; only libm's
#: sin/cos may differ from CasADi's in the last bit, which the algorithms amplify mildly
VM_TOL = 1e-12
#: a split changes nothing but where values live: with -ffp-contract=off, bit for bit
SPLIT_TOL = 0.0


def _compile(tmp_path, code: str, name: str):
    return compile_shared(tmp_path, code, name,
                          ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-ffp-contract=off"])


def _call(lib, f: ca.Function, inputs, work_size=None):
    outs = [np.zeros(f.nnz_out(j)) for j in range(f.n_out())]
    dp = ctypes.POINTER(ctypes.c_double)
    arg = (dp * f.n_in())(*[np.ascontiguousarray(x, dtype=float).ctypes.data_as(dp) for x in inputs])
    res = (dp * f.n_out())(*[y.ctypes.data_as(dp) for y in outs])
    extra = [] if work_size is None else [np.full(work_size, np.nan).ctypes.data_as(dp)]
    getattr(lib, f.name())(arg, res, *extra)
    return outs


def _vm(f: ca.Function, inputs):
    out = f.call([ca.DM(x) for x in inputs])
    return [np.asarray(y).ravel(order="F") for y in out]


def _aba(robot="ur5"):
    model = gen.load_robot(robot)
    f = kernel_function("rbd_t_kernel", trace_for(model, "aba"))
    rng = np.random.default_rng(3)
    return f, [model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)]


def test_c_double_reads_back_exactly():
    for x in (0.1, -0.1, 1 / 3, 5e-324, 1.7976931348623157e308, 0.0, -0.0, 2.0 ** -1074, np.pi):
        lit = c_double(x)
        assert float.fromhex(lit.strip("()")) == x and np.signbit(float.fromhex(lit.strip("()"))) == np.signbit(x)
    assert c_double(float("inf")) == "INFINITY" and c_double(float("-inf")) == "(-INFINITY)"


@needs_cc
@pytest.mark.parametrize("split_above, part_size", [(None, None), (100, 97), (1, 1)])
@pytest.mark.parametrize("avoid_stack", [False, True])
@pytest.mark.parametrize("order", ["tape", "schedule", "critical"])
def test_matches_casadis_virtual_machine_whole_and_split(tmp_path, split_above, part_size, avoid_stack, order):
    """ur5 aba (1361 instructions): one function, parts of 97 instructions, and one part
    per instruction (every reused slot crosses a boundary), locals or work array (of the
    writer's slot count), in CasADi's order, scheduled or in the critical-path order."""
    f, inputs = _aba()
    code, (w,) = write_functions([f], avoid_stack=avoid_stack, split_above=split_above, part_size=part_size,
                                 order=order)
    assert (w.parts > 1) == (split_above is not None) and w.scheduled == (order == "schedule")
    assert w.critical == (order == "critical")
    lib = _compile(tmp_path, code, "k")
    got = _call(lib, f, inputs, w.slots if avoid_stack else None)
    ref = _vm(f, inputs)
    assert np.max(np.abs(got[0] - ref[0])) <= VM_TOL * np.max(np.abs(ref[0]))
    code, (w,) = write_functions([f], avoid_stack=avoid_stack, order=order)
    whole = _call(_compile(tmp_path, code, "whole"), f, inputs, w.slots if avoid_stack else None)
    assert np.max(np.abs(got[0] - whole[0])) <= SPLIT_TOL


def _dataflow(steps, ids: dict) -> dict:
    """Each output's value as a hash-consed expression: ids (shared between the step lists
    compared) by (template with operands blanked, operand ids), operands read through the
    work slots in step order; two step lists compute the same expressions iff the dicts
    are equal."""
    held: dict = {}                          # work slot -> value id
    out = {}
    for st in steps:
        ops = [int(t) for t in re.findall(r"\{(\d+)\}", st.expr)]
        vid = ids.setdefault((re.sub(r"\{\d+\}", "{}", st.expr), tuple(held[s] for s in ops)), len(ids))
        if st.writes is None:
            out[st.dest] = vid
        else:
            held[st.writes] = vid
    return out


@pytest.mark.parametrize("robot, algorithm", [("talos", "crba"), ("solo12", "aba"), ("panda", "rnea")])
def test_schedule_computes_the_same_expressions_with_fewer_live_values(robot, algorithm):
    """The scheduled steps are a reordering on fresh slots: every output is the same
    expression tree as in CasADi's tape (no operand read from a slot another value has
    overwritten), and the mean number of live values drops (talos crba 492 -> ~165)."""
    f = kernel_function("k", trace_for(gen.load_robot(robot), algorithm))
    steps = cwriter._steps(f)
    new, before, after = cwriter.schedule(steps)
    assert sorted(st.dest for st in new if st.writes is None) == sorted(st.dest for st in steps if st.writes is None)
    ids: dict = {}
    assert _dataflow(new, ids) == _dataflow(steps, ids)
    assert len(new) == len(steps) and after < before
    if (robot, algorithm) == ("talos", "crba"):
        assert after < 0.4 * before


@pytest.mark.parametrize("robot, algorithm", [("ur5", "nle"), ("panda", "aba")])
@pytest.mark.parametrize("budget", [0, 28, 10 ** 9])
def test_critical_order_takes_the_longest_chain_or_ends_live_ranges(robot, algorithm, budget):
    """critical_order is a reordering computing the same expressions, and each step it
    takes is, among the steps whose operands are computed (replayed here step by step),
    one of the greatest height (longest chain of steps depending on it, counted here by
    a forward pass over the reversed order) while fewer than ``budget`` values are live,
    one ending the most live ranges otherwise; the result needs fewer live values than
    the tape on ur5 nle (54 -> 40 on average at budget 28)."""
    f = kernel_function("k", trace_for(gen.load_robot(robot), algorithm))
    steps = cwriter._steps(f)
    reads, users = cwriter._dataflow(steps)
    order = cwriter.critical_order(reads, users, budget)
    assert sorted(order) == list(range(len(steps)))
    ids: dict = {}
    assert _dataflow(cwriter._allocate(steps, reads, users, order)[0], ids) == _dataflow(steps, ids)
    n = len(steps)
    chain = [1] * n
    for k in sorted(range(n), key=lambda k: -k):     # users come after their operands in the tape
        chain[k] = 1 + max((chain[u] for u in users[k]), default=0)
    left, computed, live = [len(u) for u in users], set(), 0
    for k in order:
        ready = [j for j in range(n) if j not in computed and all(r in computed for r in reads[j])]
        assert k in ready

        def ends(j):
            return sum(left[r] == 1 for r in reads[j]) - bool(users[j])
        if live < budget:
            assert chain[k] == max(chain[j] for j in ready)
        else:
            assert ends(k) == max(ends(j) for j in ready)
        computed.add(k)
        for r in reads[k]:
            left[r] -= 1
            live -= left[r] == 0
        live += bool(users[k])
    if (robot, algorithm, budget) == ("ur5", "nle", 28):
        assert cwriter._mean_live(reads, users, order) < 0.8 * cwriter._mean_live(reads, users, range(n))


def test_order_choice_and_manifest():
    """auto schedules a big kernel whose live values the schedule cuts (talos crba: 492
    -> ~165), writes small kernels (panda aba, 84 live, where the schedule is worse) in
    the critical-path order and keeps the tape's in between (solo12 aba, 207 live, on
    doubles); "tape" keeps the tape's."""
    for robot, algorithm, scheduled, critical in (("talos", "crba", True, False), ("solo12", "aba", False, False),
                                                  ("panda", "aba", False, True)):
        f = kernel_function("k", trace_for(gen.load_robot(robot), algorithm))
        (w,) = write_functions([f])[1]
        assert w.scheduled is scheduled and w.critical is critical, robot
        (w,) = write_functions([f], order="tape")[1]
        assert not w.scheduled and not w.critical, robot


@needs_cc
def test_split_driver_parts_agree(tmp_path):
    """setup, step and finish of an early-exit driver in one file, each split."""
    model = gen.load_robot("solo12")
    dt = trace_for(model, "prox_ltl", "3D:FL_FOOT,3D:HR_FOOT", tol=1e-9, max_iter=20)
    funcs = [kernel_function(f"rbd_t_{n}", getattr(dt, n)) for n in ("setup", "step", "finish")]
    code, written = write_functions(funcs, split_above=60, part_size=50)
    assert all(w.parts > 1 for w in written)
    lib = _compile(tmp_path, code, "d")
    rng = np.random.default_rng(5)
    for f in funcs:
        inputs = [rng.normal(size=f.nnz_in(i)) for i in range(f.n_in())]
        got, ref = _call(lib, f, inputs), _vm(f, inputs)
        for g, r in zip(got, ref):
            assert np.max(np.abs(g - r)) <= VM_TOL * max(1.0, np.max(np.abs(r))), f.name()


def test_unsupported_operation_is_named():
    x = ca.SX.sym("x")
    f = ca.Function("rbd_t_sign", [x], [ca.sign(x) * x])
    with pytest.raises(RbdgenError, match="OP_SIGN"):
        write_functions([f])


def test_constants_are_exact_literals_inlined():
    x = ca.SX.sym("x")
    f = ca.Function("rbd_t_c", [x], [0.1 * x - 1 / 3, ca.fmax(x, -0.25) + x * np.inf])
    code = write_functions([f])[0]
    assert "0x1.999999999999ap-4" in code and "0x1.5555555555555p-2" in code and "(-0x1.0000000000000p-2)" in code
    assert "INFINITY" in code


@needs_cc
@pytest.mark.parametrize("split_above", [None, 300])
def test_kernel_object_exports_only_its_entry_points(tmp_path, split_above):
    """Issue 12 §6: no CasADi helper (checkout, release, n_in, sparsity, work, ...) and
    no part of a split kernel is global; the driver's object defines exactly setup,
    step and finish."""
    for algorithm, spec, options, entries in (("aba", None, {}, ["kernel"]),
                                               ("prox_ltl", "3D:tool0", {"tol": 1e-9, "max_iter": 20},
                                                ["setup", "step", "finish"])):
        bf = emit("ur5", algorithm, spec, out_dir=tmp_path / algorithm, split_above=split_above, **options)
        if split_above:
            assert max(bf.manifest["codegen"]["parts"]) > 1
        src = bf.path / f"{bf.prefix}_kernel.c"
        obj = tmp_path / f"{algorithm}.o"
        subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O2", "-c", str(src),
                        "-o", str(obj)], check=True, capture_output=True)
        nm = subprocess.run(["nm", "-g", "--defined-only", str(obj)], check=True, capture_output=True,
                            text=True).stdout
        syms = sorted(ln.split()[-1] for ln in nm.splitlines() if ln.strip())
        assert syms == sorted(f"{bf.prefix}_{e}" for e in entries), syms


@needs_cc
def test_split_kernel_built_and_called_equals_numpy(tmp_path):
    """The whole path (wrapper, split kernel, cffi) on a kernel split into parts."""
    from gen.api import get_algorithm
    from gen.build import Kernel, compile_folder
    model = gen.load_robot("solo12")
    bf = emit(model, "crba", out_dir=tmp_path / "k", split_above=200)
    assert max(bf.manifest["codegen"]["parts"]) > 1
    k = Kernel(bf, compile_folder(bf.path), model, get_algorithm("crba"))
    q = model.random_q(np.random.default_rng(7))
    ref = gen.run(model, "crba", q)
    assert np.max(np.abs(k(q) - ref)) <= 1e-12 * np.max(np.abs(ref))


@needs_cc
@pytest.mark.parametrize("split_above", [None, 3])
def test_mostly_zero_outputs_are_filled_first_and_keep_their_other_entries(tmp_path, split_above):
    """An output at least half zeros is zero-filled by one loop on entry (also of a split
    function) and its zero entries have no statement; an output with fewer zeros keeps
    all of them."""
    x = ca.SX.sym("x", 3)
    mostly = ca.SX.zeros(4, 3)
    mostly[0, 0], mostly[2, 1] = x[0] * x[1], ca.sin(x[2])
    few = ca.vertcat(x[0] + x[1], 0, x[2] * x[0])
    f = ca.Function("zf", [x], [ca.densify(mostly), few])
    code, _ = write_functions([f], split_above=split_above, part_size=split_above)
    assert code.count("res[0][k] = 0.0;") == 1 and "res[1][k]" not in code
    assert not re.search(r"res\[0\]\[\d+\] = 0x0\.0p\+0;", code) and "res[1][1] = 0x0.0p+0;" in code
    inputs = [np.array([0.3, -1.2, 0.7])]
    lib = _compile(tmp_path, code, "zf")
    got = _call(lib, f, inputs)
    for g, r in zip(got, _vm(f, inputs)):
        assert np.array_equal(g, r)
