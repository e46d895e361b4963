/* rbdgen's fast call: a compiled kernel's C function called from Python with NumPy
 * arrays, in one C-level step (gen/fastcall.py compiles this file once per Python and
 * NumPy ABI; gen/kernel.py uses it when it compiled).
 *
 * A Caller holds the kernel's function pointer and its layout: input sizes, output
 * shapes (a matrix is returned F-ordered, the C's column-major layout), which outputs
 * are one-number diagnostics (iterations: int, residual: float), the workspace size and
 * the unit-norm slices of q.  caller(*inputs[, out=tuple]) returns
 *   - the outputs (one object, or a tuple) when the C returned 0;
 *   - [rc, outputs] (a list) when it returned another code (Python explains it);
 *   - None when an argument is not already in the kernel's layout (not a float64 NumPy
 *     vector of the right size, a caller output of the wrong layout) or a quaternion of
 *     q is not unit: Python then converts or refuses with gen.run's one-line message.
 * NaN and inf are tested by the kernel's own wrapper (RBDGEN_ERR_NONFINITE_INPUT).
 * The workspace is on the calling thread's stack (up to STACK_WORK doubles) or allocated
 * per call, and the GIL released during the C call, so one Caller is safe from several
 * threads.
 *
 * A Dispatch is gen.kernel.Kernel's __call__ (a method descriptor, so kernel(...) reaches
 * C without a Python frame): it calls the kernel's Caller (attribute _fast) and hands
 * Python only what the Caller leaves to it (None: kernel._slow(...); a list:
 * kernel._after_fast(list, ...)). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_IN 8
#define MAX_OUT 12
#define MAX_UNIT 32
/* a workspace of up to this many doubles is on the C stack of the calling thread (4 kB;
   no allocation per call), a larger one allocated per call */
#define STACK_WORK 512

static PyObject *s_out;                 /* "out", interned */

typedef int (*kernel_fn)();

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *fn;
    int nin, nout, q, nunit;
    Py_ssize_t in_size[MAX_IN];
    npy_intp rows[MAX_OUT], cols[MAX_OUT];
    int kind[MAX_OUT];                  /* 0: array, 1: int, 2: float */
    Py_ssize_t work;
    Py_ssize_t unit_start[MAX_UNIT], unit_stop[MAX_UNIT];
    double unit_tol;                    /* on |norm^2 - 1| */
    int lanes;                          /* a batched kernel's N (0: one state per call) */
} Caller;

/* a float64 vector of n entries whose memory the C can read as it is */
static const double *as_vector(PyObject *o, Py_ssize_t n)
{
    PyArrayObject *a;
    int nd;
    if (!PyArray_Check(o)) return NULL;
    a = (PyArrayObject *)o;
    nd = PyArray_NDIM(a);
    if (PyArray_TYPE(a) != NPY_DOUBLE || PyArray_SIZE(a) != n || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    if (nd > 2 || (nd == 2 && PyArray_DIM(a, 0) != 1 && PyArray_DIM(a, 1) != 1)) return NULL;
    if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) return NULL;
    return (const double *)PyArray_DATA(a);
}

/* a caller output the C can write as it is: a vector contiguous; a matrix F-ordered
   (rows, cols) or 1-D column-major */
static double *as_output(PyObject *o, npy_intp rows, npy_intp cols)
{
    PyArrayObject *a;
    if (!PyArray_Check(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_DOUBLE || PyArray_SIZE(a) != rows * cols || !PyArray_ISWRITEABLE(a)
        || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    if (cols == 1) {
        int nd = PyArray_NDIM(a);
        if (nd > 2 || (nd == 2 && PyArray_DIM(a, 0) != 1 && PyArray_DIM(a, 1) != 1)) return NULL;
        if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) return NULL;
    } else if (PyArray_NDIM(a) == 2) {
        if (PyArray_DIM(a, 0) != rows || PyArray_DIM(a, 1) != cols || !PyArray_IS_F_CONTIGUOUS(a)) return NULL;
    } else if (PyArray_NDIM(a) != 1 || !PyArray_IS_C_CONTIGUOUS(a)) {
        return NULL;
    }
    return (double *)PyArray_DATA(a);
}

static int call_kernel(void *fn, int n, double **p)
{
    kernel_fn f = (kernel_fn)fn;
    switch (n) {   /* every argument a double pointer: the call matches the definition */
    case 3: return ((int (*)(double *, double *, double *))f)(p[0], p[1], p[2]);
    case 4: return ((int (*)(double *, double *, double *, double *))f)(p[0], p[1], p[2], p[3]);
#define P double *
    case 5: return ((int (*)(P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4]);
    case 6: return ((int (*)(P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5]);
    case 7: return ((int (*)(P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
    case 8: return ((int (*)(P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    case 9: return ((int (*)(P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]);
    case 10: return ((int (*)(P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                                              p[8], p[9]);
    case 11: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                                                                 p[8], p[9], p[10]);
    case 12: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                                                    p[7], p[8], p[9], p[10], p[11]);
    case 13: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                                                                       p[7], p[8], p[9], p[10], p[11], p[12]);
    case 14: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5],
                                                                          p[6], p[7], p[8], p[9], p[10], p[11],
                                                                          p[12], p[13]);
    case 15: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4], p[5],
                                                                             p[6], p[7], p[8], p[9], p[10], p[11],
                                                                             p[12], p[13], p[14]);
    case 16: return ((int (*)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P))f)(p[0], p[1], p[2], p[3], p[4],
                                                                                p[5], p[6], p[7], p[8], p[9], p[10],
                                                                                p[11], p[12], p[13], p[14], p[15]);
#undef P
    default: return -99;
    }
}

static int unit_norms_ok(const Caller *c, const double *q)
{
    int u;
    for (u = 0; u < c->nunit; ++u) {
        double s = 0.0;
        Py_ssize_t i;
        for (i = c->unit_start[u]; i < c->unit_stop[u]; ++i) s += q[i] * q[i];
        if (!(s - 1.0 <= c->unit_tol && 1.0 - s <= c->unit_tol)) return 0;
    }
    return 1;
}

/* a (k, n) C-contiguous float64 stack of k states */
static const double *as_stack(PyObject *o, Py_ssize_t n, npy_intp *k)
{
    PyArrayObject *a;
    if (!PyArray_Check(o)) return NULL;
    a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_DOUBLE || PyArray_NDIM(a) != 2 || PyArray_DIM(a, 1) != n || PyArray_DIM(a, 0) < 1
        || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    if (*k < 0) *k = PyArray_DIM(a, 0);
    return PyArray_DIM(a, 0) == *k ? (const double *)PyArray_DATA(a) : NULL;
}

/* Batched kernels: k stacked states through the N-lane function, N at a time (the last
   call padded with copies of the last state), lanes packed and unpacked here (element i
   of lane l at [i*N + l]).  Outputs: (k, rows) vectors, (k, rows, cols) matrices with
   each state's matrix F-ordered, (k,) iterations (int64) and residuals.  [rc, first
   state of the failing call] on a non-zero code. */
static PyObject *batch_call(Caller *c, PyObject *const *args)
{
    const double *x[MAX_IN];
    double *p[MAX_IN + MAX_OUT + 1], *dst[MAX_OUT], *buf = NULL;
    PyObject *outs[MAX_OUT] = {NULL}, *result = NULL;
    npy_intp k = -1, j0, j;
    Py_ssize_t total = 0, size[MAX_OUT], e, l, i;
    int o, rc = 0, N = c->lanes;

    for (i = 0; i < c->nin; ++i) {
        if (!(x[i] = as_stack(args[i], c->in_size[i], &k))) Py_RETURN_NONE;
        total += c->in_size[i];
    }
    if (c->q >= 0)
        for (j = 0; j < k; ++j)
            if (!unit_norms_ok(c, x[c->q] + j * c->in_size[c->q])) Py_RETURN_NONE;
    for (o = 0; o < c->nout; ++o) {
        npy_intp dims[3] = {k, c->rows[o], c->cols[o]};
        size[o] = c->rows[o] * c->cols[o];
        total += size[o];
        if (c->kind[o]) {
            outs[o] = PyArray_SimpleNew(1, dims, c->kind[o] == 1 ? NPY_INT64 : NPY_DOUBLE);
        } else if (c->cols[o] == 1) {
            outs[o] = PyArray_SimpleNew(2, dims, NPY_DOUBLE);
        } else {
            npy_intp strides[3] = {(npy_intp)(size[o] * sizeof(double)), sizeof(double),
                                   (npy_intp)(c->rows[o] * sizeof(double))};
            outs[o] = PyArray_New(&PyArray_Type, 3, dims, NPY_DOUBLE, strides, NULL, 0, 0, NULL);
        }
        if (!outs[o]) goto done;
        dst[o] = (double *)PyArray_DATA((PyArrayObject *)outs[o]);
    }
    buf = (double *)PyMem_RawMalloc((size_t)(total * N + (c->work > 0 ? c->work : 1)) * sizeof(double));
    if (!buf) { PyErr_NoMemory(); goto done; }
    p[0] = buf;
    for (i = 1; i < c->nin + c->nout + 1; ++i)
        p[i] = p[i - 1] + (i - 1 < c->nin ? c->in_size[i - 1] : size[i - 1 - c->nin]) * N;
    Py_BEGIN_ALLOW_THREADS
    for (j0 = 0; j0 < k && rc == 0; j0 += N) {
        for (i = 0; i < c->nin; ++i)
            for (l = 0; l < N; ++l) {
                const double *s = x[i] + (j0 + l < k ? j0 + l : k - 1) * c->in_size[i];
                for (e = 0; e < c->in_size[i]; ++e) p[i][e * N + l] = s[e];
            }
        rc = call_kernel(c->fn, c->nin + c->nout + 1, p);
        for (o = 0; o < c->nout; ++o) {
            const double *r = p[c->nin + o];
            Py_ssize_t n = N < k - j0 ? N : (Py_ssize_t)(k - j0);
            if (c->kind[o] == 1)
                for (l = 0; l < n; ++l) ((npy_int64 *)dst[o])[j0 + l] = (npy_int64)r[l];
            else if (c->kind[o] == 2)
                for (l = 0; l < n; ++l) dst[o][j0 + l] = r[l];
            else    /* element-major: the N lanes of an element share a cache line */
                for (e = 0; e < size[o]; ++e)
                    for (l = 0; l < n; ++l) dst[o][(j0 + l) * size[o] + e] = r[e * N + l];
        }
    }
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        result = Py_BuildValue("[in]", rc, (Py_ssize_t)(j0 - N));
        goto done;
    }
    if (c->nout == 1) {
        result = outs[0];
        outs[0] = NULL;
    } else if ((result = PyTuple_New(c->nout))) {
        for (o = 0; o < c->nout; ++o) { PyTuple_SET_ITEM(result, o, outs[o]); outs[o] = NULL; }
    }
done:
    PyMem_RawFree(buf);
    for (o = 0; o < c->nout; ++o) Py_XDECREF(outs[o]);
    return result;
}

static PyObject *caller_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Caller *c = (Caller *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), k;
    double *p[MAX_IN + MAX_OUT + 1], scalars[MAX_OUT], stack_work[STACK_WORK];
    PyObject *outs[MAX_OUT] = {NULL}, *given = NULL, *const *given_items = NULL, *result;
    int i, rc;

    if (nargs != c->nin) Py_RETURN_NONE;
    if (c->lanes) {
        if (kwnames) Py_RETURN_NONE;
        return batch_call(c, args);
    }
    if (kwnames) {
        if (PyTuple_GET_SIZE(kwnames) != 1
            || (PyTuple_GET_ITEM(kwnames, 0) != s_out           /* keywords are interned: mostly the same object */
                && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "out") != 0))
            Py_RETURN_NONE;
        given = args[nargs];
        if (given == Py_None) {
            given = NULL;
        } else if (PyTuple_Check(given) || PyList_Check(given)) {
            if (PySequence_Fast_GET_SIZE(given) != c->nout) Py_RETURN_NONE;
            given_items = PySequence_Fast_ITEMS(given);
        } else if (c->nout == 1 && PyArray_Check(given)) {
            given_items = &args[nargs];       /* one output: the array itself */
        } else {
            Py_RETURN_NONE;
        }
    }
    for (i = 0; i < c->nin; ++i) {
        const double *x = as_vector(args[i], c->in_size[i]);
        if (!x) Py_RETURN_NONE;
        if (i == c->q && !unit_norms_ok(c, x)) Py_RETURN_NONE;
        p[i] = (double *)x;
    }
    for (i = 0; i < c->nout; ++i) {
        if (given) {
            p[c->nin + i] = as_output(given_items[i], c->rows[i], c->cols[i]);
            if (!p[c->nin + i]) Py_RETURN_NONE;
        } else if (c->kind[i]) {
            p[c->nin + i] = &scalars[i];
        } else {
            npy_intp dims[2] = {c->rows[i], c->cols[i]};
            outs[i] = PyArray_New(&PyArray_Type, c->cols[i] == 1 ? 1 : 2, dims, NPY_DOUBLE, NULL, NULL, 0,
                                  c->cols[i] == 1 ? 0 : NPY_ARRAY_F_CONTIGUOUS, NULL);
            if (!outs[i]) goto fail;
            p[c->nin + i] = (double *)PyArray_DATA((PyArrayObject *)outs[i]);
        }
    }
    p[c->nin + c->nout] = c->work <= STACK_WORK ? stack_work
                                                 : (double *)PyMem_RawMalloc((size_t)c->work * sizeof(double));
    if (!p[c->nin + c->nout]) { PyErr_NoMemory(); goto fail; }
    Py_BEGIN_ALLOW_THREADS
    rc = call_kernel(c->fn, c->nin + c->nout + 1, p);
    Py_END_ALLOW_THREADS
    if (p[c->nin + c->nout] != stack_work) PyMem_RawFree(p[c->nin + c->nout]);
    if (rc != 0 && rc != -4) {      /* refused: Python explains the code; the outputs are not read */
        for (k = 0; k < c->nout; ++k) Py_XDECREF(outs[k]);
        return Py_BuildValue("[iO]", rc, Py_None);
    }

    for (i = 0; i < c->nout; ++i) {
        if (given) {
            outs[i] = given_items[i];
            Py_INCREF(outs[i]);
        } else if (c->kind[i] == 1) {
            outs[i] = PyLong_FromDouble(scalars[i]);
        } else if (c->kind[i] == 2) {
            outs[i] = PyFloat_FromDouble(scalars[i]);
        }
        if (!outs[i]) goto fail;
    }
    if (c->nout == 1) {
        result = outs[0];
    } else {
        result = PyTuple_New(c->nout);
        if (!result) goto fail;
        for (i = 0; i < c->nout; ++i) PyTuple_SET_ITEM(result, i, outs[i]);
    }
    if (rc == 0) return result;
    {
        PyObject *failed = Py_BuildValue("[iN]", rc, result);
        return failed;
    }
fail:
    for (k = 0; k < c->nout; ++k) Py_XDECREF(outs[k]);
    return NULL;
}

static void caller_dealloc(PyObject *self) { PyObject_Free(self); }

static PyTypeObject CallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rbdgen_fastcall.Caller",
    .tp_basicsize = sizeof(Caller),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Caller, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = caller_dealloc,
    .tp_doc = "a compiled kernel's C function called with NumPy arrays (gen/fastcall.c)",
};

/* --- Dispatch: Kernel.__call__ ------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} Dispatch;

static PyObject *s_fast, *s_slow, *s_after_fast;       /* interned attribute names */

/* kernel(*inputs[, out=...]): args[0] is the kernel */
static PyObject *dispatch_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, i;
    PyObject *caller, *r, *stack[MAX_IN + 4];
    (void)self;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "Kernel.__call__ needs the kernel");
        return NULL;
    }
    if (!(caller = PyObject_GetAttr(args[0], s_fast))) return NULL;
    if (caller == Py_None) {
        Py_DECREF(caller);
        return PyObject_VectorcallMethod(s_slow, args, (size_t)nargs, kwnames);
    }
    r = PyObject_Vectorcall(caller, args + 1, (size_t)(nargs - 1), kwnames);
    Py_DECREF(caller);
    if (!r || (r != Py_None && !PyList_CheckExact(r))) return r;
    if (r == Py_None || nargs + nkw + 1 > MAX_IN + 4) {
        Py_DECREF(r);
        return PyObject_VectorcallMethod(s_slow, args, (size_t)nargs, kwnames);
    }
    /* kernel._after_fast(r, *inputs, **kw): the C's code, explained or warned in Python */
    stack[0] = args[0];
    stack[1] = r;
    for (i = 1; i < nargs + nkw; ++i) stack[i + 1] = args[i];
    {
        PyObject *res = PyObject_VectorcallMethod(s_after_fast, stack, (size_t)(nargs + 1), kwnames);
        Py_DECREF(r);
        return res;
    }
}

/* kernel.__call__ (attribute access): a bound method, as for a function */
static PyObject *dispatch_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (!obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyTypeObject DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rbdgen_fastcall.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(Dispatch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = dispatch_get,
    .tp_dealloc = caller_dealloc,
    .tp_doc = "Kernel.__call__: the kernel's Caller, Python only for what it leaves (gen/fastcall.c)",
};

static PyObject *make_dispatch(PyObject *mod, PyObject *noargs)
{
    Dispatch *d;
    (void)mod;
    (void)noargs;
    if (!(d = PyObject_New(Dispatch, &DispatchType))) return NULL;
    d->vectorcall = dispatch_call;
    return (PyObject *)d;
}

static int read_sizes(PyObject *seq, Py_ssize_t *out, int max, const char *what)
{
    Py_ssize_t n, i;
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return -1;
    n = PySequence_Fast_GET_SIZE(fast);
    if (n > max) { Py_DECREF(fast); PyErr_Format(PyExc_ValueError, "too many %s", what); return -1; }
    for (i = 0; i < n; ++i) {
        out[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] < 0 && PyErr_Occurred()) { Py_DECREF(fast); return -1; }
    }
    Py_DECREF(fast);
    return (int)n;
}

/* Caller(fn, in_sizes, rows, cols, kinds, work, q, unit_start, unit_stop, unit_tol, lanes) */
static PyObject *make_caller(PyObject *mod, PyObject *args)
{
    unsigned long long fn;
    PyObject *ins, *rows, *cols, *kinds, *ustart, *ustop;
    Py_ssize_t work, buf[MAX_OUT];
    int q, i, n;
    double tol;
    int lanes;
    Caller *c;
    (void)mod;
    if (!PyArg_ParseTuple(args, "KOOOOniOOdi", &fn, &ins, &rows, &cols, &kinds, &work, &q, &ustart, &ustop, &tol,
                          &lanes))
        return NULL;
    c = PyObject_New(Caller, &CallerType);
    if (!c) return NULL;
    c->vectorcall = caller_call;
    c->fn = (void *)(uintptr_t)fn;
    c->work = work;
    c->q = q;
    c->unit_tol = tol;
    c->lanes = lanes;
    if ((c->nin = read_sizes(ins, c->in_size, MAX_IN, "inputs")) < 0) goto fail;
    if ((c->nout = read_sizes(rows, buf, MAX_OUT, "outputs")) < 0) goto fail;
    for (i = 0; i < c->nout; ++i) c->rows[i] = buf[i];
    if ((n = read_sizes(cols, buf, MAX_OUT, "outputs")) != c->nout) goto fail;
    for (i = 0; i < n; ++i) c->cols[i] = buf[i];
    if ((n = read_sizes(kinds, buf, MAX_OUT, "outputs")) != c->nout) goto fail;
    for (i = 0; i < n; ++i) c->kind[i] = (int)buf[i];
    if ((c->nunit = read_sizes(ustart, c->unit_start, MAX_UNIT, "unit-norm slices")) < 0) goto fail;
    if (read_sizes(ustop, c->unit_stop, MAX_UNIT, "unit-norm slices") != c->nunit) goto fail;
    if (c->nin + c->nout + 1 > 16) { PyErr_SetString(PyExc_ValueError, "more than 16 arguments"); goto fail; }
    return (PyObject *)c;
fail:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "inconsistent kernel layout");
    Py_DECREF(c);
    return NULL;
}

static PyMethodDef methods[] = {
    {"Caller", make_caller, METH_VARARGS, "Caller(fn, in_sizes, rows, cols, kinds, work, q, unit_start, "
                                          "unit_stop, unit_tol, lanes)"},
    {"Dispatch", make_dispatch, METH_NOARGS, "Dispatch(): Kernel.__call__ through the kernel's Caller"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rbdgen_fastcall", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_rbdgen_fastcall(void)
{
    import_array();
    if (PyType_Ready(&CallerType) < 0 || PyType_Ready(&DispatchType) < 0) return NULL;
    if (!(s_fast = PyUnicode_InternFromString("_fast")) || !(s_slow = PyUnicode_InternFromString("_slow"))
        || !(s_after_fast = PyUnicode_InternFromString("_after_fast")) || !(s_out = PyUnicode_InternFromString("out")))
        return NULL;
    return PyModule_Create(&module);
}
