"""solo12 on its four feet moving its base, FDDP: crocoddyl's built-in
DifferentialActionModelContactFwdDynamics against rbdgen's (gen.crocoddyl).

    python examples/crocoddyl/solo12_base.py [--T 50] [--repeat 11]
"""
import crocoddyl

import gen.crocoddyl
from problems import compare, solo12_base

if __name__ == "__main__":
    compare("solo12 on four feet", solo12_base, crocoddyl.DifferentialActionModelContactFwdDynamics,
            gen.crocoddyl.DifferentialActionModelContactFwdDynamics)
