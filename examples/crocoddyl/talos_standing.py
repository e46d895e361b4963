"""talos standing on its two 6D soles lowering its base, FDDP: crocoddyl's built-in
DifferentialActionModelContactFwdDynamics against rbdgen's (gen.crocoddyl).  The model's
armature is set to 0 for both (rbdgen models none).

    python examples/crocoddyl/talos_standing.py [--T 50] [--repeat 11]
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before crocoddyl loads libgomp: README, "OpenMP"

import crocoddyl  # noqa: E402

import gen.crocoddyl  # noqa: E402
from problems import compare, talos_standing  # noqa: E402

if __name__ == "__main__":
    compare("talos on its soles", talos_standing, crocoddyl.DifferentialActionModelContactFwdDynamics,
            gen.crocoddyl.DifferentialActionModelContactFwdDynamics)
