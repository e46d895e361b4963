"""Running an emitted build folder on aarch64 under qemu-user (issue 32 §1: robots also
run on ARM).

A build folder's sources and a small C driver, generated from the folder's manifest, are
cross-compiled by Debian's ``aarch64-linux-gnu-gcc`` into one executable that
``qemu-aarch64`` runs.  The driver reads k states from stdin (every input of the public
function, in the manifest's order, as little-endian doubles, one state after the other),
calls the function once per state and writes, per state, the return code (as a double)
followed by every output (column-major for a matrix), so that one emulator start
evaluates all the states.

The compiler runs in GNU C mode (its default, not the build folder's ``-std=c99``), so
gcc contracts ``a*b + c`` into aarch64's fused multiply-add (``-ffp-contract=fast``): the
rounding of a typical ARM build, different from NumPy's on x86-64.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
#: Debian's aarch64 sysroot (libc6-dev-arm64-cross / libc6-arm64-cross): headers for
#: the compiler, the dynamic loader and libm for qemu's ``-L``
SYSROOT = Path("/usr/aarch64-linux-gnu")
#: the Debian packages that provide the three
PACKAGES = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
#: the cross compiler's flags: -O2 (GNU C mode, see the module docstring), the level at
#: which gcc contracts multiply-adds into FMAs (a GIMPLE pass, before the RTL passes), with
#: two RTL passes made cheaper: the combiner limited to pairs of instructions and no
#: scheduling before register allocation.  The contraction is decided before either runs;
#: on every case of tests/test_portability.py the executables' outputs on the test's 16
#: states are bit for bit those of plain -O2 (compared when these flags were chosen); gcc's
#: time on the big straight-line kernels
#: is mostly these two passes (talos rnea_derivatives: the combiner 67 % of 55 s; panda
#: aba_hessian_product: register assignment 74 % of 32 s after the early scheduling)
CROSS_FLAGS = ("-O2", "--param=max-combine-insns=2", "-fno-schedule-insns")


def missing_tools() -> str | None:
    """Why the cross tools cannot run here (a reason naming the Debian packages), or
    None when the compiler, the emulator and the aarch64 C library are all present."""
    absent = [tool for tool in (CROSS_CC, QEMU) if shutil.which(tool) is None]
    if not (SYSROOT / "include" / "stdio.h").is_file():
        absent.append(f"the aarch64 C library ({SYSROOT}/include)")
    if absent:
        return f"{', '.join(absent)} not found (Debian: apt-get install {PACKAGES})"
    return None


def driver_source(manifest: dict) -> str:
    """The C driver of the folder's public function (see the module docstring)."""
    function = manifest["functions"][0]
    symbol = function["symbol"]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
        raise ValueError(f"manifest symbol {symbol!r} is not a C identifier")
    ins = [int(a["size"]) for a in function["inputs"]]
    outs = [int(a["size"]) for a in function["outputs"]]
    decls = [f"static double in{i}[{n}];" for i, n in enumerate(ins)]
    decls += [f"static double out{i}[{n}];" for i, n in enumerate(outs)]
    decls.append(f"static double work[{max(1, int(function['work_size']))}];")
    reads = "\n".join(f"        if (fread(in{i}, sizeof(double), {n}, stdin) != {n}) return 3;"
                      for i, n in enumerate(ins))
    writes = "\n".join(f"        if (fwrite(out{i}, sizeof(double), {n}, stdout) != {n}) return 4;"
                       for i, n in enumerate(outs))
    args = ", ".join([f"in{i}" for i in range(len(ins))] + [f"out{i}" for i in range(len(outs))] + ["work"])
    return f"""/* cross-run driver of {symbol}: k states on stdin, per state rc and outputs on stdout */
#include <stdio.h>
#include <stdlib.h>
#include "{manifest['header']}"

{chr(10).join(decls)}

int main(int argc, char **argv) {{
    long k = argc == 2 ? strtol(argv[1], NULL, 10) : -1;
    if (k < 1) return 2;
    for (long s = 0; s < k; ++s) {{
{reads}
        double rc = (double){symbol}({args});
        if (fwrite(&rc, sizeof(double), 1, stdout) != 1) return 4;
{writes}
    }}
    return 0;
}}
"""


def cross_compile(folder: Path, manifest: dict, exe: Path) -> str:
    """The folder's sources and its driver compiled for aarch64 into ``exe``; returns the
    compiler's diagnostics (stderr).  A compiler failure raises with them."""
    driver = folder / "cross_driver.c"
    driver.write_text(driver_source(manifest))
    sources = [str(folder / s) for s in manifest["sources"]] + [str(driver)]
    done = subprocess.run([CROSS_CC, *CROSS_FLAGS, "-I", str(folder), *sources, "-o", str(exe), "-lm"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{CROSS_CC} failed on {folder.name}:\n{done.stderr}")
    return done.stderr


def run_states(exe: Path, manifest: dict, states: list[list[np.ndarray]]) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """Every state of ``states`` (each a list of input arrays) through ``exe`` under
    qemu; returns the return codes and, per state, the outputs (flat, as the C wrote
    them)."""
    function = manifest["functions"][0]
    sizes = [int(a["size"]) for a in function["outputs"]]
    payload = b"".join(np.ascontiguousarray(a, dtype="<f8").reshape(-1).tobytes() for s in states for a in s)
    done = subprocess.run([QEMU, "-L", str(SYSROOT), str(exe), str(len(states))], input=payload,
                          capture_output=True)
    if done.returncode != 0:
        raise AssertionError(f"{exe.name} under {QEMU} exited with {done.returncode}: {done.stderr.decode()}")
    rows = np.frombuffer(done.stdout, dtype="<f8").reshape(len(states), 1 + sum(sizes))
    bounds = np.cumsum([1, *sizes])
    return rows[:, 0], [[row[a:b] for a, b in zip(bounds[:-1], bounds[1:])] for row in rows]
