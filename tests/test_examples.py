"""examples/ (issue 14 §2, §4): the trajectory optimisation (reduced: 10 intervals, both the
SX graph and the compiled external) solves and meets its constraints; the C control loop,
generated with the rbdgen CLI, built against the installed kernel packages with
find_package and run without Python, holds its 1 ms budget, tracks its reference (panda)
and holds its posture (solo12)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gen
from gen.build import compile_flags

pytestmark = pytest.mark.slow      # the slow tier: compiles the Pinocchio shim, CMake projects, ...

ROOT = Path(__file__).resolve().parent.parent
PERCENTILES = re.compile(r"^  (control|step)\s+\[us\]\s+p50\s+(\S+)\s+p90\s+(\S+)\s+p99\s+(\S+)\s+max\s+(\S+)$", re.M)


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("cmake") is None, reason="needs a C compiler and cmake")
def test_c_control_loop(tmp_path):
    env = dict(os.environ, WORK=str(tmp_path), RBDGEN=f"{sys.executable} -m gen.cli")
    r = subprocess.run(["sh", str(ROOT / "examples" / "c_control_loop" / "run.sh"), "1"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    log = tmp_path / "build.log"
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{log.read_text() if log.exists() else ''}"
    out = r.stdout
    panda, solo12 = out.split("solo12:")
    for part in (panda, solo12):
        rows = PERCENTILES.findall(part)
        assert [row[0] for row in rows] == ["control", "step"], out
        for _, *ts in rows:
            p50, p90, p99, worst = map(float, ts)
            assert 0 < p50 <= p90 <= p99 <= worst, out
        assert re.search(r"budget\s+1000 us per step: margin \S+ us at p99", part), out
    assert "1000 steps" in panda
    tracking = float(re.search(r"tracking error \[rad\]: rms \S+\s+max (\S+)", panda).group(1))
    assert tracking < 1e-2, out
    joints, base, tilt = re.search(r"joints \[rad\] max \S+ final (\S+);\s+base \[m\] max (\S+) final \S+;\s+"
                                   r"tilt \[rad\] max (\S+)", solo12).groups()
    assert float(joints) < 1e-3 and float(base) < 5e-3 and float(tilt) < 1e-3, out


def load_example(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_trajopt_reduced():
    """examples/trajopt reduced: N = 10 intervals over 0.8 s, only the base's y back at
    the end (the README's run: N = 40 over 1.6 s, the whole base pose back), both
    variants; the external compiled with the tests' flags (tests/conftest.py: -O0,
    seconds, where -O3 takes minutes for constrained_derivatives on solo12), as
    test_casadi's solo12 external, which this build leaves in the cache."""
    trajopt = load_example(ROOT / "examples" / "trajopt" / "trajopt.py")
    model = gen.load_robot(trajopt.ROBOT)
    results = {v: trajopt.solve(model, v, 10, 0.8, flags=compile_flags(), home_pose=False) for v in ("sx", "external")}
    for r in results.values():
        assert r["success"], r["status"]
        assert r["max_defect"] < 1e-6
        assert abs(r["base_y"][5] - trajopt.SHIFT) < 1e-8 and abs(r["base_y"][-1]) < 1e-8
        assert r["max_tau"] <= trajopt.TAU_MAX + 1e-6
        assert r["iterations"] > 0 and r["g_per_dynamics_us"] > 0 and r["jac_per_dynamics_us"] > 0
    sx, ext = results["sx"]["cost"], results["external"]["cost"]
    assert abs(sx - ext) < 1e-3 * abs(sx), (sx, ext)      # the same local optimum
    assert np.max(np.abs(np.array(results["sx"]["tau"]) - np.array(results["external"]["tau"]))) < 5e-2
