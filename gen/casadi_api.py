"""rbdgen's dynamics as CasADi functions, for optimisers (issue 14 §1).

Two ways into a CasADi problem (an NLP, an integrator, an OCP):

* :func:`casadi_function` -- the traced SX graph (:mod:`gen.trace`) as a
  ``casadi.Function`` with the header's input and output names.  It evaluates what
  ``gen.run`` evaluates, can be called on SX or MX expressions (CasADi differentiates it
  by its own AD, inlines it with ``expand``, generates C from it), and serialises with
  ``f.save(path)`` / ``casadi.Function.load(path)``.
* :func:`casadi_external` -- the compiled C kernel of ``gen.build`` wrapped as a
  ``casadi.Callback`` whose Jacobian is the compiled C of the algorithm's derivative row
  (the registry row's ``jacobian``: ``aba`` -> ``aba_derivatives``, ``rnea``/``nle`` ->
  ``rnea_derivatives``, the constrained solvers -> ``constrained_derivatives``,
  ``impulse`` -> ``impulse_derivatives``), so that an NLP evaluates rbdgen's C and its
  analytical derivatives (Carpentier & Mansard, RSS 2018) instead of re-deriving them.

**Derivatives with respect to q.**  rbdgen's derivative kernels are in the tangent space
(Pinocchio's ``integrate``, :mod:`gen.configuration`): ``df/dq`` is ``d f(q (+) d) / d d``
at ``d = 0`` (nv columns).  CasADi differentiates with respect to the raw coordinates
(nq columns).  For robots whose joints are all revolute or prismatic (``nq == nv``,
``q (+) d = q + d``) the two coincide.  With a free-flyer, a spherical joint or a
continuous joint they are related by the tangent map ``T(q) = d integrate(q, d)/d d``
(nq x nv, :func:`gen.configuration.tangent_map`): the tangent-space derivative is
``jacobian(f, q) @ T(q)``.  The external reports, as its raw-coordinate Jacobian,
``df/dq_tangent @ pinv(T(q))``: at a unit quaternion ``pinv(T) = T^T (T^T T)^-1`` and this
is the Jacobian of ``f(normalise(q))``, i.e. zero along the quaternion's norm direction.
The SX function differentiates the algorithm's own formulas, whose value off the unit
sphere is not normalised; the two agree on every direction tangent to it (``J T``), so
normalise the quaternions you pass (as ``examples/trajopt`` does) and both give the same
derivatives.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from .algorithms import Algorithm
from .api import get_algorithm
from .backend import NUMPY
from .build import RETURN_CODES, Kernel, build
from .configuration import tangent_map
from .emit import constraint_info, symbol_prefix
from .errors import RbdgenError
from .model import Model
from .robots import load_robot
from .trace import trace

#: options that make a kernel an early-exit driver: data-dependent iteration counts have
#: no fixed graph (casadi_function) and no derivative kernel (casadi_external)
DRIVER_OPTIONS = ("tol", "max_iter")


def _resolve(robot, algorithm: str, constraints, options: dict):
    """(model, row, constraint set, checked options): the API's one resolution (gen.run)."""
    model = robot if isinstance(robot, Model) else load_robot(robot)
    algo = get_algorithm(algorithm)
    cset = algo.constraint_set(model, constraints)
    options = algo.check_options(options)
    driver = [k for k in DRIVER_OPTIONS if options.get(k) is not None]
    if driver:
        raise RbdgenError(f"{algo.name}: option {', '.join(driver)} builds the early-exit C driver, whose "
                          f"iteration count depends on the data; a CasADi function runs a fixed number of "
                          f"iterations: give iterations=K")
    return model, algo, cset, {k: v for k, v in options.items() if v is not None}


def _name(model: Model, algo: Algorithm, cset) -> str:
    return symbol_prefix(model.name, algo.name, constraint_info(cset)[0])


def casadi_function(robot, algorithm: str, constraints=None, *, name: str | None = None,
                    **options) -> ca.Function:
    """``algorithm`` on ``robot`` as a ``casadi.Function`` on SX (module docstring).

    Inputs and outputs carry the header's names and shapes (``q`` (nq x 1), ..., matrices
    rows x cols); ``name`` defaults to the kernel's symbol (``rbd_<robot>_<algorithm>...``).
    ``options`` as for ``gen.run`` (``iterations``, ``mu``, ...; not ``tol``).  The
    function's value equals ``gen.run``'s.  CasADi's AD of it is with respect to the raw
    coordinates; with a free-flyer, multiply the q-Jacobian by
    ``gen.configuration.tangent_map(model, q, be)`` to get rbdgen's (Pinocchio's)
    tangent-space derivative (module docstring).  Like any SX function it is ``save``-d
    and ``casadi.Function.load``-ed, called on MX inside an NLP, or ``expand``-ed."""
    model, algo, cset, options = _resolve(robot, algorithm, constraints, options)
    return trace(model, algo, cset, **options).function(name or _name(model, algo, cset))


# --- the compiled C as a CasADi callback ------------------------------------------------------

def _columns(spec) -> list[ca.Sparsity]:
    return [ca.Sparsity.dense(n, 1) for _, n in spec]


class _Call:
    """One compiled kernel called on CasADi's buffers: inputs and outputs are dense,
    column-major (the kernel's layout), so they pass through without copies."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.work = np.empty(max(1, kernel.work_size))
        self.outs = [np.empty(o["size"]) for o in kernel.function["outputs"]]

    def __call__(self, ins: list[np.ndarray]) -> list[np.ndarray]:
        rc = self.kernel.call_raw(ins, self.outs, self.work)
        if rc != 0:
            raise RbdgenError(f"{self.kernel.symbol} returned {rc}: {RETURN_CODES.get(rc, 'unknown error')}")
        return self.outs


class _Jacobian(ca.Callback):
    """The Jacobian of an :class:`ExternalFunction` in CasADi's layout: inputs the
    nominal inputs then the nominal outputs, outputs ``jac_<out>_<in>`` (numel(out) x
    numel(in)), dense for the differentiated outputs, structurally zero for diagnostics."""

    def __init__(self, name: str, parent: "ExternalFunction", inames, onames, opts):
        ca.Callback.__init__(self)
        self.parent = parent
        p = parent
        self.nin, self.nout = len(p.ins), len(p.outs)
        self.inames, self.onames = list(inames), list(onames)
        self.sp_in = _columns(p.ins) + [ca.Sparsity.dense(r, c) for _, r, c in p.outs]
        self.sp_out = []
        for oname, r, c in p.outs:
            for iname, n in p.ins:
                diff = oname in p.blocks
                self.sp_out.append(ca.Sparsity.dense(r * c, n) if diff else ca.Sparsity(r * c, n))
        self.construct(name, dict(opts))

    def get_n_in(self):
        return len(self.sp_in)

    def get_n_out(self):
        return len(self.sp_out)

    def get_name_in(self, i):
        return self.inames[i]

    def get_name_out(self, i):
        return self.onames[i]

    def get_sparsity_in(self, i):
        return self.sp_in[i]

    def get_sparsity_out(self, i):
        return self.sp_out[i]

    def has_eval_buffer(self):
        return True

    def eval_buffer(self, arg, res):
        p = self.parent
        ins = [np.frombuffer(arg[i], dtype=float) for i in range(self.nin)]
        derivs = dict(zip(p.jac_names, p._jac_run(ins + p.extra)))
        chart = p.chart(ins[0]) if p.chart is not None else None
        k = 0
        for oname, _, _ in p.outs:
            for j, (iname, n) in enumerate(p.ins):
                if oname in p.blocks and res[k] is not None:      # None: not requested
                    spec = p.jac_shapes[p.blocks[oname][j]]
                    D = derivs[p.blocks[oname][j]].reshape(spec, order="F")
                    if j == 0 and chart is not None:
                        D = D @ chart
                    out = np.frombuffer(res[k], dtype=float)
                    out[:] = D.reshape(-1, order="F")
                k += 1
        return 0


class ExternalFunction(ca.Callback):
    """A compiled rbdgen kernel as a CasADi function (see :func:`casadi_external`)."""

    def __init__(self, name: str, kernel: Kernel, jac_kernel: Kernel | None, blocks: dict, opts=None):
        ca.Callback.__init__(self)
        self.kernel, self.jac_kernel = kernel, jac_kernel
        model, algo, cset = kernel.model, kernel.algorithm, kernel.cset
        self.model = model
        self.ins = algo.inputs(model, cset)
        self.outs = algo.outputs(model, cset)
        self._run = _Call(kernel)
        self.blocks = blocks
        self._jac_run = _Call(jac_kernel) if jac_kernel is not None else None
        if jac_kernel is not None:
            jrow = jac_kernel.algorithm
            jins = jrow.inputs(model, jac_kernel.cset)
            self.extra = [np.zeros(n) for _, n in jins[len(self.ins):]]     # e.g. a = 0 for nle
            self.jac_names = [o["name"] for o in jac_kernel.function["outputs"]]
            self.jac_shapes = {o["name"]: (o["rows"], o["cols"]) for o in jac_kernel.function["outputs"]}
        # raw-coordinate Jacobian from the tangent one: D pinv(T(q)) (module docstring)
        self.chart = None if model.nq == model.nv else self._chart
        self._jacobians = []                       # keep CasADi's Jacobian callbacks alive
        self.construct(name, dict(opts or {}))

    def _chart(self, q: np.ndarray) -> np.ndarray:
        return np.linalg.pinv(np.asarray(tangent_map(self.model, q.reshape(-1, 1), NUMPY)))

    def get_n_in(self):
        return len(self.ins)

    def get_n_out(self):
        return len(self.outs)

    def get_name_in(self, i):
        return self.ins[i][0]

    def get_name_out(self, i):
        return self.outs[i][0]

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.ins[i][1], 1)

    def get_sparsity_out(self, i):
        _, r, c = self.outs[i]
        return ca.Sparsity.dense(r, c)

    def has_eval_buffer(self):
        return True

    def eval_buffer(self, arg, res):
        ins = [np.frombuffer(arg[i], dtype=float) for i in range(len(self.ins))]
        for k, o in enumerate(self._run(ins)):
            if res[k] is not None:                 # None: output not requested
                np.frombuffer(res[k], dtype=float)[:] = o
        return 0

    def has_jacobian(self):
        return self._jac_run is not None

    def get_jacobian(self, name, inames, onames, opts):
        jac = _Jacobian(name, self, inames, onames, opts)
        self._jacobians.append(jac)
        return jac


def casadi_external(robot, algorithm: str, constraints=None, *, name: str | None = None, flags=None,
                    cache=None, progress=None, **options) -> ExternalFunction:
    """The compiled C of ``gen.build(robot, algorithm, constraints, **options)`` as a
    CasADi function (a ``casadi.Callback``: call it on DM, or on MX inside an NLP), whose
    Jacobian is the compiled C of the row's derivative row (registry ``jacobian``;
    module docstring), built with the same ``iterations``/``mu``/``restitution``.

    Inputs and outputs as :func:`casadi_function`.  The Jacobian with respect to q is in
    raw coordinates: ``D_tangent @ pinv(T(q))`` (equal to the tangent one when
    ``nq == nv``; module docstring).  Outputs without a derivative (a solver's
    ``iterations`` and ``residual``) have a structurally zero Jacobian: do not put them in
    a constraint.  A row without a derivative row (``crba``, ``minv``, the Delassus
    family, ...) gives a function without a Jacobian: CasADi refuses to differentiate
    it.  The callback runs Python around each C call (a few microseconds); keep the
    returned object alive while CasADi functions built on it are in use; it is not
    serialisable (use :func:`casadi_function` for that) and not thread-safe (one
    workspace)."""
    model, algo, cset, options = _resolve(robot, algorithm, constraints, options)
    if options.get("runtime_params"):
        raise RbdgenError(f"{algo.name}: the derivative kernels take mu and the gains built in, so the compiled "
                          f"callback does too: build it without runtime_params (casadi_function takes them)")
    kw = dict(flags=flags, cache=cache, progress=progress)
    kernel = build(model, algo.name, cset, **kw, **options)
    jac_kernel, blocks = None, {}
    if algo.jacobian is not None:
        jrow = get_algorithm(algo.jacobian.row)
        known = {o.name for o in jrow.options}
        jac_kernel = build(model, jrow.name, cset, **kw, **{k: v for k, v in options.items() if k in known})
        blocks = algo.jacobian.blocks
    return ExternalFunction(name or _name(model, algo, cset) + "_external", kernel, jac_kernel, blocks)
