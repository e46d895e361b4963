"""The Python way in (gen/kernel.py): arrays in the kernel's layout used in place, caller
outputs, stacked states, and the same one-line errors as gen.run whatever the path."""
import numpy as np
import pytest
from conftest import load_or_skip

import gen
from gen import RbdgenError


@pytest.fixture(scope="module")
def solo_aba():
    model = load_or_skip("solo12")
    return model, gen.build(model, "aba")


@pytest.fixture(scope="module")
def solo_daba():
    model = load_or_skip("solo12")
    return model, gen.build(model, "aba_derivatives")


def state(model, seed):
    rng = np.random.default_rng(seed)
    return model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_out_writes_the_callers_arrays_bit_for_bit(solo_daba):
    model, k = solo_daba
    q, v, tau = state(model, 1)
    plain = k(q, v, tau)
    out = tuple(np.empty(p.shape, order="F") for p in plain)
    got = k(q, v, tau, out=out)
    assert all(g is o for g, o in zip(got, out)), "out= returns the caller's arrays"
    for g, p in zip(got, plain):
        assert np.array_equal(g, p)
    flat = tuple(np.empty(p.size) for p in plain)       # column-major 1-D
    k(q, v, tau, out=flat)
    for f, p in zip(flat, plain):
        assert np.array_equal(f.reshape(p.shape, order="F"), p)


def test_out_refuses_a_layout_it_would_have_to_copy(solo_daba):
    model, k = solo_daba
    q, v, tau = state(model, 2)
    c_order = tuple(np.empty((model.nv, model.nv)) for _ in range(3)) + (np.empty(model.nv),)
    with pytest.raises(RbdgenError, match="out array for 'ddq_dq' must be .*F-ordered"):
        k(q, v, tau, out=c_order)
    with pytest.raises(RbdgenError, match="out= takes 4 arrays"):       # ddq_dq, ddq_dv, Minv, ddq
        k(q, v, tau, out=(np.empty((model.nv, model.nv), order="F"),))
    with pytest.raises(RbdgenError, match="out array for 'ddq_dq'"):
        k(q, v, tau, out=tuple(np.empty((model.nv, model.nv), order="F", dtype=np.float32) for _ in range(3))
          + (np.empty(model.nv, dtype=np.float32),))


def test_views_and_orders_give_the_plain_calls_outputs(solo_aba):
    """Column views of an F-ordered (n, k) matrix (Eigen's layout), (n, 1) and (1, n)
    arrays, non-contiguous slices, lists and float32 all give the same bits."""
    model, k = solo_aba
    q, v, tau = state(model, 3)
    plain = k(q, v, tau)
    Q = np.asfortranarray(np.stack([q, q], axis=1))
    V = np.zeros((model.nv, 2))
    V[:, 1] = v
    assert np.array_equal(k(Q[:, 0], V[:, 1], tau), plain)          # contiguous / strided views
    assert np.array_equal(k(q.reshape(-1, 1), v.reshape(1, -1), list(tau)), plain)
    wide = np.zeros(2 * model.nv)
    wide[::2] = tau
    assert np.array_equal(k(q, v, wide[::2]), plain)


def test_batch_stacks_equal_the_scalar_kernel():
    model = load_or_skip("solo12")
    k8, k1 = gen.build(model, "aba", batch=8), gen.build(model, "aba", scalar_trig="vector")
    rng = np.random.default_rng(4)
    n = 21                                              # not a multiple of the lanes: padded
    Q = np.stack([model.random_q(rng) for _ in range(n)])
    V, T = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    got = k8(Q, V, T)
    assert got.shape == (n, model.nv)
    for j in range(n):
        np.testing.assert_allclose(got[j], k1(Q[j], V[j], T[j]), rtol=1e-13, atol=1e-13)
    out = np.empty((n, model.nv))
    assert k8(Q, V, T, out=out) is out and np.array_equal(out, got)


@pytest.mark.parametrize("bad, message", [
    (lambda q, v, tau: (q, v, np.append(tau, 0.0)), "input 'tau' must have 18 entries"),
    (lambda q, v, tau: (q, v, np.where(np.arange(tau.size) == 3, np.nan, tau)), "input 'tau' contains NaN or inf"),
    (lambda q, v, tau: (q * 2.0, v, tau), "quaternion of joint .* has norm"),
    (lambda q, v, tau: (q, v), "takes 3 inputs"),
    (lambda q, v, tau: (q, "x" * 18, tau), "input 'v' is not an array of numbers"),
])
def test_bad_inputs_get_gen_runs_one_line_error(solo_aba, bad, message):
    model, k = solo_aba
    args = bad(*state(model, 5))
    with pytest.raises(RbdgenError, match=message):
        gen.run(model, "aba", *args)
    with pytest.raises(RbdgenError, match=message):
        k(*args)


def test_batch_refuses_a_bad_state_with_gen_runs_message():
    model = load_or_skip("solo12")
    k8 = gen.build(model, "aba", batch=8)
    rng = np.random.default_rng(6)
    Q = np.stack([model.random_q(rng) for _ in range(10)])
    V, T = rng.normal(size=(10, model.nv)), rng.normal(size=(10, model.nv))
    T[7, 2] = np.inf
    with pytest.raises(RbdgenError, match="input 'tau' contains NaN or inf"):
        k8(Q, V, T)
    T[7, 2] = 0.0
    Q[4, 3:7] *= 1.1
    with pytest.raises(RbdgenError, match="quaternion .* has norm"):
        k8(Q, V, T)


def test_call_raw_checks_sizes_and_takes_f_ordered_outputs(solo_daba):
    model, k = solo_daba
    q, v, tau = state(model, 7)
    outs = [np.empty((model.nv, model.nv), order="F") for _ in range(3)] + [np.empty(model.nv)]
    assert k.call_raw([q, v, tau], outs) == 0
    for o, p in zip(outs, k(q, v, tau)):
        assert np.array_equal(o, p)
    with pytest.raises(RbdgenError, match="output 'ddq_dq' must be .* 324 entries"):
        k.call_raw([q, v, tau], [np.empty(10)] + outs[1:])
    with pytest.raises(RbdgenError, match="input 'q' must have 19 entries"):
        k.call_raw([q[:5], v, tau], outs)


def both_paths(k, *args):
    """``k(*args)`` through the fast call and through the cffi path."""
    fast = k(*args)
    fast_caller, k._fast = k._fast, None
    try:
        return fast, k(*args)
    finally:
        k._fast = fast_caller


def test_the_fast_call_and_the_cffi_path_agree_bit_for_bit(solo_daba):
    """gen/fastcall.c (compiled here: the test machine has a compiler and Python's headers)
    and the pure-Python cffi path give the same bits, through out= too."""
    from gen import fastcall
    model, k = solo_daba
    assert fastcall.module() is not None, fastcall.reason
    assert k._fast is not None
    fast, slow = both_paths(k, *state(model, 8))
    for f, s in zip(fast, slow):
        assert np.array_equal(f, s) and f.flags.f_contiguous


def test_threads_share_a_kernel():
    """The fast call keeps the workspace per call (stack or heap) and releases the GIL: 4 threads x 200
    calls on one kernel give each state's own result."""
    from concurrent.futures import ThreadPoolExecutor
    model = load_or_skip("solo12")
    k = gen.build(model, "aba")
    states = [state(model, 100 + j) for j in range(8)]
    expected = [k(*s) for s in states]

    def work(j):
        return all(np.array_equal(k(*states[(j + i) % 8]), expected[(j + i) % 8]) for i in range(200))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))


def test_a_driver_that_does_not_converge_warns_through_the_fast_call():
    model = load_or_skip("solo12")
    k = gen.build(model, "prox_ltl", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT", tol=1e-30, max_iter=2)
    q, v, tau = state(model, 9)
    with pytest.warns(gen.errors.NotConvergedWarning, match="not converged"):
        ddq, lam, it, res = k(q, v, tau)
    assert it == 2 and isinstance(it, int) and isinstance(res, float) and res > 1e-30


def test_batch_fast_call_equals_the_cffi_path_bit_for_bit():
    """The batched fast call (lanes packed in C) and the Python packing give the same bits,
    iterations as integers, for a stack that is not a multiple of the lanes."""
    model = load_or_skip("solo12")
    k = gen.build(model, "prox_ltl", "3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT", batch=4)
    rng = np.random.default_rng(10)
    n = 11
    Q = np.stack([model.random_q(rng) for _ in range(n)])
    V, T = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    assert k._fast is not None
    fast, slow = both_paths(k, Q, V, T)
    for f, s in zip(fast, slow):
        assert f.shape == s.shape and f.dtype == s.dtype and np.array_equal(f, s)


def test_the_calls_benchmark_runs_and_reports():
    """python -m gen.bench.calls: one row per case with every column it can measure here
    (a smoke test of the benchmark, not a timing threshold)."""
    load_or_skip("solo12")
    from gen.bench.calls import COLUMNS, measure
    row = measure("solo12", "aba", rounds=3, repeat=2, casadi=False)
    assert set(row) <= set(COLUMNS)
    for col in ("c_us", "floor_us", "call_us", "out_us", "batch_us"):
        assert row[col] > 0, col


def test_a_batch_names_each_failing_state_with_its_own_code():
    """A state whose output overflows (-2) is named with its code, beside the states that
    pass (the per-lane status of <symbol>_status)."""
    model = load_or_skip("solo12")
    k8 = gen.build(model, "aba", batch=8)
    rng = np.random.default_rng(11)
    Q = np.stack([model.random_q(rng) for _ in range(12)])
    V, T = rng.normal(size=(12, model.nv)), rng.normal(size=(12, model.nv))
    T[9] = 1.7e308                                      # finite input, overflowing output
    with pytest.raises(RbdgenError, match=r"state 9: an output is NaN or inf") as e:
        k8(Q, V, T)
    assert "state 8" not in str(e.value) and "state 10" not in str(e.value)


def test_kernel_call_is_the_extensions_dispatch_with_the_same_results(solo_daba, solo_aba):
    """Kernel.__call__ and Kernel.call are gen/fastcall.c's Dispatch (no Python frame per
    call); through it, bound (k.__call__), as k.call, out= as a list or a lone array, and
    out=None give the plain bits, and a refused input still reaches gen.run's message
    (kernel._slow)."""
    from gen import fastcall
    from gen.kernel import Kernel
    assert fastcall.module() is not None, fastcall.reason
    assert type(Kernel.__dict__["__call__"]).__name__ == "Dispatch"
    model, k = solo_daba
    q, v, tau = state(model, 12)
    plain = k(q, v, tau)
    assert all(np.array_equal(a, b) for a, b in zip(k.__call__(q, v, tau), plain))
    assert all(np.array_equal(a, b) for a, b in zip(k(q, v, tau, out=None), plain))
    out = [np.empty(p.shape, order="F") for p in plain]
    got = k(q, v, tau, out=out)
    assert isinstance(got, tuple) and all(g is o and np.array_equal(g, p) for g, o, p in zip(got, out, plain))
    assert type(Kernel.__dict__["call"]).__name__ == "Dispatch"
    got = k.call(q, v, tau, out=tuple(out))                # the method-call path: the same call
    assert all(g is o and np.array_equal(g, p) for g, o, p in zip(got, out, plain))
    assert all(np.array_equal(a, b) for a, b in zip(k.call(q, v, tau), plain))
    model, ka = solo_aba
    one = np.empty(model.nv)
    assert ka(q, v, tau, out=one) is one and np.array_equal(one, ka(q, v, tau))
    with pytest.raises(RbdgenError, match="input 'v' must have 18 entries"):
        ka(q, v[:3], tau, out=one)
    with pytest.raises(RbdgenError, match="input 'v' must have 18 entries"):
        ka.call(q, v[:3], tau)
