"""rbdgen's dynamics as CasADi functions, for optimisers (issue 14 §1).

Two ways into a CasADi problem (an NLP, an integrator, an OCP):

* :func:`casadi_function` -- the traced SX graph (:mod:`gen.trace`) as a
  ``casadi.Function`` with the header's input and output names.  It evaluates what
  ``gen.run`` evaluates, can be called on SX or MX expressions (CasADi differentiates it
  by its own AD, inlines it with ``expand``, generates C from it), and serialises with
  ``f.save(path)`` / ``casadi.Function.load(path)``.
* :func:`casadi_external` -- the compiled C kernel of ``gen.build`` loaded by
  ``casadi.external`` from a plain shared library (:func:`casadi_library`) that speaks
  CasADi's external-function C API: no Python runs in a call.  Its Jacobian
  ``jac_<name>`` is the compiled C of the algorithm's derivative row (the registry row's
  ``jacobian``: ``aba`` -> ``aba_derivatives``, ``rnea``/``nle`` -> ``rnea_derivatives``,
  the constrained solvers -> ``constrained_derivatives``, ``impulse`` ->
  ``impulse_derivatives``), so that an NLP evaluates rbdgen's C and its analytical
  derivatives (Carpentier & Mansard, RSS 2018) instead of re-deriving them.

**The library.**  Every scalar build folder has ``P_casadi.c``
(:func:`gen.emit.casadi_context`): the value entry ``P_casadi`` with ``_n_in``,
``_sparsity_in``, ``_work``, ``_checkout``, ... (dense column-major, every symbol
prefixed), so the library ``make`` or CMake builds from any folder is loadable with
``casadi.external("P_casadi", "libP.so")`` (as a shared library), without a Jacobian.
``jac_P_casadi`` calls the derivative kernel, whose code lives in another build folder,
so :func:`casadi_library` (``rbdgen build --casadi``) compiles ONE shared library from
both folders' wrapper and kernel files and ``P_casadi.c`` rendered with the Jacobian
(the folders come from :func:`gen.build.build_folder`: cached, emitted, not compiled by
cffi, so each kernel is compiled once, into the library);
it holds both kernels' public functions too (``P`` and ``P_derivatives``, the same code
as their own builds').  Nothing in it keeps state: a call's scratch (the derivative
kernel's outputs, its work, the chart below) is in CasADi's ``w``, so the function runs
in ``Function.map(N, "thread", k)`` (one ``w`` per thread), in ``nlpsol``, and in the C
that ``Function.generate`` writes for a function calling it (link the library).
``jac_<name>``'s outputs ``jac_<out>_<in>`` have the structural pattern of the value
function's Jacobian (CasADi's ``jac_sparsity`` of the traced graph, the q blocks widened
by the chart below): the same pattern an NLP gets from :func:`casadi_function`, so a
solver that factorises by pattern (IPOPT) takes the same path with either; the outputs
the derivative row does not differentiate (a solver's ``iterations`` and ``residual``)
are structurally zero.

**Second derivatives** (``hessian=True``, ``aba``; free-flyer, revolute, prismatic and
helical joints).  CasADi
builds the Hessian of a Lagrangian (``nlpsol``'s default exact Hessian, ``casadi.hessian``)
by reverse mode, then the Jacobian of that gradient.  For an external it looks both up in
the library by name: ``adj1_<name>`` (inputs: the nominal inputs, the nominal outputs
``out_ddq``, the seed ``adj_ddq``; outputs ``adj_q``, ``adj_v``, ``adj_tau``) and
``jac_adj1_<name>`` (the jac convention on ``adj1_<name>``).  With ``jac_<name>`` alone
the reverse mode is formed from the Jacobian, but its Jacobian is not: ``nlpsol`` fails
with "Derivatives cannot be calculated for jac_<name>" (found on a two-input external
with CasADi 3.8: the Hessian function of an NLP over it calls ``<name>``,
``adj1_<name>`` and ``jac_adj1_<name>``, and asks ``jac_adj1_<name>`` only for the
blocks with respect to the variables).  The library then holds ``<name>_hessian.c``
(``gen/templates/casadi_hessian.c.j2``): ``adj1_<name>`` is ``lam^T`` of the compiled
``aba_derivatives``, and ``jac_adj1_<name>``'s blocks come from the compiled
``aba_hessian_product`` (``h_qq``, ``h_qv``, ``h_qtau`` and their transposes) and, with
respect to the seed, from ``aba_derivatives`` (the transposed first derivatives).  Each
kernel runs only when a block it gives is wanted.  Each block has the structural pattern
of the traced graph's Hessian (of ``lam^T ddq(normalise(q))``).  With a free-flyer the
q blocks are in raw coordinates, as ``jac_<name>``'s: the Hessian of
``lam^T ddq(normalise(q))``, i.e. ``P^T h_qq P`` plus the chart's second-order term
(:func:`_hessian_chart`), equal to ``casadi.hessian`` of the SX graph called on
normalised quaternions.  Spherical, planar and continuous joints are refused in one line
(their charts' second-order terms are not written).

**Derivatives with respect to q.**  rbdgen's derivative kernels are in the tangent space
(Pinocchio's ``integrate``, :mod:`gen.configuration`): ``df/dq`` is ``d f(q (+) d) / d d``
at ``d = 0`` (nv columns).  CasADi differentiates with respect to the raw coordinates
(nq columns).  For robots whose joints are all revolute or prismatic (``nq == nv``,
``q (+) d = q + d``) the two coincide.  With a free-flyer, a spherical joint or a
continuous joint they are related by the tangent map ``T(q) = d integrate(q, d)/d d``
(nq x nv, :func:`gen.configuration.tangent_map`): the tangent-space derivative is
``jacobian(f, q) @ T(q)``.  The external reports, as its raw-coordinate Jacobian,
``df/dq_tangent @ pinv(T(q))`` (computed in its C: ``pinv(T)`` block by joint, traced
from :func:`gen.configuration.tangent_map` and written by :mod:`gen.cwriter`): at a unit quaternion ``pinv(T) = T^T (T^T T)^-1`` and this
is the Jacobian of ``f(normalise(q))``, i.e. zero along the quaternion's norm direction.
The SX function differentiates the algorithm's own formulas, whose value off the unit
sphere is not normalised; the two agree on every direction tangent to it (``J T``), so
normalise the quaternions you pass (as ``examples/trajopt`` does) and both give the same
derivatives.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import casadi as ca
import numpy as np

from .algorithms import Algorithm
from .api import get_algorithm
from .backend import SXBackend
from .build import Patient, build_folder, compile_flags, compile_shared
from .configuration import tangent_map
from .cwriter import write_functions
from .emit import (STAMP, BuildFolder, _environment, casadi_context, casadi_name, constraint_info, render_casadi,
                   symbol_prefix)
from .errors import RbdgenError
from .model import Model
from .robots import load_robot
from .spatial import quat_rotation
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


# --- the compiled C through CasADi's external-function API ---------------------------------

def _pinv_tangent(model: Model, q: ca.SX) -> ca.SX:
    """``P(q) = pinv(T(q))`` (nv x nq) on SX, block by joint (:func:`_chart`)."""
    T = tangent_map(model, q, SXBackend())
    P = ca.SX(model.nv, model.nq)
    for b in model.bodies:
        if b.nv == 0:                                  # a mimic joint: no coordinate of its own
            continue
        blocks = [(b.idx_q, b.idx_v, 3, 3), (b.idx_q + 3, b.idx_v + 3, 4, 3)] if b.kind == "free" else \
            [(b.idx_q, b.idx_v, b.nq, b.nv)]
        for r, c, nr, nc in blocks:
            B = T[r:r + nr, c:c + nc]
            P[c:c + nc, r:r + nr] = ca.solve(B.T @ B, B.T)
    return P


def _chart(model: Model, fname: str) -> dict:
    """The raw-coordinate chart of the Jacobian's q block (module docstring) as C:
    ``static void fname(arg, res)`` writing the nonzeros of ``P(q) = pinv(T(q))`` (nv x
    nq, compressed columns ``colind``/``row``), the pseudo-inverse taken joint by joint
    (T is block diagonal: a free-flyer's translation block R(quat), its quaternion block,
    each other joint's), so P stays as sparse as T."""
    q = ca.SX.sym("q", model.nq)
    P = _pinv_tangent(model, q)
    f = ca.Function(fname, [q], [P])
    code, _ = write_functions([f], static=True)
    sp = P.sparsity()
    return {"fn": fname, "code": code.replace("#include <math.h>\n", "", 1).strip(),
            "colind": [int(k) for k in sp.colind()], "row": [int(k) for k in sp.row()],
            "nq": model.nq, "nv": model.nv}


def _q_groups(model: Model) -> list[range]:
    """The raw coordinates of q that the chart ``pinv(T(q))`` mixes (its diagonal blocks:
    a free-flyer's translation and its quaternion, each other joint's coordinates)."""
    groups = []
    for b in model.bodies:
        if b.nq:
            groups += [range(b.idx_q, b.idx_q + 3), range(b.idx_q + 3, b.idx_q + 7)] if b.kind == "free" else \
                [range(b.idx_q, b.idx_q + b.nq)]
    return groups


def _structure(folder: BuildFolder, model: Model, algo: Algorithm, cset, options: dict) -> dict:
    """``{"<out>|<in>": [colind, row]}``: the structural pattern of each Jacobian block of
    the value function (CasADi's ``jac_sparsity`` of the traced graph; IPOPT's KKT
    factorisation follows the pattern it is given, so dense blocks change its path).  The
    q blocks of a chart (``nq != nv``) are widened to every coordinate of a chart group
    that any of them touches: ``D pinv(T)`` mixes a group's columns.  Kept beside the
    cached build folder (tracing once)."""
    path = folder.path / "casadi_jacobian_structure.json"
    if path.exists():
        return json.loads(path.read_text())
    f = trace(model, algo.name, cset, **options).function("value")
    names_in, names_out = f.name_in(), f.name_out()
    groups = _q_groups(model) if model.nq != model.nv else []
    out = {}
    for o, blocks in algo.jacobian.blocks.items():
        oi = names_out.index(o)
        for i, iname in enumerate(names_in):
            sp = f.jac_sparsity(oi, i)
            if iname == "q" and groups:
                dense = np.array(ca.DM(sp, 1.0)) != 0
                for g in groups:
                    dense[:, g.start:g.stop] = dense[:, g.start:g.stop].any(axis=1, keepdims=True)
                sp = ca.sparsify(ca.DM(dense.astype(float))).sparsity()
            out[f"{o}|{iname}"] = [[int(k) for k in sp.colind()], [int(k) for k in sp.row()]]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)
    return out


def _sources(folder: BuildFolder) -> dict[str, str]:
    """A scalar build folder's header, wrapper and kernel files (not its ``P_casadi.c``)."""
    m = folder.manifest
    casadi_file = f"{casadi_name(folder.prefix)}.c"
    names = [m["header"], *(s for s in m["sources"] if s != casadi_file)]
    return {n: folder.files[n] for n in names}


# --- second derivatives: adj1_<name> and jac_adj1_<name> (nlpsol's exact Hessian) --------

#: the blocks of jac_adj1_<name>: (adj output, input) -> (kernel, its output, transposed);
#: absent: structurally zero (ddq is affine in tau; nothing depends on out_ddq)
HESSIAN_SOURCES = {
    ("adj_q", "q"): ("hessian", "h_qq", False), ("adj_q", "v"): ("hessian", "h_qv", False),
    ("adj_q", "tau"): ("hessian", "h_qtau", False), ("adj_v", "q"): ("hessian", "h_qv", True),
    ("adj_v", "v"): ("hessian", "h_vv", False), ("adj_tau", "q"): ("hessian", "h_qtau", True),
    ("adj_q", "adj_ddq"): ("first", "ddq_dq", True), ("adj_v", "adj_ddq"): ("first", "ddq_dv", True),
    ("adj_tau", "adj_ddq"): ("first", "Minv", True)}
#: with a chart (nq != nv): the blocks that involve q's raw coordinates come from the
#: chart functions of :func:`_hessian_chart` instead
CHART_SOURCES = {
    ("adj_q", "q"): ("chart_h", "Bqq", False), ("adj_q", "v"): ("chart_h", "Bqv", False),
    ("adj_q", "tau"): ("chart_h", "Bqt", False), ("adj_v", "q"): ("chart_h", "Bvq", False),
    ("adj_tau", "q"): ("chart_h", "Btq", False), ("adj_q", "adj_ddq"): ("chart_d", "Bqa", False)}
#: the kernel each source needs run first
NEEDS = {"first": "first", "chart_d": "first", "hessian": "hessian", "chart_h": "hessian"}
ADJ_OUTPUTS = ("adj_q", "adj_v", "adj_tau")
ADJ_INPUTS = ("q", "v", "tau", "out_ddq", "adj_ddq")


def _hessian_structure(folder: BuildFolder, model: Model) -> dict:
    """``{"<adj>|<in>": [colind, row]}``: the structural pattern of each block of the
    Jacobian of the gradient of ``lam^T aba(q, v, tau)`` on the traced graph (what
    ``casadi.hessian`` of the SX function gives), kept beside the Hessian kernel's folder."""
    path = folder.path / "casadi_hessian_structure.json"
    if path.exists():
        return json.loads(path.read_text())
    f = trace(model, "aba", None).function("value")
    x = {k: ca.SX.sym(k, model.nq if k == "q" else model.nv) for k in ("q", "v", "tau", "adj_ddq")}
    lagrangian = ca.dot(x["adj_ddq"], f(normalised(model, x["q"]), x["v"], x["tau"]))
    out = {}
    for o, i in zip(ADJ_OUTPUTS, ("q", "v", "tau")):
        g = ca.gradient(lagrangian, x[i])
        for k in ADJ_INPUTS:
            sp = ca.Sparsity(g.shape[0], model.nv) if k == "out_ddq" else ca.jacobian_sparsity(g, x[k])
            out[f"{o}|{k}"] = [[int(c) for c in sp.colind()], [int(r) for r in sp.row()]]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)
    return out


def normalised(model: Model, q):
    """q with each free-flyer's quaternion scaled to unit norm: the function whose raw
    derivatives the external reports (module docstring)."""
    parts, at = [], 0
    for b in model.bodies:
        if b.kind == "free":
            quat = q[b.idx_q + 3:b.idx_q + 7]
            parts += [q[at:b.idx_q + 3], quat / ca.norm_2(quat)]
            at = b.idx_q + 7
    return ca.vertcat(*parts, q[at:]) if parts else q


def _quat_mul(a, b):
    """Hamilton product of quaternions (x y z w)."""
    av, bv = a[0:3], b[0:3]
    return ca.vertcat(a[3] * bv + b[3] * av + ca.cross(av, bv), a[3] * b[3] - ca.dot(av, bv))


def _integrate2(model: Model, q, d):
    """``integrate(q, d)`` to second order in d (so its Hessian at d = 0 is exact): a
    free-flyer's SE(3) exponential ``p + R (v + w x v / 2)``, ``quat (x) (w / 2, 1 - |w|^2 / 8)``
    (:func:`gen.configuration.integrate`'s Taylor branch); revolute, prismatic, helical
    ``q + d``."""
    out = [q[k] for k in range(model.nq)]
    for b in model.bodies:
        iq, iv = b.idx_q, b.idx_v
        if b.kind == "free":
            v, w = d[iv:iv + 3], d[iv + 3:iv + 6]
            quat = q[iq + 3:iq + 7]
            R = ca.SX(3, 3)
            Rl = quat_rotation(quat[0], quat[1], quat[2], quat[3], SXBackend())
            for r in range(3):
                for c in range(3):
                    R[r, c] = Rl[r, c]
            p = q[iq:iq + 3] + R @ (v + 0.5 * ca.cross(w, v))
            qq = _quat_mul(quat, ca.vertcat(0.5 * w, 1 - ca.dot(w, w) / 8))
            out[iq:iq + 7] = [p[k] for k in range(3)] + [qq[k] for k in range(4)]
        elif b.nq:
            out[iq] = q[iq] + d[iv]
    return ca.vertcat(*out)


def _hessian_chart(model: Model, name: str) -> dict:
    """The raw-coordinate blocks of jac_adj1_<name> with a free-flyer, as C (static
    functions written by :mod:`gen.cwriter`).  The external is F(q) = lam^T ddq(normalise(q))
    (module docstring); with the chart delta(q') = the tangent coordinates of normalise(q')
    about q (``integrate(q, delta(q')) = normalise(q')``), P = d delta/dq' = pinv(T(q)) and

        d2F/dq2 = P^T H P + sum_k g_k d2 delta_k/dq2,
        sum_k g_k d2 delta_k/dq2 = d2 (w^T normalise)/dq2 - P^T d2 (w^T integrate(q, .))/dd2 P,

    ``H`` the chart Hessian (h_qq), ``g`` the tangent gradient (g_q), ``w = P^T g`` (the
    second line: differentiate ``integrate(q, delta(q')) = normalise(q')`` twice and apply
    P, a left inverse of T).  ``<name>_chart_h(q, h_qq, h_qv, h_qtau, g_q)`` gives that
    block (symmetrised), ``P^T h_qv``, ``P^T h_qtau`` and the transposes' ``h_qv^T P``,
    ``h_qtau^T P``; ``<name>_chart_d(q, ddq_dq, lam)`` gives ``(ddq_dq P)^T`` and
    ``P^T ddq_dq^T lam`` (adj_q).  All outputs dense, column-major."""
    nq, nv = model.nq, model.nv
    q = ca.SX.sym("q", nq)
    P = _pinv_tangent(model, q)
    H, Hqv, Hqt = (ca.SX.sym(n, nv, nv) for n in ("h_qq", "h_qv", "h_qtau"))
    g, lam = ca.SX.sym("g_q", nv), ca.SX.sym("lam", nv)
    Dq = ca.SX.sym("ddq_dq", nv, nv)
    w = P.T @ g
    qp, d = ca.SX.sym("qp", nq), ca.SX.sym("d", nv)
    S_norm = ca.substitute(ca.hessian(ca.dot(w, normalised(model, qp)), qp)[0], qp, q)
    S_int = ca.substitute(ca.hessian(ca.dot(w, _integrate2(model, q, d)), d)[0], d, ca.DM.zeros(nv))
    Bqq = P.T @ H @ P + S_norm - P.T @ S_int @ P
    Bqq = 0.5 * (Bqq + Bqq.T)
    outs_h = {"Bqq": Bqq, "Bqv": P.T @ Hqv, "Bqt": P.T @ Hqt, "Bvq": Hqv.T @ P, "Btq": Hqt.T @ P}
    outs_d = {"Bqa": (Dq @ P).T, "adjq": P.T @ (Dq.T @ lam)}
    fh = ca.Function(f"{name}_chart_h", [q, H, Hqv, Hqt, g], [ca.densify(x) for x in outs_h.values()])
    fd = ca.Function(f"{name}_chart_d", [q, Dq, lam], [ca.densify(x) for x in outs_d.values()])
    code, _ = write_functions([fh, fd], static=True)
    hwhere, hoffs, hsize = _packed((k, x.numel()) for k, x in outs_h.items())
    dwhere, doffs, dsize = _packed((k, x.numel()) for k, x in outs_d.items())
    return {"code": code.replace("#include <math.h>\n", "", 1).strip(), "fh": fh.name(), "fd": fd.name(),
            "h_where": hwhere, "h_offsets": hoffs, "h_size": hsize,
            "d_where": dwhere, "d_offsets": doffs, "d_size": dsize}


def _packed(sizes) -> tuple[dict[str, int], list[int], int]:
    """Arrays ``(name, size)`` packed one after another: name -> offset, the offsets, the
    total (a kernel's outputs, the chart functions' outputs, in ``w``)."""
    where, offset = {}, 0
    for name, size in sizes:
        where[name] = offset
        offset += size
    return where, list(where.values()), offset


def _hessian_context(name: str, model: Model, dfolder: BuildFolder, hfolder: BuildFolder) -> dict:
    """The ``h`` context of ``casadi_hessian.c.j2`` (``adj1_<name>``, ``jac_adj1_<name>``)."""
    nq, nv = model.nq, model.nv
    dfn, hfn = dfolder.manifest["functions"][0], hfolder.manifest["functions"][0]
    dwhere, doffs, dbuf = _packed((y["name"], y["size"]) for y in dfn["outputs"])
    hwhere, hoffs, hbuf = _packed((y["name"], y["size"]) for y in hfn["outputs"])
    chart = _hessian_chart(model, name) if nq != nv else None
    # w: first kernel's outputs | its work | Hessian kernel's outputs | its work | chart_h | chart_d
    base = {"first": 0}
    base["hessian"] = dbuf + dfn["work_size"]
    base["chart_h"] = base["hessian"] + hbuf + hfn["work_size"]
    base["chart_d"] = base["chart_h"] + (chart["h_size"] if chart else 0)
    sz_w = base["chart_d"] + (chart["d_size"] if chart else 0)
    where = {"first": dwhere, "hessian": hwhere, "chart_h": chart and chart["h_where"],
             "chart_d": chart and chart["d_where"]}
    sources = {**HESSIAN_SOURCES, **(CHART_SOURCES if chart else {})}
    size = {"q": nq, "adj_q": nq}
    structure = _hessian_structure(hfolder, model)
    patterns: dict[tuple, str] = {}

    def pattern(data: tuple) -> str:
        return patterns.setdefault(data, f"{name}_hsp{len(patterns)}")

    blocks = []
    for o in ADJ_OUTPUTS:
        for i in ADJ_INPUTS:
            rows, cols = size.get(o, nv), size.get(i, nv)
            colind, row = structure[f"{o}|{i}"]
            src = sources.get((o, i))
            if src is None and colind[-1]:
                raise RbdgenError(f"{name}: the graph's d {o} / d {i} is not zero, but no kernel gives it")
            b = {"index": len(blocks), "name": f"jac_{o}_{i}", "sp": pattern((rows, cols, *colind, *row)),
                 "kernel": None, "gather": None}
            if src is not None and colind[-1]:
                kernel, output, transposed = src
                cells = [(r, c) for c in range(cols) for r in row[colind[c]:colind[c + 1]]]
                b.update(kernel=kernel, src=base[kernel] + where[kernel][output],
                         what=f"{output}{'^T' if transposed else ''}",
                         gather=[c + cols * r if transposed else r + rows * c for r, c in cells])
            blocks.append(b)

    def cond(*kernels: str) -> str:
        return " || ".join(f"res[{b['index']}]" for b in blocks if b["kernel"] in kernels) or "0"

    vec = {n: f"{name}_hvec{n}" for n in sorted({nq, nv})}
    ins = [{"name": x, "sp": vec[size.get(x, nv)]} for x in ADJ_INPUTS]
    return {"name": name, "file": f"{name}_hessian.c", "nq": nq, "nv": nv, "vectors": sorted(vec.items()),
            "value_symbol": symbol_prefix(model.name, "aba"),
            "deriv_symbol": dfn["symbol"], "deriv_header": dfolder.manifest["header"],
            "deriv_offsets": doffs, "deriv_buffer": dbuf, "deriv_work": dfn["work_size"],
            "hess_symbol": hfn["symbol"], "hess_header": hfolder.manifest["header"],
            "hess_offsets": hoffs, "hess_buffer": hbuf, "hess_work": hfn["work_size"], "base": base,
            "chart": chart, "hess_outputs": {y["name"]: base["hessian"] + hwhere[y["name"]] for y in hfn["outputs"]},
            "adj_inputs": ins, "adj_outputs": [{"name": o, "sp": vec[size.get(o, nv)]} for o in ADJ_OUTPUTS],
            "jac_inputs": ins + [{"name": f"out_{o}", "sp": vec[size.get(o, nv)]} for o in ADJ_OUTPUTS],
            "blocks": blocks, "patterns": [{"name": v, "data": list(k)} for k, v in patterns.items()],
            "first_cond": cond("first", "chart_d"), "hess_cond": cond("hessian", "chart_h"),
            "chart_h_cond": cond("chart_h"), "chart_d_cond": cond("chart_d"),
            "adj1_w": dbuf + dfn["work_size"] if chart is None else sz_w, "sz_w": sz_w}


def _render_hessian(h: dict) -> str:
    """The text of ``casadi_hessian.c.j2`` (the build folders' template environment)."""
    return _environment().get_template("casadi_hessian.c.j2").render(stamp=STAMP, h=h)


def _hessian_refusal(model: Model, algo: Algorithm, cset) -> str | None:
    """Why ``hessian=True`` cannot be served (None: it can)."""
    if algo.name != "aba" or cset is not None:
        return (f"{algo.name}: hessian=True is for aba (its second-order row is aba_hessian_product); "
                f"use the limited-memory Hessian")
    other = sorted({b.kind for b in model.bodies if b.nq and b.kind not in ("free", "revolute", "prismatic", "helical")})
    if other:
        return (f"{model.name}: hessian=True takes free-flyer, revolute, prismatic and helical joints; the "
                f"raw-coordinate Hessian of {', '.join(other)} joints is not built: use casadi_function's exact "
                f"Hessian or the limited-memory one")
    return None


def casadi_library(robot, algorithm: str, constraints=None, *, name: str | None = None, flags=None,
                   cache=None, progress=None, hessian: bool = False,
                   **options) -> tuple[str, Path, dict[str, str]]:
    """``(name, library, files)``: the shared library that serves ``algorithm`` on
    ``robot`` to ``casadi.external(name, library)`` (module docstring), compiled from
    ``files`` (file name -> text: both kernels' headers, wrappers and kernels, and
    ``<name>_jacobian.c``; ``<name>.c`` for a row without a derivative row) and cached
    (:func:`gen.build.compile_shared`).  ``name`` defaults to ``P_casadi`` (``P`` the
    kernel's prefix) and must be a C identifier; the Jacobian is ``jac_<name>`` when the
    row has a derivative row; ``hessian=True`` adds ``<name>_hessian.c`` (module
    docstring).  Options as :func:`casadi_external`."""
    model, algo, cset, options = _resolve(robot, algorithm, constraints, options)
    if hessian and (why := _hessian_refusal(model, algo, cset)):
        raise RbdgenError(why)
    if options.get("runtime_params"):
        raise RbdgenError(f"{algo.name}: the derivative kernels take mu and the gains built in, so the CasADi "
                          f"external does too: build it without runtime_params (casadi_function takes them)")
    # one progress for the whole request: a library compile of minutes speaks (gen.build.Patient)
    progress = progress or Patient(time.perf_counter())
    kw = dict(cache=cache, progress=progress)
    folder = build_folder(model, algo.name, cset, **kw, **options)
    fn = folder.manifest["functions"][0]
    name = name or casadi_name(folder.prefix)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise RbdgenError(f"CasADi function name {name!r} is not a C identifier")
    files = _sources(folder)
    jac = None
    if algo.jacobian is not None:
        jrow = get_algorithm(algo.jacobian.row)
        known = {o.name for o in jrow.options}
        jfolder = build_folder(model, jrow.name, cset, **kw, **{k: v for k, v in options.items() if k in known})
        files.update(_sources(jfolder))
        jf = jfolder.manifest["functions"][0]
        jac = {"symbol": jf["symbol"], "header": jfolder.manifest["header"], "work_size": jf["work_size"],
               "inputs": jf["inputs"], "outputs": jf["outputs"], "blocks": algo.jacobian.blocks,
               "chart": None if model.nq == model.nv else _chart(model, f"{name}_chart"),
               "structure": _structure(folder, model, algo, cset, options)}
    cas = casadi_context(name, fn, folder.manifest["header"], False, jac)
    files[cas["file"]] = render_casadi(cas)
    if hessian:
        hfolder = build_folder(model, "aba_hessian_product", None, **kw)
        files.update(_sources(hfolder))
        h = _hessian_context(name, model, jfolder, hfolder)
        files[h["file"]] = _render_hessian(h)
    sources = [n for n in files if n.endswith(".c")]
    lib = compile_shared(name, {n: t.encode("utf-8") for n, t in files.items()}, sources, compile_flags(flags),
                         cache=cache, what=f"compiling the CasADi library of {name}", progress=progress)
    return name, lib, files


def casadi_external(robot, algorithm: str, constraints=None, *, name: str | None = None, flags=None,
                    cache=None, progress=None, hessian: bool = False, **options) -> ca.Function:
    """The compiled C of ``gen.build(robot, algorithm, constraints, **options)`` as a
    CasADi function: ``casadi.external(name, library)`` on :func:`casadi_library`'s
    shared library, whose Jacobian is the compiled C of the row's derivative row
    (registry ``jacobian``; module docstring), built with the same
    ``iterations``/``mu``/``restitution``.  No Python runs when CasADi calls it.

    Inputs and outputs as :func:`casadi_function`; ``name`` the CasADi function's (and
    C symbol's) name, default ``<kernel prefix>_casadi``.  The Jacobian with respect to q
    is in raw coordinates: ``D_tangent @ pinv(T(q))`` (equal to the tangent one when
    ``nq == nv``; module docstring).  Outputs without a derivative (a solver's
    ``iterations`` and ``residual``) have a structurally zero Jacobian: do not put them in
    a constraint.  A row without a derivative row (``crba``, ``minv``, the Delassus
    family, ...) gives a function without a Jacobian: CasADi refuses to differentiate
    it.  Thread-safe (no state: its scratch is CasADi's ``w``).  A failed kernel call
    (non-finite input or output) is a failed CasADi evaluation.  The quaternions of q
    are not checked: pass unit ones (the derivative kernels assume them).

    ``hessian=True`` (``aba``; free-flyer, revolute, prismatic and helical joints) adds
    the second derivatives CasADi asks an external for (``adj1_<name>``,
    ``jac_adj1_<name>``: module docstring), so ``nlpsol`` runs with IPOPT's exact Hessian.
    It builds and compiles ``aba_hessian_product`` into the library too."""
    name, lib, _ = casadi_library(robot, algorithm, constraints, name=name, flags=flags, cache=cache,
                                  progress=progress, hessian=hessian, **options)
    return ca.external(name, str(lib))
