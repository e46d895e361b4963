"""solo12 on its four feet moving its base, FDDP: crocoddyl's built-in
DifferentialActionModelContactFwdDynamics against rbdgen's (gen.crocoddyl).

    python examples/crocoddyl/solo12_base.py [--T 50] [--repeat 11]
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before crocoddyl loads libgomp: README, "OpenMP"

import crocoddyl  # noqa: E402

import gen.crocoddyl  # noqa: E402
from problems import compare, solo12_base  # noqa: E402

if __name__ == "__main__":
    compare("solo12 on four feet", solo12_base, crocoddyl.DifferentialActionModelContactFwdDynamics,
            gen.crocoddyl.DifferentialActionModelContactFwdDynamics)
