"""Packaging (issue 11 §4): a plain, non-editable ``pip install .`` into a fresh virtual
environment ships the templates and the C sources, so that from another directory,
with the source copy removed, rbdgen can emit, build and verify."""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow      # the slow tier: a fresh virtual environment and a pip install

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd, cwd, env=None):
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res.stdout


def test_non_editable_install_emits_builds_and_verifies(tmp_path):
    src = tmp_path / "src"
    for part in ("gen", "opcount", "pyproject.toml", "README.md"):
        f = ROOT / part
        (shutil.copytree if f.is_dir() else shutil.copy)(f, src / part if f.is_dir() else src)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py = venv / "bin" / "python"
    # the dependencies (casadi, numpy, ...) come from this environment: a .pth file puts
    # its site-packages after the new environment's own, so only rbdgen is installed anew
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(src)], tmp_path)
    shutil.rmtree(src)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "RBDGEN_CACHE": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    where = _run([str(py), "-c", "import gen; print(gen.__file__)"], work, env)
    assert str(venv) in where, f"gen imported from {where}, not the installed package"
    _run([str(venv / "bin" / "rbdgen"), "build", "chain:3", "-a", "aba", "--out", "out", "-q"], work, env)
    assert (work / "out" / "rbd_chain3_aba.h").is_file()
    out = _run([str(venv / "bin" / "rbdgen"), "verify", "chain:3", "-a", "rnea,aba", "-n", "2", "-q"], work, env)
    assert out.count(" ok ") == 2, out
    gen_c = _run([str(py), "-c", "from gen.generic.binding import load_library; print(load_library() is not None)"], work, env)
    assert gen_c.strip() == "True"
    assert not (work / "generated").exists() and not (work / "opcount").exists(), "library code wrote report folders"
