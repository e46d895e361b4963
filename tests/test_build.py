"""Compiled kernels (gen/build.py): compiled C = NumPy (docs/DESIGN.md §6c) on synthetic and
named robots, the error codes, the exact workspace, and the compile cache."""

import os

import numpy as np
import pytest
from conftest import load_or_skip, rel_err

import gen
from gen.algorithms import ALGORITHMS
from gen.build import Kernel, compile_folder
from gen.errors import RbdgenError
from gen.robots.named import NAMED_ROBOTS

C_TOL = 1e-12            # relative: max|c - numpy| / max(1, max|numpy|)
ALM_TOL = 1e-7           # penalty-based solvers: rounding grows to ~eps/(mu lambda_min(M)) (proximal.py)
ALGOS = ["rnea", "nle", "crba", "ltdl", "crba_solve", "aba"]
SYNTHETIC = ["chain:7", "bintree:15", "humanoid30"]
CANARY = -7.25e301
N_CANARY = 16


def inputs_for(model, algorithm, rng, cset=None):
    return [model.random_q(rng) if n == "q" else rng.normal(size=k)
            for n, k in ALGORITHMS[algorithm].inputs(model, cset)]


def check_against_numpy(kernel, model, algorithm, samples=3, tol=C_TOL, constraints=None, **options):
    rng = np.random.default_rng(5)
    for _ in range(samples):
        ins = inputs_for(model, algorithm, rng, kernel.cset)
        got = kernel(*ins)
        ref = gen.run(model, algorithm, *ins, constraints=constraints, **options)
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        assert len(got) == len(ref)
        for spec, g, r in zip(kernel.function["outputs"], got, ref):
            assert np.shape(g) == np.shape(r), f"{algorithm}/{spec['name']}: shape {np.shape(g)} != {np.shape(r)}"
            if np.size(r):
                err = rel_err(g, r)
                assert err < tol, f"{algorithm}/{spec['name']} on {model.name}: compiled C vs NumPy error {err:.2e}"


# --- compiled == NumPy ---------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("robot", SYNTHETIC)
def test_compiled_equals_numpy_synthetic(robot, algorithm, kernel_cache):
    model = gen.load_robot(robot)
    check_against_numpy(gen.build(model, algorithm, cache=kernel_cache), model, algorithm)


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("robot", list(NAMED_ROBOTS))
def test_compiled_equals_numpy_named(robot, algorithm, kernel_cache):
    model = load_or_skip(robot)
    check_against_numpy(gen.build(model, algorithm, cache=kernel_cache), model, algorithm)


def test_compiled_random_tree_with_every_joint_kind(kernel_cache):
    from random_trees import random_tree

    model = random_tree(9, 7)
    for algorithm in ("rnea", "crba", "aba"):
        check_against_numpy(gen.build(model, algorithm, cache=kernel_cache), model, algorithm)


CONSTRAINED = {"humanoid30": "6D:left_foot,3D:right_foot", "solo12": "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"}


@pytest.mark.parametrize("robot", list(CONSTRAINED))
@pytest.mark.parametrize("algorithm,tol", [("prox_ltl", C_TOL), ("prox_pv", C_TOL),
                                           ("prox_ltls", ALM_TOL), ("constrained_aba", ALM_TOL)])
def test_compiled_constrained_equals_numpy(robot, algorithm, tol, kernel_cache):
    model = load_or_skip(robot)
    spec = CONSTRAINED[robot]
    k = gen.build(model, algorithm, spec, cache=kernel_cache, iterations=4)
    assert k.manifest["iterations"] == 4 and k.manifest["m"] > 0 and k.manifest["constraints"]
    check_against_numpy(k, model, algorithm, tol=tol, constraints=spec, iterations=4)


# --- the Kernel object ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def aba_kernel(kernel_cache):
    return gen.build("humanoid30", "aba", cache=kernel_cache)


def test_kernel_attributes(aba_kernel):
    k = aba_kernel
    assert isinstance(k, Kernel)
    assert k.manifest["algorithm"] == "aba" and k.manifest["robot"] == "humanoid30"
    assert k.header_path.exists() and k.header_path.suffix == ".h"
    assert all(p.exists() for p in k.sources) and [p.name for p in k.sources] == \
        [f"{k.symbol}.c", f"{k.symbol}_kernel.c", f"{k.symbol}_casadi.c"]


def test_kernel_validates_inputs_like_run(aba_kernel):
    model = aba_kernel.model
    q, v, tau = model.neutral(), np.zeros(model.nv), np.zeros(model.nv)
    with pytest.raises(RbdgenError, match="'v' must have 30 entries"):
        aba_kernel(q, v[:3], tau)
    with pytest.raises(RbdgenError, match="takes 3 inputs"):
        aba_kernel(q, v)
    v[4] = np.nan
    with pytest.raises(RbdgenError, match="NaN or inf"):
        aba_kernel(q, v, tau)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_input_returns_error_code_and_nan_outputs(aba_kernel, bad):
    model = aba_kernel.model
    q, v, tau = model.neutral(), np.zeros(model.nv), np.ones(model.nv)
    tau[7] = bad
    out = np.zeros(model.nv)
    rc = aba_kernel.call_raw([q, v, tau], [out])
    assert rc == -1, f"non-finite input gave return code {rc}"
    assert np.all(np.isnan(out)), "outputs must be NaN after a rejected input"
    assert aba_kernel.call_raw([q, v, np.ones(model.nv)], [out]) == 0


def test_nonfinite_output_returns_error_code(kernel_cache):
    k = gen.build("chain:3", "rnea", cache=kernel_cache)
    model = k.model
    out = np.zeros(model.nv)
    rc = k.call_raw([model.neutral(), np.full(model.nv, 1e200), np.zeros(model.nv)], [out])
    assert rc == -2
    with pytest.raises(RbdgenError, match="returned -2"):
        k(model.neutral(), np.full(model.nv, 1e200), np.zeros(model.nv))


@pytest.mark.parametrize("avoid_stack", [False, True])
@pytest.mark.parametrize("algorithm", ["aba", "ltdl"])
def test_workspace_size_is_honoured(avoid_stack, algorithm, kernel_cache, tmp_path):
    """A work buffer exactly work_size long between canaries, outputs between canaries:
    the kernel writes neither past nor before them, and the results are right."""
    k = gen.build("humanoid30", algorithm, cache=kernel_cache, avoid_stack=avoid_stack, out_dir=tmp_path / "k")
    ws = k.work_size
    if avoid_stack:
        assert ws > 0
    buf = np.full(ws + 2 * N_CANARY, CANARY)
    work = buf[N_CANARY:N_CANARY + ws]
    outbufs = [np.full(o["size"] + 2 * N_CANARY, CANARY) for o in k.function["outputs"]]
    outs = [b[N_CANARY:N_CANARY + o["size"]] for b, o in zip(outbufs, k.function["outputs"])]
    ins = inputs_for(k.model, algorithm, np.random.default_rng(2))
    assert k.call_raw(ins, outs, work=work) == 0
    for b, name in [(buf, "work")] + [(b, o["name"]) for b, o in zip(outbufs, k.function["outputs"])]:
        assert np.all(b[:N_CANARY] == CANARY) and np.all(b[-N_CANARY:] == CANARY), f"{name} canaries overwritten"
    ref = gen.run(k.model, algorithm, *ins)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for o, spec, r in zip(outs, k.function["outputs"], ref):
        g = o if spec["cols"] == 1 else o.reshape(spec["rows"], spec["cols"], order="F")
        assert rel_err(g, r) < C_TOL
    if avoid_stack and ws:
        assert not np.all(work == CANARY), "avoid_stack kernel did not use its workspace"


# --- the cache ------------------------------------------------------------------------------------

def test_compile_cache(tmp_path):
    msgs = []
    k1 = gen.build("chain:2", "nle", cache=tmp_path, progress=msgs.append)
    assert any(m.startswith("compile") and "cached" not in m for m in msgs)
    assert any(m.startswith("trace") for m in msgs) and any(m.startswith("codegen") for m in msgs)
    msgs.clear()
    k2 = gen.build("chain:2", "nle", cache=tmp_path, progress=msgs.append)
    assert any("cached" in m for m in msgs), msgs
    assert k1.module is k2.module
    msgs.clear()
    k3 = compile_folder(k1.path, flags="-O1", cache=tmp_path, progress=msgs.append)
    assert k3 is not k1.module and not any("cached" in m for m in msgs)
    ins = [k1.model.neutral(), np.ones(2)]
    assert np.array_equal(k1(*ins), gen.run("chain:2", "nle", *ins)) or rel_err(k1(*ins), gen.run("chain:2", "nle", *ins)) < C_TOL


def test_compile_error_is_a_user_error(tmp_path, kernel_cache):
    k = gen.build("chain:2", "nle", cache=kernel_cache, out_dir=tmp_path / "k")
    with pytest.raises(RbdgenError, match="compiling"):
        compile_folder(k.path, flags="-fno-such-flag-for-rbdgen", cache=tmp_path / "c")


def test_kernels_differing_only_in_options_get_their_own_cache_folders():
    import gen

    spec = "3D:left_foot,3D:right_foot"
    k1 = gen.build("humanoid30", "constrained_aba", spec, iterations=1)
    k3 = gen.build("humanoid30", "constrained_aba", spec, iterations=3)
    again = gen.build("humanoid30", "constrained_aba", spec, iterations=1)
    assert k1.path != k3.path and k1.path == again.path
    assert k1.path.name.startswith(k1.manifest["functions"][0]["symbol"] + "-")
    assert k1.manifest["iterations"] == 1 and k3.manifest["iterations"] == 3


# --- iterations and residual (issue 32 §5) ----------------------------------------------------------

RESIDUAL_TOL = 1e-12     # the C's residual vs NumPy's: the same operations on the same iterate
#: a well-posed problem: the tip of a 6-link chain held in place (J has full row rank)
SOLVED = "3D:link5_tip"


@pytest.mark.parametrize("options", [{"iterations": 4}, {"tol": 1e-10, "max_iter": 50}])
def test_kernel_iterations_and_residual_are_python_numbers(options, kernel_cache):
    import warnings

    model = gen.load_robot("chain:6")
    k = gen.build(model, "prox_ltl", SOLVED, cache=kernel_cache, **options)
    rng = np.random.default_rng(4)
    ins = [model.random_q(rng), rng.normal(size=6), rng.normal(size=6)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ddq, lam, it, res = k(*ins)
    _, _, ref_it, ref_res = gen.run(model, "prox_ltl", *ins, constraints=SOLVED, **options)
    assert type(it) is int and type(res) is float
    assert it == ref_it and abs(res - ref_res) <= RESIDUAL_TOL


def test_batched_iterations_and_residual_have_one_entry_per_state(kernel_cache):
    model = gen.load_robot("chain:6")
    k = gen.build(model, "prox_ltl", SOLVED, cache=kernel_cache, batch=2, iterations=4)
    rng = np.random.default_rng(6)
    states = [[model.random_q(rng), rng.normal(size=6), rng.normal(size=6)] for _ in range(3)]
    ddq, lam, it, res = k(*[np.stack(x) for x in zip(*states)])
    assert ddq.shape == (3, 6) and it.shape == (3,) and res.shape == (3,)
    assert it.dtype.kind == "i" and res.dtype == np.float64
    for j, ins in enumerate(states):
        _, _, ref_it, ref_res = gen.run(model, "prox_ltl", *ins, constraints=SOLVED, iterations=4)
        assert it[j] == ref_it and abs(res[j] - ref_res) <= RESIDUAL_TOL


def test_a_long_build_reports_its_progress_unless_quiet(capsys, monkeypatch, tmp_path):
    """gen.build with no progress callback: a build longer than PATIENCE seconds prints
    the CLI's progress lines (trace, codegen with its size, compile) to stderr; quiet=True
    and a cached build print nothing."""
    import importlib
    monkeypatch.setattr(importlib.import_module("gen.build"), "PATIENCE", 0.0)   # gen.build is also a function
    gen.build("chain:3", "rnea", cache=tmp_path / "c1", flags="-O0")
    err = capsys.readouterr().err
    assert "rbdgen: trace" in err and "rbdgen: compile" in err and "kB of C" in err, err
    gen.build("chain:3", "rnea", cache=tmp_path / "c2", flags="-O0", quiet=True)
    gen.build("chain:3", "rnea", cache=tmp_path / "c1", flags="-O0")
    assert capsys.readouterr().err == ""


def test_a_failing_compiler_is_one_line_naming_the_error(tmp_path):
    from gen.errors import run_tool
    bad = tmp_path / "bad.c"
    bad.write_text("int f(void) { return undeclared_name; }\n")
    with pytest.raises(RbdgenError) as e:
        run_tool([os.environ.get("CC") or "cc", "-c", str(bad), "-o", str(tmp_path / "bad.o")], "compiling bad.c")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("compiling bad.c failed: ") and "undeclared_name" in msg
    with pytest.raises(RbdgenError, match=r"^running it failed: cannot run /nonexistent/tool "):
        run_tool(["/nonexistent/tool"], "running it")
    assert run_tool(["sh", "-c", "echo ok"], "echo") == "ok\n"
