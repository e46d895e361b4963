"""The one registry of algorithms (docs/DESIGN.md §3.10): :data:`ALGORITHMS`, name -> row.

A row (:class:`~gen.algorithms.registry.Algorithm`) holds every per-algorithm fact:
the function written once over the backend, inputs and outputs with shapes and docs,
family, options and their validation, Pinocchio reference, generic C entry and work
size, verification tolerance floor, benchmark peer and the committed reports that
include it.  Adding an algorithm means adding its module, its row here and its test
file (docs/ARCHITECTURE.md, "Adding an algorithm").
"""
from __future__ import annotations

from . import pinocchio as pin_ref
from .aba import aba
from .aba_derivatives import aba_derivatives, pinocchio_aba_derivatives
from .aba_hessian_product import (
    HESSIAN_DOCS,
    aba_hessian_product,
    hessian_inputs,
    hessian_outputs,
    pinocchio_aba_hessian_product,
)
from .caba_osim import caba_osim, caba_osimf, floating_roots_only
from .constrained_aba import constrained_aba
from .constrained_derivatives import (
    constrained_derivatives,
    constrained_derivatives_outputs,
    pinocchio_constraint_derivatives,
)
from .crba import crba
from .delassus import delassus, delassus_inputs, matrix_output
from .impulse import impulse, impulse_inputs, impulse_outputs
from .impulse_derivatives import (
    impulse_derivatives,
    impulse_derivatives_outputs,
    pinocchio_impulse_derivatives,
)
from .kkt_osim import kkt_delassus, kkt_osim
from .ltdl import crba_solve, ltdl, ltl
from .ltl_osim import ltl_osim
from .minv import minv, pinocchio_minv
from .prox_lcp import prox_lcp
from .prox_ltl import prox_ltl
from .prox_ltls import prox_ltls
from .prox_pv import prox_pv
from .proximal import constrained_inputs, constrained_outputs
from .registry import (  # noqa: F401
    ALM_FLOOR,
    ALM_MU,
    ITERATIONS,
    KKT_FLOOR,
    OSIM_FLOOR,
    MU,
    PROXIMAL,
    PROXIMAL_ALM,
    RESTITUTION,
    ROUTE,
    RUNTIME_INPUTS,
    RUNTIME_PARAMS,
    ADRoute,
    Algorithm,
    Floor,
    GenericC,
    Jacobian,
    Option,
    PinocchioRef,
)
from .rnea import nle, rnea
from .rnea_derivatives import pinocchio_rnea_derivatives, rnea_derivatives
from .rnea_second_order import pinocchio_rnea_second_order, rnea_second_order


def _q(m, c):
    return [("q", m.nq)]


def _qv(m, c):
    return [("q", m.nq), ("v", m.nv)]


def _qvx(x):
    return lambda m, c: [("q", m.nq), ("v", m.nv), (x, m.nv)]


def _vec(name):
    return lambda m, c: [(name, m.nv, 1)]


def _work(per_body, per_nv=0, nv2=0):
    """A generic-C workspace ``per_body nb + per_nv nv + nv2 nv^2`` (rbg.h RBG_WORK_*)."""
    return lambda nb, nv, m: per_body * nb + per_nv * nv + nv2 * nv * nv


SOLVER_REPORTS = frozenset({"opcount-constrained", "suite-constrained", "scaling"})
SOLVER_REF = dict(unit_weights=True, iterate=True)
DELASSUS_DOC = {"Delassus": "Delassus matrix J M^-1 J^T (m x m, symmetric)"}
OSIM_DOC = {"Lambda": "damped inverse Delassus matrix (J M^-1 J^T + diag(rho))^-1 (m x m, symmetric)"}
DELASSUS_REF = PinocchioRef(pin_ref.delassus, "computeDelassusMatrix (mu = 0)", joint1_only=True)
OSIM_REF = PinocchioRef(pin_ref.damped_delassus_inverse, "computeDelassusMatrix (mu = 0) + rho, inverted by NumPy",
                        joint1_only=True)
SOLVER_PIN = PinocchioRef(pin_ref.constraint_dynamics, "constraintDynamics (K iterations, same mu)", **SOLVER_REF)
TANGENT = " in the tangent space (q + d = integrate(q, d)), Pinocchio's convention"
DERIV_DOCS = {"dtau_dq": "dtau/dq" + TANGENT, "dtau_dv": "dtau/dv",
              "ddq_dq": "dddq/dq" + TANGENT, "ddq_dv": "dddq/dv", "ddq_dtau": "dddq/dtau",
              "dlam_dq": "dlam/dq" + TANGENT, "dlam_dv": "dlam/dv", "dlam_dtau": "dlam/dtau",
              "dvplus_dq": "dv_plus/dq" + TANGENT, "dvplus_dv": "dv_plus/dv_minus",
              "dimpulse_dq": "dimpulse/dq" + TANGENT, "dimpulse_dv": "dimpulse/dv_minus",
              "Minv": "inverse joint-space inertia (full, symmetric) = dddq/dtau"}
NO_GENERIC_DERIV = "not in the generic C library yet (issue 13 §4)"
#: the values a derivative row returns after its derivatives (issue 30 §2: one kernel per
#: optimal-control node), each the quantity the row's algorithm solves for anyway
VALUE_DOCS = {
    "rnea_derivatives": {"tau": "inverse dynamics tau = rnea(q, v, a), the value the derivatives are taken at "
                                "(Pinocchio's data.tau)"},
    "aba_derivatives": {"ddq": "forward dynamics ddq = aba(q, v, tau), the point the derivatives are taken at "
                               "(Pinocchio's data.ddq)"},
    "constrained_derivatives": {
        "ddq": "joint acceleration of the K-th proximal iterate, the point the derivatives are taken at "
               "(= prox_ltl's ddq at the same iterations and mu; Pinocchio's data.ddq)",
        "lam": "constraint forces of the K-th proximal iterate (local frames, M ddq + b = tau + J^T lam; "
               "= prox_ltl's lam; Pinocchio's data.lambda_c)"},
    "impulse_derivatives": {
        "v_plus": "joint velocity after the impact, the point the derivatives are taken at (Pinocchio's "
                  "data.dq_after)",
        "impulse": "constraint impulses (local frames, M (v_plus - v_minus) = J^T impulse; Pinocchio's "
                   "data.impulse_c)"}}


def _square(*names, value=None):
    """nv x nv matrices ``names``, then the nv-vector ``value`` (the value the derivatives
    are taken at, appended after them so that outputs keep their positions)."""
    return lambda m, c: [(n, m.nv, m.nv) for n in names] + ([(value, m.nv, 1)] if value else [])


#: issue 35: Pinocchio's Data::Tensor3x (column-major) as an (nv, nv^2) output
TENSOR = (" (nv x nv x nv tensor stored as nv x nv^2: element (i, j, k) in column j + nv k, i.e. at "
          "i + nv j + nv^2 k, Pinocchio's Tensor3x memory)")
SECOND_ORDER_DOCS = {
    "d2tau_dqdq": "d/dq_k (dtau/dq)[i, j]" + TANGENT + TENSOR,
    "d2tau_dvdv": "d/dv_k (dtau/dv)[i, j] (symmetric in j, k)" + TENSOR,
    "dtau_dqdv": "d/dv_k (dtau/dq)[i, j]" + TENSOR,
    "dtau_dadq": "d/dq_k M[i, j] (symmetric in i, j)" + TANGENT + TENSOR}


def _tensors(*names):
    """nv x nv x nv tensors ``names``, each as nv x nv^2 (:data:`TENSOR`)."""
    return lambda m, c: [(n, m.nv, m.nv * m.nv) for n in names]


# the derivative rows of the rows they differentiate (Jacobian w.r.t. each input, in order)
RNEA_JAC = Jacobian("rnea_derivatives", {"tau": ("dtau_dq", "dtau_dv", "M")})
NLE_JAC = Jacobian("rnea_derivatives", {"b": ("dtau_dq", "dtau_dv")})
ABA_JAC = Jacobian("aba_derivatives", {"ddq": ("ddq_dq", "ddq_dv", "Minv")})
SOLVER_JAC = Jacobian("constrained_derivatives", {"ddq": ("ddq_dq", "ddq_dv", "ddq_dtau"),
                                                  "lam": ("dlam_dq", "dlam_dv", "dlam_dtau")})
IMPULSE_JAC = Jacobian("impulse_derivatives", {"v_plus": ("dvplus_dq", "dvplus_dv"),
                                               "impulse": ("dimpulse_dq", "dimpulse_dv")})

#: the run-time parameters of the proximal solvers (option runtime_params): the damping, the
#: set's Baumgarte gains and the constraint weights; the impact map reads no gains (its a_c*
#: is -(1 + e) J v-)
SOLVER_RUNTIME = ("mu", "gains", "weights")
#: those of the damped Delassus inverses: the damping R = diag(mu / weight)
OSIM_RUNTIME = ("mu", "weights")

PEER_NOTE = "timed against constraintDynamics, whose K-th iterate is rbdgen's"

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("rnea", rnea, _qvx("a"), _vec("tau"), "dynamics",
              "inverse dynamics tau = M(q) a + b(q, v)", "Featherstone 2008 Table 5.1",
              pinocchio=PinocchioRef(pin_ref.rnea, "rnea", depth_first=False, mimic=True),
              generic=GenericC("rbg_rnea", _work(30)), pin_peer="rnea", adam_peer="inverse_dynamics", mujoco_ref="rne",
              reports=frozenset({"opcount", "suite", "callgrind", "golden"}), jacobian=RNEA_JAC),
    Algorithm("nle", nle, _qv, _vec("b"), "dynamics",
              "nonlinear effects b(q, v) (Coriolis, centrifugal, gravity)", "RNEA with a = 0",
              docs={"b": "nonlinear effects b(q, v)"},
              pinocchio=PinocchioRef(pin_ref.nle, "nonLinearEffects", depth_first=False, mimic=True),
              generic=GenericC("rbg_nle", _work(30)), pin_peer="nle", mujoco_peer="bias", mujoco_ref="bias",
              adam_peer="bias_force",
              reports=frozenset({"opcount", "suite"}), jacobian=NLE_JAC),
    Algorithm("crba", crba, _q, lambda m, c: [("M", m.nv, m.nv)], "dynamics",
              "joint-space inertia matrix M(q), full symmetric", "Featherstone 2008 Table 6.2",
              pinocchio=PinocchioRef(pin_ref.crba, "crba (upper triangle symmetrised)", mimic=True),
              generic=GenericC("rbg_crba", _work(22, 6)), pin_peer="crba", adam_peer="mass_matrix", mujoco_ref="fullM",
              reports=frozenset({"opcount", "suite", "golden"})),
    Algorithm("ltdl", ltdl, _q, lambda m, c: [("L", m.nv, m.nv), ("D", m.nv, 1)], "factorisation",
              "sparse factorisation M = L^T D L (unit lower L)", "Featherstone 2005 Table 2",
              docs={"L": "unit lower factor", "D": "diagonal factor"},
              pinocchio=PinocchioRef(pin_ref.ltdl, "cholesky.decompose (L = U^T)"),
              generic=GenericC("rbg_ltdl", _work(22, 6)), reports=frozenset({"opcount"})),
    Algorithm("ltl", ltl, _q, lambda m, c: [("L", m.nv, m.nv)], "factorisation",
              "sparse Cholesky M = L^T L", "Featherstone 2005 Table 2",
              docs={"L": "lower Cholesky factor"},
              pinocchio=PinocchioRef(pin_ref.ltl, "cholesky.decompose (L = sqrt(D) U^T)"),
              generic=GenericC("rbg_ltl", _work(22, 6)), reports=frozenset({"opcount"})),
    Algorithm("crba_solve", crba_solve, lambda m, c: [("q", m.nq), ("b", m.nv)], _vec("x"), "factorisation",
              "x = M(q)^-1 b by CRBA + LTDL + sparse substitution", "Featherstone 2005 §5",
              docs={"x": "solution of M x = b"},
              pinocchio=PinocchioRef(pin_ref.crba_solve, "cholesky.solve"),
              generic=GenericC("rbg_crba_solve", _work(22, 6, 1)), pin_peer="crba_solve", mujoco_peer="solve",
              mujoco_ref="solveM",
              reports=frozenset({"opcount"})),
    Algorithm("aba", aba, _qvx("tau"), _vec("ddq"), "dynamics",
              "forward dynamics ddq = M^-1 (tau - b)", "Featherstone 2008 Table 7.1",
              pinocchio=PinocchioRef(pin_ref.aba, "aba (mimic: crba/nle solve)", depth_first=False, mimic=True),
              generic=GenericC("rbg_aba", _work(79, 1)), pin_peer="aba", adam_peer="aba", mujoco_ref="qacc",
              reports=frozenset({"opcount", "suite", "callgrind", "golden"}), jacobian=ABA_JAC),
    Algorithm("minv", minv, _q, lambda m, c: [("Minv", m.nv, m.nv)], "dynamics",
              "inverse joint-space inertia M(q)^-1: CRBA's M factored L^T D L on the tree pattern, "
              "inverted through the tree-sparse L^-1", "Featherstone, IJRR 2005, §4-5", docs={"Minv": "inverse joint-space inertia (full, symmetric)"},
              pinocchio=PinocchioRef(pinocchio_minv, "computeMinverse (upper triangle symmetrised)",
                                     depth_first=False, mimic=True),
              generic_note="not in the generic C library yet", pin_peer="minv", mujoco_ref="solveM_identity",
              reports=frozenset({"opcount", "suite"})),
    Algorithm("rnea_derivatives", rnea_derivatives, _qvx("a"), _square("dtau_dq", "dtau_dv", "M", value="tau"),
              "dynamics", "partial derivatives of inverse dynamics (dtau/dq, dtau/dv, M) and tau, world-frame "
              "recursion", "Carpentier & Mansard, RSS 2018, Alg. 1",
              docs={**DERIV_DOCS, **VALUE_DOCS["rnea_derivatives"]},
              pinocchio=PinocchioRef(pinocchio_rnea_derivatives, "computeRNEADerivatives (M symmetrised)"),
              generic=GenericC("rbg_rnea_derivatives", _work(76, 24)),
              options=(ROUTE,), ad=ADRoute("rnea", 1), pin_peer="rnea_derivatives",
              reports=frozenset({"derivatives"}), pin_target=3.0),
    Algorithm("rnea_second_order", rnea_second_order, _qvx("a"), _tensors("d2tau_dqdq", "d2tau_dvdv", "dtau_dqdv",
                                                                        "dtau_dadq"),
              "dynamics", "second-order partial derivatives of inverse dynamics (Pinocchio's "
              "ComputeRNEASecondOrderDerivatives tensors), forward-mode differentiation of the world-frame recursion",
              "Carpentier & Mansard, RSS 2018, Alg. 1, differentiated once more; Singh, Russell & Wensing, RA-L 2022",
              docs=SECOND_ORDER_DOCS, generic_note=NO_GENERIC_DERIV, pin_peer="rnea_second_order",
              pinocchio=PinocchioRef(pinocchio_rnea_second_order,
                                     "Richardson differences (h = 1e-3) of computeRNEADerivatives along integrate "
                                     "and v (pin's binding lacks ComputeRNEASecondOrderDerivatives; the benchmark "
                                     "shim calls the C++ one)")),
    Algorithm("aba_derivatives", aba_derivatives, _qvx("tau"), _square("ddq_dq", "ddq_dv", "Minv", value="ddq"),
              "dynamics", "partial derivatives of forward dynamics (dddq/dq, dddq/dv, M^-1) = -M^-1 dtau/d(q, v) "
              "at a = ddq, and ddq", "Carpentier & Mansard, RSS 2018, §IV; M^-1 by LTDL, Featherstone 2005",
              docs={**DERIV_DOCS, **VALUE_DOCS["aba_derivatives"]},
              pinocchio=PinocchioRef(pinocchio_aba_derivatives, "computeABADerivatives (Minv symmetrised)"),
              generic=GenericC("rbg_aba_derivatives", _work(76, 25, 1)),
              floor=Floor(1e-10, 1e-10, "products with M^-1: rounding grows with cond(M) (2e5 on humanoid30, "
                                        "1e7 on talos); worst seen 2.5e-12 (SX vs NumPy, humanoid30), 6e-13 "
                                        "(generic C, talos)"),
              options=(ROUTE,), ad=ADRoute("aba", 1), pin_peer="aba_derivatives",
              reports=frozenset({"derivatives"}), pin_target=3.0),
    Algorithm("aba_hessian_product", aba_hessian_product, hessian_inputs, hessian_outputs, "dynamics",
              "Hessian of lam^T ddq(q, v, tau) w.r.t. (q, v, tau) (chart integrate(q, d)), its gradient and ddq: "
              "the second-order adjoint of rnea(q, v, ddq) = tau with mu = M^-1 lam",
              "Nganga & Wensing, RA-L 2021; Singh, Russell & Wensing, RA-L 2022; Carpentier & Mansard, RSS 2018",
              docs=HESSIAN_DOCS, generic_note=NO_GENERIC_DERIV,
              pinocchio=PinocchioRef(pinocchio_aba_hessian_product,
                                     "Richardson differences (h = 1e-3) of lam^T computeABADerivatives along "
                                     "integrate, v and tau, symmetrised in q (Pinocchio has no second-order forward "
                                     "dynamics)"),
              floor=Floor(1e-10, 1e-7, "products with M^-1 (aba_derivatives' floor; C vs NumPy worst seen 1.5e-12, "
                                       "the MJCF ball arm); against Pinocchio, differences of its first derivatives: "
                                       "rounding eps |ddq_dx| / h at h = 1e-3, worst seen 2.4e-8 (the ball arm)"),
              options=(ROUTE,), ad=ADRoute("aba", 1, hessian=True)),
    Algorithm("prox_ltl", prox_ltl, constrained_inputs, constrained_outputs, "solver",
              "constrained dynamics (ddq, lam): proximal iterations on the sparse LDL^T of the KKT matrix",
              "Carpentier 2021 Alg. 1, eq. 18", options=PROXIMAL, runtime=SOLVER_RUNTIME, pinocchio=SOLVER_PIN,
              generic=GenericC("rbg_prox_ltl", lambda nb, nv, m: (m + nv) * (m + nv + 2)
                               + nv * (nv + m + 7) + 3 * m + 52 * nb),
              pin_peer="constraint_dynamics", reports=SOLVER_REPORTS, jacobian=SOLVER_JAC),
    Algorithm("prox_ltls", prox_ltls, constrained_inputs, constrained_outputs, "solver",
              "constrained dynamics (ddq, lam): ALM on the sparse LTDL of M + J^T J / mu",
              "Sathya 2024 eq. 16, 24", options=PROXIMAL_ALM, runtime=SOLVER_RUNTIME, pinocchio=SOLVER_PIN,
              generic=GenericC("rbg_prox_ltls", lambda nb, nv, m: nv * (nv + m + 9) + 4 * m + 62 * nb),
              floor=ALM_FLOOR, pin_peer="constraint_dynamics", reports=SOLVER_REPORTS, jacobian=SOLVER_JAC),
    Algorithm("constrained_aba", constrained_aba, constrained_inputs, constrained_outputs, "solver",
              "constrained dynamics (ddq, lam): ALM in maximal coordinates, O(n + m) sweeps",
              "Sathya 2024 Alg. 1-3", options=PROXIMAL_ALM, runtime=SOLVER_RUNTIME, pinocchio=SOLVER_PIN,
              generic=GenericC("rbg_constrained_aba", lambda nb, nv, m: 103 * nb + nv + 10 * m, anchored_only=True),
              floor=ALM_FLOOR, pin_peer="constraint_dynamics", reports=SOLVER_REPORTS, jacobian=SOLVER_JAC),
    Algorithm("prox_pv", prox_pv, constrained_inputs, constrained_outputs, "solver",
              "constrained dynamics (ddq, lam): Popov-Vereshchagin with proximal dual iterations",
              "Sathya 2024 Alg. 4", options=PROXIMAL, runtime=SOLVER_RUNTIME, pinocchio=SOLVER_PIN,
              generic=GenericC("rbg_prox_pv", lambda nb, nv, m: 103 * nb + nv + m * (m + 6 * nb + 25),
                               anchored_only=True),
              pin_peer="constraint_dynamics", reports=SOLVER_REPORTS, jacobian=SOLVER_JAC),
    Algorithm("prox_lcp", prox_lcp, constrained_inputs, constrained_outputs, "event",
              "forward dynamics with unilateral normal rows (3D+/6D+): LCP by projected proximal Gauss-Seidel "
              "on the sparse KKT factorisation", "Tedrake 2012 §3.1, Carpentier 2021 eq. 18", options=PROXIMAL,
              runtime=SOLVER_RUNTIME,
              docs={"residual": "complementarity residual: |min(lam, w)| on unilateral rows, "
                                "|w| = |J ddq - a_c*| on bilateral rows (inf-norm)"},
              # without unilateral rows the LCP is the equality-constrained problem
              # (gen.pinref.supports: no reference on a set with unilateral rows)
              pinocchio=PinocchioRef(pin_ref.constraint_dynamics, "constraintDynamics (bilateral sets only)",
                                     **SOLVER_REF),
              generic=GenericC("rbg_prox_lcp", lambda nb, nv, m: (m + nv) * (m + nv + 3)
                               + nv * (nv + m + 7) + m * (m + 8) + 52 * nb),
              reports=frozenset({"suite-constrained"})),
    Algorithm("impulse", impulse, impulse_inputs, impulse_outputs, "event",
              "impact map (v_plus, impulse): M (v+ - v-) = J^T impulse, J v+ = -e J v-, by constrainedABA's "
              "proximal sweeps", "Tedrake 2012 §3.2, Sathya 2024 Alg. 1-3", options=PROXIMAL_ALM + (RESTITUTION,),
              runtime=("mu", "weights"),
              docs={"impulse": "constraint impulses (local frames, M (v_plus - v_minus) = J^T impulse)",
                    "residual": "|J v_plus + e J v_minus|_inf of the result"},
              pinocchio=PinocchioRef(pin_ref.impulse_dynamics, "impulseDynamics (exact solve)", joint1_only=True,
                                     unit_weights=True, anchored_only=True,
                                     converged={"tol": 1e-13, "max_iter": 200}),
              generic=GenericC("rbg_impulse", lambda nb, nv, m: 103 * nb + 2 * nv + 10 * m, anchored_only=True),
              floor=ALM_FLOOR, pin_peer="impulse_dynamics", reports=frozenset({"suite-constrained"}), jacobian=IMPULSE_JAC),
    Algorithm("constrained_derivatives", constrained_derivatives, constrained_inputs,
              constrained_derivatives_outputs, "solver",
              "partial derivatives of constrained forward dynamics (ddq and lam w.r.t. q, v, tau) by implicit "
              "differentiation of the KKT conditions at the K-th proximal iterate, Pinocchio's semantics, and "
              "that iterate (ddq, lam)", "Carpentier & Mansard RSS 2018; Carpentier 2021 eq. 18",
              docs={**DERIV_DOCS, **VALUE_DOCS["constrained_derivatives"]}, options=(ITERATIONS, MU, ROUTE),
              pinocchio=PinocchioRef(pinocchio_constraint_derivatives,
                                     "constraintDynamics (K iterations, same mu) + computeConstraintDynamicsDerivatives",
                                     joint1_only=True, **SOLVER_REF),
              generic_note=NO_GENERIC_DERIV, ad=ADRoute("constrained_aba", 2), floor=KKT_FLOOR,
              pin_peer="constraint_dynamics_derivatives", reports=frozenset({"derivatives"}), pin_target=2.0),
    Algorithm("impulse_derivatives", impulse_derivatives, impulse_inputs, impulse_derivatives_outputs, "event",
              "partial derivatives of the impact map (v_plus and impulse w.r.t. q, v_minus) by implicit "
              "differentiation of M (v+ - v-) = J^T impulse, J v+ = -e J v-, and (v_plus, impulse)",
              "Carpentier & Mansard RSS 2018; Tedrake 2012 §3.2", docs={**DERIV_DOCS, **VALUE_DOCS["impulse_derivatives"]},
              options=(ITERATIONS, MU, RESTITUTION, ROUTE),
              pinocchio=PinocchioRef(pinocchio_impulse_derivatives,
                                     "impulseDynamics (exact) + computeImpulseDynamicsDerivatives (ddq_dv + I)",
                                     joint1_only=True, unit_weights=True, full_rank=True,
                                     converged={"iterations": 30}),
              generic_note=NO_GENERIC_DERIV, ad=ADRoute("impulse", 2), floor=KKT_FLOOR,
              pin_peer="impulse_dynamics_derivatives", reports=frozenset({"derivatives"})),
    Algorithm("delassus", delassus, delassus_inputs("delassus"), matrix_output("Delassus"), "delassus",
              "Delassus matrix J M^-1 J^T by CRBA, sparse LTDL and sparse back-substitution",
              "Featherstone 2005 §5", docs=DELASSUS_DOC, pinocchio=DELASSUS_REF,
              generic=GenericC("rbg_delassus", lambda nb, nv, m: nv * (nv + 7 + 2 * m) + 22 * nb),
              reports=frozenset({"suite-constrained"})),
    Algorithm("kkt_delassus", kkt_delassus, delassus_inputs("kkt_delassus"), matrix_output("Delassus"), "delassus",
              "Delassus matrix J M^-1 J^T as the Schur complement of the sparse KKT joint pass",
              "Carpentier 2021 Alg. 1, §IV-E", docs=DELASSUS_DOC, pinocchio=DELASSUS_REF,
              generic_note="the generic library computes the Delassus matrix once, by rbg_delassus"),
    Algorithm("caba_osim", caba_osim, delassus_inputs("caba_osim"), matrix_output("Lambda"), "delassus",
              "damped Delassus inverse (J M^-1 J^T + R)^-1 by the inversion lemma on articulated inertias, "
              "O(n + m^2)", "Sathya 2024 Alg. 5, eq. 40", docs=OSIM_DOC, pinocchio=OSIM_REF, options=(ALM_MU, RUNTIME_PARAMS),
              runtime=OSIM_RUNTIME,
              generic=GenericC("rbg_caba_osim", lambda nb, nv, m: 91 * nb + nv + m * (6 * nb + 13),
                               anchored_only=True),
              floor=ALM_FLOOR, pin_peer="delassus_inv", reports=frozenset({"suite-constrained", "scaling"})),
    Algorithm("caba_osimf", caba_osimf, delassus_inputs("caba_osimf"), matrix_output("Lambda"), "delassus",
              "damped Delassus inverse as caba_osim, split at the floating base",
              "Sathya 2024 §VI-B, eq. 41", docs=OSIM_DOC, pinocchio=OSIM_REF, options=(ALM_MU, RUNTIME_PARAMS),
              runtime=OSIM_RUNTIME,
              # rbg_caba_osim carries every supporting body in constraint space: at a
              # floating base that is eq. 41's split
              generic=GenericC("rbg_caba_osim", lambda nb, nv, m: 91 * nb + nv + m * (6 * nb + 13),
                               anchored_only=True),
              floor=ALM_FLOOR, pin_peer="delassus_inv", refuses=floating_roots_only),
    Algorithm("ltl_osim", ltl_osim, delassus_inputs("ltl_osim"), matrix_output("Lambda"), "delassus",
              "damped Delassus inverse by sparse LTL of M, then dense Cholesky and inverse",
              "Sathya 2024 §VIII-C (LTL-OSIM), Featherstone 2005", docs=OSIM_DOC, pinocchio=OSIM_REF, options=(MU, RUNTIME_PARAMS),
              runtime=OSIM_RUNTIME,
              generic=GenericC("rbg_ltl_osim", lambda nb, nv, m: nv * (nv + 6 + m) + 22 * nb + m * (2 * m + 1)),
              floor=OSIM_FLOOR, pin_peer="delassus_inv", reports=frozenset({"suite-constrained", "scaling"})),
    Algorithm("kkt_osim", kkt_osim, delassus_inputs("kkt_osim"), matrix_output("Lambda"), "delassus",
              "damped Delassus inverse from the sparse LDL^T of the KKT matrix",
              "Carpentier 2021 Alg. 1, eq. 24, §IV-E", docs=OSIM_DOC, pinocchio=OSIM_REF, options=(MU, RUNTIME_PARAMS),
              runtime=OSIM_RUNTIME,
              generic=GenericC("rbg_kkt_osim", lambda nb, nv, m: (m + nv) * (m + nv + 1)
                               + nv * (nv + m + 6) + 22 * nb + m * (m + 1)),
              floor=OSIM_FLOOR, pin_peer="delassus_inv", reports=frozenset({"suite-constrained"})),
]}


def in_report(report: str) -> list[str]:
    """The algorithms of the committed report ``report``, in registry order."""
    return [name for name, a in ALGORITHMS.items() if report in a.reports]


def of_family(*families: str) -> list[str]:
    """The algorithms of the given families, in registry order."""
    return [name for name, a in ALGORITHMS.items() if a.family in families]
