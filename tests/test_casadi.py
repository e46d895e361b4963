"""gen.casadi_function and gen.casadi_external (gen/casadi_api.py, issue 14 §1): values =
gen.run, header names, CasADi's AD of the SX graph = the derivative kernels (raw q
coordinates times the tangent map where nq != nv), the external's Jacobian = the same,
save / load, and both used symbolically inside an IPOPT problem."""
import casadi as ca
import numpy as np
import pytest

import gen
from gen.api import get_algorithm
from gen.build import compile_flags
from gen.backend import NUMPY
from gen.configuration import tangent_map
from gen.errors import RbdgenError
from conftest import row_floor, load_or_skip, rel_err
from tests.random_trees import random_tree

AD_TOL = 1e-8          # relative to max(1, max|ref|): AD of the SX graph vs the derivative kernels
VALUE_TOL = 1e-12
FEET = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def ad_jacobians(f, model, q, *args):
    """CasADi's AD of the differentiated outputs of ``f`` w.r.t. each input, the q
    column block times the tangent map (raw -> tangent coordinates)."""
    x = [ca.MX.sym(f.name_in(i), f.size_in(i)) for i in range(f.n_in())]
    y = f.call(x)
    J = ca.Function("J", x, [ca.jacobian(o, s) for o in y for s in x])
    T = np.asarray(tangent_map(model, np.asarray(q).reshape(-1, 1), NUMPY))
    out = [np.array(b) for b in J(q, *args)]
    return [b @ T if k % f.n_in() == 0 else b for k, b in enumerate(out)], f.n_in()


def kernel_blocks(model, algorithm, constraints, q, *args, **options):
    """The derivative row's matrices in the layout of :func:`ad_jacobians`."""
    algo = get_algorithm(algorithm)
    jrow = get_algorithm(algo.jacobian.row)
    known = {o.name for o in jrow.options}
    extra = [np.zeros(n) for _, n in jrow.inputs(model, None)[len(args) + 1:]]
    d = gen.run(model, jrow.name, q, *args, *extra, constraints=constraints,
                **{k: v for k, v in options.items() if k in known})
    names = [n for n, _, _ in jrow.outputs(model, None if not jrow.constrained else constraints)]
    d = dict(zip(names, d if isinstance(d, tuple) else (d,)))
    return [[d[n] for n in algo.jacobian.blocks[o]] if o in algo.jacobian.blocks else None
            for o, _, _ in algo.outputs(model, algo.constraint_set(model, constraints))]


def check_jacobians(f, model, algorithm, constraints, args, tol=AD_TOL):
    got, nin = ad_jacobians(f, model, *args)
    want = kernel_blocks(model, algorithm, constraints, *args)
    checked = 0
    for o, blocks in enumerate(want):
        if blocks is None:
            continue
        for i, ref in enumerate(blocks):
            err = rel_err(got[o * nin + i], ref)
            assert err < tol, (algorithm, f.name_out(o), f.name_in(i), err)
            checked += 1
    return checked


@pytest.mark.parametrize("robot,algorithm,constraints", [
    ("panda", "aba", None), ("panda", "crba", None), ("panda", "rnea", None),
    ("solo12", "prox_ltl", FEET), ("solo12", "nle", None)])
def test_function_values_and_names(robot, algorithm, constraints):
    model = load_or_skip(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    f = gen.casadi_function(model, algorithm, constraints)
    assert f.name_in() == [n for n, _ in algo.inputs(model, cset)]
    assert f.name_out() == [n for n, _, _ in algo.outputs(model, cset)]
    assert [f.size_out(i) for i in range(f.n_out())] == [(r, c) for _, r, c in algo.outputs(model, cset)]
    q, v, x = state(model)
    args = [q, v, x][:f.n_in()]
    ref = gen.run(model, algorithm, *args, constraints=constraints)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = f(*args)
    got = got if isinstance(got, tuple) else (got,)
    for g, r in zip(got, ref):
        assert rel_err(np.array(g).reshape(np.shape(r)), r) < VALUE_TOL


@pytest.mark.parametrize("algorithm", ["aba", "rnea", "nle"])
def test_ad_equals_derivative_kernels_fixed_base(algorithm):
    """panda: revolute joints only, raw = tangent coordinates."""
    model = load_or_skip("panda")
    q, v, x = state(model, 1)
    f = gen.casadi_function(model, algorithm)
    assert check_jacobians(f, model, algorithm, None, [q, v, x][:f.n_in()]) == f.n_in()


def test_ad_equals_constrained_derivatives_free_flyer():
    """solo12 held by its four feet: prox_ltl's SX graph (K = 3 iterations, mu = 1e-6)
    differentiated by CasADi, the q block mapped by the tangent map, = constrained_derivatives."""
    model = load_or_skip("solo12")
    q, v, tau = state(model, 2)
    f = gen.casadi_function(model, "prox_ltl", FEET)
    assert check_jacobians(f, model, "prox_ltl", FEET, [q, v, tau]) == 6


def test_ad_equals_derivative_kernels_mixed_joints():
    """A random tree with a free-flyer, continuous (cos, sin) and prismatic joints."""
    model = random_tree(5, 3)
    assert model.nq != model.nv
    q, v, x = state(model, 3)
    for algorithm in ("aba", "rnea"):
        f = gen.casadi_function(model, algorithm)
        assert check_jacobians(f, model, algorithm, None, [q, v, x]) == 3


@pytest.mark.parametrize("case", ["panda-aba", "panda-nle", "tree-aba", "tree-prox_ltl", "tree-impulse"])
def test_external_values_and_jacobian(case):
    """The compiled kernel as a CasADi external: values = the SX function's, Jacobian (the
    derivative row's C, raw q coordinates) times the tangent map = the derivative kernels."""
    robot, algorithm = case.split("-")
    model = load_or_skip("panda") if robot == "panda" else random_tree(5, 3)
    constraints = "3D:tip4" if get_algorithm(algorithm).constrained else None
    q, v, x = state(model, 4)
    e = gen.casadi_external(model, algorithm, constraints)
    f = gen.casadi_function(model, algorithm, constraints)
    assert e.name_in() == f.name_in() and e.name_out() == f.name_out()
    args = [q, v, x][:e.n_in()]
    floor = row_floor(algorithm, model, constraints, q, tol=VALUE_TOL)     # C vs the SX graph's VM
    for a, b in zip(*(g if isinstance(g, tuple) else (g,) for g in (e(*args), f(*args)))):
        assert rel_err(a, b) < floor
    assert check_jacobians(e, model, algorithm, constraints, args) >= e.n_in()
    if model.nq != model.nv:                 # zero along the quaternion's norm direction
        Jq = np.array(ca.Function("J", [s := ca.MX.sym("q", model.nq)] + [ca.MX.sym("x", a.size) for a in args[1:]],
                                  [ca.jacobian(e(s, *args[1:])[0] if e.n_out() > 1 else e(s, *args[1:]), s)])(*args))
        free = next(b for b in model.bodies if b.kind == "free")
        quat = q[free.idx_q + 3:free.idx_q + 7]
        assert np.max(np.abs(Jq[:, free.idx_q + 3:free.idx_q + 7] @ quat)) < 1e-10


def test_external_solo12_feet_when_cached():
    """solo12 held by its four feet (the trajopt example's dynamics); its derivative kernel
    takes minutes to compile cold, so this runs where examples/trajopt has built it."""
    model = load_or_skip("solo12")
    q, v, tau = state(model, 5)
    e = gen.casadi_external(model, "prox_ltl", FEET, flags=compile_flags())     # the tests' flags, as trajopt's
    assert check_jacobians(e, model, "prox_ltl", FEET, [q, v, tau]) == 6


def test_save_load_round_trip(tmp_path):
    model = load_or_skip("solo12")
    f = gen.casadi_function(model, "prox_ltl", FEET)
    path = tmp_path / "f.casadi"
    f.save(str(path))
    g = ca.Function.load(str(path))
    assert g.name_in() == f.name_in() and g.name_out() == f.name_out()
    q, v, tau = state(model, 6)
    for a, b in zip(g(q, v, tau), gen.run(model, "prox_ltl", q, v, tau, constraints=FEET)):
        assert rel_err(np.array(a).reshape(-1), b) < VALUE_TOL


@pytest.mark.parametrize("kind", ["function", "external"])
def test_inside_an_nlp(kind):
    """IPOPT finds the torque that gives a target acceleration through aba: the answer is
    rnea's (an identity between two algorithms), with the dynamics as a symbolic call."""
    model = load_or_skip("panda")
    q, v, _ = state(model, 7)
    a_target = np.random.default_rng(8).normal(size=model.nv)
    make = gen.casadi_function if kind == "function" else gen.casadi_external
    aba = make(model, "aba")
    tau = ca.MX.sym("tau", model.nv)
    res = aba(ca.DM(q), ca.DM(v), tau) - a_target
    solver = ca.nlpsol("s", "ipopt", {"x": tau, "f": 0.5 * ca.sumsqr(res)},
                       {"print_time": False, "ipopt": {"print_level": 0, "tol": 1e-12,
                                                        "hessian_approximation": "limited-memory"}})
    sol = solver(x0=np.zeros(model.nv))
    assert solver.stats()["success"]
    assert rel_err(np.array(sol["x"]).reshape(-1), gen.run(model, "rnea", q, v, a_target)) < 1e-6


def test_refusals():
    model = load_or_skip("panda")
    with pytest.raises(RbdgenError, match="early-exit"):
        gen.casadi_function("solo12", "prox_ltl", FEET, tol=1e-10, max_iter=20)
    with pytest.raises(RbdgenError, match="takes no constraints"):
        gen.casadi_function(model, "aba", "3D:panda_hand_tcp")
    e = gen.casadi_external(model, "crba")          # no derivative row: no jac_<name> in its library
    q = ca.MX.sym("q", model.nq)
    with pytest.raises(RuntimeError):
        ca.jacobian(e(q), q)
