"""minv: M(q)^-1 through CRBA's M factored L^T D L on the tree pattern (Featherstone 2005),
against Pinocchio's computeMinverse (the ABA-based algorithm of Carpentier & Mansard, RSS
2018 §IV: an independent route), the identity minv . crba = I, the traced SX graph
and the compiled C; and through the CLI (opcount, build, verify) by its registry row alone."""
import numpy as np
import pytest
from conftest import load_or_skip, needs_pin, rel_err

import gen
from gen import pinref
from gen.cli import main
from gen.trace import trace

PIN_TOL = 1e-9          # relative to max(1, max|ref|): exact algorithm, rounding only
IDENTITY_TOL = 1e-9     # |Minv M - I|_max
SX_TOL = 1e-12          # traced graph evaluated on numbers vs NumPy
C_TOL = 1e-12           # compiled C vs NumPy
NAMED = ("ur5", "panda", "solo12", "anymal_c", "go1", "talos", "icub", "g1")
SYNTHETIC = ("chain:5", "bintree:12", "humanoid30", "fourbar")


@pytest.mark.parametrize("name", NAMED + SYNTHETIC)
def test_minv_is_the_inverse_of_crba(name):
    model = load_or_skip(name)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = model.random_q(rng)
        Minv = gen.run(model, "minv", q)
        assert np.array_equal(Minv, Minv.T), f"{name}: minv not symmetric"
        err = np.abs(Minv @ gen.run(model, "crba", q) - np.eye(model.nv)).max()
        assert err <= IDENTITY_TOL, f"{name}: |Minv M - I| = {err:.1e}"


@needs_pin
@pytest.mark.parametrize("name", NAMED + SYNTHETIC)
def test_minv_matches_pinocchio(name):

    model = load_or_skip(name)
    pm = pinref.pin_model(model)
    rng = np.random.default_rng(8)
    for _ in range(3):
        q = model.random_q(rng)
        err = rel_err(gen.run(model, "minv", q), pinref.reference(model, "minv", q, pmodel=pm))
        assert err <= PIN_TOL, f"{name}: minv vs computeMinverse {err:.1e}"


@pytest.mark.parametrize("name", ("ur5", "solo12", "bintree:12"))
def test_traced_and_compiled_minv_equal_numpy(name):
    model = load_or_skip(name)
    f = trace(model, "minv").function()
    kernel = gen.build(model, "minv")
    rng = np.random.default_rng(9)
    for _ in range(3):
        q = model.random_q(rng)
        ref = gen.run(model, "minv", q)
        assert rel_err(np.array(f(q)), ref) <= SX_TOL
        assert rel_err(kernel(q), ref) <= C_TOL


def test_minv_through_the_cli(tmp_path, capsys):
    assert main(["opcount", "ur5", "-a", "minv", "--format", "json", "-q"]) == 0
    assert '"minv"' in capsys.readouterr().out
    assert main(["build", "ur5", "-a", "minv", "--out", str(tmp_path / "b"), "-q"]) == 0
    assert (tmp_path / "b" / "rbd_ur5_minv.h").is_file()
    assert main(["verify", "ur5", "-a", "minv", "-n", "3", "-q"]) == 0
    assert "ok" in capsys.readouterr().out
