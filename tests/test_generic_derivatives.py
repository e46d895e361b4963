"""rbg_rnea_derivatives and rbg_aba_derivatives in the generic C library (issue 13 §4)
against the NumPy reference gen.run(model, "rnea_derivatives" | "aba_derivatives", ...)
on chain:5, random trees with a free-flyer (free joints mid-tree too), random trees with
every joint kind (spherical, planar and helical: the tangent-space derivatives of their
LOCAL subspaces, Pinocchio's convention), ur5, solo12 and talos; the values they end with
(tau, ddq: issue 30 §2) equal rbg_rnea's and rbg_aba's; the workspace the API asks for is
enough (canaries after it, and after every output, stay untouched); NaN / inf inputs return
RBG_EINPUT."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import load_or_skip, rel_err
from random_trees import every_kind_tree, random_state, random_tree

import gen
from gen.errors import RbdgenError
from gen.generic import GenericModel, work_sizes
from gen.generic.serialize import ALGO_IDS
from gen.robots.named import NAMED_ROBOTS

# max|C - NumPy| / max(1, max|NumPy|).  rnea_derivatives agrees to ~1e-15.  For
# aba_derivatives the C solves with the sparse L^T D L of M where NumPy multiplies by the
# ABA-swept M^-1: both are backward stable (|M X + dtau| ~ 1e-15 |dtau| for each) and
# differ by ~eps cond(M): worst seen 6.1e-13 on talos (cond(M) ~ 1e7), 2e-13 elsewhere.
REL_TOL = 1e-12
ALGOS = ("rnea_derivatives", "aba_derivatives")
CANARY = -1.2345e300
RBG_EINPUT = 1


def _model(name: str):
    if name.startswith("every_kind"):
        return every_kind_tree(12, int(name[len("every_kind"):]))
    if name.startswith("random"):
        return random_tree(10, int(name[len("random"):]))
    return load_or_skip(name) if name in NAMED_ROBOTS else gen.load_robot(name)


MODELS = ("chain:5", "random0", "random5", "every_kind8", "every_kind11", "ur5", "solo12", "talos")
_G: dict[str, tuple] = {}


def _bound(name: str):
    if name not in _G:
        model = _model(name)
        _G[name] = (model, GenericModel(model))
    return _G[name]


@pytest.mark.parametrize("name", MODELS)
def test_generic_derivatives_match_numpy(name):
    model, g = _bound(name)
    if name.startswith("random"):
        assert model.bodies[0].kind == "free", "the random tree must have a free-flyer root"
    if name.startswith("every_kind"):
        assert {"spherical", "planar", "helical"} <= {b.kind for b in model.bodies}
    rng = np.random.default_rng(21)
    for _ in range(3):
        q, v, x = random_state(model, rng)
        for algo in ALGOS:
            out, ref = g.call(algo, q, v, x), gen.run(model, algo, q, v, x)
            assert len(out) == len(ref) == 4
            for k, (o, r) in enumerate(zip(out, ref)):
                assert o.shape == r.shape == ((model.nv, model.nv) if k < 3 else (model.nv,))
                err = rel_err(o, r)
                assert err < REL_TOL, f"{name} {algo} output {k}: generic C vs NumPy rel. error {err:.2e}"
            assert np.array_equal(out[2], out[2].T), f"{name} {algo}: M / Minv not exactly symmetric"


@pytest.mark.parametrize("name", ("chain:5", "random0", "every_kind10", "solo12"))
def test_aba_derivatives_solve_the_rnea_identity(name):
    """M dddq/dx = -dtau/dx at a = ddq and M Minv = 1, to rounding (RSS 2018 §IV)."""
    model, g = _bound(name)
    q, v, tau = random_state(model, np.random.default_rng(4))
    ddq = g.aba(q, v, tau)
    dq, dv, M, _ = g.rnea_derivatives(q, v, ddq)
    ddq_dq, ddq_dv, Minv, _ = g.aba_derivatives(q, v, tau)
    assert rel_err(M @ ddq_dq, -dq) < 1e-12 and rel_err(M @ ddq_dv, -dv) < 1e-12
    assert np.abs(M @ Minv - np.eye(model.nv)).max() < 1e-11
    assert rel_err(M, g.crba(q)) < 1e-13, "rnea_derivatives' M vs rbg_crba"


#: rbg_rnea_derivatives' tau (J_i^T of the world-frame subtree forces) vs rbg_rnea (body
#: frames): two exact algorithms, rounding only (~1e-15 relative seen)
VALUE_TOL = 1e-12


@pytest.mark.parametrize("name", ("chain:5", "random5", "every_kind8", "solo12", "talos"))
def test_generic_values_equal_the_plain_functions(name):
    """Issue 30 §2: the value each derivative function writes after its derivatives is the
    plain function's: tau = rbg_rnea(q, v, a) to rounding; ddq = rbg_aba(q, v, tau)
    bit for bit (rbg_aba_derivatives calls rbg_aba into its ddq output)."""
    model, g = _bound(name)
    rng = np.random.default_rng(30)
    for _ in range(3):
        q, v, x = random_state(model, rng)
        tau = g.rnea_derivatives(q, v, x)[3]
        assert rel_err(tau, g.rnea(q, v, x)) <= VALUE_TOL, f"{name}: tau vs rbg_rnea"
        assert np.array_equal(g.aba_derivatives(q, v, x)[3], g.aba(q, v, x)), f"{name}: ddq vs rbg_aba"


def _raw(g: GenericModel, algo: str, inputs, outs, work):
    ptr = lambda a: g.ffi.from_buffer("double[]", a)
    fn = getattr(g.lib, f"rbg_{algo}")
    return fn(g.c_model, *(ptr(np.ascontiguousarray(x, dtype=float)) for x in inputs), *(ptr(o) for o in outs),
              ptr(work))


@pytest.mark.parametrize("name", ("chain:5", "random0", "random5", "every_kind8", "solo12"))
def test_workspace_size_is_enough(name):
    model, g = _bound(name)
    nv, pad = model.nv, 32
    inputs = random_state(model, np.random.default_rng(2))
    sizes = work_sizes(model)
    for algo in ALGOS:
        n = g.work_size(algo)
        assert n == sizes[algo] == g.lib.rbg_work_size(g.c_model, ALGO_IDS[algo]), f"{algo}: work size mismatch"
        work = np.full(n + pad, CANARY)
        lengths = [nv * nv] * 3 + [nv]
        outs = [np.full(size + pad, CANARY) for size in lengths]
        assert _raw(g, algo, inputs, outs, work) == 0, f"{algo} failed"
        assert np.all(work[n:] == CANARY), f"{algo} wrote past its {n}-double workspace"
        for k, (o, size) in enumerate(zip(outs, lengths)):
            assert np.all(o[size:] == CANARY), f"{algo} wrote past output {k}"
        for o, size, r in zip(outs, lengths, gen.run(model, algo, *inputs)):
            assert rel_err(o[:size].reshape(np.shape(r)), r) < REL_TOL, f"{algo} with the exact workspace"


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_returns_einput(bad):
    model, g = _bound("random0")
    inputs = random_state(model, np.random.default_rng(1))
    for algo in ALGOS:
        for k in range(3):
            spoiled = [np.array(x, dtype=float) for x in inputs]
            spoiled[k][-1] = bad
            work = np.zeros(g.work_size(algo))
            outs = [np.zeros(model.nv ** 2) for _ in range(3)] + [np.zeros(model.nv)]
            assert _raw(g, algo, spoiled, outs, work) == RBG_EINPUT, f"{algo}: {bad} in input {k}"
        with pytest.raises(RbdgenError, match="NaN or inf"):
            g.call(algo, *[np.full(n, np.nan) for n in (model.nq, model.nv, model.nv)])
