"""What a constrained Hessian-vector contraction would cost by AD (issue 35 §2): the
operation count of CasADi's forward-over-reverse on the traced ``constrained_aba`` graph.

``f = la^T ddq + lf^T lam`` of ``constrained_aba(q, v, tau)`` (K proximal iterations,
``mu``), its tangent gradient ``(T(q)^T df/dq, df/dv, df/dtau)`` (``casadi.gradient``:
reverse mode; ``T`` :func:`gen.configuration.tangent_map`) and the Jacobians of the
gradient (forward over reverse): ``h_qq`` (symmetrised, the chart Hessian, as
:func:`gen.trace.trace_ad_hessian`), ``h_qv``, ``h_vv``, ``h_qtau``.  Counted as
:func:`gen.trace.tape_operations` counts a straight-line tape: the instructions after CSE
but inputs, outputs and constants.  A measurement, not a kernel: nothing registers it.

    .venv/bin/python -m gen.bench.constrained_hessian_cost solo12 3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT
"""
from __future__ import annotations

import sys
import time

import casadi as ca

from ..api import get_algorithm, load_robot
from ..backend import SXBackend
from ..configuration import tangent_map
from ..constraint_spec import parse_constraints
from ..trace import _trace_fn, tape_operations

#: the derivative report's point (opcount/reports/derivatives.md: K = 3, mu = 1e-6)
OPTIONS = {"iterations": 3, "mu": 1e-6}


def hessian_cost(robot: str, spec: str) -> dict:
    """Operation counts of the value ``(ddq, lam)``, value and gradient, and value,
    gradient and the four Hessian blocks; the seconds it took."""
    t0 = time.perf_counter()
    model = load_robot(robot)
    cset = parse_constraints(model, spec)
    algo = get_algorithm("constrained_aba")
    tr = _trace_fn(model, algo, cset, algo.fn_options(OPTIONS))
    ins = [s for _, s in tr.inputs]
    q, v, tau = ins[:3]
    ddq, lam = tr.outputs[0][1], tr.outputs[1][1]
    la, lf = ca.SX.sym("la", ddq.shape[0]), ca.SX.sym("lf", lam.shape[0])
    f = ca.dot(la, ddq) + ca.dot(lf, lam)
    T = tangent_map(model, q, SXBackend())
    grads = [ca.mtimes(T.T, ca.gradient(f, q)), ca.gradient(f, v), ca.gradient(f, tau)]
    H = ca.mtimes(ca.jacobian(grads[0], q), T)
    hess = [0.5 * (H + H.T), ca.jacobian(grads[0], v), ca.jacobian(grads[1], v), ca.jacobian(grads[0], tau)]
    full = ins + [la, lf]
    return {"robot": robot, "constraints": spec, "value": tape_operations(ins, [ddq, lam]),
            "gradient": tape_operations(full, ca.cse([ca.SX(e) for e in grads + [ddq, lam]])),
            "hessian": tape_operations(full, ca.cse([ca.SX(e) for e in hess + grads + [ddq, lam]])),
            "seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    print(hessian_cost(sys.argv[1], sys.argv[2]))
