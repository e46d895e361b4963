"""The stack figures of the header (issue 32 §7): <SYMBOL>_STACK_BYTES bounds the stack
one call takes in an optimised build, <SYMBOL>_STACK_BYTES_O0 at -O0
(gen.cwriter.stack_bytes).  Checked two ways:

* the compilers' own account, -fstack-usage, at -O0, -O2 and -O3 (gcc; clang at -O0 and
  -O2 where installed) on kernels of every code shape: the frames on the call path
  (every function of the wrapper file, the deepest entry point of the kernel file, every
  static function of it but the parts of a split function, and the deepest part; more
  than any real path, as a check of a bound should take);
* the real use, C library included: the call runs on a thread whose stack was filled
  with a pattern, and the bytes the pattern lost are counted (a kernel with sin, cos and
  atan2), against STACK_BYTES plus the header's "under 1 kB" for the C library (glibc
  2.36: 80 bytes beyond the kernel's frames on the kernel below).
"""
import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_emit_hygiene import emit_shape

needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

#: (compiler, flags) the -fstack-usage check runs
LEVELS = [("gcc", "-O0"), ("gcc", "-O2"), ("gcc", "-O3")] + \
    ([("clang", "-O0"), ("clang", "-O2")] if shutil.which("clang") else [])
#: the code shapes checked (test_emit_hygiene.SHAPES)
CHECKED = ["scalar", "lanes", "products", "avoid_stack", "split", "batch", "driver", "runtime_params"]
#: the header's bound on the C library's part of a call (glibc's sin, cos, atan2, sqrt)
LIBM_BYTES = 1024


def frames(src: Path, cc: str, flags: str, tmp: Path) -> dict[str, int]:
    """Function name -> frame bytes of ``src`` compiled with ``-fstack-usage``."""
    obj = tmp / f"{src.stem}-{cc}{flags}.o"
    subprocess.run([cc, "-std=c99", *flags.split(), "-fstack-usage", "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    out = {}
    for line in obj.with_suffix(".su").read_text().splitlines():
        where, size, _ = line.split("\t")
        out[where.rsplit(":", 1)[-1]] = int(size)
    return out


def call_path(bf, cc: str, flags: str, tmp: Path) -> int:
    """Bytes of the frames on the deepest call path of the folder's C, over-counted (see
    the module docstring)."""
    symbol = bf.manifest["functions"][0]["symbol"]
    # the wrapper and the kernel file (P_casadi.c, the CasADi entry, calls the wrapper)
    wrapper, kernel = (frames(bf.path / s, cc, flags, tmp) for s in bf.manifest["sources"][:2])
    entries = [n for n in kernel if n in {f"{symbol}_{e}" for e in ("kernel", "setup", "step", "finish")}]
    parts = [n for n in kernel if re.search(r"_p\d+$", n)]
    rest = [n for n in kernel if n not in entries and n not in parts]
    return (sum(wrapper.values()) + max(kernel[n] for n in entries) + sum(kernel[n] for n in rest)
            + max([kernel[n] for n in parts], default=0))


@needs_cc
@pytest.mark.parametrize("shape", CHECKED)
def test_stack_bytes_bound_the_frames(tmp_path, shape):
    bf = emit_shape(shape, tmp_path / "k")
    f = bf.manifest["functions"][0]
    header = bf.header_path.read_text()
    for key in ("STACK_BYTES", "STACK_BYTES_O0"):
        assert f"#define {f['symbol'].upper()}_{key} {f[key.lower()]}\n" in header
    for cc, flags in LEVELS:
        used = call_path(bf, cc, flags, tmp_path)
        bound = f["stack_bytes_o0"] if flags == "-O0" else f["stack_bytes"]
        assert used <= bound, f"{shape}, {cc} {flags}: {used} bytes on the call path > the header's {bound}"


PAINT_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "{header}"

#define STACK (1 << 20)
#define PATTERN 0xa5
static unsigned char stack[STACK] __attribute__((aligned(4096)));
{arrays}
static int rc;

static void *run(void *unused)
{{
    (void)unused;
    rc = {call};
    return 0;
}}

static void *nothing(void *unused)
{{
    return unused;
}}

/* the deepest byte of the thread's stack the call wrote (idle: the thread alone) */
long used(int idle)
{{
    pthread_attr_t attr;
    pthread_t t;
    long n = 0;
    memset(stack, PATTERN, sizeof stack);
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, sizeof stack);
    pthread_create(&t, &attr, idle ? nothing : run, 0);
    pthread_join(t, 0);
    while (n < STACK && stack[n] == PATTERN) ++n;
    return rc != 0 ? -1 : STACK - n;
}}
"""


@needs_cc
def test_stack_bytes_bound_the_real_use_with_the_c_library(tmp_path):
    """ur5, prox_ltl on 6D:tool0 with run-time gains: its position error is log6 (atan2),
    and it calls sin, cos and sqrt; at -O2 the call, C library included, stays within
    STACK_BYTES + LIBM_BYTES (the pattern's loss minus a thread that does nothing)."""
    from gen.emit import emit
    import gen

    model = gen.load_robot("ur5")
    bf = emit(model, "prox_ltl", "6D:tool0", out_dir=tmp_path / "k", iterations=3, runtime_params=True)
    assert "atan2(" in (bf.path / bf.manifest["sources"][1]).read_text()
    f = bf.manifest["functions"][0]
    rng = np.random.default_rng(5)
    values = {"q": model.random_q(rng), "mu": [1e-6], "gains": [10.0, 2.0, 0.0], "weights": [1.0]}
    arrays = []
    for x in f["inputs"]:
        v = values.get(x["name"], rng.normal(size=x["size"]))
        arrays.append(f"static const double {x['name']}[] = {{{', '.join(float(a).hex() for a in v)}}};")
    arrays += [f"static double {y['name']}[{y['size']}];" for y in f["outputs"]]
    arrays.append(f"static double work[{max(1, f['work_size'])}];")
    call = f"{f['symbol']}({', '.join([x['name'] for x in f['inputs']] + [y['name'] for y in f['outputs']])}, work)"
    src = tmp_path / "paint.c"
    src.write_text(PAINT_C.format(header=bf.manifest["header"], arrays="\n".join(arrays), call=call))
    lib = tmp_path / "libpaint.so"
    subprocess.run(["gcc", "-std=c99", "-O2", "-shared", "-fPIC", "-I", str(bf.path), str(src),
                    *[str(bf.path / s) for s in bf.manifest["sources"]], "-o", str(lib), "-lm", "-lpthread"],
                   check=True, capture_output=True)
    paint = ctypes.CDLL(str(lib))
    used = paint.used(0) - paint.used(1)          # the thread's own start (and its TLS) taken off
    assert used > 0, "the call failed or wrote no stack"
    assert used <= f["stack_bytes"] + LIBM_BYTES, \
        f"{used} bytes of stack used, the header says {f['stack_bytes']} + the C library's {LIBM_BYTES}"
    frames_o2 = call_path(bf, "gcc", "-O2", tmp_path)
    assert used - frames_o2 <= LIBM_BYTES, f"the C library took {used - frames_o2} bytes beyond the kernel's frames"
