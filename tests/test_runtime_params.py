"""Run-time parameters (issue 14 §5; option ``runtime_params``, registry.RUNTIME_PARAMS):
a solver built with them takes ``mu``, the Baumgarte gains ``[Kp, Kd, Kv]`` and the
constraint weights as inputs and, at any (mu, gains, weights), equals the solver with those
values built in -- traced SX (§6b), ``gen.run`` (the NumPy path), compiled C and the
early-exit driver (§6c) -- and Pinocchio's ``constraintDynamics`` with the same damping and
corrector gains (§6e; unit weights, Pinocchio has no others).
Out-of-range values are refused: RBDGEN_ERR_INVALID_ARGUMENT and NaN outputs from the
C, one RbdgenError line from Python.  The header, the manifest and the CLI say so.

Tolerances: the dual solvers (prox_ltl, prox_pv, prox_lcp) and the Delassus inverses
ltl_osim and kkt_osim do the same arithmetic with a run-time mu as with a built-in one:
DUAL_TOL.  The augmented-Lagrangian ones (prox_ltls, constrained_aba, impulse,
caba_osim[f]) add ``J^T J / mu`` to an inertia, so where CasADi folds the built-in ``1/mu``
into constants (the run-time graph cannot) the rounding, amplified to
~eps / (mu lambda_min(M)), differs: up to the row's floor eps kappa(M + J^T Rho^-1 J)
(gen.verify.floor_at; measured on solo12, four feet, 2 iterations: 5e-8 at mu = 1e-6,
4e-9 at 1e-4, 2e-11 at 1e-2; caba_osim 5e-10 at 1e-6)."""
import json

import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, rel_err
from test_constrained import states

import gen
from gen import RbdgenError
from gen.algorithms import ALGORITHMS, of_family
from gen.cli import main
from gen.constraint_spec import parse_constraints
from gen.emit import emit
from gen.verify import floor_at

#: the rows that take run-time parameters, from the registry
ROWS = tuple(n for n in ALGORITHMS if ALGORITHMS[n].runtime)
SOLO = "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT"
SOLO_V = "3D:FL_FOOT,3D:FR_FOOT,3Dv:HL_FOOT,3D:HR_FOOT"        # a velocity row: Kv
K = 2                                                          # iterations (small kernels)
#: (mu, [Kp, Kd, Kv]) at which run-time kernels are compared with built-in ones
POINTS = [(1e-6, [0.0, 0.0, 0.0]), (1e-4, [10.0, 3.0, 5.0]), (1e-2, [100.0, 20.0, 1.0])]
WEIGHTS = [1.0, 1.0, 1.0, 1.0]                                 # unit weights: Pinocchio has no others
#: (mu, weights) of the weighted comparisons (run-time weights vs built-in weights)
WEIGHTED = [(1e-4, [1.0, 2.0, 0.5, 4.0]), (1e-2, [3.0, 1.0, 1.0, 0.25])]

DUAL_TOL = 1e-12        # run-time vs built-in, dual solvers and the NumPy path (relative)
PIN_RTOL = 1e-9         # against Pinocchio (relative), raised to the row's floor.pinocchio


def tol(alg, model, cset, state, mu):
    """DUAL_TOL, or the row's conditioned floor at the state and mu where it is larger
    (1/mu enters an inertia: the augmented-Lagrangian solvers, caba_osim[f]; module docstring)."""
    return max(DUAL_TOL, floor_at(alg, model, cset, state[0], mu))


def params(alg, mu, gains, weights=WEIGHTS):
    """The run-time inputs of ``alg`` at (mu, gains, weights): [mu], gains if it reads them,
    the weights."""
    return [np.array([mu])] + ([np.array(gains, dtype=float)] if "gains" in ALGORITHMS[alg].runtime else []) \
        + [np.array(weights, dtype=float)]


def built_in(model, spec, gains, weights=WEIGHTS, **kw):
    return parse_constraints(model, spec, Kp=gains[0], Kd=gains[1], Kv=gains[2], weights=weights, **kw)


def inputs(alg, state):
    q, v, tau = state
    if alg == "impulse":
        return q, v
    return (q,) if ALGORITHMS[alg].family == "delassus" else (q, v, tau)


def fixed(alg):
    """``iterations=K`` for an iterative row, nothing for a Delassus inverse."""
    return {"iterations": K} if ALGORITHMS[alg].iterative else {}


def check(got, ref, rtol, what):
    got, ref = (x if isinstance(x, (tuple, list)) else (x,) for x in (got, ref))
    for name, g, r in zip(("first output", "second output"), got[:2], ref[:2]):
        e = rel_err(g, r)
        assert e <= rtol, f"{what}: {name} off by {e:.2e} > {rtol:.0e}"


@pytest.fixture(scope="module")
def solo():
    return load_or_skip("solo12")


# --- registry, options ---------------------------------------------------------------------------

def test_rows_and_option():
    assert set(ROWS) == {"prox_ltl", "prox_ltls", "constrained_aba", "prox_pv", "prox_lcp", "impulse",
                         "ltl_osim", "kkt_osim", "caba_osim", "caba_osimf"}
    assert ALGORITHMS["impulse"].runtime == ("mu", "weights") == ALGORITHMS["caba_osim"].runtime
    for name in set(of_family("delassus")) - set(ROWS):          # no damping: nothing to take at run time
        with pytest.raises(RbdgenError, match=f"{name} has no option runtime_params"):
            ALGORITHMS[name].check_options({"runtime_params": True})
    with pytest.raises(RbdgenError, match="runtime_params='yes' must be True or False"):
        ALGORITHMS["prox_ltl"].check_options({"runtime_params": "yes"})


def test_inputs_follow_the_option(solo):
    algo = ALGORITHMS["prox_ltl"]
    names = [n for n, _ in algo.input_spec(solo, SOLO, {"runtime_params": True})]
    assert names == ["q", "v", "tau", "mu", "gains", "weights"]
    assert [n for n, _ in algo.input_spec(solo, SOLO, {})] == ["q", "v", "tau"]
    f = gen.casadi_function(solo, "prox_ltl", SOLO, iterations=K, runtime_params=True)
    assert [f.name_in(i) for i in range(f.n_in())] == names and (f.size1_in(4), f.size1_in(5)) == (3, 4)


# --- run-time == built in: traced SX and the NumPy path ----------------------------------------

@pytest.mark.parametrize("alg", ROWS)
def test_traced_runtime_equals_built_in(alg, solo):
    spec = SOLO_V if alg != "impulse" else SOLO
    f = gen.casadi_function(solo, alg, spec, **fixed(alg), runtime_params=True)
    for state in states(solo, 3, 2, parse_constraints(solo, spec)):
        for mu, gains, weights in [(mu, g, WEIGHTS) for mu, g in POINTS] + [(mu, POINTS[1][1], w) for mu, w in WEIGHTED]:
            ref = gen.casadi_function(solo, alg, built_in(solo, spec, gains, weights), **fixed(alg),
                                      mu=mu)(*inputs(alg, state))
            got = f(*inputs(alg, state), *params(alg, mu, gains, weights))
            check(got, ref, tol(alg, solo, built_in(solo, spec, gains, weights), state, mu),
                  f"{alg} traced at mu={mu:g}, gains={gains}, weights={weights}")


@pytest.mark.parametrize("alg", ROWS)
def test_run_runtime_equals_built_in(alg, solo):
    spec = SOLO_V if alg != "impulse" else SOLO
    state = states(solo, 4, 1, parse_constraints(solo, spec))[0]
    for mu, gains, weights in [(mu, g, WEIGHTS) for mu, g in POINTS] + [(mu, POINTS[1][1], w) for mu, w in WEIGHTED]:
        ref = gen.run(solo, alg, *inputs(alg, state), constraints=built_in(solo, spec, gains, weights),
                      **fixed(alg), mu=mu)
        got = gen.run(solo, alg, *inputs(alg, state), *params(alg, mu, gains, weights), constraints=spec,
                      **fixed(alg), runtime_params=True)
        check(got, ref, DUAL_TOL, f"{alg} gen.run at mu={mu:g}, gains={gains}, weights={weights}")


# --- compiled C and the early-exit driver --------------------------------------------------------

@pytest.mark.parametrize("alg", ["prox_ltl", "constrained_aba", "impulse", "caba_osim"])
def test_compiled_runtime_equals_built_in(alg, solo):
    k = gen.build(solo, alg, SOLO, **fixed(alg), runtime_params=True)
    for state in states(solo, 5, 2, parse_constraints(solo, SOLO)):
        for mu, gains, weights in [(mu, g, WEIGHTS) for mu, g in POINTS] + [(WEIGHTED[0][0], POINTS[1][1],
                                                                               WEIGHTED[0][1])]:
            baked = gen.build(solo, alg, built_in(solo, SOLO, gains, weights), **fixed(alg), mu=mu)
            check(k(*inputs(alg, state), *params(alg, mu, gains, weights)), baked(*inputs(alg, state)),
                  tol(alg, solo, built_in(solo, SOLO, gains, weights), state, mu),
                  f"{alg} compiled at mu={mu:g}, gains={gains}, weights={weights}")


@pytest.mark.parametrize("alg", ["prox_pv", "prox_ltls"])
def test_driver_runtime_equals_numpy(alg, solo):
    """The early-exit driver reads mu from its const (gen.trace.trace_driver): same
    iterates and iteration count as gen.run with the values built in."""
    k = gen.build(solo, alg, SOLO, tol=1e-10, max_iter=50, runtime_params=True)
    state = states(solo, 6, 1, parse_constraints(solo, SOLO))[0]
    for mu, gains, weights in [(mu, g, WEIGHTS) for mu, g in POINTS[1:]] + [(mu, POINTS[1][1], w) for mu, w in WEIGHTED]:
        ref = gen.run(solo, alg, *state, constraints=built_in(solo, SOLO, gains, weights), tol=1e-10, max_iter=50,
                      mu=mu)
        got = k(*state, *params(alg, mu, gains, weights))
        check(got, ref, tol(alg, solo, built_in(solo, SOLO, gains, weights), state, mu),
              f"{alg} driver at mu={mu:g}, gains={gains}")
        assert got[2] == ref[2], f"{alg}: {got[2]} iterations, NumPy {ref[2]}"


# --- Pinocchio -----------------------------------------------------------------------------------

@needs_pin
@pytest.mark.parametrize("robot, spec, alg", [("solo12", SOLO, "prox_ltl"), ("solo12", SOLO, "constrained_aba"),
                                              ("ur5", "6D:tool0", "prox_pv")],
                         ids=["solo12-prox_ltl", "solo12-constrained_aba", "ur5-6D-prox_pv"])
def test_runtime_equals_pinocchio(robot, spec, alg):
    """constraintDynamics at the same mu and corrector gains (6D: the log6 position error,
    anchored where the frame is at the first state)."""
    from gen import pinref
    model = load_or_skip(robot)
    state = states(model, 7, 1, parse_constraints(model, spec))[0]
    anchor = {"reference_q": model.random_q(np.random.default_rng(8))}
    k = gen.build(model, alg, parse_constraints(model, spec, **anchor), iterations=K, runtime_params=True)
    for mu, gains in POINTS:
        cset = built_in(model, spec, [gains[0], gains[1], 0.0], [1.0] * len(spec.split(",")), **anchor)
        ref = pinref.reference(model, alg, *state, cset=cset, options={"iterations": K, "mu": mu})
        rtol = max(PIN_RTOL, floor_at(alg, model, cset, state[0], mu))         # the row's floor at mu
        check(k(*state, *params(alg, mu, gains, [1.0] * len(cset))), ref, rtol,
              f"{robot} {alg} vs Pinocchio at mu={mu:g}, gains={gains}")


# --- refusals ------------------------------------------------------------------------------------

#: (algorithm, mu, gains or None, weights): each refused
BAD = [("prox_ltl", -1e-6, [0, 0, 0], WEIGHTS), ("prox_ltl", 0.0, [0, 0, 0], WEIGHTS),
       ("prox_ltl", np.nan, [0, 0, 0], WEIGHTS), ("prox_ltl", np.inf, [0, 0, 0], WEIGHTS),
       ("prox_ltl", 1e-6, [0, -1.0, 0], WEIGHTS), ("prox_ltl", 1e-6, [np.inf, 0, 0], WEIGHTS),
       ("prox_ltl", 1e-6, [0, 0, np.nan], WEIGHTS), ("prox_ltl", 1e-6, [0, 0, 0], [1, 1, 0.0, 1]),
       ("prox_ltl", 1e-6, [0, 0, 0], [1, -2, 1, 1]), ("constrained_aba", 5e-7, [0, 0, 0], WEIGHTS),
       ("impulse", 1e-9, None, WEIGHTS), ("impulse", 1e-6, None, [1, 1, 1, np.inf]),
       ("caba_osim", 1e-7, None, WEIGHTS), ("ltl_osim", 1e-6, None, [1, 1, 1, 0.0])]


@pytest.mark.parametrize("alg, mu, gains, weights", BAD, ids=[f"{a}-{m}-{g}-{w}" for a, m, g, w in BAD])
def test_bad_parameters_refused(alg, mu, gains, weights, solo):
    k = gen.build(solo, alg, SOLO, **fixed(alg), runtime_params=True)
    state = inputs(alg, states(solo, 9, 1)[0])
    args = [np.array([mu])] + ([] if gains is None else [np.array(gains, dtype=float)]) \
        + [np.array(weights, dtype=float)]
    outs = [np.zeros(o["size"]) for o in k.function["outputs"]]
    what = f"{alg} at mu={mu}, gains={gains}, weights={weights}"
    assert k.call_raw(list(state) + args, outs) == -3, f"{what}: not refused"
    assert all(np.isnan(o).all() for o in outs), f"{what}: outputs of a refused call are not NaN"
    for call in (lambda: k(*state, *args),
                 lambda: gen.run(solo, alg, *state, *args, constraints=SOLO, runtime_params=True)):
        with pytest.raises(RbdgenError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and any(w in msg for w in ("mu", "gain", "weight", "NaN")), msg


def test_driver_refuses_bad_mu(solo):
    k = gen.build(solo, "prox_pv", SOLO, tol=1e-10, max_iter=20, runtime_params=True)
    q, v, tau = states(solo, 10, 1)[0]
    outs = [np.zeros(o["size"]) for o in k.function["outputs"]]
    assert k.call_raw([q, v, tau, np.array([-1.0]), np.zeros(3), np.ones(4)], outs) == -3
    assert all(np.isnan(o).all() for o in outs)


def test_batch_refuses_runtime_params(solo):
    with pytest.raises(RbdgenError, match="a batched kernel takes no run-time parameters"):
        gen.build(solo, "prox_ltl", SOLO, iterations=K, runtime_params=True, batch=4)


# --- header, manifest, CLI -----------------------------------------------------------------------

def test_header_and_manifest_document_it(solo, tmp_path):
    cset = parse_constraints(solo, SOLO, Kp=10.0, Kd=2.0)
    f = emit(solo, "constrained_aba", cset, out_dir=tmp_path / "rt", iterations=K, mu=1e-5, runtime_params=True)
    h, P = f.header_path.read_text(), f.prefix.upper()
    for needle in (f"#define {P}_DEFAULT_MU 1e-05", f"#define {P}_DEFAULT_GAINS {{10.0, 2.0, 0.0}}",
                   f"#define {P}_MU_MIN", "Run-time parameters", "the augmented-Lagrangian accuracy floor",
                   "run time (built with\n *   runtime_params): mu, the Baumgarte gains [Kp, Kd, Kv] and the weights",
                   f"#define {P}_DEFAULT_WEIGHTS {{1.0, 1.0, 1.0, 1.0}}",
                   "const double *RBDGEN_RESTRICT mu, const double *RBDGEN_RESTRICT gains, "
                   "const double *RBDGEN_RESTRICT weights",
                   "RBDGEN_ERR_INVALID_ARGUMENT for mu, gains or weights out of range"):
        assert needle in h, f"header lacks {needle!r}"
    man = f.manifest
    assert man["parameters"] == {"run_time": ["mu", "gains", "weights"],
                                 "built_in": ["constraint set", "anchors", "iterations"]}
    assert man["runtime_params"]["mu"] == {"default": 1e-5, "valid": "[1e-06, inf)",
                                           "floor": ALGORITHMS["constrained_aba"].options[1].floor}
    assert man["runtime_params"]["gains"]["default"] == [10.0, 2.0, 0.0]
    assert man["runtime_params"]["weights"]["default"] == [1.0] * 4
    assert [x["name"] for x in man["functions"][0]["inputs"]] == ["q", "v", "tau", "mu", "gains", "weights"]
    assert "-3" in man["return_codes"]
    assert json.loads((f.path / "manifest.json").read_text()) == man
    plain = emit(solo, "constrained_aba", SOLO, out_dir=tmp_path / "plain", iterations=K)
    assert plain.manifest["parameters"]["built_in"] == ["constraint set", "anchors", "mu", "gains", "weights",
                                                        "iterations"]
    assert "runtime_params" not in plain.manifest and "DEFAULT_MU" not in plain.header_path.read_text()
    assert plain.prefix != f.prefix
    osim = emit(solo, "ltl_osim", SOLO, out_dir=tmp_path / "osim", runtime_params=True)
    assert osim.manifest["parameters"] == {"run_time": ["mu", "weights"], "built_in": ["constraint set", "anchors"]}
    assert [x["name"] for x in osim.manifest["functions"][0]["inputs"]] == ["q", "mu", "weights"]


def test_cli_build_runtime_params(tmp_path, capsys):
    out = tmp_path / "k"
    rc = main(["build", "solo12", "-a", "prox_ltl", "-c", "3D:FL_FOOT,3D:HR_FOOT", "--iterations", "2",
               "--runtime-params", "--baumgarte", "10,2", "--out", str(out), "--quiet", "--format", "json"])
    assert rc == 0, capsys.readouterr().err
    header = next(out.glob("*.h")).read_text()
    assert "const double *RBDGEN_RESTRICT mu, const double *RBDGEN_RESTRICT gains, " \
           "const double *RBDGEN_RESTRICT weights" in header
    assert "_DEFAULT_GAINS {10.0, 2.0, 0.0}" in header
    capsys.readouterr()
    assert main(["verify", "solo12", "-a", "prox_ltl", "-c", "3D:FL_FOOT,3D:HR_FOOT", "--iterations", "2",
                 "--runtime-params", "--samples", "2", "--quiet"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["build", "solo12", "-a", "aba", "--runtime-params", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rbdgen: error: aba has no option --runtime-params (options: none)"


def test_runtime_costs_operations(solo):
    """The option's price: the gain terms (and the position error) are always computed;
    measured per solver in docs/ARCHITECTURE.md ("Run-time parameters")."""
    for alg in ("prox_ltl", "impulse"):
        plain = gen.opcount(solo, alg, SOLO)["total"]
        rt = gen.opcount(solo, alg, SOLO, runtime_params=True)["total"]
        assert plain < rt < 1.2 * plain, f"{alg}: {plain} -> {rt} operations"


def test_6d_position_error_needs_atan2():
    """A run-time Kp computes the 6D position error (log6) whatever its value: a symbolic
    backend without atan2 is refused in one line naming the reason."""
    from gen.backend import SXBackend
    from gen.constraints import log6

    class NoAtan2(SXBackend):
        atan2 = None

    be = NoAtan2()
    with pytest.raises(RbdgenError, match=r"6D Baumgarte position feedback \(Kp > 0, or a run-time Kp\) needs atan2"):
        log6(be.asarray(np.eye(3)), be.zeros(3, 1), be)
