# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU tests, second round (tests/pallas/
tpu_pallas_test.py, indexing_test.py, tpu_pallas_async_test.py, ops_test.py)
and of the Pallas TPU docs, each named after the test or example it ports,
with a NumPy reference: strided slices, float and narrow SMEM arrays, loops
with traced bounds, 2-D semaphore arrays, DMA slices from SMEM values."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_rng = np.random.default_rng(4321)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


# --- strided slices: the DMA engine gathers and scatters them ---

def test_strided_load_1d():
    """ops_test.py OpsTest.test_strided_load (1-D: issue 20895)."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[::4]

    x = np.arange(16, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32))(x)
    np.testing.assert_array_equal(out, x[::4])


def test_strided_load_2d():
    """ops_test.py OpsTest.test_strided_load (the (16, 4) form)."""
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[::4]

    x = np.arange(64, dtype=np.float32).reshape((16, 4))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 4), jnp.float32))(x)
    np.testing.assert_array_equal(out, x[::4])


@pytest.mark.parametrize("slice_type", ["slice", "ds"])
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
@pytest.mark.parametrize("ref_shape,indices,strides", [
    ((8, 8, 32), (1, 2, 3), (2, 3, 5)),
    ((7, 7, 33), (0, 6, 31), (10, 1, 1)),
    ((8, 8, 32), (6, 0, 0), (1, 4, 9)),
])
def test_strided_load_and_store(indexer_type, slice_type, ref_shape, indices, strides):
    """indexing_test.py IndexerOpsTest.test_strided_load_and_store, at
    fixed points of its hypothesis ranges."""
    ref_shape = (*ref_shape, 128)
    indices = (*indices, 0)
    strides = (*strides, 1)
    vec_shape = [(l - i + s - 1) // s for l, i, s in zip(ref_shape, indices, strides)]

    def body(x_ref, y_ref1, y_ref2):
        if slice_type == "slice":
            slices = tuple(slice(i, rs, s) for i, rs, s in zip(indices, ref_shape, strides))
        else:
            slices = tuple(pl.ds(i, vs, s) for i, vs, s in zip(indices, vec_shape, strides))
        if indexer_type == "state":
            y_ref1[...] = x_ref[slices]
            y_ref2[slices] = y_ref1[...]
        else:
            pl.store(y_ref1, ..., pl.load(x_ref, slices))
            pl.store(y_ref2, slices, pl.load(y_ref1, ...))

    x = _normal(ref_shape)
    y1, y2 = pl.pallas_call(body, out_shape=[
        jax.ShapeDtypeStruct(tuple(vec_shape), jnp.float32),
        jax.ShapeDtypeStruct(ref_shape, jnp.float32)])(x)
    slices = tuple(slice(i, l, s) for l, i, s in zip(ref_shape, indices, strides))
    np.testing.assert_array_equal(y1, x[slices])
    np.testing.assert_array_equal(y2[slices], x[slices])


def test_strided_rows_ds_keyword_and_accumulate():
    """pl.ds(0, 8, stride=2) rows read, and += into strided rows."""
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[pl.ds(1, 8, stride=2), :] += x_ref[pl.ds(0, 8, stride=2), :] * 2.0

    x = _normal((16, 128))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x)
    want = np.zeros_like(x)
    want[1::2] = x[0::2] * 2.0
    np.testing.assert_array_equal(out, want)


def test_advanced_indexer_slices():
    """indexing_test.py AdvancedIndexerOpsTest.test_advanced_indexer, its
    slice cases: arr[::4, ::4], arr[1:14:2, 2:13:4], arr[1::3, :]."""
    for shape, f in [((12, 12), lambda a: a[::4, ::4]),
                     ((16, 16), lambda a: a[1:14:2, 2:13:4]),
                     ((8, 2), lambda a: a[1::3, :])]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        y = f(x)

        def kernel(x_ref, o_ref):
            o_ref[...] = f(x_ref)

        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(y.shape, jnp.float32))(x)
        np.testing.assert_array_equal(out, y)


def test_strided_value_slice():
    """Once refused; a value's stepped slice now goes through a scratch
    (test_value_at.py has more)."""
    x = _normal((8, 128))

    def kernel(x_ref, o_ref):
        v = x_ref[...] + 1.0
        o_ref[...] = v[::2]

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.float32))(x)
    np.testing.assert_array_equal(np.asarray(out), (x + 1.0)[::2])


# --- lax.fori_loop with traced bounds: unrolled, each trip predicated ---

def _dynamic_loop(loop_end):
    def body(loop_end_ref, out_ref):
        out_ref[...] = jnp.zeros_like(out_ref)

        def loop_body(i, carry):
            del i, carry
            out_ref[...] += 1

        lax.fori_loop(0, loop_end_ref[0], loop_body, None)

    return pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, out_specs=pl.BlockSpec((8, 128), lambda *_: (0, 0)),
            grid=1))(loop_end)


@pytest.mark.parametrize("n", [5, 0, 16])
def test_scalar_interpreter_dynamic_loop(n):
    """tpu_pallas_test.py PallasCallScalarPrefetchTest.
    test_scalar_interpreter_dynamic_loop (5 trips), and 0 and the limit."""
    out = _dynamic_loop(np.array([n], np.int32))
    np.testing.assert_array_equal(out, np.full((8, 128), n, np.float32))


@pytest.mark.parametrize("n", [17, 1000])
def test_dynamic_loop_beyond_the_old_unroll_limit_runs_on_the_device(n):
    """A traced bound is a device loop: no limit of 16 unrolled trips."""
    out = _dynamic_loop(np.array([n], np.int32))
    np.testing.assert_array_equal(out, np.full((8, 128), n, np.float32))


def test_fori_loop_over_program_id_with_a_carry_and_traced_index():
    """A carry through a loop whose bounds are program ids, the index
    traced (lower is one): rows i of x summed for i in [pid, 2 * pid). The
    carry is computed at every unrolled trip (the trips past the bound are
    discarded by jnp.where), so its reads stay inside x."""
    def kernel(x_ref, o_ref):
        pid = pl.program_id(0)

        def step(i, acc):
            return acc + x_ref[pl.ds(i, 1), :]

        acc = lax.fori_loop(pid, 2 * pid, step, jnp.zeros((1, 128), jnp.float32))
        o_ref[...] = jnp.broadcast_to(acc, (8, 128))

    x = _normal((32, 128))
    out = pl.pallas_call(kernel, grid=(4,),
                         in_specs=[pl.BlockSpec((32, 128), lambda i: (0, 0))],
                         out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                         out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)
    want = np.repeat(np.stack([x[p:2 * p].sum(axis=0) if p else np.zeros(128, np.float32)
                               for p in range(4)]), 8, axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_pl_loop_with_a_traced_bound():
    def kernel(n_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.loop(0, n_ref[0])
        def _(i):
            o_ref[pl.ds(i, 1), :] = jnp.full((1, 128), 1.0, jnp.float32) * jnp.float32(i + 1)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                         grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1))(
        np.array([3], np.int32))
    want = np.zeros((8, 128), np.float32)
    want[:3] = np.arange(1, 4, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(out, want)


# --- scalar prefetch of float32, and of int8/uint8/bool widened into words ---

def test_f32_scalar_prefetch():
    """tpu_pallas_test.py PallasCallScalarPrefetchTest.test_f32_scalar_prefetch."""
    def body(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.broadcast_to(s_ref[0], x_ref.shape)

    s = np.array([5.0], np.float32)
    x = np.arange(8 * 128, dtype=np.float32).reshape((8, 128))
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1))(s, x)
    np.testing.assert_allclose(out, x + np.broadcast_to(s, x.shape))


@pytest.mark.parametrize("dtype,index", [(np.int8, 311), (np.int8, 597), (np.int8, 1025),
                                         (np.uint8, 129), (np.uint8, 255)])
def test_narrow_bitwidth_scalar_prefetch(dtype, index):
    """tpu_pallas_test.py PallasCallScalarPrefetchTest.
    test_narrow_bitwidth_scalar_prefetch, its 8-bit cases (int16 and bf16
    outputs are not device dtypes)."""
    def body(s_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(s_ref[index], o_ref.shape)

    s = np.arange(16 * 128).astype(dtype)
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((16, 128), dtype),
                         grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1))(s)
    np.testing.assert_array_equal(out, np.broadcast_to(s[index], (16, 128)))


def test_bool_scalar_prefetch_in_pl_when():
    def body(m_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

        @pl.when(m_ref[pl.program_id(0)])
        def _():
            o_ref[...] = x_ref[...] * 2.0

    m = np.array([True, False, True, False])
    x = _normal((32, 128))
    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         grid_spec=pltpu.PrefetchScalarGridSpec(
                             num_scalar_prefetch=1, grid=(4,),
                             in_specs=[pl.BlockSpec((8, 128), lambda i, m: (i, 0))],
                             out_specs=pl.BlockSpec((8, 128), lambda i, m: (i, 0))))(m, x)
    want = x * np.repeat(np.where(m, 2.0, 1.0), 8)[:, None].astype(np.float32)
    np.testing.assert_array_equal(out, want)
