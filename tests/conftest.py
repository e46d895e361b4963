"""Helpers shared by the test modules (issue 11 §6): the relative error, the optional
dependencies and their skip markers, the named robots, the solver list; and the ``slow``
marker.

A test is skipped only when an optional dependency is missing (``pin``,
``example-robot-data``), never because an :class:`~gen.errors.RbdgenError` was raised:
:func:`load_or_skip` skips for a named robot without example-robot-data and lets every
other error fail the test."""
import ctypes
import importlib.metadata
import importlib.util
import os
import subprocess

import numpy as np
import pytest

import gen
from gen.algorithms import ALGORITHMS, of_family
from gen.build import cache_dir
from gen.robots.named import NAMED_ROBOTS, ROBOTS_DIR_ENV

#: kernels compiled by the tests use -O0 (unless $RBDGEN_CFLAGS says otherwise): the tests
#: check values, and gcc compiles the 100k-operation straight-line kernels about 5 times
#: faster at -O0 than at -O1 (solo12's derivative kernels: 9 s against 44 s) and many
#: times faster than at the default -O3.  The values are those of -O1: gcc neither
#: reassociates nor contracts multiply-adds into FMAs below -O2 (0 FMA instructions in
#: ur5's constrained-derivative kernel at -O0 and -O1, 10609 at -O2), so a kernel's
#: rounding is the C text's; tests of optimised builds (fast math, stack bounds, the
#: other CPU's flags, the benchmarks) pass their own flags
os.environ.setdefault("RBDGEN_CFLAGS", "-O0 -march=native")
#: the benchmark harness's programs and the Pinocchio shim (gen.bench.pinshim.BENCH_FLAGS)
#: likewise at -O0 (unless $RBDGEN_BENCH_FLAGS says otherwise): the tests check the
#: peers' values, never their times, and every benchmark program compiles the kernel and
#: the generic C (3.6 s of CPU at -O3, 0.36 s at -O0); -march=native stays: the benchmark
#: programs and the header-only shim keep the benchmarks' instruction set (the
#: library-mode shim drops it, below)
os.environ.setdefault("RBDGEN_BENCH_FLAGS", "-O0 -march=native -DNDEBUG")
#: the Pinocchio shim in library mode (unless $RBDGEN_PINSHIM_MODE says otherwise;
#: gen.bench.pinshim): its parts take Pinocchio's algorithms from the pin wheel's
#: libpinocchio_default.so, compiled without the machine options (the wheel's Eigen ABI),
#: instead of instantiating them (seconds of g++ per part instead of minutes: the module's
#: docstring); the benchmarks' header-only build is tested by
#: test_bench.py::test_header_only_pin_shim_equals_pin_python
os.environ.setdefault("RBDGEN_PINSHIM_MODE", "library")

#: pinocchio can be imported (found without importing it here: the tests that load the
#: Pinocchio shim must do so in a process that has not imported pinocchio)
HAVE_PIN = importlib.util.find_spec("pinocchio") is not None


@pytest.fixture(scope="session")
def kernel_cache() -> str:
    """The kernel cache the tests build into: ``$RBDGEN_CACHE``, else gen.build's default
    (``~/.cache/rbdgen``), shared by every test and worker and kept between runs, so a
    rerun compiles only what changed (independent of pytest's cache plugin)."""
    return str(cache_dir())


def _have_robots() -> bool:
    if os.environ.get(ROBOTS_DIR_ENV):
        return True
    try:
        importlib.metadata.distribution("example-robot-data")   # not importable as a module
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


#: the named robots' URDFs are available (example-robot-data installed, or $RBDGEN_ROBOTS_DIR)
HAVE_ROBOTS = _have_robots()

needs_pin = pytest.mark.skipif(not HAVE_PIN, reason="pinocchio (pin) is not installed")
needs_robots = pytest.mark.skipif(not HAVE_ROBOTS, reason="example-robot-data is not installed")

#: the bilateral constrained forward-dynamics solvers (iterative rows of the "solver"
#: family), from the registry
SOLVERS = tuple(n for n in of_family("solver") if ALGORITHMS[n].iterative)


def compile_shared(tmp_path, code: str, name: str, flags) -> ctypes.CDLL:
    """``code`` compiled by ``cc`` with ``flags`` into ``tmp_path/lib<name>.so``, loaded."""
    src, lib = tmp_path / f"{name}.c", tmp_path / f"lib{name}.so"
    src.write_text(code)
    subprocess.run(["cc", *flags, "-shared", "-fPIC", str(src), "-o", str(lib), "-lm"], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def rel_err(x, ref) -> float:
    """``max|x - ref| / max(1, max|ref|)``, both raveled; 0.0 for an empty ``ref``."""
    x, ref = np.asarray(x, dtype=float).ravel(), np.asarray(ref, dtype=float).ravel()
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(x - ref)) / max(1.0, float(np.max(np.abs(ref)))))



def richardson(f, x, h: float):
    """``d f / d x`` at ``x`` by central differences at ``h`` and ``h/2`` combined
    (Richardson): truncation O(h^4), rounding ~eps / h.  For a derivative on the manifold
    pass ``f(d) = g(integrate(q, d))`` and ``x = 0``."""
    x = np.asarray(x, dtype=float)
    cols = []
    for e in np.eye(len(x)):
        d1 = (f(x + h * e) - f(x - h * e)) / (2 * h)
        d2 = (f(x + h / 2 * e) - f(x - h / 2 * e)) / h
        cols.append((4 * d2 - d1) / 3)
    return np.column_stack(cols)

def load_or_skip(name: str, **options):
    """``gen.load_robot(name, **options)``; skips the test only when ``name`` is a named
    robot and example-robot-data is missing (any RbdgenError otherwise fails the test)."""
    if name in NAMED_ROBOTS and not HAVE_ROBOTS:
        pytest.skip(f"{name}: example-robot-data is not installed")
    return gen.load_robot(name, **options)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test outside the fast tier (deselect with -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    """Each half of the collection starts with half of the slow tier (each tier keeping its
    order), so that the two workers of the README's parallel run (``-n 2 --dist
    worksteal``) each start on long tests and end on short ones: worksteal gives a worker
    the first half of the collection and the other the second, and a worker that runs out
    takes the *last* queued tests of the other.  In collection order a minutes-long test
    queued last kept one worker busy while the other had nothing left to take.  Every
    worker reorders the same collection the same way, as xdist requires."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    first = slow[0::2]
    take = max(0, len(items) // 2 - len(first))
    items[:] = first + fast[:take] + slow[1::2] + fast[take:]


def row_floor(algorithm, model, constraints, q, options=None, tol=0.0):
    """``tol``, or the rounding floor of ``algorithm``'s row at ``q`` where larger: its
    fixed floors and, for a conditioned row (the augmented-Lagrangian solvers, the KKT
    derivatives), ``slack eps kappa`` of what it factorises at the damping it runs at
    (gen.conditioning)."""
    from gen.algorithms import ALGORITHMS
    from gen.conditioning import floor_at, kernel_mu
    row = ALGORITHMS[algorithm]
    cset = row.constraint_set(model, constraints) if row.constrained else None
    mu = kernel_mu(row, options or {})
    return max(tol, row.floor.c_numpy, row.floor.pinocchio, floor_at(algorithm, model, cset, np.ravel(q), mu))
