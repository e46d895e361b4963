"""The entry points that keep the outputs across calls (``<symbol>_zero_outputs`` and
``<symbol>_update``, :mod:`gen.codegen.zero_fill`; ``Kernel.zero_outputs`` and
``Kernel.update``): the structural zeros and constants written once, then only the
entries that depend on the inputs, as Pinocchio's Data keeps its tensors.

Reference: the kernel's full entry point (``<symbol>``), whose outputs ``_update``
must equal to the bit (the same statements, the structural ones moved out), on random
states; the C's own buffers guarded by sentinels on both sides.
"""
import numpy as np
import pytest
from conftest import load_or_skip
from random_trees import random_state

import gen
from gen.codegen.config import CodegenConfig
from gen.errors import RbdgenError

#: a guard of this many doubles on each side of every output buffer (the C must leave it)
GUARD = 64
SENTINEL = 1234.5


def bits(x):
    """The float64 bits of ``x`` (NaN payloads and signed zeros compared exactly)."""
    return np.ascontiguousarray(x).view(np.uint64)


def same_bits(a, b) -> bool:
    return all(np.array_equal(bits(x), bits(y)) for x, y in zip(a, b))


#: the kernel split into parts (talos' is, in 48: the fills leave the entry point that
#: calls the parts), on solo12, whose build costs seconds where talos' costs two minutes
SPLIT = CodegenConfig(split_above=3000, part_size=1500)


@pytest.fixture(scope="module", params=["solo12", "solo12 in parts"])
def kernel(request):
    k = gen.build(load_or_skip("solo12"), "rnea_second_order", config=SPLIT if "parts" in request.param else None)
    assert (k.manifest["codegen"]["parts"][0] > 1) == ("parts" in request.param)
    return k


def states(model, n, seed):
    rng = np.random.default_rng(seed)
    return [random_state(model, rng) for _ in range(n)]


def test_the_entry_points_exist_where_outputs_are_zero_filled(kernel):
    fn = kernel.manifest["functions"][0]
    assert fn["update"] == fn["symbol"] + "_update"
    assert fn["zero_outputs"] == fn["symbol"] + "_zero_outputs"
    kernel_c = (kernel.path / f"{kernel.folder.prefix}_kernel.c").read_text()
    # the fill loops are in the _zero function only: the kernel itself stores no +0.0
    assert "_kernel_zero(double **res)" in kernel_c
    assert "= 0x0p+0;" not in kernel_c


def test_update_after_zero_outputs_equals_the_full_call_to_the_bit(kernel):
    """zero_outputs once, then update on several states: each equals the full call (the
    structural zeros of the first state stay right for the next)."""
    out = kernel.zero_outputs()
    for q, v, a in states(kernel.model, 3, 7):
        full = kernel(q, v, a)
        got = kernel.update(q, v, a, out=out)
        assert all(g is o for g, o in zip(got, out))
        assert same_bits(out, full)


def test_update_through_cffi_equals_the_full_call(kernel):
    """The slow path (cffi, :meth:`gen.kernel.Kernel._slow` with the update entry): a
    list input the fast call does not take."""
    out = kernel.zero_outputs()
    for q, v, a in states(kernel.model, 2, 8):
        kernel.update(list(q), list(v), list(a), out=out)
        assert same_bits(out, kernel(q, v, a))


def test_update_writes_only_the_entries_that_depend_on_the_inputs(kernel):
    """On outputs holding a sentinel, update leaves every entry the full call gets from
    _zero_outputs (the point of the entry: solo12's tensors are 91 % structural zeros,
    talos' 94 %)."""
    q, v, a = states(kernel.model, 1, 9)[0]
    full = kernel(q, v, a)
    marked = tuple(np.full_like(y, SENTINEL) for y in full)
    kernel.update(q, v, a, out=marked)
    zeroed = kernel.zero_outputs(tuple(np.full_like(y, SENTINEL) for y in full))
    for m, z, f in zip(marked, zeroed, full):
        untouched = m == SENTINEL
        assert np.array_equal(bits(m[~untouched]), bits(f[~untouched]))
        # an entry update leaves is one _zero_outputs writes, with the full call's value
        assert np.array_equal(bits(z[untouched]), bits(f[untouched]))
        assert untouched.mean() > 0.8          # solo12 91 % structural


def test_non_finite_input_is_reported_and_out_stays_usable(kernel):
    """A NaN input: update raises as the full call does; the outputs are written back to
    the structural entries, so the next update is right again."""
    out = kernel.zero_outputs()
    q, v, a = states(kernel.model, 1, 10)[0]
    bad = v.copy()
    bad[1] = np.nan
    with pytest.raises(RbdgenError, match="NaN or inf"):
        kernel.update(q, bad, a, out=out)
    kernel.update(q, v, a, out=out)
    assert same_bits(out, kernel(q, v, a))


def test_the_c_entries_return_codes_and_stay_in_their_buffers(kernel):
    """Called through cffi on outputs inside larger arrays: _zero_outputs and _update
    write nothing outside them; _update returns -1 (every output NaN) on a NaN input, 0
    otherwise, and equals the full entry."""
    ffi, lib, fn = kernel.ffi, kernel.lib, kernel.function
    sizes = [y["size"] for y in fn["outputs"]]
    padded = [np.full(n + 2 * GUARD, SENTINEL) for n in sizes]
    outs = [ffi.from_buffer("double[]", p[GUARD:GUARD + n]) for p, n in zip(padded, sizes)]
    work = ffi.from_buffer("double[]", np.zeros(max(1, fn["work_size"])))
    q, v, a = states(kernel.model, 1, 11)[0]
    ins = [ffi.from_buffer("double[]", np.ascontiguousarray(x)) for x in (q, v, a)]
    getattr(lib, fn["zero_outputs"])(*outs)
    assert getattr(lib, fn["update"])(*ins, *outs, work) == 0
    full = kernel(q, v, a)
    for p, n, f in zip(padded, sizes, full):
        assert np.all(p[:GUARD] == SENTINEL) and np.all(p[GUARD + n:] == SENTINEL)
        assert np.array_equal(bits(p[GUARD:GUARD + n]), bits(f.ravel(order="F")))
    nan_v = np.ascontiguousarray(v.copy())
    nan_v[0] = np.inf
    assert getattr(lib, fn["update"])(ins[0], ffi.from_buffer("double[]", nan_v), ins[2], *outs, work) == -1
    for p, n in zip(padded, sizes):
        assert np.isnan(p[GUARD:GUARD + n]).all()
        assert np.all(p[:GUARD] == SENTINEL) and np.all(p[GUARD + n:] == SENTINEL)


def test_a_kernel_without_zero_fill_updates_by_its_full_call():
    """panda's tensors (a chain: every pair of joints an ancestor and a descendant) are
    less than half zeros, so nothing is zero-filled: no entry points; update is the full
    call."""
    kernel = gen.build(load_or_skip("panda"), "rnea_second_order")
    assert "update" not in kernel.function
    q, v, a = states(kernel.model, 1, 12)[0]
    out = kernel.zero_outputs()
    got = kernel.update(q, v, a, out=out)
    assert all(g is o for g, o in zip(got, out))
    assert same_bits(out, kernel(q, v, a))


def test_update_refuses_to_allocate_its_outputs(kernel):
    """update without out= would write into new arrays whose structural entries hold
    nothing: refused in one line."""
    q, v, a = states(kernel.model, 1, 13)[0]
    with pytest.raises(RbdgenError, match="update writes into out="):
        kernel.update(q, v, a, out=None)


def test_a_batched_kernel_refuses_zero_outputs():
    kernel = gen.build(load_or_skip("ur5"), "rnea", batch=4)
    with pytest.raises(RbdgenError, match="batched kernel has no update entry"):
        kernel.zero_outputs()


@pytest.mark.parametrize("robot,entry", [("solo12", "_update"), ("panda", "")])
def test_the_benchmark_times_the_update_entry_and_checks_it(robot, entry):
    """The harness times <symbol>_update on rnea_second_order where the kernel has it (the
    outputs zeroed once, as Pinocchio's Data), names it in the result, and its outputs on
    consecutive states equal NumPy's (the harness's own check)."""
    from gen.bench.harness import benchmark
    res = benchmark(robot, "rnea_second_order", against=(), n_states=4, rounds=1, batch=1, warmup=0,
                    numpy_states=4)
    spec = res["implementations"]["specialized"]
    assert spec["entry"] == spec["symbol"] + entry
    assert res["verify"]["ok"] and res["verify"]["numpy_states"] == 4
