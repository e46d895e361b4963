"""talos standing on its two 6D soles lowering its base, FDDP: crocoddyl's built-in
DifferentialActionModelContactFwdDynamics against rbdgen's (gen.crocoddyl).  The model's
armature is set to 0 for both (rbdgen models none).

    python examples/crocoddyl/talos_standing.py [--T 50] [--repeat 11]
"""
import crocoddyl

import gen.crocoddyl
from problems import compare, talos_standing

if __name__ == "__main__":
    compare("talos on its soles", talos_standing, crocoddyl.DifferentialActionModelContactFwdDynamics,
            gen.crocoddyl.DifferentialActionModelContactFwdDynamics)
