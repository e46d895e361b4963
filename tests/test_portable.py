"""The emitted C does not depend on the x86-64 CPU that generates it (issue 12 §1).

Model constants (placements, axes, inertias) are computed before tracing and become
literals of the emitted C; common-subexpression elimination merges equal literals, so a
last-bit difference also renames temporaries and changes the stack size.  The
``*_cpu_independent`` tests repeat some work in a subprocess whose libraries are steered
to their baseline x86-64 code paths and compare the result, bit for bit, with this
process's (default dispatch; ``tests/test_golden.py`` compares that with ``generated/``):

* ``NPY_DISABLE_CPU_FEATURES``: every SIMD feature above NumPy's baseline that NumPy
  found on this CPU (read at test time, so the test fits any CPU);
* ``OPENBLAS_CORETYPE=Prescott``: OpenBLAS's generic SSE3 kernels (NumPy's ``@``,
  ``dot`` and ``linalg`` call BLAS) instead of the ones it picked for this CPU;
* ``GLIBC_TUNABLES``: glibc's SSE2 builds of libm (``sin``, ``cos``, ...) instead of the
  FMA / AVX2 builds it picks on CPUs that have them.

A variable is ignored where its library is absent (another BLAS, another C library).
The other tests check :mod:`gen.portable`, which computes the constants.
"""
import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_robots

from gen.emit import render_reference
from gen.portable import cos_sin, matmul, norm
from gen.robots import load_robot
from gen.robots.named import NAMED_ROBOTS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KERNELS = ("talos/rnea", "talos/crba", "talos/aba", "solo12/aba")
MODELS = tuple(NAMED_ROBOTS) + ("humanoid30",)


def numpy_simd_found() -> list[str]:
    """The SIMD features above the baseline that NumPy dispatches to on this CPU (the
    ``found`` list of ``numpy.show_runtime()``)."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:                 # NumPy < 2
        from numpy.core import _multiarray_umath as umath
    return [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]


def baseline_env() -> dict[str, str]:
    """This process's environment, with NumPy, OpenBLAS and glibc's libm held to their
    baseline x86-64 code paths, and this folder importable (for :func:`child_main`)."""
    env = dict(os.environ)
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(numpy_simd_found())
    env["OPENBLAS_CORETYPE"] = "Prescott"
    env["GLIBC_TUNABLES"] = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    return env


def rendered(kernels) -> dict[str, dict[str, str]]:
    """``{"robot/algorithm": {file name: text}}``: the reference kernels as committed
    under ``generated/``."""
    out = {}
    for key in kernels:
        name, files = render_reference(*key.split("/"))
        out[key] = {f"{name}/{fname}": text for fname, text in files.items()}
    return out


def constants(robots) -> dict[str, dict[str, str]]:
    """``{robot: {"label[k]": hex float}}``: every number of each model that can reach a
    trace: body placements, joint axes, inertias (and their 6x6 matrices), frame
    placements."""
    out = {}
    for robot in robots:
        model = load_robot(robot)
        items = []
        for b in model.bodies:
            items += [(f"{b.name}.R", b.placement.R), (f"{b.name}.p", b.placement.p),
                      (f"{b.name}.axis", b.axis), (f"{b.name}.mass", b.inertia.mass),
                      (f"{b.name}.com", b.inertia.com), (f"{b.name}.I_c", b.inertia.I_c),
                      (f"{b.name}.matrix", b.inertia.matrix())]
        items += [(f"frame {f.name}.{k}", v) for f in model.frames
                  for k, v in (("R", f.placement.R), ("p", f.placement.p))]
        out[robot] = {f"{label}[{k}]": float(x).hex()
                      for label, value in items for k, x in enumerate(np.ravel(value))}
    return out


def in_baseline_child(function: str, args) -> dict:
    """``function(args)`` of this module, run in a subprocess with :func:`baseline_env`;
    fails unless the child's NumPy really has its SIMD features disabled."""
    env = baseline_env()
    proc = subprocess.run([sys.executable, "-c", "import test_portable; test_portable.child_main()",
                           function, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["simd"] == [], f"NPY_DISABLE_CPU_FEATURES={env['NPY_DISABLE_CPU_FEATURES']!r} left {out['simd']} on"
    return out["result"]


def child_main() -> None:
    """Entry point of the subprocess: ``argv = [function name, *args]``; prints JSON."""
    function, *args = sys.argv[1:]
    result = {"rendered": rendered, "constants": constants}[function](args)
    json.dump({"simd": numpy_simd_found(), "result": result}, sys.stdout)


def test_cos_sin_is_correctly_rounded():
    """Against mpmath at 300 bits, on angles over several turns, both signs, huge and
    tiny ones, and one where glibc's FMA and SSE2 builds of cos disagree."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(12)
    xs = list(rng.uniform(-20.0, 20.0, 3000)) + [0.0, 1e-300, 5e-324, np.pi / 2, np.pi, 1.5708,
                                                  -3.14159265358979, 1e22, -1e300,
                                                  float.fromhex("0x1.f3b9a2d853288p+0")]
    with mpmath.workprec(300):
        for x in xs:
            exact = float(mpmath.cos(mpmath.mpf(x))), float(mpmath.sin(mpmath.mpf(x)))
            assert cos_sin(x) == exact, f"x = {float(x).hex()}"
    assert cos_sin(-0.0)[1] == 0.0 and np.signbit(cos_sin(-0.0)[1])


def test_matmul_sums_left_to_right_with_numpy_shapes():
    rng = np.random.default_rng(3)
    A, B, v, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=4), rng.normal(size=3)
    for x, y in ((A, B), (A, v), (w, A), (v, v)):
        assert np.shape(matmul(x, y)) == np.shape(x @ y)
        assert np.allclose(matmul(x, y), x @ y, rtol=1e-14, atol=0.0)
    assert matmul(A, B)[2, 1] == ((A[2, 0] * B[0, 1] + A[2, 1] * B[1, 1]) + A[2, 2] * B[2, 1]) + A[2, 3] * B[3, 1]
    assert isinstance(matmul(v, v), float) and norm(np.array([3.0, 4.0, 12.0])) == 13.0
    with pytest.raises(ValueError):
        matmul(A, A)


@needs_robots
def test_model_constants_are_cpu_independent():
    here, child = constants(MODELS), in_baseline_child("constants", MODELS)
    for robot in MODELS:
        diff = [f"{k}: {v} vs {child[robot].get(k)}" for k, v in here[robot].items() if child[robot].get(k) != v]
        assert not diff and here[robot].keys() == child[robot].keys(), \
            f"{robot}: {len(diff)} constants depend on the CPU (default vs baseline dispatch), e.g.\n" + "\n".join(diff[:8])


@needs_robots
def test_emitted_c_is_cpu_independent():
    here, child = rendered(KERNELS), in_baseline_child("rendered", KERNELS)
    for key in KERNELS:
        assert here[key].keys() == child[key].keys()
        for fname, text in here[key].items():
            if child[key][fname] != text:
                diff = difflib.unified_diff(text.splitlines(True), child[key][fname].splitlines(True),
                                            "default dispatch", "baseline dispatch", n=1)
                pytest.fail(f"{fname} depends on the CPU:\n" + "".join(list(diff)[:40]))
