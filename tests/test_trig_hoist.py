"""gen.cwriter.hoist_trig: a scalar kernel's sines and cosines of the joint angles through
the vector routine, together: the written C evaluates the function as CasADi's virtual
machine does (the independent reference), on a plain tape and on a lane plan's vector
groups, calls the routine's sine and cosine once per TRIG_LANES distinct arguments, and leaves a sin or
cos of a sin (which needs another first) to libm."""
from __future__ import annotations

import ctypes
import math
import re
import shutil

import casadi as ca
import numpy as np
import pytest

import gen
from gen import cwriter, lanes
from gen.cwriter import TRIG_LANES, write_functions
from gen.codegen.functions import kernel_function
from gen.codegen.trig import routine, vector_typedefs
from gen.emit import trace_for
from conftest import compile_shared, rel_err

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
#: the routine is within 2.3e-16 absolute of glibc on |x| <= 1e6 (gen.emit, tests/test_batch.py)
#: and CasADi's VM calls libm; the algorithms amplify the last-bit differences mildly
VM_TOL = 1e-12
PREFIX = "t_cg"
#: a call of libm's sin or cos (not the routine's names)
LIBM_TRIG = re.compile(r"\b(sin|cos)\(")
#: a call of the vector routine's sine or cosine wrapper on a vector of arguments
ROUTINE_CALL = re.compile(PREFIX + r"_(sin|cos)\(&t_\)")
FLAGS = ["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-O2"]


def _routine() -> str:
    return "\n".join([*vector_typedefs(PREFIX, TRIG_LANES), "", routine(PREFIX, TRIG_LANES)])


def _run(tmp_path, f: ca.Function, inputs, plan=None, name="k", **split):
    code, (written,) = write_functions([f], preamble=_routine(), trig_vector=PREFIX, lanes=[plan], **split)
    lib = compile_shared(tmp_path, code, name, FLAGS)
    outs = [np.zeros(f.nnz_out(j)) for j in range(f.n_out())]
    dp = ctypes.POINTER(ctypes.c_double)
    arg = (dp * f.n_in())(*[np.ascontiguousarray(x, dtype=float).ctypes.data_as(dp) for x in inputs])
    res = (dp * f.n_out())(*[y.ctypes.data_as(dp) for y in outs])
    getattr(lib, f.name())(arg, res)
    return code, outs


def _vm(f: ca.Function, inputs):
    return [np.asarray(y).ravel(order="F") for y in f.call([ca.DM(x) for x in inputs])]


@needs_cc
@pytest.mark.parametrize("robot,algorithm", [("ur5", "aba"), ("panda", "crba")])
def test_hoisted_kernel_matches_the_virtual_machine(tmp_path, robot, algorithm):
    model = gen.load_robot(robot)
    tr = trace_for(model, algorithm)
    f = kernel_function("rbd_h_kernel", tr)
    rng = np.random.default_rng(5)
    inputs = [model.random_q(rng)] + [rng.normal(size=model.nv) for _ in range(f.n_in() - 1)]
    code, outs = _run(tmp_path, f, inputs)
    for y, ref in zip(outs, _vm(f, inputs)):
        assert rel_err(y, ref) < VM_TOL
    # every joint angle's sin and cos in the vector routine: two calls per TRIG_LANES angles
    angles = len({m.group(1) for m in re.finditer(r"\barg\[0\]\[(\d+)\]", code)})
    assert len(ROUTINE_CALL.findall(code)) == 2 * math.ceil(angles / TRIG_LANES)
    assert not LIBM_TRIG.search(code.split("void rbd_h_kernel")[1])


@needs_cc
def test_hoisted_kernel_split_into_parts_matches_the_virtual_machine(tmp_path):
    # the vectors of sines and cosines cross the parts' boundaries through x, lane by lane
    model = gen.load_robot("ur5")
    f = kernel_function("rbd_s_kernel", trace_for(model, "aba"))
    rng = np.random.default_rng(7)
    inputs = [model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)]
    code, outs = _run(tmp_path, f, inputs, split_above=300, part_size=300)
    assert "rbd_s_kernel_p1" in code and cwriter.FLATTEN + "static RBDGEN_PART void rbd_s_kernel_p0" in code
    for y, ref in zip(outs, _vm(f, inputs)):
        assert rel_err(y, ref) < VM_TOL


@needs_cc
def test_hoisted_lane_groups_match_the_virtual_machine(tmp_path):
    # anymal_c's four legs are isomorphic: the lane plan writes their sin and cos as vectors
    model = gen.load_robot("anymal_c")
    tr = trace_for(model, "crba")
    f, _, plan = lanes.trace_plan(tr, lambda t: (kernel_function("rbd_l_kernel", t), None))
    assert plan is not None
    rng = np.random.default_rng(6)
    inputs = [model.random_q(rng)]
    code, outs = _run(tmp_path, f, inputs, plan)
    for y, ref in zip(outs, _vm(f, inputs)):
        assert rel_err(y, ref) < VM_TOL
    body = code.split("void rbd_l_kernel")[1]
    assert ROUTINE_CALL.search(body) and not LIBM_TRIG.search(body)


@needs_cc
def test_a_sine_of_a_sine_stays_with_libm(tmp_path):
    x = ca.SX.sym("x", 3)
    y = ca.vertcat(ca.sin(x[0]) * ca.cos(x[1]), ca.sin(ca.sin(x[2])) + ca.cos(x[0] * x[2]))
    f = ca.Function("nested", [x], [y])
    xs = [np.array([0.3, -2.1, 7.5])]
    code, (out,) = _run(tmp_path, f, xs)
    assert rel_err(out, _vm(f, xs)[0]) < VM_TOL
    body = code.split("void nested")[1]
    # sin(x0), cos(x1), sin(x2), cos(x0 x2): four arguments, one chunk; sin(sin(x2)) through libm
    assert len(ROUTINE_CALL.findall(body)) == 2 and len(LIBM_TRIG.findall(body)) == 1


def test_one_argument_is_left_unchanged():
    x = ca.SX.sym("x", 2)
    f = ca.Function("one", [x], [ca.sin(x[0]) * x[1] + ca.cos(x[0])])
    steps = cwriter._steps(f)
    assert cwriter.hoist_trig(steps, {}, PREFIX) == (steps, {})


def test_the_header_names_the_sin_cos_the_writer_wrote():
    """The header's vector uses come from what the writer did: the hoisted routine where
    it hoisted (gen.cwriter.Written.hoisted_trig), the one-lane routine for
    scalar_trig='vector', nothing for glibc's; a kernel without sin or cos names none."""
    from gen.emit import context
    hoisted = "the joint angles' sines and cosines four at a time, which --no-lanes turns off"
    one_lane = "every sine and cosine through the vector routine on one lane (scalar_trig='vector')"
    tr = trace_for("chain:3", "rnea")
    assert context(tr)["vector_uses"] == [hoisted]
    assert context(tr, scalar_trig="vector")["vector_uses"] == [one_lane]
    assert context(tr, scalar_trig="libm")["vector_uses"] == []
    assert context(tr, lanes=False)["vector_uses"] == []
