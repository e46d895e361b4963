"""The CasADi external-function C API of rbdgen's builds (gen/casadi_api.py, gen/emit.py
casadi_context, issue 30 §3): casadi.external on the library gen.casadi_library compiles
equals gen.run, its Jacobian (jac_<name>, the compiled derivative kernel; raw q
coordinates through pinv(T(q)) on a free-flyer) equals the derivative row, threads give
the serial map's numbers, CasADi's generated C links against the library and gives the
same numbers, a plain build folder's library serves the value, and bad uses fail in one
line."""
import subprocess

import casadi as ca
import numpy as np
import pytest

import gen
from gen.api import get_algorithm
from gen.backend import NUMPY
from gen.build import compile_flags, compile_shared
from gen.casadi_api import casadi_library, normalised
from gen.cli import main
from gen.configuration import tangent_map
from gen.errors import RbdgenError
from conftest import load_or_skip, rel_err
from tests.random_trees import random_tree

#: the C against gen.run's NumPy evaluation of the same formulas: rounding only, relative
#: to max(1, max|ref|) (rel_err)
VALUE_TOL = 1e-12
#: jac_<name> against the derivative kernel called from Python: the same compiled C, up
#: to the compiler flags of the two builds (contraction into FMAs) and, on a free-flyer,
#: NumPy's pinv against the traced one of the chart
JAC_TOL = 1e-12


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def jacobian_blocks(e, args):
    """CasADi's Jacobian of every output of ``e`` w.r.t. every input, through MX AD (which
    calls jac_<name>), at ``args``: a list in output-major order."""
    x = [ca.MX.sym(e.name_in(i), e.size_in(i)) for i in range(e.n_in())]
    y = e.call(x)
    J = ca.Function("J", x, [ca.jacobian(o, s) for o in y for s in x])
    return [np.array(b) for b in J(*args)]


def derivative_blocks(model, algorithm, constraints, args):
    """The derivative row's matrices (gen.run, by name) in :func:`jacobian_blocks`'
    layout, the q block times pinv(T(q)) (raw coordinates; None: no derivative)."""
    algo = get_algorithm(algorithm)
    jrow = get_algorithm(algo.jacobian.row)
    cset = jrow.constraint_set(model, constraints) if jrow.constrained else None
    extra = [np.zeros(n) for _, n in jrow.inputs(model, cset)[len(args):]]
    d = as_tuple(gen.run(model, jrow.name, *args, *extra, constraints=constraints))
    d = dict(zip([n for n, _, _ in jrow.outputs(model, cset)], d))
    P = np.linalg.pinv(np.asarray(tangent_map(model, args[0].reshape(-1, 1), NUMPY)))
    out = []
    for o, _, _ in algo.outputs(model, algo.constraint_set(model, constraints)):
        names = algo.jacobian.blocks.get(o)
        for i in range(len(args)):
            out.append(None if names is None else d[names[i]] @ P if i == 0 else
                       None if names is None else d[names[i]])
    return out


@pytest.mark.parametrize("robot,algorithm", [("panda", "aba"), ("panda", "rnea"), ("panda", "nle"),
                                             ("solo12", "aba")])
def test_values_and_jacobian(robot, algorithm):
    """panda: revolute joints (raw = tangent coordinates); rnea's Jacobian w.r.t. a is M,
    nle's derivative kernel takes a = 0 from the library; solo12: a free-flyer (chart)."""
    model = load_or_skip(robot)
    q, v, x = state(model, 1)
    e = gen.casadi_external(model, algorithm)
    assert e.is_a("External")
    args = [q, v, x][:e.n_in()]
    ref = as_tuple(gen.run(model, algorithm, *args))
    for got, want in zip(as_tuple(e(*args)), ref):
        assert rel_err(np.array(got).reshape(np.shape(want)), want) < VALUE_TOL
    got, want = jacobian_blocks(e, args), derivative_blocks(model, algorithm, None, args)
    for k, (g, w) in enumerate(zip(got, want)):
        assert rel_err(g, w) < JAC_TOL, (algorithm, k, rel_err(g, w))
    if model.nq != model.nv:                 # zero along the quaternion's norm direction
        free = next(b for b in model.bodies if b.kind == "free")
        quat = q[free.idx_q + 3:free.idx_q + 7]
        assert np.max(np.abs(got[0][:, free.idx_q + 3:free.idx_q + 7] @ quat)) < JAC_TOL * np.max(np.abs(got[0]))


def test_solver_outputs_structurally_zero():
    """A constrained solver on a random tree with a free-flyer: ddq and lam are
    differentiated (the chart on q) with the graph's structural pattern, iterations and
    residual have structurally zero Jacobian blocks."""
    model = random_tree(5, 3)
    e = gen.casadi_external(model, "prox_ltl", "3D:tip4")
    jac = e.jacobian()
    assert jac.name() == f"jac_{e.name()}"
    assert jac.name_in() == e.name_in() + [f"out_{n}" for n in e.name_out()]
    nnz = {jac.name_out(k): jac.sparsity_out(k).nnz() for k in range(jac.n_out())}
    sx = gen.casadi_function(model, "prox_ltl", "3D:tip4")
    for o in e.name_out():
        for i in e.name_in():
            graph = sx.jac_sparsity(sx.index_out(o), sx.index_in(i)).nnz()
            assert nnz[f"jac_{o}_{i}"] == (0 if o in ("iterations", "residual") else graph), f"jac_{o}_{i}"
    q, v, tau = state(model, 2)
    got, want = jacobian_blocks(e, [q, v, tau]), derivative_blocks(model, "prox_ltl", "3D:tip4", [q, v, tau])
    for g, w in zip(got, want):
        if w is not None:
            assert rel_err(g, w) < JAC_TOL


@pytest.mark.parametrize("robot", ["panda", "solo12"])
def test_jacobian_pattern_is_the_graphs(robot):
    """jac_<name>'s blocks have the structural pattern CasADi finds in the traced graph
    (casadi_function's jac_sparsity): an NLP gets the same pattern from either, so IPOPT
    takes the same path (examples/trajopt).  panda: aba does not depend on the first
    joint's angle (gravity along its axis); solo12: nor on the base position."""
    model = load_or_skip(robot)
    ext = gen.casadi_external(model, "aba")
    sx = gen.casadi_function(model, "aba")
    jac = ext.jacobian()
    for i, name in enumerate(sx.name_in()):
        want, got = sx.jac_sparsity(0, i), jac.sparsity_out(jac.name_out().index(f"jac_ddq_{name}"))
        assert got == want, f"{robot} jac_ddq_{name}: {got.nnz()} nonzeros, the graph's {want.nnz()}"
        assert got.nnz() < got.numel() or name != "q"


def test_jacobian_outputs_asked_one_at_a_time_equal_the_full_call():
    """jac_<name> writes a dense, unchanged block (solo12 aba: ddq_dv, Minv) straight into
    CasADi's res, and into its w when CasADi does not want it (a NULL res): an MX function
    using one output of jac_<name> (the others NULL) gives the full call's numbers, bit
    for bit (the same compiled C)."""
    model = load_or_skip("solo12")
    e = gen.casadi_external(model, "aba")
    jac = e.jacobian()
    q, v, tau = state(model, 3)
    args = [q, v, tau, np.array(e(q, v, tau)).ravel()]
    full = [np.array(b) for b in as_tuple(jac(*args))]
    x = [ca.MX.sym(jac.name_in(i), jac.sparsity_in(i)) for i in range(jac.n_in())]
    y = jac.call(x)
    for k in range(jac.n_out()):
        one = np.array(ca.Function("one", x, [y[k]])(*args))
        assert np.array_equal(one, full[k]), jac.name_out(k)


def test_thread_map_equals_serial():
    """F.map(N, "thread", 2): each thread its own w; the numbers of the serial map, bit for bit."""
    model = load_or_skip("panda")
    e = gen.casadi_external(model, "aba")
    n = 64
    states = [state(model, s) for s in range(n)]
    args = [np.stack([s[k] for s in states], axis=1) for k in range(3)]
    x = [ca.MX.sym(e.name_in(i), e.size_in(i)) for i in range(3)]
    J = ca.Function("J", x, [ca.jacobian(e(*x), ca.vertcat(*x))])
    for f in (e, J):
        serial = np.array(f.map(n)(*args))
        threads = np.array(f.map(n, "thread", 2)(*args))
        assert np.array_equal(serial, threads)
    col = np.array(e.map(n)(*args))[:, 5]
    assert rel_err(col, gen.run(model, "aba", *states[5])) < VALUE_TOL


def test_generated_c_program(tmp_path, monkeypatch):
    """A function calling the external and its Jacobian, written as C by CasADi
    (Function.generate, with_header and main), compiled with the system compiler against
    the library, run: its printed numbers are the in-process evaluation's."""
    model = load_or_skip("panda")
    name, lib, _ = casadi_library(model, "aba")
    e = ca.external(name, str(lib))
    x = [ca.MX.sym(n, model.nv) for n in ("q", "v", "tau")]
    ddq = e(*x)
    g = ca.Function("g", x, [ddq, ca.jacobian(ddq, ca.vertcat(*x))], ["q", "v", "tau"], ["ddq", "J"])
    monkeypatch.chdir(tmp_path)                   # Function.generate writes into the working folder
    src = tmp_path / "g.c"
    g.generate("g.c", {"with_header": True, "main": True})
    exe = tmp_path / "g"
    subprocess.run(["cc", str(src), str(lib), f"-Wl,-rpath,{lib.parent}", "-lm", "-o", str(exe)], check=True)
    q, v, tau = state(model, 3)
    stdin = " ".join(repr(float(a)) for a in np.concatenate([q, v, tau]))
    out = subprocess.run([str(exe), "g"], input=stdin, capture_output=True, text=True, check=True).stdout
    printed = np.array([float(t) for t in out.split()])
    want = np.concatenate([np.array(b.nonzeros()) for b in g(q, v, tau)])   # printed: the structural nonzeros
    assert printed.size == want.size
    assert rel_err(printed, want) < 1e-15          # printed with 17 significant digits


def test_plain_folder_library_serves_the_value(tmp_path):
    """A plain build folder (no derivative kernel) compiled as it is into a shared
    library: casadi.external loads its P_casadi value entry, which has no Jacobian."""
    model = load_or_skip("panda")
    k = gen.build(model, "rnea")
    m = k.folder.manifest
    assert m["functions"][0]["casadi_external"] == f"{k.folder.prefix}_casadi"
    files = {n: (k.folder.path / n).read_bytes() for n in [m["header"], *m["sources"]]}
    lib = compile_shared(k.folder.prefix, files, m["sources"], compile_flags(None), cache=tmp_path,
                         what="test")
    e = ca.external(m["functions"][0]["casadi_external"], str(lib))
    q, v, a = state(model, 4)
    assert rel_err(np.array(e(q, v, a)).ravel(), k(q, v, a)) < 1e-15
    s = ca.MX.sym("q", model.nq)
    with pytest.raises(RuntimeError):
        ca.jacobian(e(s, v, a), s)


def test_cli_build_casadi(tmp_path):
    """rbdgen build --casadi writes lib<name>.so beside the folder (which still makes with
    its own sources) and the derivative kernel's files; the library has the Jacobian."""
    out = tmp_path / "k"
    assert main(["build", "chain:3", "-a", "rnea", "-o", str(out), "--casadi", "-q", "--format", "csv"]) == 0
    lib = out / "librbd_chain3_rnea_casadi.so"
    e = ca.external("rbd_chain3_rnea_casadi", str(lib))
    assert e.jacobian().name() == "jac_rbd_chain3_rnea_casadi"
    assert (out / "rbd_chain3_rnea_derivatives_kernel.c").exists() and (out / "rbd_chain3_rnea_casadi.c").exists()
    assert main(["build", "chain:3", "-a", "rnea", "-o", str(out), "--casadi", "--batch", "4", "-q"]) == 2
    assert main(["build", "chain:3", "-a", "aba", "-o", str(out), "--casadi-hessian", "-q"]) == 2


def test_cli_build_casadi_hessian(tmp_path):
    """rbdgen build --casadi --casadi-hessian: the library's reverse mode and its Jacobian are
    the external's own adj1_/jac_adj1_ (CasADi's Lagrangian Hessian), equal to the SX graph's."""
    out = tmp_path / "k"
    assert main(["build", "chain:3", "-a", "aba", "-o", str(out), "--casadi", "--casadi-hessian", "-q"]) == 0
    e = ca.external("rbd_chain3_aba_casadi", str(out / "librbd_chain3_aba_casadi.so"))
    assert e.reverse(1).name() == "adj1_rbd_chain3_aba_casadi"
    model = gen.load_robot("chain:3")
    q, v, tau = state(model, 1)
    lam = np.random.default_rng(2).normal(size=model.nv)
    x = ca.MX.sym("x", 3 * model.nv)
    f = ca.dot(lam, e(x[:3], x[3:6], x[6:]))
    g = gen.casadi_function(model, "aba")
    ref = ca.dot(lam, g(x[:3], x[3:6], x[6:]))
    H, H_ref = (ca.Function("H", [x], [ca.hessian(y, x)[0]]) for y in (f, ref))
    point = np.concatenate([q, v, tau])
    assert rel_err(np.array(H(point)), np.array(H_ref(point))) < 1e-10


def test_refusals():
    model = load_or_skip("panda")
    with pytest.raises(RbdgenError, match="not a C identifier"):
        gen.casadi_external(model, "aba", name="bad name")
    with pytest.raises(RbdgenError, match="early-exit"):
        gen.casadi_external(model, "prox_ltl", "3D:panda_hand_tcp", tol=1e-10, max_iter=20)
    with pytest.raises(RbdgenError, match="runtime_params"):
        gen.casadi_external(model, "prox_ltl", "3D:panda_hand_tcp", runtime_params=True)
    e = gen.casadi_external(model, "crba")            # no derivative row: no Jacobian
    q = ca.MX.sym("q", model.nq)
    with pytest.raises(RuntimeError):
        ca.jacobian(e(q), q)
    a = gen.casadi_external(model, "aba")             # a non-finite input: a failed evaluation
    q0, v0, t0 = state(model, 5)
    v0[2] = np.nan
    with pytest.raises(RuntimeError):
        a(q0, v0, t0)


# --- second derivatives: adj1_<name>, jac_adj1_<name> (issue 35 §4) -----------------------

#: adj1_<name> (lam^T of the compiled derivative kernel) against the SX graph's reverse
#: mode: the same derivatives by two routes, rounding only
ADJ_TOL = 1e-12
#: the Hessian CasADi forms from the external (jac_adj1_<name>: the compiled
#: aba_hessian_product) against casadi.hessian of lam^T aba on the SX graph: two routes
#: (second-order adjoint vs forward-over-reverse AD), rounding of sums of ~nv^2 terms
HESS_TOL = 1e-10


def hessian_functions(e, sx, model):
    """(value, gradient, Hessian) of lam^T f(q, v, tau) w.r.t. (q, v, tau), MX over the
    external ``e`` and SX over the graph ``sx``: what nlpsol's exact Hessian evaluates.
    The graph is called on q with its free-flyers' quaternions normalised: the function
    whose raw-coordinate derivatives the external reports (gen/casadi_api.py)."""
    out = []
    for f, sym in ((e, ca.MX.sym), (sx, ca.SX.sym)):
        x = [sym(n, model.nq if n == "q" else model.nv) for n in ("q", "v", "tau")]
        lam = sym("lam", model.nv)
        z = ca.vertcat(*x)
        lagrangian = ca.dot(lam, f(x[0] if f is e else normalised(model, x[0]), x[1], x[2]))
        H, g = ca.hessian(lagrangian, z)
        out.append(ca.Function("h", [*x, lam], [lagrangian, g, H]))
    return out


@pytest.fixture(scope="module")
def panda_hessian():
    model = load_or_skip("panda")
    return model, gen.casadi_external(model, "aba", hessian=True), gen.casadi_function(model, "aba")


def test_reverse_mode_is_adj1(panda_hessian):
    """CasADi's reverse mode of the external is the library's adj1_<name> (not its
    jac_<name> wrapped), equal to the SX graph's reverse mode."""
    model, e, sx = panda_hessian
    rev = e.reverse(1)
    assert rev.is_a("External") and rev.name() == f"adj1_{e.name()}"
    for seed in range(3):
        q, v, tau = state(model, seed)
        lam = np.random.default_rng(seed + 10).normal(size=model.nv)
        ddq = np.array(e(q, v, tau))
        got = [np.array(a).ravel() for a in rev(q, v, tau, ddq, lam)]
        want = [np.array(a).ravel() for a in sx.reverse(1)(q, v, tau, ddq, lam)]
        for g, w in zip(got, want):
            assert rel_err(g, w) < ADJ_TOL


def test_hessian_equals_the_graphs(panda_hessian):
    """The Hessian of lam^T aba CasADi builds on the external (its graph calls
    jac_adj1_<name>) equals casadi.hessian on the SX graph, with the same structural
    pattern (panda: nothing depends on the first joint's angle)."""
    model, e, sx = panda_hessian
    fe, fs = hessian_functions(e, sx, model)
    assert fe.sparsity_out(2) == fs.sparsity_out(2)
    assert fe.sparsity_out(2).nnz() < (3 * model.nv) ** 2
    for seed in range(3):
        q, v, tau = state(model, seed)
        lam = np.random.default_rng(seed + 20).normal(size=model.nv)
        for got, want in zip(fe(q, v, tau, lam), fs(q, v, tau, lam)):
            assert rel_err(np.array(got), np.array(want)) < HESS_TOL
    H = np.array(fe(*state(model, 0), np.ones(model.nv))[2])
    assert np.array_equal(H, H.T)


def test_hessian_thread_map_equals_serial(panda_hessian):
    """The Lagrangian's Hessian over the external in F.map(N, "thread", 2): adj1_<name>
    and jac_adj1_<name> keep their scratch in each thread's w, so the numbers are the
    serial map's, bit for bit."""
    model, e, sx = panda_hessian
    fe, _ = hessian_functions(e, sx, model)
    n = 32
    rng = np.random.default_rng(9)
    args = [np.stack([model.random_q(rng) for _ in range(n)], axis=1),
            *(rng.normal(size=(model.nv, n)) for _ in range(3))]
    for serial, threads in zip(fe.map(n)(*args), fe.map(n, "thread", 2)(*args)):
        assert np.array_equal(np.array(serial), np.array(threads))


@pytest.mark.parametrize("bodies,seed,kinds", [(6, 11, ("revolute", "prismatic")),
                                                (3, 1, ("revolute", "prismatic", "free")),
                                                (5, 3, ("revolute", "prismatic", "free"))])
def test_hessian_random_tree(bodies, seed, kinds):
    """Random trees: a branching fixed-base tree of revolute and prismatic joints with
    random axes, and trees with free-flyers (the root's and another body's: the
    raw-coordinate chart's second-order term, _hessian_chart).  The external's reverse
    mode and Hessian equal the SX graph's on normalised quaternions, with its structural
    pattern; the Hessian is exactly symmetric."""
    model = random_tree(bodies, seed, kinds=kinds)
    e, sx = gen.casadi_external(model, "aba", hessian=True, flags=compile_flags()), gen.casadi_function(model, "aba")
    fe, fs = hessian_functions(e, sx, model)
    assert fe.sparsity_out(2) == fs.sparsity_out(2)
    for k in range(2):
        q, v, tau = state(model, 6 + k)
        lam = np.random.default_rng(6 + k).normal(size=model.nv)
        got, want = fe(q, v, tau, lam), fs(q, v, tau, lam)
        assert rel_err(np.array(got[1]), np.array(want[1])) < ADJ_TOL
        assert rel_err(np.array(got[2]), np.array(want[2])) < HESS_TOL
        H = np.array(got[2])
        assert np.array_equal(H, H.T)


def test_jac_adj1_blocks_with_respect_to_the_seed(panda_hessian):
    """jac_adj1_<name>'s blocks w.r.t. the adjoint seed are the transposed first
    derivatives (the derivative kernel, gen.run), those w.r.t. out_ddq structurally zero."""
    model, e, _ = panda_hessian
    J = e.reverse(1).jacobian()
    assert J.name() == f"jac_adj1_{e.name()}"
    q, v, tau = state(model, 4)
    lam = np.random.default_rng(4).normal(size=model.nv)
    ddq = np.array(e(q, v, tau)).ravel()
    adj = [np.array(a).ravel() for a in e.reverse(1)(q, v, tau, ddq, lam)]
    blocks = dict(zip(J.name_out(), J(q, v, tau, ddq, lam, *adj)))
    d = gen.run(model, "aba_derivatives", q, v, tau)
    for o, D in zip(("adj_q", "adj_v", "adj_tau"), d[:3]):
        assert rel_err(np.array(blocks[f"jac_{o}_adj_ddq"]), D.T) < JAC_TOL
        assert J.sparsity_out(J.name_out().index(f"jac_{o}_out_ddq")).nnz() == 0


def test_nlpsol_exact_hessian(panda_hessian):
    """IPOPT with its default exact Hessian on an NLP over the external (a static posture
    reached under torque bounds: ddq(q, 0, tau) = 0): the Lagrangian Hessian function
    calls jac_adj1_<name>, and the solution is the SX graph's."""
    model, e, sx = panda_hessian
    nv = model.nv
    target = np.array(model.random_q(np.random.default_rng(7)))
    sols = []
    for f, sym in ((e, ca.MX.sym), (sx, ca.SX.sym)):
        q, tau = sym("q", nv), sym("tau", nv)
        nlp = {"x": ca.vertcat(q, tau), "f": ca.sumsqr(q - target) + 1e-3 * ca.sumsqr(tau),
               "g": f(q, ca.DM.zeros(nv), tau)}
        S = ca.nlpsol("S", "ipopt", nlp, {"ipopt.print_level": 0, "print_time": False, "ipopt.tol": 1e-10})
        r = S(x0=np.zeros(2 * nv), lbg=0, ubg=0, lbx=[-np.inf] * nv + [-10.0] * nv, ubx=[np.inf] * nv + [10.0] * nv)
        assert S.stats()["success"]
        sols.append(np.array(r["x"]).ravel())
        if f is e:
            H = S.get_function("nlp_hess_l")
            called = {H.instruction_MX(k).which_function().name() for k in range(H.n_instructions())
                      if H.instruction_id(k) == ca.OP_CALL}
            assert f"jac_adj1_{e.name()}" in called
    assert rel_err(sols[0], sols[1]) < 1e-8


def test_hessian_refusals():
    with pytest.raises(RbdgenError, match="raw-coordinate Hessian of revolute_unb joints is not built"):
        gen.casadi_external(random_tree(4, 2, kinds=("revolute_unb",)), "aba", hessian=True)
    with pytest.raises(RbdgenError, match="hessian=True is for aba"):
        gen.casadi_external(load_or_skip("panda"), "rnea", hessian=True)


def test_panda_swing_exact_hessian_fewer_iterations():
    """examples/trajopt/panda_swing.py reduced (N = 15 over 0.5 s; the README's run: N = 40):
    IPOPT with the external's exact Hessian reaches the optimum of the limited-memory run
    and of the SX graph's exact Hessian (the same NLP), in the SX reference's iterations
    and in fewer than the limited-memory run."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "examples" / "trajopt" / "panda_swing.py"
    spec = importlib.util.spec_from_file_location("panda_swing", path)
    swing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(swing)
    model = load_or_skip(swing.ROBOT)
    r = {v: swing.solve(model, v, 15, 0.5, max_iter=3000, verbose=False, repeats=1) for v in swing.VARIANTS}
    for x in r.values():
        assert x["success"], (x["variant"], x["status"])
        assert x["max_defect"] < 1e-6 and x["max_tau_ratio"] <= 1 + 1e-8
    exact, lbfgs, sx = r["external-exact"], r["external-lbfgs"], r["sx-exact"]
    assert exact["iterations"] == sx["iterations"] < lbfgs["iterations"]
    assert rel_err(np.array(exact["x"]), np.array(sx["x"])) < 1e-8
    assert abs(exact["cost"] - lbfgs["cost"]) < 1e-6 * exact["cost"]
