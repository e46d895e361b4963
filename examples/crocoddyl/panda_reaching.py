"""Panda reaching with FDDP: crocoddyl's built-in DifferentialActionModelFreeFwdDynamics
against rbdgen's (gen.crocoddyl), the same problem and initial guess.

    python examples/crocoddyl/panda_reaching.py [--T 100] [--repeat 11]
"""
import crocoddyl

import gen.crocoddyl
from problems import compare, panda_reaching

if __name__ == "__main__":
    compare("panda reaching", panda_reaching, crocoddyl.DifferentialActionModelFreeFwdDynamics,
            gen.crocoddyl.DifferentialActionModelFreeFwdDynamics)
