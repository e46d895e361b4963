"""Installable build folders (issue 14 §3): `cmake --install` gives a CMake package
(``find_package(P CONFIG)``, target ``rbdgen::P``) and a pkg-config file, `make install
PREFIX=...` gives the header, the library and the pkg-config file, and under
``add_subdirectory`` the folder leaves the parent's build type alone.  Each way builds a
separate consumer program whose printed result must equal ``gen.run``."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import gen
from gen.emit import emit

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("cc") is None or shutil.which("cmake") is None
                                or shutil.which("make") is None, reason="needs a C compiler, make and cmake")]

ROBOT, ALGORITHM, PREFIX = "ur5", "rnea", "rbd_ur5_rnea"
C_TOL = 1e-12

MAIN_C = r"""
#include <stdio.h>
#include "{P}.h"
int main(void)
{{
    const double q[] = {{{q}}}, v[] = {{{v}}}, a[] = {{{a}}};
    double tau[{NV}];
    int i;
    if ({P}(q, v, a, tau, 0) != RBDGEN_OK) return 1;
    for (i = 0; i < {NV}; ++i) printf("%.17g\n", tau[i]);
    return 0;
}}
"""

CONSUMER_CMAKE = f"""cmake_minimum_required(VERSION 3.10)
project(consumer C)
find_package({PREFIX} CONFIG REQUIRED)
add_executable(app main.c)
target_link_libraries(app PRIVATE rbdgen::{PREFIX})
"""

PARENT_CMAKE = f"""cmake_minimum_required(VERSION 3.10)
project(parent C)
add_subdirectory(${{KERNEL_DIR}} kernel)
add_executable(app main.c)
target_link_libraries(app PRIVATE rbdgen::{PREFIX})
"""


def sh(*cmd, env=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """The emitted folder, a consumer main.c and the NumPy reference of what it prints."""
    root = tmp_path_factory.mktemp("install")
    bf = emit(ROBOT, ALGORITHM, out_dir=root / "kernel")
    model = gen.load_robot(ROBOT)
    rng = np.random.default_rng(14)
    q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    fmt = lambda x: ", ".join(repr(float(e)) for e in x)
    main = root / "main.c"
    main.write_text(MAIN_C.format(P=PREFIX, NV=model.nv, q=fmt(q), v=fmt(v), a=fmt(a)))
    return bf.path, main, gen.run(model, ALGORITHM, q, v, a)


def check_output(stdout, ref):
    got = np.array([float(x) for x in stdout.split()])
    assert got.shape == ref.shape
    assert np.max(np.abs(got - ref)) <= C_TOL * max(1.0, np.max(np.abs(ref)))


def consumer_dir(tmp_path, main, cmake_text):
    d = tmp_path / "consumer"
    d.mkdir()
    shutil.copy(main, d / "main.c")
    (d / "CMakeLists.txt").write_text(cmake_text)
    return d


def pkg_config_program(main, pkgconfig_dir, exe):
    """Compile ``main`` with the flags of the installed pkg-config file."""
    env = dict(os.environ, PKG_CONFIG_PATH=str(pkgconfig_dir))
    flags = sh("pkg-config", "--cflags", "--libs", PREFIX, env=env).split()
    sh("cc", "-std=c99", main, *flags, "-o", exe)
    return exe


@pytest.mark.parametrize("shared", [False, True], ids=["static", "shared"])
def test_cmake_install_then_find_package(kernel, tmp_path, shared):
    folder, main, ref = kernel
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    sh("cmake", "-S", folder, "-B", build, f"-DBUILD_SHARED_LIBS={'ON' if shared else 'OFF'}")
    assert "CMAKE_BUILD_TYPE:STRING=Release" in (build / "CMakeCache.txt").read_text()   # top-level default
    sh("cmake", "--build", build)
    sh("cmake", "--install", build, "--prefix", prefix)

    (pc,) = prefix.glob(f"lib*/**/pkgconfig/{PREFIX}.pc")
    libdir = pc.parent.parent
    installed = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    rel = libdir.relative_to(prefix).as_posix()
    assert {f"include/{PREFIX}.h", f"{rel}/cmake/{PREFIX}/{PREFIX}Config.cmake",
            f"{rel}/cmake/{PREFIX}/{PREFIX}ConfigVersion.cmake",
            f"{rel}/lib{PREFIX}.{'so' if shared else 'a'}"} <= installed

    consumer, cbuild = consumer_dir(tmp_path, main, CONSUMER_CMAKE), tmp_path / "consumer-build"
    sh("cmake", "-S", consumer, "-B", cbuild, f"-DCMAKE_PREFIX_PATH={prefix}")
    sh("cmake", "--build", cbuild)
    check_output(sh(cbuild / "app"), ref)

    if shutil.which("pkg-config"):
        exe = pkg_config_program(main, pc.parent, tmp_path / "app-pc")
        check_output(sh(exe, env=dict(os.environ, LD_LIBRARY_PATH=str(libdir))), ref)


def test_make_install_then_pkg_config(kernel, tmp_path):
    folder, main, ref = kernel
    src, stage, prefix = tmp_path / "src", tmp_path / "stage", tmp_path / "prefix"
    shutil.copytree(folder, src)
    sh("make", "-s", "-C", src, "install", f"PREFIX={stage}")
    stage.rename(prefix)               # the pkg-config file is relocatable
    assert {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()} == \
        {f"include/{PREFIX}.h", f"lib/lib{PREFIX}.a", f"lib/pkgconfig/{PREFIX}.pc"}
    if shutil.which("pkg-config"):
        exe = pkg_config_program(main, prefix / "lib" / "pkgconfig", tmp_path / "app")
    else:
        exe = tmp_path / "app"
        sh("cc", "-std=c99", main, f"-I{prefix}/include", f"-L{prefix}/lib", f"-l{PREFIX}", "-lm", "-o", exe)
    check_output(sh(exe), ref)


def test_add_subdirectory_keeps_the_parents_build_type(kernel, tmp_path):
    folder, main, ref = kernel
    parent = consumer_dir(tmp_path, main, PARENT_CMAKE)
    debug = tmp_path / "debug"
    sh("cmake", "-S", parent, "-B", debug, f"-DKERNEL_DIR={folder}", "-DCMAKE_BUILD_TYPE=Debug",
       "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert "CMAKE_BUILD_TYPE:STRING=Debug" in (debug / "CMakeCache.txt").read_text()
    commands = [c["command"] for c in json.loads((debug / "compile_commands.json").read_text())
                if PREFIX in os.path.basename(c["file"])]
    assert len(commands) == 3                # wrapper, kernel, the CasADi entry (P_casadi.c)
    for c in commands:
        assert " -g " in c and "-O3" not in c and "-DNDEBUG" not in c, f"kernel not built with Debug flags: {c}"
    sh("cmake", "--build", debug)
    check_output(sh(debug / "app"), ref)

    plain = tmp_path / "plain"     # a parent without a build type keeps none
    sh("cmake", "-S", parent, "-B", plain, f"-DKERNEL_DIR={folder}")
    assert "CMAKE_BUILD_TYPE:STRING=\n" in (plain / "CMakeCache.txt").read_text()
