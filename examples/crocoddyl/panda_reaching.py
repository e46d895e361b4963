"""Panda reaching with FDDP: crocoddyl's built-in DifferentialActionModelFreeFwdDynamics
against rbdgen's (gen.crocoddyl), the same problem and initial guess.

    python examples/crocoddyl/panda_reaching.py [--T 100] [--repeat 11]
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before crocoddyl loads libgomp: README, "OpenMP"

import crocoddyl  # noqa: E402

import gen.crocoddyl  # noqa: E402
from problems import compare, panda_reaching  # noqa: E402

if __name__ == "__main__":
    compare("panda reaching", panda_reaching, crocoddyl.DifferentialActionModelFreeFwdDynamics,
            gen.crocoddyl.DifferentialActionModelFreeFwdDynamics)
