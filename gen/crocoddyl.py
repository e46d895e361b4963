"""crocoddyl action models on rbdgen's kernels: switching is one import.

``from gen.crocoddyl import DifferentialActionModelFreeFwdDynamics`` (and
``DifferentialActionModelContactFwdDynamics``) take crocoddyl's own constructor arguments
and compute what crocoddyl's built-in models of the same names compute, with rbdgen's
generated C for the dynamics and its analytical derivatives.

Two implementations, one behaviour.  Where a C++ compiler and the crocoddyl wheel's headers
are present, the classes return the **compiled model**: the header-only C++ model of
``rbdgen build --crocoddyl`` (:mod:`gen.crocoddyl_cpp`) compiled into a boost.python
extension per kernel (cached; the first compile of crocoddyl's headers takes a minute or
two), a subclass of crocoddyl's class of the same name in Python too, so crocoddyl's
integrators and solvers call its calc and calcDiff in C++ (built by
:func:`compiled_free_fwd_dynamics`, :func:`compiled_contact_fwd_dynamics`).  Otherwise, with
a one-line warning saying why, or when ``RBDGEN_CROCODDYL_MODELS=python``, they return the
**Python model** (:class:`PythonDifferentialActionModelFreeFwdDynamics`,
:class:`PythonDifferentialActionModelContactFwdDynamics`), a crocoddyl Python subclass whose
calc and calcDiff crocoddyl calls per node through boost.python.  What follows describes the
Python model; the compiled one computes the same (its header's comment says how), with
crocoddyl's own ``quasiStatic`` and data classes (it derives from the built-in model).  A
subclass of the public classes is always the Python model (its Python overrides are its
reason to exist).  Both refuse, in one line (:class:`RbdgenError`) before constructing
anything, a state that is not a ``StateMultibody``, an actuation, contacts or costs of
another type or of mismatched sizes.

The Python model:

* **free**: ``xout`` from ``aba``; ``Fx = [ddq_dq, ddq_dv] + M^-1 dtau_dx`` and
  ``Fu = M^-1 dtau_du`` from ``aba_derivatives`` (crocoddyl's
  ``computeABADerivatives`` route, a model without armature);
* **contact**: ``xout`` and the contact forces from ``prox_ltl`` on the constraint set of
  the active contacts (sorted by name, as crocoddyl's ``ContactModelMultiple`` stacks
  them); ``Fx``, ``Fu`` and, with ``enable_force``, ``df_dx``, ``df_du`` from
  ``constrained_derivatives``.  crocoddyl's ``inv_damping`` ``eps`` (the KKT system
  ``[M J^T; J -eps I]``) is rbdgen's ``iterations = 1, mu = eps``, exactly; ``eps = 0`` is
  rbdgen's default ``iterations = 3, mu = 1e-6`` (the proximal iterates converge to the
  undamped solution, ``(mu kappa)^3`` away).  ``ContactModel3D`` / ``ContactModel6D`` in
  ``pinocchio.LOCAL`` map to ``3D:`` / ``6D:`` constraints (rbdgen's rows are LOCAL with
  Pinocchio's force sign); their Baumgarte gains ``(Kp, Kd)`` to the set's gains (one pair
  for all contacts; crocoddyl's ``a0 += Kd v`` is rbdgen's ``a_c* = -gamma - Kd J v``).
  ``LOCAL_WORLD_ALIGNED`` and ``WORLD`` contacts, 1D/2D contacts, gains differing between
  contacts and a position gain ``Kp != 0`` (rbdgen's ``constrained_derivatives`` has
  none; with ``Kp`` crocoddyl's reference would be the constraint's anchor) are refused
  in one line.

Actuation, costs and residuals stay crocoddyl's.  The kernels write into crocoddyl's data
in place: its ``xout``, ``Fx``, ``Fu`` are NumPy views of the Eigen (column-major)
storage, which the kernels take as ``out=`` arrays as they are.  A solve sweeps over its
nodes, each with its own data, so what a node writes is never in the core's cache: the
outputs no model reads (the derivative kernels' values, the force derivatives without
``enable_force``) go to one array per kernel, and with crocoddyl's full and floating-base
actuations (constant Jacobians) ``actuation.calcDiff``, which is empty for them, is not
called.  The Pinocchio data the costs read is kept up to date as far as the costs need it,
read from the residual types at construction (:class:`Kinematics`): frame, state and
control residuals need the joint placements (``forwardKinematics(q)`` in ``calc``) and the
joint Jacobians (``computeJointJacobians`` in ``calcDiff``, from the placements of
``calc`` at the same point: crocoddyl's contract, on which the costs' own calcDiff relies
too); ``ResidualModelFrameVelocity`` adds the velocities and accelerations
(``forwardKinematics(q, v, a)``) and ``computeForwardKinematicsDerivatives``,
``ResidualModelCoMPosition`` the centre of mass and its Jacobian; a residual of any other
type gets everything the built-in model computes (``computeAllTerms`` and the centroidal
momentum in ``calc``, ``computeRNEADerivatives`` with the contact forces or
``computeABADerivatives`` in ``calcDiff``).  The contact forces reach the contact data (``updateForce``;
``updateForceDiff`` with ``enable_force``), which the force residuals read; the contact
data's ``Jc`` and ``a0`` are not computed.  ``quasiStatic`` is the built-in models' (a
pseudo-inverse of ``dtau_du``, with the contact Jacobian's transpose beside it for the
contact model), not crocoddyl's generic iterative one that a Python model would inherit.
Contact status is read at construction.

Kernels are built from ``state.pinocchio`` (:func:`gen.load_robot` on a
``pinocchio.Model``) with :func:`gen.build`, cached on disk, and shared in the process
between the models of one Pinocchio model (a problem has one model per node).

crocoddyl's wheel links libgomp: with OpenMP's default spin-waiting, solves on a loaded
machine are slow and erratic (60-230 ms instead of 18 ms for the panda example on two
shared cores).  Importing this module sets ``OMP_WAIT_POLICY=passive`` when it is unset,
before crocoddyl is imported; if libgomp is already loaded by then, it warns.  crocoddyl's
Eigen products also start OpenMP threads: on a loaded machine the built-in contact model's
calcDiff on talos took 7.1 ms per node with them and 147 us with ``OMP_NUM_THREADS=1``,
which the examples set (this module leaves the thread count to the user).

Requires the ``crocoddyl`` extra (``pip install rbdgen[crocoddyl]``: crocoddyl 3.2.1 with
pin 4.0.0; with pin 4.1.0 crocoddyl 3.2.1 crashes on a frame-translation cost).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from .errors import RbdgenError

if "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"      # read by libgomp when it loads (crocoddyl's wheel)
    try:
        with open("/proc/self/maps") as _maps:
            if "libgomp" in _maps.read():
                warnings.warn("libgomp was loaded before gen.crocoddyl set OMP_WAIT_POLICY=passive; set it in the "
                              "environment (or import gen.crocoddyl before crocoddyl) for steady solve times",
                              stacklevel=2)
    except OSError:
        pass

try:
    import crocoddyl
    import pinocchio as pin
except ImportError as e:                           # pragma: no cover - the extra is missing
    raise RbdgenError(f"gen.crocoddyl needs crocoddyl and Pinocchio: pip install 'rbdgen[crocoddyl]' ({e})") from None

from . import crocoddyl_cpp
from .build import build, build_folder
from .constraint_spec import parse_constraints
from .robots import load_robot

__all__ = ["DifferentialActionModelContactFwdDynamics", "DifferentialActionModelFreeFwdDynamics", "Kinematics",
           "PythonDifferentialActionModelContactFwdDynamics", "PythonDifferentialActionModelFreeFwdDynamics",
           "compiled_contact_fwd_dynamics", "compiled_free_fwd_dynamics"]

_ROBOTS: dict[int, tuple] = {}          # id(pinocchio.Model) -> (the model, rbdgen Model)
_KERNELS: dict[tuple, tuple] = {}       # (id(pinocchio.Model), algorithm, key) -> (the model, Kernel)
_UNREAD: dict[int, tuple] = {}          # id(Kernel) -> (the kernel, {output: array})


def robot_of(pm):
    """rbdgen's Model of the Pinocchio model ``pm``, loaded once per object."""
    hit = _ROBOTS.get(id(pm))
    if hit is None or hit[0] is not pm:
        hit = _ROBOTS[id(pm)] = (pm, load_robot(pm))
    return hit[1]


def kernel(pm, algorithm: str, constraints=None, key=(), **options):
    """``gen.build(load_robot(pm), algorithm, constraints, **options)``, once per process
    for one ``(pm, algorithm, key)`` (and once per machine: processes building the same
    kernel take turns, :func:`gen.buildcache.building`)."""
    k = (id(pm), algorithm, key, tuple(sorted(options.items())))
    hit = _KERNELS.get(k)
    if hit is None or hit[0] is not pm:
        hit = _KERNELS[k] = (pm, build(robot_of(pm), algorithm, constraints, quiet=False, **options))
    return hit[1]


def folder_kernel(pm, algorithm: str, constraints=None, key=(), **options):
    """The build folder of ``kernel(pm, algorithm, constraints, key, **options)`` as a
    :class:`gen.crocoddyl_cpp.FolderKernel`: traced and emitted (or found in the cache) but
    not compiled by cffi, for the compiled models' extension, which compiles its C."""
    k = (id(pm), algorithm, key, tuple(sorted(options.items())), "folder")
    hit = _KERNELS.get(k)
    if hit is None or hit[0] is not pm:
        robot = robot_of(pm)
        folder = build_folder(robot, algorithm, constraints, **options)
        hit = _KERNELS[k] = (pm, crocoddyl_cpp.FolderKernel(folder, robot, constraints, options))
    return hit[1]


def out_arrays(kern, named: dict) -> tuple:
    """The ``out=`` tuple of ``kern``: ``named[output]`` where given, else an array of the
    output's shape that no model reads (such as the value a derivative kernel also returns),
    one per kernel in the process: a problem's nodes each have their data, and an array per
    node is memory a solve's sweep over the nodes writes for nothing (it is never in cache).
    Calls that overlap (the kernel runs without the GIL) write it at once; nothing reads it."""
    hit = _UNREAD.get(id(kern))
    if hit is None or hit[0] is not kern:
        hit = _UNREAD[id(kern)] = (kern, {n: np.empty(r) if c == 1 else np.empty((r, c), order="F")
                                          for n, r, c in kern._outputs})
    return tuple(named[n] if n in named else hit[1][n] for n, _, _ in kern._outputs)


# --- the kinematics the costs read --------------------------------------------------------

#: residuals that read the joint placements, velocities and Jacobians only
BASIC = {"ResidualModelState", "ResidualModelControl", "ResidualModelFrameTranslation",
         "ResidualModelFramePlacement", "ResidualModelFrameRotation", "ResidualModelContactForce",
         "ResidualModelContactFrictionCone", "ResidualModelContactWrenchCone", "ResidualModelContactCoPPosition",
         "ResidualModelJointEffort", "ResidualModelJointAcceleration"}
VELOCITY = {"ResidualModelFrameVelocity"}
COM = {"ResidualModelCoMPosition"}
JOINT = {"ResidualModelJointEffort", "ResidualModelJointAcceleration"}


class Kinematics:
    """What of Pinocchio's data the costs of ``costs`` read, and its update (module
    docstring).  ``full``: a residual of unknown type, so everything the built-in models
    compute."""

    def __init__(self, pm, costs):
        self.pm = pm
        types = {type(item.cost.residual).__name__ for _, item in costs.costs.todict().items()}
        self.full = bool(types - BASIC - VELOCITY - COM)
        self.velocity = bool(types & VELOCITY) or self.full
        self.com = bool(types & COM) or self.full
        self.joint = bool(types & JOINT)

    def calc(self, pd, q, v, a) -> None:
        if self.full:
            pin.computeAllTerms(self.pm, pd, q, v)
            pin.computeCentroidalMomentum(self.pm, pd)
        elif self.velocity:
            pin.forwardKinematics(self.pm, pd, q, v, a)
        else:
            pin.forwardKinematics(self.pm, pd, q)
        if not self.full and self.com:
            pin.centerOfMass(self.pm, pd, q, v, a)

    def calc_diff(self, pd, q, v, a, tau=None, fext=None) -> None:
        """After :meth:`calc` at the same ``q`` (crocoddyl's contract: calcDiff follows calc
        at the same point, whose frame placements the costs' calcDiff reads too): the joint
        Jacobians from the joint placements ``calc`` left in ``pd``.  ``full``: the built-in
        models' calcDiff, ``computeRNEADerivatives`` with the contact forces ``fext``
        (contact model) or ``computeABADerivatives`` at ``tau`` (free model); the centre of
        mass's Jacobian came with ``computeAllTerms`` in :meth:`calc`."""
        if self.full:
            if fext is not None:
                pin.computeRNEADerivatives(self.pm, pd, q, v, a, fext)
            else:
                pin.computeABADerivatives(self.pm, pd, q, v, tau)
            return
        if self.velocity:
            pin.computeForwardKinematicsDerivatives(self.pm, pd, q, v, a)
        else:
            pin.computeJointJacobians(self.pm, pd)
        if self.com:
            pin.jacobianCenterOfMass(self.pm, pd, q, False)


def _state_parts(state, x):
    return x[:state.nq], x[state.nq:]


def _refuse_constraints(constraints) -> None:
    if constraints is not None:
        raise RbdgenError("gen.crocoddyl models take no ConstraintModelManager (equality/inequality "
                          "constraints); use crocoddyl's built-in model for constrained solvers")


def check_arguments(state, actuation, costs, contacts=None) -> None:
    """The constructor arguments' types and sizes, checked before anything is built (a
    wrong type would reach C++ as a multi-line ArgumentError, a wrong size as a kernel
    writing outside its arrays)."""
    wanted = [("state", state, crocoddyl.StateMultibody), ("actuation", actuation, crocoddyl.ActuationModelAbstract),
              ("costs", costs, crocoddyl.CostModelSum)]
    if contacts is not None:
        wanted.append(("contacts", contacts, crocoddyl.ContactModelMultiple))
    for name, value, cls in wanted:
        if not isinstance(value, cls):
            raise RbdgenError(f"{name} is a {type(value).__name__}; crocoddyl.{cls.__name__} expected")
    nx, nu = state.nx, actuation.nu
    sizes = [("actuation.state", actuation.state.nx, nx), ("costs.state", costs.state.nx, nx),
             ("costs.nu", costs.nu, nu)]
    if contacts is not None:
        sizes += [("contacts.state", contacts.state.nx, nx), ("contacts.nu", contacts.nu, nu)]
    for name, got, expected in sizes:
        if got != expected:
            what = "nx" if name.endswith("state") else "nu"
            raise RbdgenError(f"{name} has {what} = {got}; the model's {what} is {expected} (state.nx, actuation.nu)")


def _check_armature(pm) -> None:
    if np.any(np.asarray(pm.armature) != 0.0):
        raise RbdgenError("state.pinocchio has a non-zero armature, which rbdgen's dynamics do not model; "
                          "use crocoddyl's built-in model or set armature to 0")


class _Base(crocoddyl.DifferentialActionModelAbstract):
    """Shared parts: actuation, costs, kinematics, terminal calc."""

    implementation = "python"

    def __init__(self, state, actuation, costs):
        crocoddyl.DifferentialActionModelAbstract.__init__(self, state, actuation.nu, costs.nr)
        _check_armature(state.pinocchio)
        self.actuation, self.costs = actuation, costs
        self.pm = state.pinocchio
        self.nq, self.nv = state.nq, state.nv
        self.kinematics = Kinematics(self.pm, costs)
        self.robot = robot_of(self.pm)
        #: constant actuation Jacobians: dtau_dx = 0 and dtau_du = I (full) or [0; I] (floating base)
        self.actuated = {"ActuationModelFull": 0, "ActuationModelFloatingBase": 6}.get(type(actuation).__name__)

    def _terminal_calc(self, data, x) -> None:
        q, v = _state_parts(self.state, x)
        pin.computeAllTerms(self.pm, data.pinocchio, q, v)   # the built-in models' terminal calc
        self._terminal_extra(data)
        self.costs.calc(data.costs, x)
        data.cost = data.costs.cost

    def _terminal_extra(self, data) -> None:
        pass

    def _control_jacobians(self, data, dx_dtau, Fx, Fu) -> None:
        """``Fx += dx_dtau dtau_dx`` and ``Fu = dx_dtau dtau_du``; with crocoddyl's full or
        floating-base actuation (dtau_dx = 0, dtau_du = [0; I]) ``Fu`` is columns of
        ``dx_dtau`` (the full actuation's kernel writes them into ``Fu`` itself)."""
        if self.actuated is None:
            Fx += dx_dtau @ data.dtau_dx
            np.matmul(dx_dtau, data.dtau_du, out=Fu)
        elif self.actuated:
            np.copyto(Fu, data.actuated_columns[id(dx_dtau)])

    def _actuation_diff(self, data, x, u) -> None:
        """crocoddyl's ``actuation.calcDiff``, but for the full and floating-base actuations,
        whose calcDiff is empty (their constant Jacobians are set in createData)."""
        if self.actuated is None:
            self.actuation.calcDiff(data.actuation, x, u)

    def _dtau(self, Fu, rows: int):
        """The array a kernel writes ``d(.)/dtau`` (``rows x nv``) into: ``Fu`` itself under
        the full actuation (``Fu = d(.)/dtau``), else a new F-ordered array."""
        return Fu if self.actuated == 0 else np.zeros((rows, self.nv), order="F")

    def _columns(self, data, *dtau) -> None:
        """The actuated columns of the ``d(.)/dtau`` arrays (views made once per data)."""
        data.actuated_columns = {id(a): a[:, self.actuated or 0:] for a in dtau}


class _Data(crocoddyl.DifferentialActionDataAbstract):
    """Pinocchio data, actuation, joint (and contact) data in crocoddyl's data collector,
    the cost data sharing this data's Lx, Lu, ..., and cached views of the arrays the
    kernels write (their memory is the Eigen storage, fixed for the data's lifetime)."""

    def __init__(self, model, contacts=None):
        crocoddyl.DifferentialActionDataAbstract.__init__(self, model)
        self.pinocchio = model.pm.createData()
        self.actuation = model.actuation.createData()
        joint = crocoddyl.JointDataAbstract(model.state, model.actuation, model.nu)
        if contacts is None:
            self.multibody = crocoddyl.DataCollectorJointActMultibody(self.pinocchio, self.actuation, joint)
        else:
            self.contacts = contacts.createData(self.pinocchio)
            self.multibody = crocoddyl.DataCollectorJointActMultibodyInContact(self.pinocchio, self.actuation, joint,
                                                                              self.contacts)
        self.joint = self.multibody.joint
        self.costs = model.costs.createData(self.multibody)
        self.costs.shareMemory(self)
        self.tau, self.dtau_dx, self.dtau_du = self.actuation.tau, self.actuation.dtau_dx, self.actuation.dtau_du
        self.xout_, self.Fx_, self.Fu_ = self.xout, self.Fx, self.Fu


class PythonDifferentialActionModelFreeFwdDynamics(_Base):
    """The Python model of crocoddyl's ``DifferentialActionModelFreeFwdDynamics(state,
    actuation, costs)`` on rbdgen's ``aba`` and ``aba_derivatives`` kernels (module
    docstring)."""

    def __init__(self, state, actuation, costs, constraints=None):
        _refuse_constraints(constraints)
        check_arguments(state, actuation, costs)
        _Base.__init__(self, state, actuation, costs)
        self.aba = kernel(self.pm, "aba")
        self.aba_derivatives = kernel(self.pm, "aba_derivatives")

    def createData(self):
        data = _Data(self)
        nv = self.nv
        data.Minv = self._dtau(data.Fu_, nv)
        self._columns(data, data.Minv)
        data.out_value = out_arrays(self.aba, {"ddq": data.xout_})
        data.out_derivatives = out_arrays(self.aba_derivatives, {"ddq_dq": data.Fx_[:, :nv],
                                                                 "ddq_dv": data.Fx_[:, nv:], "Minv": data.Minv})
        return data

    def calc(self, data, x, u=None):
        if u is None:
            return self._terminal_calc(data, x)
        q, v = x[:self.nq], x[self.nq:]
        self.actuation.calc(data.actuation, x, u)
        self.aba(q, v, data.tau, out=data.out_value)
        self.kinematics.calc(data.pinocchio, q, v, data.xout_)
        if self.kinematics.joint:
            data.joint.a = data.xout_
            data.joint.tau = u
        self.costs.calc(data.costs, x, u)
        data.cost = data.costs.cost

    def calcDiff(self, data, x, u=None):
        if u is None:
            return self.costs.calcDiff(data.costs, x)
        q, v = x[:self.nq], x[self.nq:]
        self._actuation_diff(data, x, u)
        self.aba_derivatives(q, v, data.tau, out=data.out_derivatives)
        self._control_jacobians(data, data.Minv, data.Fx_, data.Fu_)
        self.kinematics.calc_diff(data.pinocchio, q, v, data.xout_, tau=data.tau)
        if self.kinematics.joint:
            data.joint.da_dx = data.Fx_
            data.joint.da_du = data.Fu_
        self.costs.calcDiff(data.costs, x, u)

    def quasiStatic(self, data, x, maxiter=100, tol=1e-9):
        """The built-in model's: ``u = pinv(dtau_du) g(q)`` at ``v = 0``."""
        q = x[:self.nq]
        xs = np.concatenate([q, np.zeros(self.nv)])
        tau = pin.rnea(self.pm, data.pinocchio, q, np.zeros(self.nv), np.zeros(self.nv)).copy()
        u = np.zeros(self.nu)
        self.actuation.calc(data.actuation, xs, u)
        self.actuation.calcDiff(data.actuation, xs, u)
        data.pinocchio.tau[:] = 0.0
        return np.linalg.pinv(data.dtau_du) @ tau


def contact_set(robot, pm, contacts):
    """(rbdgen ConstraintSet, its cache key, the contact names in crocoddyl's row order)
    of the active contacts of a ``crocoddyl.ContactModelMultiple`` (module docstring)."""
    items = sorted((name, item) for name, item in contacts.contacts.todict().items() if item.active)
    if not items:
        raise RbdgenError("the ContactModelMultiple has no active contact; use DifferentialActionModelFreeFwdDynamics")
    tokens, gains = [], set()
    for name, item in items:
        c = item.contact
        cls = type(c).__name__
        kind = {"ContactModel3D": "3D", "ContactModel6D": "6D"}.get(cls)
        if kind is None:
            raise RbdgenError(f"contact '{name}': {cls} has no rbdgen constraint "
                              f"(ContactModel3D and ContactModel6D do)")
        if c.type != pin.ReferenceFrame.LOCAL:
            raise RbdgenError(f"contact '{name}': reference frame {c.type.name} is not supported; rbdgen's contact "
                              f"rows are pinocchio.LOCAL (build the contact with pinocchio.LOCAL)")
        tokens.append(f"{kind}:{pm.frames[c.id].name}")
        gains.add((float(c.gains[0]), float(c.gains[1])))
    if len(gains) > 1:
        raise RbdgenError(f"contacts have different Baumgarte gains {sorted(gains)}; rbdgen's constraint set has one "
                          f"(Kp, Kd) pair: give every contact the same gains")
    (Kp, Kd), = gains
    if Kp != 0.0:
        raise RbdgenError(f"contacts' Baumgarte position gain Kp = {Kp:g} is not supported (rbdgen's "
                          f"constrained_derivatives takes Kp = 0; Kd is supported): use gains [0, Kd]")
    return parse_constraints(robot, tokens, Kd=Kd), (tuple(tokens), Kd), [name for name, _ in items]


def damping_options(inv_damping: float) -> dict:
    """rbdgen options equal to crocoddyl's ``inv_damping`` (module docstring)."""
    eps = float(inv_damping)
    if not eps >= 0.0:
        raise RbdgenError(f"inv_damping {inv_damping} must be >= 0")
    return {} if eps == 0.0 else {"iterations": 1, "mu": eps}


class PythonDifferentialActionModelContactFwdDynamics(_Base):
    """The Python model of crocoddyl's ``DifferentialActionModelContactFwdDynamics(state,
    actuation, contacts, costs, inv_damping=0., enable_force=False)`` on rbdgen's
    ``prox_ltl`` and ``constrained_derivatives`` kernels (module docstring)."""

    def __init__(self, state, actuation, contacts, costs, inv_damping=0.0, enable_force=False, constraints=None):
        _refuse_constraints(constraints)
        check_arguments(state, actuation, costs, contacts)
        _Base.__init__(self, state, actuation, costs)
        self.contacts = contacts
        self.inv_damping, self.enable_force = float(inv_damping), bool(enable_force)
        self.cset, key, self.contact_names = contact_set(self.robot, self.pm, contacts)
        self.nc = self.cset.m
        options = damping_options(inv_damping)
        self.forward = kernel(self.pm, "prox_ltl", self.cset, key, **options)
        self.derivatives = kernel(self.pm, "constrained_derivatives", self.cset, key, **options)

    def createData(self):
        data = _Data(self, self.contacts)
        nv, nc = self.nv, self.nc
        data.lam = np.zeros(nc)
        data.ddq_dtau = self._dtau(data.Fu_, nv)
        named = {"ddq_dq": data.Fx_[:, :nv], "ddq_dv": data.Fx_[:, nv:], "ddq_dtau": data.ddq_dtau}
        if self.enable_force:            # else the force derivatives are outputs nothing reads
            data.df_dx = np.zeros((nc, 2 * nv), order="F")
            data.df_du = np.zeros((nc, self.nu), order="F")
            data.dlam_dtau = self._dtau(data.df_du, nc)
            named.update(dlam_dq=data.df_dx[:, :nv], dlam_dv=data.df_dx[:, nv:], dlam_dtau=data.dlam_dtau)
            self._columns(data, data.ddq_dtau, data.dlam_dtau)
        else:
            self._columns(data, data.ddq_dtau)
        data.out_value = out_arrays(self.forward, {"ddq": data.xout_, "lam": data.lam})
        data.out_derivatives = out_arrays(self.derivatives, named)
        return data

    def _terminal_extra(self, data) -> None:
        pin.computeCentroidalMomentum(self.pm, data.pinocchio)

    def calc(self, data, x, u=None):
        if u is None:
            return self._terminal_calc(data, x)
        q, v = x[:self.nq], x[self.nq:]
        self.actuation.calc(data.actuation, x, u)
        self.forward(q, v, data.tau, out=data.out_value)
        self.kinematics.calc(data.pinocchio, q, v, data.xout_)
        self.contacts.updateForce(data.contacts, data.lam)
        if self.kinematics.joint:
            data.joint.a = data.xout_
            data.joint.tau = u
        self.costs.calc(data.costs, x, u)
        data.cost = data.costs.cost

    def calcDiff(self, data, x, u=None):
        if u is None:
            return self.costs.calcDiff(data.costs, x)
        q, v = x[:self.nq], x[self.nq:]
        self._actuation_diff(data, x, u)
        self.derivatives(q, v, data.tau, out=data.out_derivatives)
        self._control_jacobians(data, data.ddq_dtau, data.Fx_, data.Fu_)
        if self.enable_force:
            self._control_jacobians(data, data.dlam_dtau, data.df_dx, data.df_du)
            self.contacts.updateAccelerationDiff(data.contacts, data.Fx_)
            self.contacts.updateForceDiff(data.contacts, data.df_dx, data.df_du)
        self.kinematics.calc_diff(data.pinocchio, q, v, data.xout_, fext=data.contacts.fext)
        if self.kinematics.joint:
            data.joint.da_dx = data.Fx_
            data.joint.da_du = data.Fu_
        self.costs.calcDiff(data.costs, x, u)

    def quasiStatic(self, data, x, maxiter=100, tol=1e-9):
        """The built-in model's: ``u`` from ``pinv([dtau_du, Jc^T]) g(q)`` at ``v = 0``."""
        q, zero = x[:self.nq], np.zeros(self.nv)
        xs = np.concatenate([q, zero])
        pd = data.pinocchio
        pin.computeAllTerms(self.pm, pd, q, zero)
        pin.computeJointJacobians(self.pm, pd, q)
        tau = pin.rnea(self.pm, pd, q, zero, zero).copy()
        u = np.zeros(self.nu)
        self.actuation.calc(data.actuation, xs, u)
        self.actuation.calcDiff(data.actuation, xs, u)
        self.contacts.calc(data.contacts, xs)
        J = np.hstack([data.dtau_du, data.contacts.Jc[:self.nc].T])
        pd.tau[:] = 0.0
        return (np.linalg.pinv(J) @ tau)[:self.nu]


# --- the compiled models ------------------------------------------------------------------

_EXTENSIONS: dict[int, tuple] = {}      # id(Kernel) -> (the kernel, its extension module)
#: why the compiled models are not available in this process ("" until a build failed)
_unavailable = {"why": ""}


class Unavailable(RbdgenError):
    """The compiled model cannot be built here (no compiler, no wheel headers, a compiler
    error): :func:`gen.crocoddyl_cpp.extension`'s reason."""


def _extension(kern):
    hit = _EXTENSIONS.get(id(kern))
    if hit is None or hit[0] is not kern:
        try:
            hit = _EXTENSIONS[id(kern)] = (kern, crocoddyl_cpp.extension(kern, progress=_say))
        except RbdgenError as e:
            raise Unavailable(str(e)) from None
    return hit[1]


def _say(message: str) -> None:
    """A compile of the extension speaks on stderr, as a kernel build does (it takes a
    minute or two); a cache hit is silent."""
    print(f"rbdgen: {message}", file=sys.stderr, flush=True)


def _finish(model, state, costs, kern, **attributes):
    k = Kinematics(state.pinocchio, costs)
    model.kinematics_velocity, model.kinematics_com, model.kinematics_full = k.velocity, k.com, k.full
    model.implementation, model.kernel = "compiled", kern
    for name, value in attributes.items():
        setattr(model, name, value)
    return model


def compiled_free_fwd_dynamics(state, actuation, costs, constraints=None):
    """The compiled model of crocoddyl's ``DifferentialActionModelFreeFwdDynamics(state,
    actuation, costs)`` (module docstring) on rbdgen's ``aba_derivatives`` kernel; raises
    :class:`Unavailable` when it cannot be built here."""
    _refuse_constraints(constraints)
    check_arguments(state, actuation, costs)
    pm = state.pinocchio
    _check_armature(pm)
    kern = folder_kernel(pm, "aba_derivatives")
    model = _extension(kern).DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
    return _finish(model, state, costs, kern, robot=robot_of(pm))


def compiled_contact_fwd_dynamics(state, actuation, contacts, costs, inv_damping=0.0, enable_force=False,
                                  constraints=None):
    """The compiled model of crocoddyl's ``DifferentialActionModelContactFwdDynamics(state,
    actuation, contacts, costs, inv_damping=0., enable_force=False)`` (module docstring) on
    rbdgen's ``constrained_derivatives`` kernel; raises :class:`Unavailable` when it cannot
    be built here."""
    _refuse_constraints(constraints)
    check_arguments(state, actuation, costs, contacts)
    pm = state.pinocchio
    _check_armature(pm)
    robot = robot_of(pm)
    cset, key, names = contact_set(robot, pm, contacts)
    kern = folder_kernel(pm, "constrained_derivatives", cset, key, **damping_options(inv_damping))
    model = _extension(kern).DifferentialActionModelContactFwdDynamics(state, actuation, contacts, costs,
                                                                        float(inv_damping), bool(enable_force))
    return _finish(model, state, costs, kern, robot=robot, cset=cset, contact_names=names, nc=cset.m,
                   inv_damping=float(inv_damping), enable_force=bool(enable_force))


def _compiled_or_none(make, *args):
    """``make(*args)``, or None (the Python model) when ``RBDGEN_CROCODDYL_MODELS=python``
    or the compiled model cannot be built here, which warns once per process."""
    if os.environ.get("RBDGEN_CROCODDYL_MODELS", "") == "python" or _unavailable["why"]:
        return None
    try:
        return make(*args)
    except Unavailable as e:
        _unavailable["why"] = str(e)
        warnings.warn(f"gen.crocoddyl: using the Python models ({e})", RuntimeWarning, stacklevel=3)
        return None


class DifferentialActionModelFreeFwdDynamics(PythonDifferentialActionModelFreeFwdDynamics):
    """crocoddyl's ``DifferentialActionModelFreeFwdDynamics(state, actuation, costs)`` on
    rbdgen's kernels: the compiled model where it can be built, else the Python model
    (module docstring)."""

    def __new__(cls, state, actuation, costs, constraints=None):
        if cls is DifferentialActionModelFreeFwdDynamics:
            model = _compiled_or_none(compiled_free_fwd_dynamics, state, actuation, costs, constraints)
            if model is not None:
                return model
        return super().__new__(cls)


class DifferentialActionModelContactFwdDynamics(PythonDifferentialActionModelContactFwdDynamics):
    """crocoddyl's ``DifferentialActionModelContactFwdDynamics(state, actuation, contacts,
    costs, inv_damping=0., enable_force=False)`` on rbdgen's kernels: the compiled model
    where it can be built, else the Python model (module docstring)."""

    def __new__(cls, state, actuation, contacts, costs, inv_damping=0.0, enable_force=False, constraints=None):
        if cls is DifferentialActionModelContactFwdDynamics:
            model = _compiled_or_none(compiled_contact_fwd_dynamics, state, actuation, contacts, costs, inv_damping,
                                      enable_force, constraints)
            if model is not None:
                return model
        return super().__new__(cls)
