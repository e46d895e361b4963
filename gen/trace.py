"""Tracing: run a registered algorithm on CasADi SX symbols (docs/DESIGN.md §1).

``trace(model, "aba")`` gives a :class:`Trace`: the symbolic inputs, the output
expressions after common-subexpression elimination, and the phase marks recorded by the
backend, from which :mod:`opcount` attributes operations to phases and :mod:`gen.emit`
generates C.  Structure (parents, joint kinds, constraint placement, iteration counts)
is resolved here, at trace time, which is what makes the emitted code robot-specific.

A derivative row (``Algorithm.ad``) has two routes to the same matrices, option
``route``: ``"analytical"`` traces the row's own algorithm, ``"ad"`` takes CasADi's
symbolic Jacobian of the traced value algorithm (:func:`trace_ad`, the hook through
which automatic differentiation enters; algorithms never import casadi).  Without the
option both are traced and the one of lower estimated cost is kept (:func:`estimated_cost`:
the operations of the emitted C, those the products' loops run at a tenth, as measured);
``Trace.route`` records the route used, why, and both operation counts and costs (the
manifest carries it).

``trace_driver(model, "prox_ltl", cset, tol=1e-10, max_iter=50)`` traces a proximal
solver for the early-exit C driver (docs/DESIGN.md §3.3) as three functions, see
:class:`DriverTrace`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property

import casadi as ca
import numpy as np

from . import buildcache
from .algorithms import ALGORITHMS, Algorithm
from .algorithms.proximal import ProximalSolver, norm_inf, returned
from .api import get_algorithm
from .backend import SXBackend
from .canonical_frames import Choice, apply, canonical, constraints
from .codegen.config import CodegenConfig
from .configuration import tangent_map
from .errors import RbdgenError
from .model import Model


#: the thresholds a trace is made for when no config is given (the defaults)
DEFAULT_CONFIG = CodegenConfig()


@dataclass
class Trace:
    model: Model
    algorithm: Algorithm
    cset: object
    options: dict
    inputs: list[tuple[str, ca.SX]]
    outputs: list[tuple[str, ca.SX]]
    phases: list[tuple[str, list[ca.SX]]] = field(default_factory=list)
    #: a derivative row's route: {"used": "analytical" | "ad", "chosen": "lower estimated
    #: cost" | "requested", "ops": {"analytical": n, "ad": n}, "cost": {...}, "ad_of": value
    #: algorithm}; None for the other rows
    route: dict | None = None
    #: the outputs formed by ``be.product`` (:class:`Product`), which the C writes as
    #: loops (:mod:`gen.products`); empty when there are none
    products: list = field(default_factory=list)
    #: the code-generation config it was traced for: which products become loops
    #: (:func:`deferred`) and what they cost in the route choice (:func:`estimated_cost`)
    config: CodegenConfig = DEFAULT_CONFIG
    #: the body frames it was traced in (``config.canonical_frames``,
    #: :mod:`gen.canonical_frames`), None for the model's own; ``model`` and ``cset`` are
    #: the caller's either way (the kernel's inputs, outputs and references)
    frames: Choice | None = None
    #: the model it was traced on: ``model`` in ``frames`` (None: ``model`` itself); the
    #: placements a lane trace turns into symbols are this model's (gen.lanes)
    framed_model: Model | None = None

    @property
    def traced_model(self) -> Model:
        """The model the graph was traced on (``model`` in the body frames ``frames``)."""
        return self.model if self.framed_model is None else self.framed_model

    def straight_line(self) -> tuple[list[ca.SX], list[tuple[str | None, int, int]], list[tuple[str, list]]]:
        """``(expressions, loops, marks)``: what the emitted C computes in straight-line
        code (the outputs, or with products written as loops the head's outputs and
        scratch, :func:`head`), per product written as loops its phase
        (:func:`loop_phase`), multiply-adds and additions of base entries, and the arrays
        the head writes for each product's loops as ``(phase, [arrays])``: what the op
        counter counts (:func:`opcount.count_trace`)."""
        loops = deferred(self)
        if not loops:
            return [e for _, e in self.outputs], [], []
        heads, scratch, plan = head(self)
        phases = [loop_phase(self, loops, i) for i in range(len(loops))]
        marks = [(name, _loop_arrays(step, scratch)) for name, step in zip(phases, plan) if name]
        return heads + scratch, [(name, p.madds, len(p.base_entries[0])) for name, p in zip(phases, loops)], marks

    def function(self, name: str | None = None) -> ca.Function:
        """The whole algorithm as one ``casadi.Function`` (inputs -> outputs)."""
        return ca.Function(name or self.algorithm.name,
                           [s for _, s in self.inputs], [e for _, e in self.outputs],
                           [n for n, _ in self.inputs], [n for n, _ in self.outputs])


def _cse(outputs: list, phases: list) -> tuple[list[ca.SX], list[tuple[str, list[ca.SX]]]]:
    """``casadi.cse`` over the outputs and the marked values jointly, so that a marked value
    and the output sub-expression it stands for stay one node (the op counter attributes
    output operations to phases through the marks; CSE of the outputs alone leaves the
    marks pointing at the pre-CSE copies, which a second CSE does not always reunite)."""
    marks = [ca.SX(v) for _, vals in phases for v in vals]
    merged = ca.cse([ca.SX(o) for o in outputs] + marks)
    rest = iter(merged[len(outputs):])
    return merged[:len(outputs)], [(name, [next(rest) for _ in vals]) for name, vals in phases]


FREE_OPS = frozenset({ca.OP_INPUT, ca.OP_OUTPUT, ca.OP_CONST, ca.OP_PARAMETER})


def operations(tr: Trace) -> int:
    """The operations of the C emitted for ``tr``: the instructions of the tape of
    ``inputs -> outputs`` (after the trace's CSE) but inputs, outputs and constants; with
    products written as loops, those of the head (:func:`head`) plus the loops' (a
    multiply and an add per multiply-add, :func:`loop_operations`), which run over every
    row of ``A``, its zeros included, where the SX sums skip them (the op counter's total,
    :func:`opcount.count_trace`)."""
    exprs, _, _ = tr.straight_line()
    return tape_operations([s for _, s in tr.inputs], exprs) + loop_operations(tr)


def tape_operations(inputs: list, exprs: list) -> int:
    """The instructions of the tape of ``inputs -> exprs`` but inputs, outputs and
    constants (:data:`FREE_OPS`)."""
    f = ca.Function("ops", inputs, [ca.densify(ca.SX(e)) for e in exprs])
    return sum(1 for k in range(f.n_instructions()) if f.instruction_id(k) not in FREE_OPS)


#: the rows of a symmetric product's diagonal blocks (:attr:`Product.symmetric`): its
#: loops' vectors of 8 doubles (:mod:`gen.products`)
SYMMETRIC_BLOCK = 8


@dataclass
class Product:
    """``base + sum(sign * A @ X)`` formed by ``be.product``: the trace's output
    ``output``, or (``output`` None) an *intermediate*, a product no output is but a
    later product's term reads as its ``A`` (its loops then write it into scratch).
    ``value`` is the result; ``terms`` are ``(sign, A, x, k, c)`` with ``x`` the nonzeros
    of ``X`` (a column), at rows ``k`` and columns ``c`` of ``X``, column by column (``k``
    ascending in each); all expressions share the trace's CSE."""

    output: int | None
    value: ca.SX
    base: ca.SX
    terms: list[tuple[float, ca.SX, ca.SX, list[int], list[int]]]
    #: ``A A^T`` (one term, ``X`` the transpose of ``A``, a zero base: ``M^-1 = V V^T``),
    #: exactly symmetric: the loops form each column from the block of
    #: :data:`SYMMETRIC_BLOCK` rows holding its diagonal down and copy the rest from the
    #: rows (:mod:`gen.products`)
    symmetric: bool = False

    @cached_property
    def base_entries(self) -> tuple[list[int], list[ca.SX]]:
        """``(positions, values)``: the entries of ``base`` that are not zero, at their
        column-major positions in ``Y`` (the loops add them after the first term's, which
        assign ``Y``, :mod:`gen.products`); once per product (0.17 s on talos
        aba_derivatives' three, read by the head, the op count and the route cost)."""
        base = ca.densify(ca.SX(self.base)).nonzeros()
        at = [i for i, x in enumerate(base) if not ca.SX(x).is_zero()]
        return at, [base[i] for i in at]

    @property
    def madds(self) -> int:
        """Its multiply-adds: one per nonzero of each term's ``X`` and row of its ``A``
        (symmetric: row of its column's blocks on and below the diagonal)."""
        rows = self.base.shape[0]
        if self.symmetric:
            return sum(rows - SYMMETRIC_BLOCK * (j // SYMMETRIC_BLOCK) for _, _, _, _, c in self.terms for j in c)
        return rows * sum(len(k) for _, _, _, k, _ in self.terms)


def deferred(tr: Trace) -> list:
    """The products of ``tr`` written as loops, by the thresholds of the config it was
    traced with (:class:`~gen.codegen.config.CodegenConfig`: at least ``loop_rows`` rows,
    or ``loop_min_rows`` rows and ``loop_madds`` multiply-adds); the others stay in the
    head's straight-line code."""
    c = getattr(tr, "config", DEFAULT_CONFIG)

    def loops(p) -> bool:
        rows = p.base.shape[0]
        return rows >= c.loop_rows or rows >= c.loop_min_rows and p.madds >= c.loop_madds
    return [p for p in getattr(tr, "products", []) if loops(p)]


def loop_operations(tr: Trace) -> int:
    """The operations of ``tr`` that the C runs in the products' loops: a multiply and an
    add per multiply-add (:attr:`Product.madds`) and an add per nonzero entry of a base
    (:attr:`Product.base_entries`); part of :func:`operations`."""
    return sum(2 * p.madds + len(p.base_entries[0]) for p in deferred(tr))


def estimated_cost(tr: Trace) -> float:
    """The operations of the emitted C, those of the products' loops at the config's
    ``loop_op_cost`` each: the route choice's measure (:func:`trace`)."""
    loops = loop_operations(tr)
    return operations(tr) - loops + getattr(tr, "config", DEFAULT_CONFIG).loop_op_cost * loops


def head(tr: Trace) -> tuple[list[ca.SX], list[ca.SX], list[dict]]:
    """The straight-line part of a trace with products written as loops
    (:mod:`gen.products`): ``(heads, scratch, plan)``.  ``heads`` are the trace's outputs
    with each deferred product's result replaced by nothing (an empty sparsity: the loops
    write every entry); ``scratch`` the arrays the loops use that no output holds: room
    for each intermediate's result, each term's ``A`` (unless it is an output the head
    writes or an earlier product's result, whose loops have run), the nonzeros of its
    ``X`` and the nonzero entries of the product's base (:attr:`Product.base_entries`);
    per deferred product in the order its loops run, the plan says where its result
    ``Y`` goes (``("output", j)``, or ``("scratch", i)`` for an intermediate), per term
    where its ``A`` is (an output, an earlier product's destination or ``("scratch",
    i)``) and the scratch index of its nonzeros, and its ``base``: None (zero) or the
    scratch index of its nonzero entries and their positions in ``Y``."""
    outs = [ca.densify(ca.SX(e)) for _, e in tr.outputs]
    loops = deferred(tr)
    product_of = {p.output: p for p in loops if p.output is not None}
    heads = [ca.SX(*e.shape) if o in product_of else e for o, e in enumerate(outs)]   # loops write Y
    scratch: list[ca.SX] = []
    plan = []
    ready = [(("output", o), e) for o, e in enumerate(outs) if o not in product_of]   # (where, value)
    for p in loops:
        if p.output is None:
            scratch.append(ca.SX(*p.base.shape))          # room for Y, which the loops write
            dest = ("scratch", len(scratch) - 1)
        else:
            dest = ("output", p.output)
        terms = []
        for sign, A, x, k, c in p.terms:
            A = ca.densify(A)
            where = next((w for w, value in ready if same_nodes(value, A)), None)
            if where is None:
                scratch.append(A)
                where = ("scratch", len(scratch) - 1)
            scratch.append(x)
            terms.append({"sign": sign, "A": where, "x": len(scratch) - 1, "k": k, "c": c,
                          "rows": int(A.shape[0]), "cols": int(p.base.shape[1])})
        at, values = p.base_entries
        if at:
            scratch.append(ca.vertcat(*values))
        plan.append({"Y": dest, "terms": terms, "symmetric": p.symmetric,
                     "base": (len(scratch) - 1, at) if at else None})
        ready.append((dest, ca.densify(p.value)))
    return heads, scratch, plan


def _loop_arrays(step: dict, scratch: list) -> list[ca.SX]:
    """The arrays the head writes for one product's loops (a step of :func:`head`'s plan):
    the ``A`` of its terms held in scratch, their nonzeros and the base's nonzero entries."""
    return [e for t in step["terms"] for e in ([scratch[t["A"][1]]] if t["A"][0] == "scratch" else [])
            + [scratch[t["x"]]]] + ([scratch[step["base"][0]]] if step["base"] else [])


def loop_phase(tr: Trace, loops: list, i: int) -> str | None:
    """The phase of the loops of product ``loops[i]``: the first mark holding its result;
    for an intermediate no mark holds, that of the first later product reading it as
    ``A``; None (the op counter's ``output`` phase) otherwise."""
    value = loops[i].value
    for name, vals in tr.phases:
        if any(ca.SX(v).shape == value.shape and same_nodes(v, value) for v in vals):
            return name
    user = next((j for j in range(i + 1, len(loops))
                 if any(A.shape == value.shape and same_nodes(A, value) for _, A, _, _, _ in loops[j].terms)), None)
    return None if user is None else loop_phase(tr, loops, user)


def same_nodes(a: ca.SX, b: ca.SX) -> bool:
    """The two matrices are the same expression nodes, entry by entry."""
    a, b = ca.SX(a), ca.SX(b)
    return a.sparsity() == b.sparsity() and all(ca.is_equal(x, y, 0) for x, y in zip(a.nonzeros(), b.nonzeros()))


def _products(outs: list, be: SXBackend) -> list[tuple[int | None, ca.SX, ca.SX, list, bool]]:
    """``(output, value, base, terms, symmetric)``, in the order they were formed, of the
    ``be.product`` results that are outputs as the product formed them (not changed
    afterwards) or intermediates (``output`` None: read as a later product's ``A``);
    terms with ``X`` split into the nonzeros and their rows and columns;
    :attr:`Product.symmetric`."""
    found = []
    for i, (Y, base, terms) in enumerate(be.products):
        o = next((o for o, out in enumerate(outs) if all(f[0] != o for f in found) and same_nodes(out, Y)), None)
        if o is None and not any(same_nodes(A, Y) for _, _, later in be.products[i + 1:] for _, A, _ in later):
            continue
        split = []
        for sign, A, X in terms:
            # column by column, k ascending: the order of the C's sums (gen.products)
            nz = [(k, c) for c in range(X.shape[1]) for k in range(X.shape[0]) if not X[k, c].is_zero()]
            split.append((sign, A, ca.vertcat(ca.SX(0, 1), *[X[k, c] for k, c in nz]),
                          [k for k, _ in nz], [c for _, c in nz]))
        symmetric = len(terms) == 1 and all(ca.SX(x).is_zero() for x in ca.SX(base).nonzeros()) and \
            same_nodes(terms[0][2], ca.SX(terms[0][1]).T)
        found.append((o, Y, base, split, symmetric))
    return found


def _trace_fn(model: Model, algo: Algorithm, cset, options: dict) -> Trace:
    be = SXBackend()
    syms = [(name, be.sym(name, n)) for name, n in algo.input_spec(model, cset, options)]
    extra = {"cset": cset} if algo.constrained else {}
    outs = algo.fn(model, *[s for _, s in syms], be=be, **extra, **algo.fn_options(options))
    names = [n for n, _, _ in algo.outputs(model, cset)]
    found = _products(outs, be)
    parts = [e for _, Y, base, terms, _ in found for e in (Y, base, *[e for t in terms for e in t[1:3]])]
    exprs, phases = _cse(list(outs) + parts, be.phases)
    rest = iter(exprs[len(outs):])
    products = [Product(o, next(rest), next(rest), [(sign, next(rest), next(rest), k, c) for sign, _, _, k, c in terms],
                        symmetric) for o, _, _, terms, symmetric in found]
    return Trace(model, algo, cset, dict(options), syms, list(zip(names, exprs[:len(outs)])), phases,
                 products=products)


def trace_ad(model: Model, algo: Algorithm, cset=None, **options) -> Trace:
    """The AD route of derivative row ``algo`` (:class:`~gen.algorithms.registry.ADRoute`):
    trace the value algorithm ``algo.ad.value`` with the same options, and for each of
    its first ``algo.ad.outputs`` outputs ``y`` and each input ``x`` take
    ``casadi.jacobian(y, x)``; for ``x = q`` composed with the tangent map
    ``T(q) = d integrate(q, d)/dd`` at 0 (:func:`gen.configuration.tangent_map`), since
    ``d/dd y(integrate(q, d)) = dy/dq T(q)`` (chain rule; Pinocchio's tangent-space
    convention); then the values ``y`` themselves (the row's outputs end with them, issue
    30 §2).  Phases: ``value`` (the value outputs), ``jacobian``.  A Hessian route
    (``algo.ad.hessian``) is :func:`trace_ad_hessian`."""
    if algo.ad.hessian:
        return trace_ad_hessian(model, algo, cset, **options)
    value = get_algorithm(algo.ad.value)
    tr = _trace_fn(model, value, cset, algo.fn_options(options))
    ins = [s for _, s in tr.inputs]
    values = [e for _, e in tr.outputs[:algo.ad.outputs]]
    T = tangent_map(model, ins[0], SXBackend())
    outs = [ca.mtimes(ca.jacobian(y, x), T) if k == 0 else ca.jacobian(y, x)
            for y in values for k, x in enumerate(ins)]
    names = [n for n, _, _ in algo.outputs(model, cset)]
    if len(names) != len(outs) + len(values):
        raise RuntimeError(f"{algo.name}: {len(outs)} Jacobians and {len(values)} values of {value.name} "
                           f"for {len(names)} outputs")
    exprs, phases = _cse(outs + values, [("value", values), ("jacobian", outs)])
    return Trace(model, algo, cset, dict(options), tr.inputs, list(zip(names, exprs)), phases)


def trace_ad_hessian(model: Model, algo: Algorithm, cset=None, **options) -> Trace:
    """The Hessian AD route of ``algo`` (``ADRoute(value, 1, hessian=True)``): trace the
    value algorithm on its inputs ``(q, v, x)``, take ``f = lam^T y`` of its first output
    ``y`` with the row's last input ``lam``, the tangent gradient ``g_q = T(q)^T df/dq``
    (``casadi.gradient``: reverse mode; ``T`` :func:`gen.configuration.tangent_map`),
    ``g_v``, ``g_x`` and their Jacobians (forward over reverse).  The Hessian in the chart
    ``integrate(q, d)`` is the symmetric part of ``d g_q/dq T(q)``: the two tangent
    perturbations of ``f(integrate(integrate(q, d), e))`` differ from the chart's
    ``integrate(q, d + e)`` by half their Lie bracket at second order
    (Baker-Campbell-Hausdorff), an antisymmetric term.  Outputs: ``h_qq``, ``h_qv``,
    ``h_vv``, ``h_qx``, ``g_q``, ``g_v``, ``g_x``, ``y``; phases ``value``, ``gradient``,
    ``hessian``."""
    value = get_algorithm(algo.ad.value)
    tr = _trace_fn(model, value, cset, algo.fn_options(options))
    q, v, x = (s for _, s in tr.inputs)
    y = tr.outputs[0][1]
    lam_name, n = algo.inputs(model, cset)[-1]
    lam = ca.SX.sym(lam_name, n)
    f = ca.dot(lam, y)
    T = tangent_map(model, q, SXBackend())
    grads = [ca.mtimes(T.T, ca.gradient(f, q)), ca.gradient(f, v), ca.gradient(f, x)]
    H_qq = ca.mtimes(ca.jacobian(grads[0], q), T)
    hess = [0.5 * (H_qq + H_qq.T), ca.jacobian(grads[0], v), ca.jacobian(grads[1], v), ca.jacobian(grads[0], x)]
    names = [n for n, _, _ in algo.outputs(model, cset)]
    if len(names) != len(hess) + len(grads) + 1:
        raise RuntimeError(f"{algo.name}: {len(names)} outputs for a Hessian route's 8")
    exprs, phases = _cse(hess + grads + [y], [("value", [y]), ("gradient", grads), ("hessian", hess)])
    return Trace(model, algo, cset, dict(options), tr.inputs + [(lam_name, lam)], list(zip(names, exprs)), phases)


def trace(model: Model, algorithm: str | Algorithm, cset=None, *, config: CodegenConfig = DEFAULT_CONFIG,
          **options) -> Trace:
    """Trace ``algorithm`` on SX symbols for code generation under ``config`` (its
    products-as-loops thresholds).  For a derivative row, ``route`` (option) picks the
    analytical algorithm or :func:`trace_ad`; both routes' operation counts are recorded,
    and without ``route`` the one of lower :func:`estimated_cost` is returned (ties:
    analytical).  Both routes are traced unless their counts are in the kernel cache
    (:func:`route_counts`): then only the route returned is.  A Hessian row
    (``ADRoute.hessian``) traces only the route asked for, analytical by default
    (:class:`~gen.algorithms.registry.ADRoute`)."""
    algo = algorithm if isinstance(algorithm, Algorithm) else get_algorithm(algorithm)
    requested = options.get("route")
    given, given_cset = model, cset
    model, cset, frames = _frames(model, cset, config.canonical_frames)

    def one(route):
        tr = trace_ad(model, algo, cset, **options) if route == "ad" else _trace_fn(model, algo, cset, options)
        tr.config, tr.model, tr.cset, tr.frames = config, given, given_cset, frames
        tr.framed_model = model if frames is not None else None
        return tr

    if algo.ad is None:
        return one(None)
    if algo.ad.hessian:
        used = requested or "analytical"
        tr = one(used)
        ops, cost = {used: operations(tr)}, {used: round(estimated_cost(tr))}
    else:
        used, tr, ops, cost = _both_routes(one, requested, route_counts(given, algo, given_cset, options, config))
    chosen = "requested" if requested else "default" if algo.ad.hessian else "lower estimated cost"
    tr.route = {"used": used, "chosen": chosen, "ops": ops, "cost": cost, "ad_of": algo.ad.value}
    return tr


def _both_routes(one, requested: str | None, counts: RouteCounts):
    """``(used, trace of used, ops, cost)`` of a derivative row with two routes: the route
    ``requested``, else the one of lower estimated cost (ties: analytical).  ``one(route)``
    traces a route.  With both routes' counts cached in ``counts`` only the used route is
    traced (and its fresh counts must equal the cached ones, else the other is traced
    too); both traced, their counts are recorded there."""
    def pick(cost):
        return requested or min(cost, key=lambda r: (cost[r], r != "analytical"))

    cached, traced = counts.read(), {}
    if cached is not None:
        used = pick(cached["cost"])
        tr = traced[used] = one(used)
        if operations(tr) == cached["ops"][used] and round(estimated_cost(tr)) == cached["cost"][used]:
            # in the order both traces record them (the header's comment lists them so)
            return used, tr, *({r: cached[k][r] for r in ("analytical", "ad")} for k in ("ops", "cost"))
    routes = {r: traced.get(r) or one(r) for r in ("analytical", "ad")}   # a stale record: the other route too
    ops = {name: operations(t) for name, t in routes.items()}
    cost = {name: round(estimated_cost(t)) for name, t in routes.items()}
    counts.write(ops, cost)
    used = pick(cost)
    return used, routes[used], ops, cost


#: the fields of :class:`~gen.codegen.config.CodegenConfig` that are the build's request
#: for the C (prefix, storage, batching, trig, lanes, order): :func:`trace` does not read
#: them (only ``canonical_frames`` and the ``loop_*`` thresholds), so they stay out of the
#: route counts' key and builds that differ only in them share the counts
WRITE_OPTIONS = ("prefix", "avoid_stack", "batch", "batch_trig", "scalar_trig", "lanes", "order")


@dataclass
class RouteCounts:
    """Both routes' operation counts and costs of one trace request in the kernel cache
    (``<cache>/routes/<key>.json``, :func:`gen.buildcache.read_counts`); ``key`` None: not
    cached (nothing read, nothing written)."""

    key: str | None

    def read(self) -> dict | None:
        if self.key is None:
            return None
        try:
            return buildcache.read_counts(buildcache.cache_dir(), self.key)
        except OSError:
            return None

    def write(self, ops: dict, cost: dict) -> None:
        if self.key is not None:
            try:
                buildcache.write_counts(buildcache.cache_dir(), self.key, ops, cost)
            except OSError:
                pass


def route_counts(model: Model, algo: Algorithm, cset, options: dict, config: CodegenConfig) -> RouteCounts:
    """The cached route counts of tracing ``algo`` on ``model`` (as given, before the body
    frames) with ``cset``: keyed by everything that decides the two traces, the model's
    content, the registry row's name, the constraint set, the options but ``route``, the
    config's thresholds (not :data:`WRITE_OPTIONS`) and the generator
    (:func:`gen.buildcache.generator_identity`: its sources and CasADi's version).  Not
    cached (key None) for an algorithm that is not the registry's row of its name or a
    request without a canonical form (:func:`gen.buildcache.canonical`)."""
    if ALGORITHMS.get(algo.name) is not algo:
        return RouteCounts(None)
    thresholds = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in WRITE_OPTIONS}
    try:
        request = {"model": buildcache.canonical(model), "algorithm": algo.name,
                   "constraints": buildcache.canonical(cset, model),
                   "options": buildcache.canonical({k: v for k, v in options.items() if k != "route"}),
                   "config": buildcache.canonical(thresholds), "generator": buildcache.generator_identity()}
    except buildcache.Uncacheable:
        return RouteCounts(None)
    return RouteCounts(buildcache.digest(request))


def _frames(model: Model, cset, on: bool) -> tuple[Model, object, Choice | None]:
    """The model and constraint set to trace on: in the body frames of
    :func:`gen.canonical_frames.canonical` when ``on``, else as given."""
    return canonical(model, cset) if on else (model, cset, None)


def retrace(tr: Trace, model: Model, extra: tuple[str, ca.SX]) -> Trace:
    """``tr``'s algorithm, constraint set, options and route traced on ``model`` (``tr.model``
    or ``tr.traced_model`` with placements traced as symbols, :func:`gen.lanes.lane_constants`)
    in ``tr``'s body frames (``tr.model``'s traced placements through the frames' rotations),
    the symbols ``extra = (name, column)`` its last input."""
    ad = tr.route is not None and tr.route["used"] == "ad"
    on, cset = model, tr.cset
    if tr.frames is not None:
        if not _same_placements(model, tr.traced_model):     # ``tr.model``'s placements as symbols
            on = apply(model, tr.frames)
        cset = constraints(cset, tr.frames, on)
    out = trace_ad(on, tr.algorithm, cset, **tr.options) if ad else _trace_fn(on, tr.algorithm, cset, tr.options)
    out.inputs = out.inputs + [extra]
    out.route, out.model, out.cset, out.frames = tr.route, tr.model, tr.cset, tr.frames
    out.framed_model = on if tr.frames is not None else None
    return out


def _same_placements(a: Model, b: Model) -> bool:
    """``a`` and ``b`` have the same placement numbers, axes and angle offsets (``a`` is
    ``b`` with some placements traced as symbols, not the model before the frames were
    chosen; either way the model traced is one consistent model)."""
    return all(np.array_equal(x.placement.R, y.placement.R) and np.array_equal(x.placement.p, y.placement.p)
               and np.array_equal(x.axis, y.axis) and x.angle_offset == y.angle_offset
               for x, y in zip(a.bodies, b.bodies))


# --- the early-exit driver ------------------------------------------------------------------

@dataclass
class DriverTrace:
    """A proximal solver traced for the early-exit C driver (docs/DESIGN.md §3.3), as three
    :class:`Trace` objects sharing one packing of the solver's ``const`` and loop state:

    * ``setup``: the algorithm's inputs -> ``const`` (``const_size``), ``state`` (the
      loop state of iteration 1, ``state_size``);
    * ``step``: (``const``, ``state``) -> ``next`` (the loop state of the next iteration), ``residual``
      (``|r_k|_inf``, the stopping test of :class:`gen.algorithms.proximal.Proximal`);
    * ``finish``: (``const``, ``state``) -> ``ddq``, ``lam`` of the iterate that
      ``state`` starts (the driver keeps the state its last step started from) and
      ``residual``, the true constraint residual ``|J ddq - a_c*|_inf`` of that ``ddq``
      (the reported one; step's may be another expression of it, see
      :class:`gen.algorithms.proximal.Iterate`).

    A call that stops after k steps costs ``setup + k step + finish``.  ``const`` holds
    only the values that step or finish read, each once; values that are constants of
    the trace (structural zeros, ones, constant constraint rows) stay inlined; and the
    sub-expressions of step and finish that do not depend on the loop state are computed
    in setup (phase ``invariant``; :func:`_hoist`), as common-subexpression elimination
    does across the iterations of a fixed-K trace, so that a step costs what one more
    unrolled iteration costs."""

    model: Model
    algorithm: Algorithm
    cset: object
    options: dict
    inputs: list[tuple[str, ca.SX]]
    setup: Trace
    step: Trace
    finish: Trace
    tol: float
    max_iter: int

    @property
    def const_size(self) -> int:
        return int(self.step.inputs[0][1].numel())

    @property
    def state_size(self) -> int:
        return int(self.step.inputs[1][1].numel())


def _flatten(tree):
    """Scalar leaves of a nested list / tuple / named tuple / dict of SX matrices (column-
    major; anything else is kept as it is), and the function rebuilding the tree from
    replacement leaves."""
    if isinstance(tree, ca.SX):
        rows, cols = tree.shape
        leaves = [tree[i, j] for j in range(cols) for i in range(rows)]
        return leaves, lambda xs: ca.reshape(ca.vertcat(ca.SX(0, 1), *xs), rows, cols)
    if isinstance(tree, (list, tuple, dict)):
        keys = list(tree) if isinstance(tree, dict) else range(len(tree))
        parts = [_flatten(tree[k]) for k in keys]
        sizes = [len(p[0]) for p in parts]

        def rebuild(xs):
            items, at = [], 0
            for (_, build), n in zip(parts, sizes):
                items.append(build(xs[at:at + n]))
                at += n
            if isinstance(tree, dict):
                return dict(zip(keys, items))
            return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)

        return [x for p in parts for x in p[0]], rebuild
    return [], lambda xs: tree


def _hoist(outputs: list, csym: ca.SX, cvals: list, ssym: ca.SX):
    """Loop-invariant code motion.  ``outputs`` are expressions of the const symbols
    ``csym`` (standing for the setup expressions ``cvals``) and the loop state ``ssym``.
    Replays their instruction tape: an instruction none of whose operands depends on
    the state is rebuilt over ``cvals`` (it moves to setup), the others over ``csym``,
    the state and, for each moved value they read, a new symbol.  Returns (the outputs
    rewritten, the new symbols, their setup expressions)."""
    f = ca.Function("loop", [csym, ssym], [ca.densify(ca.SX(o)) for o in outputs])
    moved, moved_vals = [], []
    setup_side: dict[int, ca.SX | None] = {}       # register -> value in setup (None: varies)
    loop_side: dict[int, ca.SX | None] = {}        # register -> value in the loop (None: not yet read)

    def read(r):
        if loop_side[r] is None:
            moved.append(ca.SX.sym(f"moved_{len(moved)}"))
            moved_vals.append(setup_side[r])
            loop_side[r] = moved[-1]
        return loop_side[r]

    outs = [[None] * f.nnz_out(i) for i in range(f.n_out())]
    for k in range(f.n_instructions()):
        op, ins, (r, *nz) = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_INPUT:
            which, at = ins
            setup_side[r] = cvals[at] if which == 0 else None
            loop_side[r] = csym[at] if which == 0 else ssym[at]
        elif op == ca.OP_CONST:
            setup_side[r] = loop_side[r] = ca.SX(f.instruction_constant(k))
        elif op == ca.OP_OUTPUT:
            outs[r][nz[0]] = read(ins[0])
        elif all(setup_side[a] is not None for a in ins):
            args = [setup_side[a] for a in ins]
            setup_side[r] = ca.SX.unary(op, *args) if len(args) == 1 else ca.SX.binary(op, *args)
            loop_side[r] = None
        else:
            args = [read(a) for a in ins]
            setup_side[r] = None
            loop_side[r] = ca.SX.unary(op, *args) if len(args) == 1 else ca.SX.binary(op, *args)
    rebuilt = [ca.reshape(ca.vertcat(ca.SX(0, 1), *o), f.size1_out(i), f.size2_out(i)) for i, o in enumerate(outs)]
    return rebuilt, moved, moved_vals


def trace_driver(model: Model, algorithm: str | Algorithm, cset=None, *, config: CodegenConfig | None = None,
                 **options) -> DriverTrace:
    """Trace ``algorithm`` (a :class:`~gen.algorithms.proximal.ProximalSolver`) for the
    early-exit driver; ``options`` must hold ``tol`` (``max_iter``, else ``iterations``,
    is the cap).  Traced in the body frames of :mod:`gen.canonical_frames` when
    ``config.canonical_frames`` (None: the default config's) is on; the result holds
    ``model`` and ``cset``."""
    on, on_cset, frames = _frames(model, cset, (config or CodegenConfig()).canonical_frames)
    out = _trace_driver(on, algorithm, on_cset, **options)
    for t in (out, out.setup, out.step, out.finish):
        t.model, t.cset = model, cset
    for t in (out.setup, out.step, out.finish):
        t.frames, t.framed_model = frames, (on if frames is not None else None)
    return out


def _trace_driver(model: Model, algorithm: str | Algorithm, cset=None, **options) -> DriverTrace:
    algo = algorithm if isinstance(algorithm, Algorithm) else get_algorithm(algorithm)
    solver = algo.fn
    if not isinstance(solver, ProximalSolver):
        raise RbdgenError(f"{algo.name} is not iterative: a tolerance applies to the proximal solvers only")
    be = SXBackend()
    syms = [(name, be.sym(name, n)) for name, n in algo.input_spec(model, cset, options)]
    prox, own, ins = solver.start(model, cset, be, algo.fn_options(options), [s for _, s in syms])
    if prox.tol is None or not math.isfinite(prox.tol):
        raise RbdgenError(f"the early-exit driver needs a finite tolerance, got tol={options.get('tol')}")
    if not prox.cset.m:
        raise RbdgenError(f"{algo.name} without constraints does not iterate: build it without a tolerance")
    plan, const, state0 = solver.setup(model, *ins, prox, be, **own)

    const_leaves, const_tree = _flatten(const)
    unique: dict[int, ca.SX] = {}                 # element hash -> value, first occurrence
    for e in const_leaves:
        if not e.is_constant():
            unique.setdefault(e.element_hash(), e)
    csym = ca.SX.sym("const", len(unique))
    slot = {h: csym[a] for a, h in enumerate(unique)}
    const_ph = const_tree([e if e.is_constant() else slot[e.element_hash()] for e in const_leaves])
    state_leaves, state_tree = _flatten(state0)
    ssym = ca.SX.sym("state", len(state_leaves))
    state_ph = state_tree([ssym[a] for a in range(len(state_leaves))])

    def run_step(b):
        it = solver.step(model, plan, const_ph, state_ph, prox, b)
        b.mark("iteration", it.lam, it.r)
        return it

    step_be, finish_be = SXBackend(), SXBackend()
    it = run_step(step_be)
    nxt = _flatten(it.state)[0]
    if len(nxt) != len(state_leaves):
        raise RuntimeError(f"{algo.name}: step changed the size of the loop state")
    step_out = [ca.vertcat(*nxt), norm_inf(it.r, step_be)]
    fin = run_step(finish_be)
    ddq, true_r = returned(fin, prox, finish_be)                  # of the returned ddq
    finish_out = [ddq, fin.lam, norm_inf(fin.r if true_r is None else true_r, finish_be)]

    # inputs that step or finish read directly, not through const (a run-time mu in the
    # damping rho of the controller and the plan) become const slots: setup copies them
    loops = [(step_out, step_be.phases), (finish_out, finish_be.phases)]
    flat = [ca.SX(e) for outs, phases in loops for e in outs + [v for _, vals in phases for v in vals]]
    loop_syms = {e.element_hash() for e in ca.symvar(ca.vertcat(csym, ssym))}
    direct = [e for e in ca.symvar(ca.veccat(*flat)) if e.element_hash() not in loop_syms]
    if direct:
        slots = ca.SX.sym("direct", len(direct))
        flat = ca.substitute(flat, direct, [slots[a] for a in range(len(direct))])
        csym = ca.vertcat(csym, slots)
        unique.update({("direct", a): e for a, e in enumerate(direct)})

    # move what does not depend on the loop state to setup: outputs and marked values of
    # step and finish are rewritten together, so that both read one const
    values = list(unique.values())
    rebuilt, moved, moved_vals = _hoist(flat, csym, values, ssym)
    rest = iter(rebuilt)
    loops = [([next(rest) for _ in outs], [(n, [next(rest) for _ in vals]) for n, vals in phases])
             for outs, phases in loops]
    be.mark("invariant", *moved_vals)

    used = {e.element_hash() for e in ca.symvar(ca.veccat(*[e for outs, _ in loops for e in outs]))}
    keep = [a for a in range(csym.numel()) if csym[a].element_hash() in used]
    const_in = ca.vertcat(ca.SX(0, 1), *[csym[a] for a in keep], *moved)
    setup_out = [ca.vertcat(ca.SX(0, 1), *[values[a] for a in keep], *moved_vals), ca.vertcat(*state_leaves)]

    opts = dict(options)
    loop_inputs = [("const", const_in), ("state", ssym)]
    parts = []
    for names, (outs, phases), ins in ((("const", "state"), (setup_out, be.phases), syms),
                                       (("next", "residual"), loops[0], loop_inputs),
                                       (("ddq", "lam", "residual"), loops[1], loop_inputs)):
        exprs, marks = _cse(outs, phases)
        parts.append(Trace(model, algo, cset, opts, ins, list(zip(names, exprs)), marks))
    return DriverTrace(model, algo, cset, opts, syms, *parts, tol=prox.tol, max_iter=prox.n)
