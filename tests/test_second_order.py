"""``rnea_second_order`` (issue 35 §1): Pinocchio's ``ComputeRNEASecondOrderDerivatives``
tensors, each an (nv, nv^2) output whose column-major memory is Pinocchio's Tensor3x
(element (i, j, k) in column j + nv k).

References: Richardson differences of ``rnea_derivatives`` on the manifold (every joint
kind, free-flyers, mimic joints), Pinocchio's C++ ``ComputeRNEASecondOrderDerivatives``
through the benchmark shim (its Python binding does not expose it: a small C program
linked with the shim's objects, never loaded into this process), the traced SX graph and
a compiled kernel against NumPy.
"""
import subprocess

import numpy as np
import pytest
from conftest import load_or_skip, rel_err, richardson
from pin_models import shim_part_ready
from random_trees import every_kind_tree, random_state
from test_joint_types import mimic_tree

import gen
from gen.backend import NUMPY
from gen.simulate import integrate as be_integrate
from gen.trace import trace

#: Richardson differences (h = 1e-3, truncation O(h^4)) of the first-order row, relative to
#: max(1, max|ref|): worst seen 6e-12 (every-kind trees)
FD_TOL = 1e-9
#: Pinocchio's tensors, relative to max(1, max|ref|): two exact algorithms, rounding only
#: (worst seen 3.8e-15: anymal_c; panda, solo12, talos, ur5 below 3.1e-15)
PIN_TOL = 1e-12
#: traced SX and compiled C vs NumPy: the same arithmetic, reordered
SX_TOL = 1e-12
C_TOL = 1e-12
#: symmetry of d2tau_dvdv in (j, k), of d2tau_dqdq in (j, k) on 1-dof joints: each slice k
#: is computed along its own direction, so the two sides agree to rounding
SYM_TOL = 1e-12
OUTPUTS = ("d2tau_dqdq", "d2tau_dvdv", "dtau_dqdv", "dtau_dadq")


def tensor(X):
    """An (nv, nv^2) output as the nv x nv x nv tensor T[i, j, k] (column j + nv k)."""
    nv = X.shape[0]
    return np.asarray(X).reshape(nv, nv, nv, order="F")


def integrate(model, q, d):
    """``q (+) d`` (Pinocchio's ``integrate``; :func:`gen.simulate.integrate`, which has the
    spherical joint's quaternion exponential)."""
    return be_integrate(model, NUMPY.asarray(q), NUMPY.asarray(d), be=NUMPY).ravel()


def fd_tensors(model, q, v, a, h=1e-3):
    """The four tensors by Richardson differences of ``rnea_derivatives``: along the
    tangent space of q (``integrate(q, d)``) and along v, Pinocchio's definition (its unit
    test differentiates ``computeRNEADerivatives`` the same way)."""
    nv = model.nv

    def first(qq, vv):
        dq, dv, M, _ = gen.run(model, "rnea_derivatives", qq, vv, a)
        return np.concatenate([dq.ravel(order="F"), dv.ravel(order="F"), M.ravel(order="F")])

    Fq = richardson(lambda d: first(integrate(model, q, d), v), np.zeros(nv), h)
    Fv = richardson(lambda d: first(q, v + d), np.zeros(nv), h)
    n2 = nv * nv
    return [X.reshape(nv, nv, nv, order="F") for X in (Fq[:n2], Fv[n2:2 * n2], Fv[:n2], Fq[2 * n2:])]


def _models():
    return [("every_kind8-1", every_kind_tree(8, 1)), ("every_kind8-2", every_kind_tree(8, 2)),
            ("every_kind12-3", every_kind_tree(12, 3)), ("mimic", mimic_tree(4)), ("ur5", None),
            ("solo12", None)]


@pytest.mark.parametrize("name,model", _models(), ids=[n for n, _ in _models()])
def test_matches_finite_differences_of_the_first_order_row(name, model):
    model = model or load_or_skip(name)
    q, v, a = random_state(model, np.random.default_rng(31))
    ours = gen.run(model, "rnea_second_order", q, v, a)
    for out, X, ref in zip(OUTPUTS, ours, fd_tensors(model, q, v, a)):
        assert X.shape == (model.nv, model.nv ** 2)
        err = rel_err(tensor(X), ref)
        assert err <= FD_TOL, f"{name} {out}: {err:.1e} against Richardson differences of rnea_derivatives"


@pytest.mark.parametrize("name", ("panda", "talos", "every_kind"))
def test_symmetries(name):
    model = every_kind_tree(10, 2) if name == "every_kind" else load_or_skip(name)
    q, v, a = random_state(model, np.random.default_rng(32))
    qq, vv, qv, aq = (tensor(X) for X in gen.run(model, "rnea_second_order", q, v, a))
    scale = max(1.0, np.abs(vv).max())
    assert np.abs(vv - vv.transpose(0, 2, 1)).max() <= SYM_TOL * scale, f"{name}: d2tau_dvdv not symmetric in (j, k)"
    assert np.array_equal(aq, aq.transpose(1, 0, 2)), f"{name}: dtau_dadq not symmetric in (i, j)"
    one_dof = [d for b in model.bodies if b.nv == 1 for d in [b.idx_v]]
    sub = qq[:, one_dof][:, :, one_dof]
    assert np.abs(sub - sub.transpose(0, 2, 1)).max() <= SYM_TOL * max(1.0, np.abs(qq).max()), \
        f"{name}: d2tau_dqdq not symmetric in (j, k) on the 1-dof joints"


def test_traced_and_compiled_equal_numpy():
    model = load_or_skip("panda")
    rng = np.random.default_rng(33)
    f = trace(model, "rnea_second_order").function()
    kernel = gen.build(model, "rnea_second_order")
    for _ in range(2):
        q, v, a = random_state(model, rng)
        ref = gen.run(model, "rnea_second_order", q, v, a)
        for out, o, r in zip(OUTPUTS, f(q, v, a), ref):
            assert rel_err(np.array(o), r) <= SX_TOL, f"panda {out}: SX vs NumPy"
        for out, o, r in zip(OUTPUTS, kernel(q, v, a), ref):
            assert rel_err(o, r) <= C_TOL, f"panda {out}: C vs NumPy"


PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
typedef struct pinshim pinshim;
const char *pinshim_last_error(void);
pinshim *pinshim_create(const char *archive, size_t len);
int pinshim_rnea_second_order(pinshim *s, const double *q, const double *v, const double *a, double *t0,
                              double *t1, double *t2, double *t3);

/* usage: prog MODEL.txt NQ NV < states (q v a per line, binary doubles) > tensors */
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *archive = malloc(len + 1);
    if (fread(archive, 1, len, f) != (size_t)len) return 3;
    fclose(f);
    archive[len] = 0;
    pinshim *s = pinshim_create(archive, len);
    if (!s) { fprintf(stderr, "%s\n", pinshim_last_error()); return 2; }
    int nq = atoi(argv[2]), nv = atoi(argv[3]);
    size_t n3 = (size_t)nv * nv * nv;
    double *x = malloc(sizeof(double) * (nq + 2 * nv)), *t = malloc(sizeof(double) * 4 * n3);
    while (fread(x, sizeof(double), nq + 2 * nv, stdin) == (size_t)(nq + 2 * nv)) {
        if (pinshim_rnea_second_order(s, x, x + nq, x + nq + nv, t, t + n3, t + 2 * n3, t + 3 * n3)) {
            fprintf(stderr, "%s\n", pinshim_last_error());
            return 4;
        }
        fwrite(t, sizeof(double), 4 * n3, stdout);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def pin_program(tmp_path_factory):
    from gen.bench import pinshim

    shim = pinshim.build_shim(("second_order",), jobs=1)
    folder = tmp_path_factory.mktemp("pin_second_order")
    (folder / "main.c").write_text(PROGRAM)
    exe = folder / "prog"
    subprocess.run(["gcc", "-O2", str(folder / "main.c"), "-o", str(exe), *shim.link_args(("core", "second_order"))],
                   check=True, capture_output=True, text=True)
    return exe, pinshim


@pytest.mark.skipif(not shim_part_ready("second_order"),
                    reason="the Pinocchio shim's second_order part is not built (RBDGEN_TEST_CONSTRAINED_SHIM=1 builds it)")
@pytest.mark.parametrize("name", ("panda", "solo12", "talos"))
def test_matches_pinocchio(name, pin_program, tmp_path):
    """Pinocchio's ComputeRNEASecondOrderDerivatives (the shim copies each Tensor3x out as
    rbdgen's (nv, nv^2) output, row-major) on the named robots, three random states."""
    exe, pinshim = pin_program
    model = load_or_skip(name)
    archive = tmp_path / "model.txt"
    archive.write_bytes(pinshim.model_archive(pinshim.pin_model(model)))
    rng = np.random.default_rng(34)
    states = [random_state(model, rng) for _ in range(3)]
    blob = np.concatenate([np.concatenate(s) for s in states]).astype(np.float64).tobytes()
    res = subprocess.run([str(exe), str(archive), str(model.nq), str(model.nv)], input=blob, capture_output=True)
    assert res.returncode == 0, res.stderr.decode()
    nv = model.nv
    pin_out = np.frombuffer(res.stdout, dtype=np.float64).reshape(len(states), 4, nv, nv * nv)
    for s, ref in zip(states, pin_out):
        for out, X, R in zip(OUTPUTS, gen.run(model, "rnea_second_order", *s), ref):
            err = rel_err(X, R)
            assert err <= PIN_TOL, f"{name} {out}: {err:.1e} against Pinocchio's ComputeRNEASecondOrderDerivatives"


# --- aba_hessian_product (issue 35 §2) ------------------------------------------------------

HESSIAN_OUTPUTS = ("h_qq", "h_qv", "h_vv", "h_qtau", "g_q", "g_v", "g_tau", "ddq")
#: Richardson differences (h = 1e-3) of lam^T aba_derivatives, relative to max(1, max|ref|):
#: rounding eps |ddq_dx| / h with M^-1 in every entry, worst seen 1.5e-9 (solo12 h_qv)
HESS_FD_TOL = 1e-8
#: analytical vs AD (CasADi's forward-over-reverse on the traced aba): two exact
#: algorithms, rounding only, worst seen 2.4e-14 (solo12); and compiled C vs NumPy
ROUTE_TOL = 1e-12
#: the gradient (Z^T lam - X^T mu, mu = M^-1 lam by the LDL factor) against lam^T of
#: aba_derivatives' formed matrices: the same quantities, rounded in another order, worst
#: seen 2.6e-15 (solo12 g_v)
GRAD_TOL = 1e-14
#: second differences (h = 1e-4) of the value lam^T aba(integrate(q, d)): truncation
#: O(h^2) |d4 f|, rounding eps |f| / h^2, ~1e-8 relative
CHART_TOL = 1e-5


def hessian_state(model, rng):
    q, v, tau = random_state(model, rng)
    return q, v, tau, rng.normal(size=model.nv)


def fd_hessian(model, q, v, tau, lam, h=1e-3):
    """The four blocks by Richardson differences of ``lam^T`` aba_derivatives' matrices
    along ``integrate(q, d)``, v and tau; the q-block symmetrised (the chart Hessian) and
    the tangent derivative itself (not symmetric on multi-dof joints)."""
    nv = model.nv

    def grad(qq, vv, tt):
        dq, dv, Minv, _ = gen.run(model, "aba_derivatives", qq, vv, tt)
        return np.concatenate([lam @ dq, lam @ dv, lam @ Minv])

    Dq = richardson(lambda d: grad(integrate(model, q, d), v, tau), np.zeros(nv), h)
    Dv = richardson(lambda d: grad(q, v + d, tau), np.zeros(nv), h)
    Dt = richardson(lambda d: grad(q, v, tau + d), np.zeros(nv), h)
    blocks = [0.5 * (Dq[:nv] + Dq[:nv].T), Dv[:nv], Dv[nv:2 * nv], Dt[:nv]]
    zeros = {"h_vtau": Dt[nv:2 * nv], "h_tautau": Dt[2 * nv:]}
    return blocks, zeros, Dq[:nv]


@pytest.mark.parametrize("name,model", _models(), ids=[n for n, _ in _models()])
def test_hessian_matches_finite_differences_of_aba_derivatives(name, model):
    model = model or load_or_skip(name)
    q, v, tau, lam = hessian_state(model, np.random.default_rng(41))
    out = gen.run(model, "aba_hessian_product", q, v, tau, lam)
    blocks, zeros, _ = fd_hessian(model, q, v, tau, lam)
    for n, X, ref in zip(HESSIAN_OUTPUTS, out, blocks):
        assert X.shape == (model.nv, model.nv)
        err = rel_err(X, ref)
        assert err <= HESS_FD_TOL, f"{name} {n}: {err:.1e} against Richardson differences of aba_derivatives"
    for n, Z in zeros.items():      # the blocks the row leaves out: ddq is affine in tau
        assert np.abs(Z).max() <= HESS_FD_TOL * max(1.0, np.abs(out[3]).max()), f"{name}: {n} is not zero"
    dq, dv, Minv, ddq = gen.run(model, "aba_derivatives", q, v, tau)
    for n, X, ref in zip(HESSIAN_OUTPUTS[4:], out[4:], (lam @ dq, lam @ dv, Minv @ lam)):
        assert rel_err(X, ref) <= GRAD_TOL, f"{name} {n}: not lam^T of aba_derivatives"
    assert np.array_equal(out[7], ddq), f"{name}: ddq is not aba_derivatives' value"
    assert rel_err(out[7], gen.run(model, "aba", q, v, tau)) <= ROUTE_TOL, f"{name}: ddq is not aba's"


@pytest.mark.parametrize("seed", (1, 2))
def test_hessian_is_the_chart_hessian(seed):
    """The q-block is the Hessian of d -> lam^T aba(integrate(q, d), v, tau) at 0 (second
    differences of the value, no derivative row involved), and the tangent derivative of
    the first-order row differs from it by an antisymmetric term that is not zero on
    multi-dof joints (so the test tells the two conventions apart)."""
    model = every_kind_tree(8, seed)
    q, v, tau, lam = hessian_state(model, np.random.default_rng(42))
    h_qq = gen.run(model, "aba_hessian_product", q, v, tau, lam)[0]
    nv, h = model.nv, 1e-4

    def f(d):
        return lam @ gen.run(model, "aba", integrate(model, q, d), v, tau)

    E = np.eye(nv) * h
    ref = np.array([[(f(E[j] + E[k]) - f(E[j] - E[k]) - f(E[k] - E[j]) + f(-E[j] - E[k])) / (4 * h * h)
                     for k in range(nv)] for j in range(nv)])
    assert rel_err(h_qq, ref) <= CHART_TOL, f"every_kind{seed}: h_qq is not the chart Hessian"
    _, _, tangent = fd_hessian(model, q, v, tau, lam)
    skew = tangent - tangent.T
    assert np.abs(skew).max() > 1e3 * CHART_TOL * max(1.0, np.abs(ref).max()), \
        f"every_kind{seed}: no multi-dof joint term (the test cannot tell the conventions apart)"


@pytest.mark.parametrize("name", ("panda", "every_kind", "mimic"))
def test_hessian_analytical_equals_ad_route(name):
    model = {"every_kind": lambda: every_kind_tree(8, 2), "mimic": lambda: mimic_tree(4)}.get(
        name, lambda: load_or_skip(name))()
    rng = np.random.default_rng(43)
    fs = {r: trace(model, "aba_hessian_product", route=r).function() for r in ("analytical", "ad")}
    for _ in range(2):
        x = hessian_state(model, rng)
        ref = gen.run(model, "aba_hessian_product", *x)
        for route, f in fs.items():
            for n, o, r in zip(HESSIAN_OUTPUTS, f(*x), ref):
                err = rel_err(np.array(o).reshape(r.shape), r)
                assert err <= ROUTE_TOL, f"{name} {n}: {route} route {err:.1e} from NumPy"


def test_hessian_symmetric_and_compiled_equals_numpy():
    model = load_or_skip("panda")
    rng = np.random.default_rng(44)
    kernel = gen.build(model, "aba_hessian_product", route="analytical")
    for _ in range(2):
        x = hessian_state(model, rng)
        ref = gen.run(model, "aba_hessian_product", *x)
        out = kernel(*x)
        for n, o, r in zip(HESSIAN_OUTPUTS, out, ref):
            assert rel_err(o, r) <= C_TOL, f"panda {n}: C vs NumPy"
        for X in (out[0], out[2], ref[0], ref[2]):      # h_qq, h_vv: mirrored sums
            assert np.array_equal(X, X.T), "panda: h_qq or h_vv not exactly symmetric"


#: the tensors contracted with mu as formed (rnea_second_order) vs contracted inside the
#: recursion: the same terms summed in another order, worst seen 1.4e-15 (mimic)
CONTRACT_TOL = 1e-13


@pytest.mark.parametrize("name,model", _models(), ids=[n for n, _ in _models()])
def test_contracted_second_order_equals_contracted_tensors(name, model):
    from gen.algorithms.rnea_second_order import contracted_second_order

    model = model or load_or_skip(name)
    rng = np.random.default_rng(45)
    q, v, a = (x.reshape(-1, 1) for x in random_state(model, rng))
    mu = rng.normal(size=(model.nv, 1))
    got = contracted_second_order(model, q, v, a, mu, NUMPY)
    tensors = [tensor(X) for X in gen.run(model, "rnea_second_order", q.ravel(), v.ravel(), a.ravel())]
    for n, X, T in zip(("C_qq", "C_vv", "C_qv", "B"), got, tensors):
        ref = np.einsum("i,ijk->jk", mu.ravel(), T)
        err = rel_err(X, ref)
        assert err <= CONTRACT_TOL, f"{name} {n}: {err:.1e} from mu^T of the rnea_second_order tensor"
