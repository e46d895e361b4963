"""rnea_derivatives and aba_derivatives (Carpentier & Mansard, RSS 2018): against
Pinocchio's computeRNEADerivatives / computeABADerivatives on every named robot (free-flyers
at non-zero velocity), central finite differences on the manifold (gen.configuration),
identities with crba, minv and aba, the traced SX graph, the compiled C, and the CLI
through the registry rows alone."""
import numpy as np
import pytest

import gen
from gen import pinref
from gen.cli import main
from gen.configuration import integrate
from gen.trace import trace
from conftest import load_or_skip, needs_pin, rel_err

PIN_TOL = 1e-8          # relative to max(1, max|ref|)
FD_TOL = 1e-6           # central differences, h = 1e-6, relative to max(1, max|J|)
IDENTITY_TOL = 1e-9
SX_TOL = 1e-12
C_TOL = 1e-12
NAMED = ("ur5", "panda", "solo12", "anymal_c", "go1", "talos", "icub", "g1")
SYNTHETIC = ("chain:5", "humanoid30", "fourbar")


def _state(model, rng):
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


@needs_pin
@pytest.mark.parametrize("name", NAMED + SYNTHETIC)
def test_derivatives_match_pinocchio(name):

    model = load_or_skip(name) if name in NAMED else gen.load_robot(name)
    pm = pinref.pin_model(model)
    rng = np.random.default_rng(11)
    for _ in range(2):
        q, v, x = _state(model, rng)
        for algo in ("rnea_derivatives", "aba_derivatives"):
            ours = gen.run(model, algo, q, v, x)
            ref = pinref.reference(model, algo, q, v, x, pmodel=pm)
            assert len(ours) == len(ref) == 4, "the value (tau, ddq) is compared with Pinocchio's data.tau, data.ddq"
            for o, r, out in zip(ours, ref, gen.api.get_algorithm(algo).outputs(model, None)):
                err = rel_err(o, r)
                assert err <= PIN_TOL, f"{name} {algo} {out[0]}: {err:.1e} against Pinocchio"


def _fd(f, model, q, v, x, h=1e-6):
    """Central differences of f(q, v, x) in the tangent space of q and along v."""
    dq = np.column_stack([(f(integrate(model, q, h * e), v, x) - f(integrate(model, q, -h * e), v, x)) / (2 * h)
                          for e in np.eye(model.nv)])
    dv = np.column_stack([(f(q, v + h * e, x) - f(q, v - h * e, x)) / (2 * h) for e in np.eye(model.nv)])
    return dq, dv


@pytest.mark.parametrize("name", ("ur5", "solo12", "humanoid30", "fourbar"))
def test_derivatives_match_finite_differences(name):
    model = load_or_skip(name) if name in NAMED else gen.load_robot(name)
    q, v, x = _state(model, np.random.default_rng(12))
    dq, dv, M, _ = gen.run(model, "rnea_derivatives", q, v, x)
    fq, fv = _fd(lambda *s: gen.run(model, "rnea", *s), model, q, v, x)
    assert rel_err(dq, fq) <= FD_TOL and rel_err(dv, fv) <= FD_TOL, f"{name}: dtau vs central differences"
    dq, dv, Minv, _ = gen.run(model, "aba_derivatives", q, v, x)
    fq, fv = _fd(lambda *s: gen.run(model, "aba", *s), model, q, v, x)
    assert rel_err(dq, fq) <= FD_TOL and rel_err(dv, fv) <= FD_TOL, f"{name}: dddq vs central differences"


@pytest.mark.parametrize("name", ("ur5", "solo12", "talos", "humanoid30", "bintree:12"))
def test_derivative_identities(name):
    model = load_or_skip(name) if name in NAMED else gen.load_robot(name)
    q, v, tau = _state(model, np.random.default_rng(13))
    ddq = gen.run(model, "aba", q, v, tau)
    dq, dv, M, _ = gen.run(model, "rnea_derivatives", q, v, ddq)
    ddq_dq, ddq_dv, Minv, _ = gen.run(model, "aba_derivatives", q, v, tau)
    Mc = gen.run(model, "crba", q)
    assert np.array_equal(M, M.T) and np.array_equal(Minv, Minv.T), f"{name}: M, Minv not symmetric"
    assert rel_err(M, Mc) <= IDENTITY_TOL, f"{name}: rnea_derivatives' M vs crba"
    assert np.abs(Minv @ Mc - np.eye(model.nv)).max() <= IDENTITY_TOL, f"{name}: Minv crba != I"
    assert rel_err(ddq_dq, -Minv @ dq) <= IDENTITY_TOL, f"{name}: dddq/dq != -Minv dtau/dq at a = ddq"
    assert rel_err(ddq_dv, -Minv @ dv) <= IDENTITY_TOL, f"{name}: dddq/dv != -Minv dtau/dv at a = ddq"
    assert rel_err(Minv, gen.run(model, "minv", q)) <= IDENTITY_TOL, f"{name}: Minv vs minv"


@pytest.mark.parametrize("name", ("ur5", "solo12"))
def test_traced_and_compiled_derivatives_equal_numpy(name):
    model = load_or_skip(name)
    rng = np.random.default_rng(14)
    for algo in ("rnea_derivatives", "aba_derivatives"):
        f = trace(model, algo).function()
        kernel = gen.build(model, algo)
        q, v, x = _state(model, rng)
        ref = gen.run(model, algo, q, v, x)
        for o, r in zip(f(q, v, x), ref):
            assert rel_err(np.array(o), r) <= SX_TOL, f"{name} {algo}: SX vs NumPy"
        for o, r in zip(kernel(q, v, x), ref):
            assert rel_err(o, r) <= C_TOL, f"{name} {algo}: C vs NumPy"


#: issue 30 §2: the value a derivative row ends with vs the plain row's, relative to
#: max(1, max|ref|).  rnea_derivatives' tau (J_i^T of the world-frame subtree forces) and
#: aba_derivatives' ddq (the L^T D L solve of the world-frame M) are rnea's and aba's
#: quantities by other exact algorithms, so rounding only (worst seen 3e-14, panda's ddq);
#: the AD route's value is the plain row's own traced graph.
VALUE_TOL = 1e-12
VALUES = {"rnea_derivatives": ("rnea", ["dtau_dq", "dtau_dv", "M", "tau"]),
          "aba_derivatives": ("aba", ["ddq_dq", "ddq_dv", "Minv", "ddq"])}


@pytest.mark.parametrize("name", ("panda", "solo12", "talos", "humanoid30"))
def test_values_equal_the_plain_rows(name):
    """The derivative rows end with the value they are taken at (appended: the derivative
    outputs keep their positions), equal to the plain row's in NumPy and, on panda and
    solo12, on both routes' traced graphs (talos: the analytical NumPy only, its AD trace
    alone takes ~15 s)."""
    model = load_or_skip(name) if name in NAMED else gen.load_robot(name)
    rng = np.random.default_rng(30)
    for algo, (plain, names) in VALUES.items():
        assert [n for n, _, _ in gen.api.get_algorithm(algo).outputs(model, None)] == names
        # AD first: its trace records both routes' counts, the analytical one then traces
        # its own route only (gen.trace.route_counts)
        graphs = {r: trace(model, algo, route=r).function() for r in ("ad", "analytical")} \
            if name in ("panda", "solo12") else {}
        for _ in range(2):
            q, v, x = _state(model, rng)
            want = gen.run(model, plain, q, v, x)
            got = gen.run(model, algo, q, v, x)[-1]
            assert got.shape == want.shape == (model.nv,)
            assert rel_err(got, want) <= VALUE_TOL, f"{name} {algo}: {names[-1]} vs {plain} (NumPy)"
            for r, f in graphs.items():
                value = np.array(f(q, v, x)[-1]).ravel()
                assert rel_err(value, want) <= VALUE_TOL, f"{name} {algo} route {r}: {names[-1]} vs {plain} (SX)"


@pytest.mark.parametrize("name", ("panda", "solo12", "talos"))
def test_compiled_values_equal_the_plain_kernels(name):
    """The compiled derivative kernels' values equal the compiled plain kernels' (panda and
    solo12 on both routes; talos on the analytical route only: its kernels are the slowest
    to compile of this file, the AD one ~450k operations).  The analytical kernel is the
    default build's, the route of lower estimated cost on these robots (asserted): the
    request the aarch64 and other-CPU tests and ``rbdgen verify`` make, traced once."""
    model = load_or_skip(name)
    rng = np.random.default_rng(31)
    for algo, (plain, names) in VALUES.items():
        # AD first: its build records both routes' counts (gen.trace.route_counts)
        kernels = {} if name == "talos" else {"ad": gen.build(model, algo, route="ad")}
        kernels["analytical"] = gen.build(model, algo)
        assert kernels["analytical"].manifest["route"]["used"] == "analytical", f"{name} {algo}: default route"
        value_kernel = gen.build(model, plain)
        for k in kernels.values():
            assert [y["name"] for y in k.manifest["functions"][0]["outputs"]] == names
        for _ in range(2):
            q, v, x = _state(model, rng)
            want = value_kernel(q, v, x)
            for r, k in kernels.items():
                out = k(q, v, x)
                assert len(out) == 4
                assert rel_err(out[-1], want) <= VALUE_TOL, f"{name} {algo} route {r}: {names[-1]} vs {plain} (C)"


def test_derivatives_through_the_cli(tmp_path, capsys):
    load_or_skip("solo12")
    assert main(["opcount", "solo12", "-a", "rnea_derivatives", "--format", "json", "-q"]) == 0
    assert '"rnea_derivatives"' in capsys.readouterr().out
    assert main(["build", "ur5", "-a", "aba_derivatives", "--out", str(tmp_path / "b"), "-q"]) == 0
    assert (tmp_path / "b" / "rbd_ur5_aba_derivatives.h").is_file()
    assert main(["verify", "ur5", "-a", "rnea_derivatives", "-n", "3", "-q"]) == 0
    assert "ok" in capsys.readouterr().out


ROUTE_TOL = 1e-10       # analytical vs AD, compiled, relative to max(1, max|ref|)


@pytest.mark.slow
@pytest.mark.parametrize("name", ("ur5", "solo12"))
def test_ad_route_equals_analytical_and_pinocchio(name):
    """Issue 13 §2: route="ad" (CasADi jacobian of the traced rnea / aba graph, tangent
    map for q) compiles to the analytical kernel's matrices and Pinocchio's; the default
    build takes the route of lower estimated cost and the manifest records both counts."""
    from gen import pinref
    model = load_or_skip(name)
    rng = np.random.default_rng(31)
    pm = pinref.pin_model(model) if pinref.available() else None
    for algo in ("rnea_derivatives", "aba_derivatives"):
        # AD first: its build records both routes' counts, so the analytical and default
        # builds trace one route each (gen.trace.route_counts)
        kernels = {r: gen.build(model, algo, route=r) for r in ("ad", "analytical")}
        default = gen.build(model, algo)
        ops = {r: k.manifest["route"]["ops"][r] for r, k in kernels.items()}
        cost = {r: k.manifest["route"]["cost"][r] for r, k in kernels.items()}
        assert default.manifest["route"]["used"] == min(cost, key=lambda r: (cost[r], r != "analytical"))
        assert default.manifest["route"]["chosen"] == "lower estimated cost"
        assert cost["ad"] == ops["ad"], "the AD route is straight-line code"
        for r, k in kernels.items():
            assert k.manifest["route"] == {"used": r, "chosen": "requested", "ops": ops, "cost": cost,
                                           "ad_of": algo.replace("_derivatives", "")}
            assert k.function["opcount"]["total"] == ops[r], f"{name} {algo} {r}: manifest counts disagree"
        for _ in range(3):
            q, v, x = _state(model, rng)
            an, ad = kernels["analytical"](q, v, x), kernels["ad"](q, v, x)
            for o_an, o_ad in zip(an, ad):
                assert rel_err(o_ad, o_an) <= ROUTE_TOL, f"{name} {algo}: AD vs analytical"
            if pm is not None:
                ref = pinref.reference(model, algo, q, v, x, pmodel=pm)
                for o, r in zip(ad, ref):
                    assert rel_err(o, r) <= PIN_TOL, f"{name} {algo}: AD route vs Pinocchio"


def test_route_option_is_checked(tmp_path):
    model = load_or_skip("ur5")
    with pytest.raises(gen.RbdgenError, match="route"):
        gen.build(model, "rnea_derivatives", route="numeric")
    with pytest.raises(gen.RbdgenError, match="no option route"):
        gen.run(model, "rnea", np.zeros(6), np.zeros(6), np.zeros(6), route="ad")
    q, v, a = _state(model, np.random.default_rng(2))
    assert all(np.array_equal(x, y) for x, y in zip(gen.run(model, "rnea_derivatives", q, v, a, route="ad"),
                                                    gen.run(model, "rnea_derivatives", q, v, a)))
    assert main(["build", "ur5", "-a", "aba_derivatives", "--route", "ad", "--out", str(tmp_path / "b"), "-q"]) == 0
    import json
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["route"]["used"] == "ad" and manifest["options"] == {"route": "ad"}
    assert "route: automatic differentiation" in (tmp_path / "b" / manifest["header"]).read_text()


def test_route_counts_are_cached(tmp_path, monkeypatch):
    """Both routes' counts of a derivative row's trace are recorded in the kernel cache
    (gen.trace.route_counts): a later trace of the same request, with a route or without,
    traces only the route it returns and records the route exactly as tracing both does
    (the manifest and the header's comment print it); a damaged record is traced again;
    the key ignores ``route`` and the C-only options, not the thresholds."""
    import dataclasses
    import gen.trace as T
    from gen.codegen.config import CodegenConfig
    model = load_or_skip("panda")
    traced = []                                   # the rows traced: aba_derivatives (analytical), aba (AD)
    real = T._trace_fn
    monkeypatch.setattr(T, "_trace_fn", lambda m, algo, *a: traced.append(algo.name) or real(m, algo, *a))

    def routes_traced(cache, **options):
        monkeypatch.setenv("RBDGEN_CACHE", str(tmp_path / cache))
        traced.clear()
        tr = T.trace(model, "aba_derivatives", **options)
        return tr, {"analytical": "aba_derivatives" in traced, "ad": "aba" in traced}

    first, both = routes_traced("c", route="ad")
    assert both == {"analytical": True, "ad": True}
    assert len(list((tmp_path / "c" / "routes").glob("*.json"))) == 1
    cached, one = routes_traced("c", route="analytical")
    assert one == {"analytical": True, "ad": False}
    uncached, both = routes_traced("fresh", route="analytical")
    assert both == {"analytical": True, "ad": True}
    assert list(cached.route.items()) == list(uncached.route.items())
    assert [list(cached.route[k]) for k in ("ops", "cost")] == [["analytical", "ad"]] * 2
    auto, one = routes_traced("c")
    assert one == {r: r == auto.route["used"] for r in ("analytical", "ad")}
    assert auto.route["chosen"] == "lower estimated cost" and auto.route["ops"] == first.route["ops"]

    record, = (tmp_path / "c" / "routes").glob("*.json")
    record.write_text('{"ops": {"ad": 1}}')
    _, both = routes_traced("c", route="analytical")
    assert both == {"analytical": True, "ad": True}

    algo, config = gen.api.get_algorithm("aba_derivatives"), CodegenConfig()
    key = T.route_counts(model, algo, None, {}, config).key
    assert T.route_counts(model, algo, None, {"route": "ad"}, dataclasses.replace(config, prefix="p", batch=4)).key == key
    assert T.route_counts(model, algo, None, {}, dataclasses.replace(config, loop_rows=17)).key != key
    assert T.route_counts(model, gen.api.get_algorithm("rnea_derivatives"), None, {}, config).key != key
