"""Verification that holds on other CPUs (issue 32 §1).

* ARM: the default kernels of the named robots (every unconstrained algorithm, one
  constrained solver per robot), the build folders ``gen.build`` compiles
  (``gen.build.build_folder``: traced once into the kernel cache, where other tests'
  builds of the same request find them), cross-compiled for aarch64 by Debian's
  ``aarch64-linux-gnu-gcc`` and run under ``qemu-aarch64`` (:mod:`cross_aarch64`), equal
  NumPy on random states within the tolerance ``rbdgen verify`` applies.  Skipped, with the Debian packages to install,
  where the cross tools are absent.
* Another x86-64 CPU: the README's commands (``rbdgen demo``, ``rbdgen verify``) pass with
  the kernels compiled for x86-64-v2 (SSE4.2: no AVX, no fused multiply-add) and NumPy,
  OpenBLAS and glibc's libm held to their baseline x86-64 code paths
  (:func:`test_portable.baseline_env`).

Both are ``slow``: each kernel is compiled again, for aarch64 or with the other CPU's flags.
What they share with the rest of the suite is the tracing, which does not depend on the
CPU (the emitted C is the same bit for bit under the baseline code paths:
``tests/test_portable.py``; the build cache's key holds no flag and no CPU,
:mod:`gen.buildcache`):

* the ARM cases take the build folders from the kernel cache (:func:`gen.build.build_folder`);
* of the README's commands on the other CPU, the demo runs as a new user runs it, from
  an empty cache of its own (trace under the baseline code paths, compile with the other
  CPU's flags, verify); the ``verify`` rows run with a cache of their own whose traced
  store (the build folders, their keys, the derivative rows' route counts and the
  builders' locks) is the kernel cache's (:func:`shared_traces`), so a kernel another
  test traced is not traced again, while every extension is compiled there, with the
  other CPU's flags, and verified under its code paths.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import load_or_skip, needs_robots, rel_err
from cross_aarch64 import cross_compile, missing_tools, run_states
from test_portable import baseline_env

from gen.algorithms import ALGORITHMS
from gen.api import check_inputs, get_algorithm, run
from gen.cli import DEMO_CONSTRAINTS
from gen.build import build_folder
from gen.emit import write
from gen.verify import VERIFY_TOL, kappas, random_inputs, tolerances


# --- ARM (aarch64 under qemu-user) ------------------------------------------------------------

UNCONSTRAINED = tuple(name for name, row in ALGORITHMS.items() if not row.constrained)
#: left out on talos: the second order is 14 MB of C there (12 min to trace, write and
#: compile); tests/test_second_order.py checks it against Pinocchio on talos
HEAVY_ON_TALOS = ("rnea_second_order", "aba_hessian_product")
#: one bilateral solver per robot, so that the four robots cover the four solvers
ARM_SOLVER = {"panda": ("prox_ltl", "6D:panda_hand_tcp"),
              "ur5": ("prox_pv", "3D:tool0"),
              "solo12": ("constrained_aba", DEMO_CONSTRAINTS["solo12"]),
              "talos": ("prox_ltls", "6D:left_sole_link,6D:right_sole_link")}
#: left out on solo12 under the emulator: its Hessian product (37k straight-line operations)
#: took 549 s to cross-compile and run in CI; panda's checks that row on aarch64 (34 s)
HEAVY_ON_ARM = {"talos": HEAVY_ON_TALOS, "solo12": ("aba_hessian_product",)}
ARM_CASES = [(robot, name, None) for robot in ARM_SOLVER for name in UNCONSTRAINED
             if name not in HEAVY_ON_ARM.get(robot, ())] + \
            [(robot, name, spec) for robot, (name, spec) in ARM_SOLVER.items()]
#: random states per kernel, all evaluated by one emulator run (rbdgen verify: 10)
ARM_STATES = 16
ARM_SEED = 32

CROSS_MISSING = missing_tools()
needs_cross = pytest.mark.skipif(CROSS_MISSING is not None, reason=f"aarch64 cross tools: {CROSS_MISSING}")


def arm_tolerance(model, algorithm: str, cset, manifest: dict, states) -> float:
    """The relative tolerance of the C-vs-NumPy comparison on ARM, the one ``rbdgen
    verify`` applies (:func:`gen.verify.tolerances`): its default rtol floored by the
    registry row, with the worst condition numbers over ``states`` where the row's floor
    is conditioned."""
    options = dict(manifest.get("options") or {})
    route = (manifest.get("route") or {}).get("used")
    worst: dict = {}
    for state in states:
        for kind, k in kappas(algorithm, model, cset, state[0].reshape(-1), options, route).items():
            worst[kind] = max(worst.get(kind, 1.0), k)
    return tolerances(algorithm, VERIFY_TOL, worst, route)["c_numpy"]


def c_outputs(manifest: dict, flat: list[np.ndarray]) -> list[np.ndarray]:
    """The C outputs of one state shaped as ``gen.run`` returns them (matrices are
    column-major in C)."""
    specs = manifest["functions"][0]["outputs"]
    return [o if s["cols"] == 1 else o.reshape(s["rows"], s["cols"], order="F") for o, s in zip(flat, specs)]


@pytest.mark.slow
@needs_robots
@needs_cross
@pytest.mark.parametrize("robot, algorithm, constraints", ARM_CASES,
                         ids=[f"{r}-{a}" for r, a, _ in ARM_CASES])
def test_aarch64_kernel_equals_numpy(tmp_path, robot, algorithm, constraints):
    model = load_or_skip(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    # the folder gen.build compiles, from the kernel cache where another test traced it,
    # copied out of the cache (the driver is written next to the sources)
    cached = build_folder(model, algorithm, cset, quiet=True)
    folder = write(cached.files, tmp_path / "folder")
    manifest, options = cached.manifest, dict(cached.manifest.get("options") or {})
    exe = tmp_path / "kernel.aarch64"
    cross_compile(folder, manifest, exe)

    rng = np.random.default_rng(ARM_SEED)
    states = [check_inputs(model, algo, random_inputs(model, algorithm, rng, cset), cset, options)
              for _ in range(ARM_STATES)]
    codes, outputs = run_states(exe, manifest, states)
    assert list(codes) == [0] * ARM_STATES, f"{manifest['functions'][0]['symbol']} return codes {codes}"

    worst = 0.0
    for state, flat in zip(states, outputs):
        ref = run(model, algorithm, *state, constraints=cset, **options)
        ref = ref if isinstance(ref, tuple) else (ref,)
        got = c_outputs(manifest, flat)
        assert len(got) == len(ref)
        worst = max(worst, *(rel_err(g, r) for g, r in zip(got, ref)))
    tol = arm_tolerance(model, algorithm, cset, manifest, states)
    assert worst <= tol, f"{robot}/{algorithm} on aarch64: {worst:.3g} from NumPy, tolerance {tol:.3g}"


# --- another x86-64 CPU ------------------------------------------------------------------------

#: compiler flags of a CPU without AVX and FMA (x86-64-v2: up to SSE4.2), at -O0: what
#: the other CPU changes is the instruction set (no fused multiply-add), and gcc neither
#: reassociates nor contracts at any level without FMA, so -O0 rounds as -O2 and -O3
#: would there, and compiles the kernels several times faster (tests/conftest.py)
OTHER_CPU_CFLAGS = "-O0 -march=x86-64-v2"
TALOS_FEET = "6D:left_sole_link,6D:right_sole_link"
SOLO12_FEET = DEMO_CONSTRAINTS["solo12"]
#: the constrained derivatives: 100k-operation kernels on talos, the slowest to build (80 s
#: each), verified on solo12 and the arms
CONSTRAINED_DERIVATIVES = ("constrained_derivatives", "impulse_derivatives")
#: every constrained row that applies to a fixed-base arm (caba_osimf splits the Delassus
#: matrix at a floating base and refuses an arm)
ARM_CONSTRAINED = ",".join(n for n, row in ALGORITHMS.items() if row.constrained and n != "caba_osimf")
TALOS_ALGORITHMS = ",".join(n for n, row in ALGORITHMS.items()
                            if n not in CONSTRAINED_DERIVATIVES + HEAVY_ON_TALOS)
#: the README's two commands on the named robots, every algorithm on each robot (the
#: demo is solo12's with its four feet, without the constrained derivatives, which the
#: solo12 row adds) but talos's constrained derivatives
OTHER_CPU_COMMANDS = {
    "demo": ["demo"],
    "verify-solo12": ["verify", "solo12", "-a", ",".join(CONSTRAINED_DERIVATIVES), "-c", SOLO12_FEET],
    "verify-panda": ["verify", "panda", "-a", "all"],
    "verify-panda-constrained": ["verify", "panda", "-a", ARM_CONSTRAINED, "-c", "6D:panda_hand_tcp"],
    "verify-ur5": ["verify", "ur5", "-a", "all"],
    "verify-ur5-constrained": ["verify", "ur5", "-a", ARM_CONSTRAINED, "-c", "3D:tool0"],
    "verify-talos": ["verify", "talos", "-a", TALOS_ALGORITHMS, "-c", TALOS_FEET],
}


def rbdgen_command() -> list[str]:
    """The ``rbdgen`` console script next to this interpreter (as a user runs it), else
    ``python -m gen.cli``."""
    script = Path(sys.executable).with_name("rbdgen")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gen.cli"]


#: the folders of a kernel cache that hold what tracing makes (gen.buildcache: build
#: folders, their keys, route counts, the builders' locks); the compiled extensions are
#: files at its top (gen.build.extension_path)
TRACED_STORE = ("build", "keys", "routes", "locks")


def shared_traces(cache: Path, kernel_cache: str) -> Path:
    """``cache`` made a kernel cache whose :data:`TRACED_STORE` folders are links to
    ``kernel_cache``'s: a build there finds (or records) its traced folder in the kernel
    cache and compiles its extension into ``cache`` (so it compiles with the flags asked
    for, whatever ``kernel_cache`` holds compiled)."""
    cache.mkdir()
    for name in TRACED_STORE:
        target = Path(kernel_cache) / name
        target.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(target, target_is_directory=True)
    return cache


@pytest.mark.slow
@needs_robots
@pytest.mark.parametrize("command", list(OTHER_CPU_COMMANDS))
def test_readme_commands_pass_on_another_cpu(tmp_path, command, kernel_cache):
    """The README's commands pass on a CPU without AVX and FMA; the demo from an empty
    cache, the ``verify`` rows with the traced store shared (module docstring)."""
    cache = tmp_path / "cache"
    if command != "demo":
        shared_traces(cache, kernel_cache)
    env = {**baseline_env(), "RBDGEN_CFLAGS": OTHER_CPU_CFLAGS, "RBDGEN_CACHE": str(cache)}
    args = OTHER_CPU_COMMANDS[command]
    if args[0] == "demo":
        args = [*args, "--out", str(tmp_path / "demo")]
    done = subprocess.run([*rbdgen_command(), *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "rbdgen: PASS:" in done.stderr, \
        f"rbdgen {' '.join(args)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert f"({OTHER_CPU_CFLAGS})" in done.stderr, "the kernels were not compiled with the other CPU's flags"
