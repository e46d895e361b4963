"""cABA-OSIM and cABA-OSIMf: the damped Delassus inverse ``Lambda_mu`` in O(n + m^2) by
the matrix inversion lemma on the augmented inertia, in maximal coordinates.

Sathya & Carpentier, "Constrained Articulated Body Dynamics Algorithms", 2024
(docs/REFERENCES.md), §VI, Algorithm 5 (PV-OSIMr structure) and eq. 41,
in LOCAL frames.  With ``W = R^-1 = diag(weight / mu)`` (Sathya's penalty ``mu_S = 1/mu``
per row; damping conventions in :mod:`gen.algorithms.delassus`), eq. 40::

    Lambda_mu = (J M^-1 J^T + R)^-1 = W - W J (M + J^T W J)^-1 J^T W = W - L_0^A

and ``M + J^T W J`` is M with each constrained body's inertia augmented by ``W K^T K``
(§II-F; a constant point mass, plus rotational inertia for 6D, at an anchored frame), so
``L_0^A`` is the Delassus matrix of the augmented system for the scaled constraint rows
``K^A = W K``.  It is assembled without any m x m factorisation:

1. (line 4) ``H_b^A = I_b + W K^T K`` and ``K^A = W K`` for each constrained body b;
2. (lines 5-11) backward sweep: articulated inertias (Featherstone 2008 Table 7.1,
   ``D_i = S_i^T H_i^A S_i``, ``P_i = 1 - H_i^A S_i D_i^-1 S_i^T``) over the trees holding
   constraints; on the supporting bodies, from each *branching* body d (the set N: a
   constrained body, or one with two constrained subtrees) up to the next one
   ``a = N_anc(d)``, the extended force propagator ``^aP_d = prod X_i^* P_i`` and the
   inverse inertia seen at d through the joints in between,
   ``^aOmega_d = sum_i ^iP_d^T S_i D_i^-1 S_i^T ^iP_d``;
3. (line 13) down the branching bodies, ``^0Omega_d = ^aOmega_d + ^aP_d^T ^0Omega_a ^aP_d``;
4. (line 16) the constraints' force propagators ``^aK_e = ^dK_e ^aP_d^T``;
5. (line 18) ``L_ef = ^cK_e ^0Omega_c ^cK_f^T``, c the closest common ancestor of the
   two constrained bodies (a branching body), upper triangle mirrored;
6. (line 21) ``Lambda_mu = W - L_0^A``.

**Two representations of a branching body.**  Besides Algorithm 5's *frame* form (the
6 x 6 ``^aP_d`` and ``^aOmega_d``), a branching body d may use the *constraint-space* form
of PV-OSIM (Sathya 2024 Alg. 4 lines 9-11): it carries the m_d columns ``^iK^T`` of the
rows below it up its chain instead of ``^iP_d`` (so ``^aK = ^dK ^aP_d^T`` is never
formed), and ``^dK ^aOmega_d ^dK^T`` (m_d x m_d) instead of ``^aOmega_d``.  ``L_ef`` then
sums, from the common ancestor c up to the world, the constraint-space blocks of those
bodies, and for each run of frame-form bodies one ``^kK_e ^0Omega_k ^kK_f^T`` at its
lowest member k (``^0Omega`` accumulated by line 13 inside the run only).  The form is
chosen per body by an estimate of the operations of each (:func:`constraint_space`):
constraint space costs ~m_d^2 per joint of the chain but one addition per pair, the
frame form a constant per joint but a 6-term product per pair, so constraint space wins
for short chains or few rows (every limb end, and every branching body of the robots
and trees measured) and the frame form keeps Algorithm 5's O(n + m^2) for long chains
carrying many rows.  The constraint-space form also rounds much less: the rows are
applied before the stiff directions of ``W K^T K`` cancel, whereas a 6 x 6 ``^0Omega``
mixes the ~1/W entries that matter with O(1) ones.

``caba_osimf`` (§VI-B, eq. 41) puts each free-flyer root r in constraint space whatever
its row count: its block ``^rK (H_r^A)^-1 ^rK^T`` is added to every pair below r
(one 6 x 6 LDL^T solve per row), so ``L_0^A = L_r^A + ^rK (H_r^A)^-1 ^rK^T`` and no
``^0Omega`` below r involves the floating base.  Every constrained tree must hang from a
free-flyer.  (``caba_osim`` computes the same thing whenever its estimate already puts r
in constraint space, which it does on every robot measured; it differs when a long
chain above r carries many rows, where Algorithm 5's frame form through r is cheaper.)

With mimic joints (``gen.model``) the articulated sweeps do not apply (one dof moves
bodies on several branches): both return ``Lambda_mu = (J M^-1 J^T + R)^-1`` by
``ltl_osim`` (sparse Cholesky of CRBA's ``M``, as ``aba`` solves with ``M``), which also
closes loops.  Only constraints relative to the world are handled (§II-E).  Accuracy: ``L_0^A`` has
the size of ``W`` (1e6 at mu = 1e-6), so ``W - L_0^A`` keeps an absolute error of order
``eps W`` times the robot's inverse inertias, amplified by the 6 x 6 frame form (where
~1/W entries of ``^0Omega`` sit next to O(1) ones).  Measured against dense NumPy at
mu = 1e-6: ~1e-9 relative when every branching body is in constraint space (all the
named robots, humanoid30, the binary trees), ~1e-6 where long chains keep the frame form; at
mu = 1e-3, ~1e-11.  On redundant sets it is the most accurate method: it never inverts
the nearly singular damped Delassus matrix.  Pinocchio's
``computeDampedDelassusMatrixInverse`` (the same lemma, frame form) has the same floor.
Shapes: q (nq,1) -> Lambda (m,m).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import RbdgenError
from ..kinematics import forward_velocities, subspaces
from ..model import Model
from ..spatial import act_force, inertia_matrix
from .articulated import (
    constant_constraint_inertia,
    dsolve,
    joint_factor,
    pass_inertia,
    project_force,
    supporting_bodies,
)
from .delassus import damping, delassus_set
from .dense import sym_product
from .ltl_osim import ltl_osim
from .proximal import DEFAULT_MU


def caba_osim(model: Model, q, *params, be, cset=None, mu=DEFAULT_MU, runtime_params=()):
    """``Lambda_mu = (J M^-1 J^T + R)^-1`` (m x m) at q by Algorithm 5 (module docstring);
    ``params``: run-time ``mu`` and weights (:func:`~gen.algorithms.delassus.damping`)."""
    cset = delassus_set(model, cset, "caba_osim")
    if model.has_mimic:
        return ltl_osim(model, q, *params, be=be, cset=cset, mu=mu, runtime_params=runtime_params)
    return _caba_osim(model, q, be, cset, damping(cset, mu, params, runtime_params, be), "caba_osim",
                      split_roots=False)


def floating_roots_only(model: Model, cset) -> str | None:
    """Why caba_osimf does not apply to ``cset`` on ``model`` (one line: a root of the
    constrained tree that is not a free-flyer, where eq. 41 splits), or None."""
    for con in cset.constraints:
        for b in (con.body1, con.body2):
            if b >= 0:
                root = model.bodies[model.ancestors(b)[-1]]
                if root.kind != "free":
                    return _not_floating(root)
    return None


def _not_floating(root) -> str:
    return (f"caba_osimf splits the Delassus matrix at a floating base (Sathya 2024 eq. 41), but "
            f"joint '{root.name}' at the root of the constrained tree is '{root.kind}'; use caba_osim")


def caba_osimf(model: Model, q, *params, be, cset=None, mu=DEFAULT_MU, runtime_params=()):
    """``Lambda_mu`` as :func:`caba_osim`, split at each free-flyer root (eq. 41)."""
    cset = delassus_set(model, cset, "caba_osimf")
    if model.has_mimic:
        return ltl_osim(model, q, *params, be=be, cset=cset, mu=mu, runtime_params=runtime_params)
    return _caba_osim(model, q, be, cset, damping(cset, mu, params, runtime_params, be), "caba_osimf",
                      split_roots=True)


class OsimRow(NamedTuple):
    """One constraint of Algorithm 5: its global rows, its body, ``K^A = W K`` and ``W``."""

    rows: list
    body: int
    KA: object
    W: object


@dataclass
class Node:
    """A branching body of N.  ``rows``: constraint-space form (else frame form).
    ``cons``: the constraints below it, in the column order of ``kt``/``arr``/``rel``
    (constraint-space form).  ``kt = ^dK^T`` (6 x m_d); ``arr = ^aK^T`` (6 x m_d) on
    arrival at ``anc`` = N_anc (-1: the world); ``up = ^aP_d`` (frame form);
    ``rel``: ``^dK ^aOmega_d ^dK^T`` or ``^aOmega_d``; ``om0``: ``^0Omega_d`` accumulated
    within the run of frame-form ancestors (frame form)."""

    body: int
    rows: bool
    cons: list
    anc: int = -1
    kt: object = None
    arr: object = None
    up: object = None
    rel: object = None
    om0: object = None
    children: list = field(default_factory=list)


def _caba_osim(model: Model, q, be, cset, rho, name: str, split_roots: bool):
    for con in cset.constraints:
        if not con.anchored:
            raise RbdgenError(f"{name} handles constraints relative to the world only (Sathya 2024 §II-E); "
                              f"'{con}' closes a loop between two moving bodies: use ltl_osim or kkt_osim")
    S = subspaces(model, be)
    kin = forward_velocities(model, q, be.zeros(model.nv, 1), S, be)
    ev = cset.evaluate(model, q, be.zeros(model.nv, 1), be=be, kin=kin, jacobian=False, drift=False)
    IA = [inertia_matrix(b.inertia, be) for b in model.bodies]
    cons = []
    for ci, (con, terms) in enumerate(zip(cset.constraints, ev.terms)):
        (body, K), = terms
        W = 1.0 / rho[cset.offsets[ci]]
        aug = constant_constraint_inertia(con, W)
        IA[body] = IA[body] + (be.asarray(aug[1]) if aug is not None else W * (K.T @ K))   # line 4
        cons.append(OsimRow(list(cset.rows(ci)), body, W * K, W))
    nodes = branching_bodies(model, supporting_bodies(model, cset), cons, split_roots)

    sweep(model, q, kin[0], S, IA, nodes, cons, be)                 # lines 5-11 (and 16)
    be.mark("articulated_inertia", *IA)
    be.mark("propagators", *[x for n in nodes.values() for x in (n.arr, n.up, n.rel) if x is not None])
    for d in sorted(nodes):                            # line 13, within runs of frame form
        n = nodes[d]
        if not n.rows:
            a = nodes.get(n.anc)
            om = a.om0 if a is not None and not a.rows else None
            n.om0 = add(n.rel, None if om is None else sym_product(n.up, om @ n.up, be))
    be.mark("inverse_inertia", *[n.om0 for n in nodes.values() if not n.rows])
    L = coupling(model, nodes, cons, be)                                     # line 18

    m = cset.m
    out = be.zeros(m, m)                               # line 21: Lambda_mu = W - L_0^A
    for (e, f), blk in L.items():
        for a, r in enumerate(cons[e].rows):
            for b, s in enumerate(cons[f].rows):
                if r <= s:
                    out[r, s] = -blk[a, b]
                    out[s, r] = out[r, s]
    for c in cons:
        for r in c.rows:
            out[r, r] = c.W + out[r, r]
    be.mark("lambda", out)
    return (out,)


def branching_bodies(model: Model, SE, cons, split_roots: bool) -> dict:
    """N of Algorithm 5 as {body: Node}: supporting bodies that carry a constraint or have
    two supporting children (their constraint set is strictly larger than each child's),
    each in the form :func:`constraint_space` picks; with ``split_roots`` also the roots,
    free-flyers in constraint-space form (eq. 41)."""
    nsup = {i: 0 for i in SE}
    for i in SE:
        if model.bodies[i].parent != -1:
            nsup[model.bodies[i].parent] += 1
    constrained = {c.body for c in cons}
    N = {i for i in SE if i in constrained or nsup[i] >= 2}
    roots = [i for i in SE if model.bodies[i].parent == -1]
    if split_roots:
        for r in roots:
            if model.bodies[r].kind != "free":
                raise RbdgenError(_not_floating(model.bodies[r]))
        N.update(roots)
    nodes = {}
    for d in sorted(N):
        below = [e for e, c in enumerate(cons) if d in model.ancestors(c.body)]
        chain = [d]                                    # the joints from d up to N_anc(d)
        while model.bodies[chain[-1]].parent not in N and model.bodies[chain[-1]].parent != -1:
            chain.append(model.bodies[chain[-1]].parent)
        rows = constraint_space(model, chain, sum(len(cons[e].rows) for e in below))
        nodes[d] = Node(d, rows or (split_roots and d in roots), below)
    return nodes


def constraint_space(model: Model, chain, m: int) -> bool:
    """Whether a branching body with m rows below it and these joints up to the next one
    costs fewer operations in constraint-space form than in frame form (estimates per
    joint of nv dofs carrying c columns: ``nv (nv + 1) c`` to solve with D, ``nv c (c+1)``
    for the symmetric update, ``(12 nv + 42) c`` to project and transform when it has a
    parent; then per pair of rows, 1 addition against a 6-term product, plus ``K P^T``
    and ``^0Omega K^T`` (66 m) and the 6 x 6 sandwich of line 13 (640) in frame form)."""
    def chain_cost(c):
        total = 0
        for i in chain:
            nv = model.bodies[i].nv
            total += nv * (nv + 1) * c + nv * c * (c + 1)
            if model.bodies[i].parent != -1:
                total += (12 * nv + 42) * c
        return total
    return chain_cost(m) + m * m / 2 <= chain_cost(6) + 66 * m + 5.5 * m * m + 640


def sweep(model: Model, q, liMi, S, IA, nodes, cons, be) -> None:
    """Algorithm 5 lines 5-11 (with line 16), leaves to root over the trees holding
    constraints: articulated inertias, and along each branching body's chain its
    propagator (``^iK^T`` or ``^iP_d``) and ``rel``; fills the nodes' fields."""
    roots = {model.ancestors(d)[-1] for d in nodes}
    chain: dict = {}                                   # body -> (d, propagator, rel) arriving at it
    eye = be.eye(6)
    for i in reversed(range(model.nbodies)):
        if model.ancestors(i)[-1] not in roots:
            continue
        p = model.bodies[i].parent
        U, Dfac = joint_factor(model, i, S, IA, be)
        DinvUt = None
        if p != -1:
            DinvUt = dsolve(Dfac, U.T, be)
            pass_inertia(model, i, q, IA, U, DinvUt, be)
        if i in nodes:
            n = start(nodes[i], nodes, cons, be)
            d, F, rel = i, (n.kt if n.rows else None), None
        elif i in chain:
            d, F, rel = chain.pop(i)
        else:
            continue                                   # supports no constraint
        Q = S[i].T if F is None else S[i].T @ F       # line 10
        rel = add(rel, quadratic_form(Dfac, Q, be))
        if p != -1:                                    # line 9: X_i^* P_i
            F = project_force(U, DinvUt, S[i], eye if F is None else F)
            F = be.hcat([act_force(liMi[i], F[:, k:k + 1], be) for k in range(F.shape[1])])
        if p == -1 or p in nodes:
            n = nodes[d]
            n.anc, n.rel = p, rel
            if p != -1:
                n.up = None if n.rows else F
                n.arr = F if n.rows else F @ n.kt      # line 16: ^aK^T = ^aP_d ^dK^T
                nodes[p].children.append(d)
        else:
            chain[p] = (d, F, rel)


def start(node: Node, nodes, cons, be) -> Node:
    """``kt = ^dK^T`` of a branching body: its children's arrived columns, then its own
    constraints' ``K^A^T`` (``node.cons`` reordered to match)."""
    cols, order = [], []
    for c in node.children:
        cols.append(nodes[c].arr)
        order += nodes[c].cons
    own = [e for e in node.cons if cons[e].body == node.body]
    node.cons = order + own
    node.kt = be.hcat(cols + [cons[e].KA.T for e in own])
    return node


def coupling(model: Model, nodes, cons, be) -> dict:
    """Line 18: ``L_ef`` for e <= f as {(e, f): size_e x size_f block}: from the common
    ancestor up, the constraint-space blocks ``rel`` and, per run of frame-form bodies,
    ``^kK_e ^0Omega_k ^kK_f^T`` at its lowest member k."""
    X = {}
    L = {}
    for f, cf in enumerate(cons):
        for e in range(f + 1):
            k, t = common_ancestor(model, cons[e].body, cf.body), None
            while k != -1:
                n = nodes[k]
                if n.rows:
                    t = add(t, n.rel[span(n, cons, e), span(n, cons, f)])
                    k = n.anc
                    continue
                if (f, k) not in X:
                    X[(f, k)] = n.om0 @ n.kt[:, span(n, cons, f)]
                t = add(t, n.kt[:, span(n, cons, e)].T @ X[(f, k)])
                while k != -1 and not nodes[k].rows:    # the run's om0 covers its members
                    k = nodes[k].anc
            if t is not None:
                L[(e, f)] = t
    return L


def span(node: Node, cons, e) -> slice:
    """Constraint e's columns in the node's order."""
    o = 0
    for c in node.cons:
        if c == e:
            break
        o += len(cons[c].rows)
    return slice(o, o + len(cons[e].rows))


def quadratic_form(Dfac, Q, be):
    """``Q^T D^-1 Q`` from the factor of D (:func:`articulated.joint_factor`'s convention): for a
    multi-DoF joint ``D = L diag(d) L^T`` gives ``Y^T diag(1/d) Y`` with ``Y = L^-1 Q``,
    half of an LDL^T solve per column."""
    if not isinstance(Dfac, tuple):
        return sym_product(Q, Q * Dfac, be)
    L, _, dinv = Dfac
    Y = []
    for i in range(len(dinv)):
        y = Q[i:i + 1, :]
        for k in range(i):
            y = y - L[i][k] * Y[k]
        Y.append(y)
    return sym_product(be.vcat(Y), be.vcat([y * dinv[i] for i, y in enumerate(Y)]), be)


def common_ancestor(model: Model, a: int, b: int) -> int:
    """The deepest body supporting both a and b (-1 if none)."""
    anc = set(model.ancestors(a))
    while b != -1 and b not in anc:
        b = model.bodies[b].parent
    return b


def add(a, b):
    """``a + b`` with None as zero."""
    return b if a is None else a if b is None else a + b
