"""A compiled kernel called from Python at C speed.

``kernel(*inputs)`` returns what ``gen.run`` returns (vectors 1-D, matrices 2-D in the
C's column-major layout, ``iterations`` an ``int`` and ``residual`` a ``float``);
``kernel(*inputs, out=(...))`` writes caller arrays instead and allocates nothing
(``out`` a tuple or list of one array per output, or the array of a one-output kernel).
``kernel.call(...)`` is the same call, cheaper from Python (:attr:`Kernel.call`).

**The fast path.**  Where the extension :mod:`gen.fastcall` compiled, ``Kernel.__call__``
is its ``Dispatch``: ``kernel(...)`` goes from the interpreter to the kernel's ``Caller``
in C without a Python frame.  A float64 input whose memory already has the kernel's
layout (any contiguous vector of the right size: 1-D, ``(n, 1)``, ``(1, n)``, C or F
order) is handed to the C as it is; the Caller tests the unit norms of ``q``'s
quaternions and (cos, sin) pairs, the C wrapper every input for NaN and inf
(``RBDGEN_ERR_NONFINITE_INPUT``) and run-time parameters for their range.  Anything the
Caller does not take as it is (another layout or type, a wrong size, a unit norm off)
goes to :meth:`Kernel._slow`, which converts once or refuses with the one-line message
``gen.run`` gives (:func:`gen.api.check_inputs`); a non-zero return code to
:meth:`Kernel._after_fast`.  Outputs are allocated in the C's layout (a matrix as an
F-ordered ``(rows, cols)`` array), so nothing is copied after the call.  Without the
extension, ``_slow`` is the call (cffi, ``ffi.from_buffer``; the workspace one buffer
per thread; cffi releases the GIL during the call): same results, ~1-2 us more.

**Caller outputs** (``out=``): one array per output, float64, of the output's size and
layout: a vector any contiguous array of its size; a matrix an F-contiguous
``(rows, cols)`` array (Eigen's and Pinocchio's layout) or a contiguous 1-D array of
``rows * cols`` (column-major).  Anything else is refused in one line: writing through a
temporary would allocate.

**Outputs kept across calls** (as Pinocchio's Data keeps its tensors): a kernel whose
outputs are mostly structural zeros writes them whole on every call (talos
``rnea_second_order``: four 50 x 2500 tensors, 94 % zeros, ~125 us of its call).
``out = kernel.zero_outputs()`` makes the output arrays once, with the entries that do
not depend on the inputs written (C ``<symbol>_zero_outputs``), and
``kernel.update(*inputs, out=out)`` writes only the others (C ``<symbol>_update``, fast
path as ``kernel(...)``): the same values as ``kernel(*inputs)``, to the bit.  A kernel
without those entries (no zero-filled output) runs its full call there.

**Batched kernels** (``batch = N``) take ``(k, n)`` stacks (or lists of k vectors) and
return a leading axis of k; the states are packed into lanes and the outputs unpacked
by whole-array transposes, and checked by vectorised tests, with one C call per N states.
"""
from __future__ import annotations

import threading

import numpy as np

from .api import SCALAR_OUTPUTS, UNIT_NORM, UNIT_NORM_TOL, check_inputs, check_unit_norms, warn_not_converged
from . import fastcall
from .errors import RbdgenError

RETURN_CODES = {-1: "an input holds NaN or inf", -2: "an output is NaN or inf (singular model or extreme state)",
                -3: "a run-time option or parameter is out of range", -4: "not converged (max_iter reached with residual > tol)"}
NOT_CONVERGED = -4      # RBDGEN_ERR_NOT_CONVERGED: warned (gen.errors.NotConvergedWarning), outputs returned
F64 = np.dtype(np.float64)


def unit_slices(model) -> list[tuple[int, int]]:
    """``(start, stop)`` in ``q`` of every quaternion and (cos, sin) pair that must be unit
    (:func:`gen.api.check_unit_norms`)."""
    out = []
    for b in model.bodies:
        if b.kind in UNIT_NORM and b.mimic is None:
            off, n = UNIT_NORM[b.kind]
            out.append((b.idx_q + off, b.idx_q + off + n))
    return out


class Kernel:
    """A compiled kernel (module docstring).  An early-exit driver that stops at
    ``max_iter`` above ``tol`` (``RBDGEN_ERR_NOT_CONVERGED``) returns its outputs and warns
    :class:`gen.errors.NotConvergedWarning`, as ``gen.run`` does; other non-zero codes
    raise :class:`RbdgenError`; ``call_raw`` exposes the C return code."""

    def __init__(self, folder, module, model, algorithm, cset=None, options=None):
        self.folder = folder
        self.model, self.algorithm, self.cset = model, algorithm, cset
        self.options: dict = dict(options or {})
        self.module, self.ffi, self.lib = module, module.ffi, module.lib
        self.manifest: dict = folder.manifest
        self.function: dict = self.manifest["functions"][0]
        self.symbol: str = self.function["symbol"]
        self.work_size: int = self.function["work_size"]
        self._c = getattr(self.lib, self.symbol)
        #: states per C call (None: the scalar kernel)
        self.batch: int | None = self.manifest.get("batch")
        self._inputs = [(i["name"], i["size"]) for i in self.function["inputs"]]
        self._outputs = [(o["name"], o["rows"], o["cols"]) for o in self.function["outputs"]]
        names = [n for n, _ in self._inputs]
        self._q = names.index("q") if "q" in names else None
        self._unit = unit_slices(model) if self._q is not None else []
        self._local = threading.local()
        self._fb = self.ffi.from_buffer
        self._scalars = any(name in SCALAR_OUTPUTS for name, _, _ in self._outputs)
        kinds = [{"iterations": 1, "residual": 2}.get(name, 0) for name, _, _ in self._outputs]
        self._fast = fastcall.caller(
            self.ffi, self.lib, self.symbol, [n for _, n in self._inputs], [(r, c) for _, r, c in self._outputs],
            kinds, self.work_size, self._q, self._unit, 1.9 * UNIT_NORM_TOL, self.batch or 0)
        if self._fast is not None:
            fastcall.install_dispatch(Kernel)
        # the entries apart from the structural zeros (gen.codegen.zero_fill): None without them
        self._zero_c = getattr(self.lib, self.function["zero_outputs"]) if "zero_outputs" in self.function else None
        self._update_c = getattr(self.lib, self.function["update"]) if "update" in self.function else None
        self._fast_update = None if self._update_c is None or self._fast is None else fastcall.caller(
            self.ffi, self.lib, self.function["update"], [n for _, n in self._inputs],
            [(r, c) for _, r, c in self._outputs], kinds, self.work_size, self._q, self._unit,
            1.9 * UNIT_NORM_TOL)

    @property
    def header_path(self):
        return self.folder.header_path

    @property
    def sources(self):
        return self.folder.sources

    @property
    def path(self):
        return self.folder.path

    def __repr__(self) -> str:
        return f"<Kernel {self.symbol} at {self.folder.path}>"

    # --- buffers ------------------------------------------------------------------------

    def _work(self):
        """This thread's workspace, as a cffi pointer (made once per thread)."""
        w = getattr(self._local, "work", None)
        if w is None:
            self._local.buf = np.empty(max(1, self.work_size) * (self.batch or 1))
            w = self._local.work = self.ffi.from_buffer("double[]", self._local.buf)
        return w

    def _input(self, x, name: str, n: int, inputs):
        """``x`` as a contiguous float64 array of ``n`` entries (converted once); a shape or
        type ``gen.run`` refuses gets its message."""
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            a = None
        if a is None or a.size != n or a.ndim > 2 or (a.ndim == 2 and 1 not in a.shape):
            self._refuse(inputs)
        return np.ascontiguousarray(a)

    def _refuse(self, inputs, rc: int | None = None):
        """Raise the one-line error ``gen.run`` gives for ``inputs`` (or, when they pass its
        checks, the C return code's meaning)."""
        check_inputs(self.model, self.algorithm, inputs, self.cset, self.options)
        raise RbdgenError(f"{self.symbol} returned {rc}: {RETURN_CODES.get(rc, 'unknown error')}")

    def _unit_norms(self, q) -> None:
        flat = q.reshape(-1)
        for start, stop in self._unit:
            s = 0.0
            for x in flat[start:stop].tolist():
                s += x * x
            if abs(s - 1.0) > 1.9 * UNIT_NORM_TOL:       # |norm^2 - 1| = |norm - 1| (norm + 1)
                check_unit_norms(self.model, flat)          # decides, with gen.run's message

    def _out(self, out, k: int | None = None):
        """The output arrays: new ones in the C's layout, or the caller's, checked."""
        if out is None:
            if k is None:
                return [np.empty(rows) if cols == 1 else np.empty((rows, cols), order="F")
                        for _, rows, cols in self._outputs]
            return None
        out = (out,) if isinstance(out, np.ndarray) else tuple(out)
        if len(out) != len(self._outputs):
            raise RbdgenError(f"{self.symbol}: out= takes {len(self._outputs)} arrays "
                              f"({', '.join(n for n, _, _ in self._outputs)}), got {len(out)}")
        for o, (name, rows, cols) in zip(out, self._outputs):
            if not _writable_layout(o, rows, cols, k):
                want = f"({rows}, {cols}) F-ordered or {rows * cols} contiguous" if cols > 1 else f"{rows} contiguous"
                lead = f"k = {k} stacked " if k is not None else ""
                raise RbdgenError(f"{self.symbol}: out array for '{name}' must be {lead}writable float64, {want}; "
                                  f"got {getattr(o, 'dtype', type(o).__name__)} shape {getattr(o, 'shape', None)}")
        return list(out)

    # --- calls --------------------------------------------------------------------------

    def call_raw(self, inputs, outputs, work=None) -> int:
        """Call the C function on contiguous float64 arrays as they are (their sizes checked,
        nothing else); returns its return code.  ``work`` defaults to this thread's buffer."""
        fb = self.ffi.from_buffer
        per = self.batch or 1
        ins = []
        for a, (name, n) in zip(inputs, self._inputs):
            a = np.ascontiguousarray(a, dtype=float)
            if a.size != n * per:
                raise RbdgenError(f"{self.symbol}: input '{name}' must have {n * per} entries, got {a.size}")
            ins.append(fb("double[]", a))
        outs = []
        for o, (name, rows, cols) in zip(outputs, self._outputs):
            if not (isinstance(o, np.ndarray) and o.dtype == F64 and o.size == rows * cols * per
                    and (o.flags.c_contiguous or o.flags.f_contiguous) and o.flags.writeable):
                raise RbdgenError(f"{self.symbol}: output '{name}' must be a writable contiguous float64 array of "
                                  f"{rows * cols * per} entries")
            outs.append(fb("double[]", o if o.flags.c_contiguous else o.T))
        if len(ins) != len(self._inputs) or len(outs) != len(self._outputs):
            raise RbdgenError(f"{self.symbol} takes {len(self._inputs)} inputs and {len(self._outputs)} outputs")
        if work is not None and np.asarray(work).size < self.work_size * per:
            raise RbdgenError(f"{self.symbol}: work must hold {self.work_size * per} doubles")
        w = self._work() if work is None else fb("double[]", np.ascontiguousarray(work, dtype=float))
        return self._c(*ins, *outs, w)

    def __call__(self, *inputs, out=None):
        """What the extension's dispatcher does (:func:`gen.fastcall.install_dispatch`
        replaces this method by it where the extension compiled)."""
        if self._fast is not None:
            r = self._fast(*inputs, out=out)
            if r is not None:
                return r if r.__class__ is not list else self._after_fast(r, *inputs, out=out)
        return self._slow(*inputs, out=out)

    #: ``kernel.call(...)`` is ``kernel(...)`` through CPython's method call, which passes
    #: keywords without building a dict (``kernel(..., out=...)`` on a Python object
    #: builds one, and an argument tuple: 0.1-0.4 us more per call, measured)
    call = __call__

    def zero_outputs(self, out=None):
        """The output arrays :meth:`update` takes: new ones in the C's layout (or the
        caller's ``out=``, checked as for a call) with the entries that do not depend on
        the inputs written (``<symbol>_zero_outputs``: the structural zeros and
        constants; zeros for a kernel without that entry)."""
        if self.batch:
            raise RbdgenError(f"{self.symbol}: a batched kernel has no update entry point: call it whole")
        outs = self._out(out) if out is not None else [
            np.zeros(rows) if cols == 1 else np.zeros((rows, cols), order="F") for _, rows, cols in self._outputs]
        if self._zero_c is not None:
            self._zero_c(*[self._fb("double[]", o if o.flags.c_contiguous else o.T) for o in outs])
        elif out is not None:
            for o in outs:
                o[...] = 0.0
        return outs[0] if len(outs) == 1 else tuple(outs)

    def update(self, *inputs, out):
        """``kernel(*inputs, out=out)`` writing and checking only the entries of ``out``
        that depend on the inputs (``<symbol>_update``; the full call for a kernel without
        it); ``out`` must hold what :meth:`zero_outputs` or an earlier call wrote.
        Returns ``out`` (its one array for a one-output kernel).  A refused call raises
        as ``kernel(...)`` does, after writing the structural entries back (the C filled
        the outputs with NaN), so ``out`` may be passed again."""
        if out is None:
            raise RbdgenError(f"{self.symbol}: update writes into out=, the arrays zero_outputs() made")
        if self._update_c is None:
            return self.call(*inputs, out=out)
        if self._fast_update is not None:
            r = self._fast_update(*inputs, out=out)
            if r is not None:
                if r.__class__ is not list:
                    return r
                self.zero_outputs(out)
                self._failed(r[0], inputs, list(out) if isinstance(out, (tuple, list)) else [out])
        return self._slow(*inputs, out=out, entry=self._update_c)

    def _after_fast(self, r, *inputs, out=None):
        """The fast call's ``[rc, outputs]`` (``[rc, first state]`` for a batch): a batch
        names its failing states, a scalar kernel warns or refuses (:meth:`_failed`)."""
        if self.batch:
            self._batch_refuse(self._stacks(inputs), r[1])
        return self._fast_failed(r[0], inputs, r[1])

    def _slow(self, *inputs, out=None, entry=None):
        """The call in Python and cffi: arguments the fast call leaves (other layouts,
        types, refusals, batched ``out=``), or every call without the extension;
        ``entry``: the C function called instead of the kernel's (:meth:`update`'s, whose
        refusal writes the structural entries back first)."""
        if self.batch:
            return self._call_batch(inputs, out)
        if len(inputs) != len(self._inputs):
            self._refuse(inputs)
        fb = self._fb
        ptrs, arrays = [], []
        for x, (name, n) in zip(inputs, self._inputs):
            # as it is: float64, n entries, a vector (1-D or (n, 1) / (1, n)): C-contiguous
            # for the buffer protocol, which from_buffer asks for (else TypeError/BufferError)
            if x.__class__ is not np.ndarray or x.dtype is not F64 or x.size != n or x.ndim > 1 and 1 not in x.shape:
                x = self._input(x, name, n, inputs)
            try:
                ptrs.append(fb("double[]", x))
            except (TypeError, ValueError, BufferError):
                x = np.ascontiguousarray(x)
                ptrs.append(fb("double[]", x))
            arrays.append(x)
        if self._unit:
            self._unit_norms(arrays[self._q])
        outs = self._out(out)
        rc = (entry or self._c)(*ptrs, *[fb("double[]", o if o.flags.c_contiguous else o.T) for o in outs],
                                self._work())
        if rc:
            if entry is not None:
                self.zero_outputs(outs)
            self._failed(rc, inputs, outs)
        if out is not None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        if self._scalars:
            outs = [float(o[0]) if name == "residual" else int(o[0]) if name == "iterations" else o
                    for o, (name, _, _) in zip(outs, self._outputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _fast_failed(self, rc: int, inputs, result):
        """The fast call's non-zero code (:meth:`_failed`); not converged returns its outputs."""
        self._failed(rc, inputs, list(result) if isinstance(result, tuple) else [result])
        return result

    def _failed(self, rc: int, inputs, outs) -> None:
        """A non-zero code: not converged warns (the outputs are the last iterate, as from
        ``gen.run``), anything else is refused with gen.run's message (:meth:`_refuse`)."""
        if rc != NOT_CONVERGED:
            self._refuse(inputs, rc)
        warn_not_converged(self.symbol, self.model.name, {"tol": self.manifest["tolerance"],
                                                          "max_iter": self.manifest["max_iter"]}, outs)

    def _stacks(self, inputs) -> list[np.ndarray]:
        """Each input as a ``(k, n)`` float64 array (one-line errors otherwise)."""
        stacks = []
        for x in inputs:
            try:
                a = np.asarray(x, dtype=float)
            except (TypeError, ValueError):
                raise RbdgenError(f"{self.symbol}: every input must be k stacked states (a (k, n) array or a "
                                  f"list of k vectors)") from None
            if a.ndim == 3 and a.shape[2] == 1:
                a = a[:, :, 0]
            if a.ndim != 2 or a.shape[0] < 1:
                raise RbdgenError(f"{self.symbol} evaluates {self.batch} states per call: give each input as a "
                                  f"(k, n) array or a list of k vectors, got shape {a.shape}")
            stacks.append(a)
        if len(stacks) != len(self._inputs):
            self._refuse([s[0] for s in stacks])
        if len({s.shape[0] for s in stacks}) > 1:
            raise RbdgenError(f"{self.symbol}: the inputs hold different numbers of states "
                              f"({', '.join(str(s.shape[0]) for s in stacks)})")
        for s, (name, n) in zip(stacks, self._inputs):
            if s.shape[1] != n:
                self._refuse([t[0] for t in stacks])
        return stacks

    def _check_states(self, stacks) -> None:
        """Vectorised tests of every state (finite, unit norms); the first failing state is
        refused with ``gen.run``'s message."""
        bad = ~np.all([np.isfinite(s).all(axis=1) for s in stacks], axis=0)
        if self._unit:
            q = stacks[self._q]
            for start, stop in self._unit:
                bad |= np.abs(np.sqrt(np.sum(q[:, start:stop] ** 2, axis=1)) - 1.0) > UNIT_NORM_TOL
        if bad.any():
            j = int(np.argmax(bad))
            check_inputs(self.model, self.algorithm, [s[j] for s in stacks], self.cset, self.options)

    def _batch_refuse(self, stacks, start: int):
        """A batched call starting at state ``start`` returned non-zero: an input ``gen.run``
        refuses gets its message; otherwise the call is repeated through
        ``<symbol>_status`` and every failing state named with its own code."""
        self._check_states(stacks)
        N, k, fb = self.batch, stacks[0].shape[0], self._fb
        idx = [min(j, k - 1) for j in range(start, start + N)]
        args = [np.ascontiguousarray(s[idx].T) for s in stacks]          # lanes innermost
        outs = [np.empty(rows * cols * N) for _, rows, cols in self._outputs]
        status = self.ffi.new("int[]", N)
        getattr(self.lib, f"{self.symbol}_status")(*[fb("double[]", a) for a in args],
                                                     *[fb("double[]", o) for o in outs], self._work(), status)
        bad = [(start + lane, status[lane]) for lane in range(N) if start + lane < k and status[lane]]
        raise RbdgenError(f"{self.symbol}: " + "; ".join(f"state {j}: {RETURN_CODES.get(c, f'error {c}')}"
                                                         for j, c in bad))

    def _call_batch(self, inputs, out=None):
        """k stacked states through the N-lane C function, N at a time (the last call padded
        with copies of the last state): outputs ``(k, size)`` for vectors, ``(k, rows,
        cols)`` for matrices."""
        N = self.batch
        stacks = self._stacks(inputs)
        self._check_states(stacks)
        if self._fast is not None and out is None:
            r = self._fast(*[np.ascontiguousarray(s) for s in stacks])
            if r is not None and r.__class__ is not list:
                return r
            if r is not None:
                self._batch_refuse(stacks, r[1])
        k = stacks[0].shape[0]
        chunks = -(-k // N)
        pad = chunks * N - k
        # lanes innermost: element i of lane l at [i*N + l]: (chunks, n, N), one copy per input
        packed = [np.ascontiguousarray(np.concatenate([s, np.repeat(s[-1:], pad, axis=0)]) if pad else s)
                  .reshape(chunks, N, -1).transpose(0, 2, 1).copy() for s in stacks]
        raw = [np.empty((chunks, rows * cols, N)) for _, rows, cols in self._outputs]
        fb, c, w = self.ffi.from_buffer, self._c, self._work()
        for j in range(chunks):
            rc = c(*[fb("double[]", p[j]) for p in packed], *[fb("double[]", r[j]) for r in raw], w)
            if rc:
                self._batch_refuse(stacks, j * N)
        result = []
        for r, (name, rows, cols) in zip(raw, self._outputs):
            flat = r.transpose(0, 2, 1).reshape(chunks * N, rows * cols)[:k]
            if name in SCALAR_OUTPUTS:
                result.append(flat[:, 0].astype(SCALAR_OUTPUTS[name]))
            else:
                result.append(flat if cols == 1 else flat.reshape(k, cols, rows).transpose(0, 2, 1))
        if out is not None:
            for dst, src in zip(self._out(out, k), result):
                dst[...] = src
            result = list(out) if not isinstance(out, np.ndarray) else [out]
        return result[0] if len(result) == 1 else tuple(result)


def _writable_layout(o, rows: int, cols: int, k: int | None) -> bool:
    """``o`` is a writable float64 array the C can write one output into as it is (a
    stacked output of a batched call: any float64 array of shape ``(k, ...)``)."""
    if not (isinstance(o, np.ndarray) and o.dtype == F64 and o.flags.writeable):
        return False
    if k is not None:
        return o.shape[0] == k and o[0].size == rows * cols
    if cols == 1:
        return o.size == rows and (o.flags.c_contiguous or o.flags.f_contiguous) and (o.ndim < 2 or 1 in o.shape)
    return (o.ndim == 2 and o.shape == (rows, cols) and o.flags.f_contiguous) or \
        (o.ndim == 1 and o.size == rows * cols and o.flags.c_contiguous)
