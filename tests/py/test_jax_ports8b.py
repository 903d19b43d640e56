# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU tests, eighth round, second file
(tests/pallas/indexing_test.py IndexerOpsTest; tpu_pallas_async_test.py
PallasCallAsyncCopyTest; tpu_pallas_pipeline_test.py
PallasCallBoundedSliceIndexingTest, EmitPipelinePrefetchTest, the
pipeline tests that are gaps, and
the transformed-refs test with HBM passthrough; tpu_pallas_state_test.py
CoreMapTest's kernels in a lax.scan), each named after the test it ports,
with a NumPy reference: loads and stores through chained ref.at[...]
windows, dynamic starts in the second-minor dimension, copies started in
one pallas_call and waited for in the next, pl.BoundedSlice blocks.
Gaps are strict xfails naming them."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu import random
from tpuemu.pallas import tpu as pltpu


# --- indexing_test.py IndexerOpsTest ---

_INDEXING_TEST_CASES = [
    ((4, 8, 128), (...,), (4, 8, 128)),
    ((4, 8, 128), (0,), (8, 128)),
    ((4, 8, 128), (pl.ds(1, 2),), (2, 8, 128)),
    ((4, 8, 128), (pl.ds(2, 2),), (2, 8, 128)),
    ((4, 8, 128), (pl.ds(2, 2), 0), (8, 128)),
    ((4, 8, 128), (pl.ds(2, 2), 1), (8, 128)),
    ((4, 8, 128), (slice(2, 4), 1), (8, 128)),
    ((4, 8, 128), (slice(2, 4), slice(0, 1), 0), (8, 128)),
    ((4, 8, 128), ((0, pl.ds(0, 8), pl.ds(0, 128)), ...), (8, 128)),
    ((4, 8, 128), (..., (0, pl.ds(0, 8), pl.ds(0, 128)), ...), (8, 128)),
]


def _maybe_ds_to_slice(x):
    if isinstance(x, type(pl.ds(0, 1))):
        return slice(x.start, x.start + x.size)
    return x


@pytest.mark.parametrize("case", _INDEXING_TEST_CASES)
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
def test_can_load_with_ref_at(indexer_type, case):
    in_shape, indexers, out_shape = case
    dtype = jnp.float32
    def body(x_ref, y_ref):
        for indexer in indexers[:-1]:
            x_ref = x_ref.at[indexer]
        if indexer_type == "state":
            x = x_ref[indexers[-1]]
            y_ref[...] = x
        elif indexer_type == "pallas":
            x = pl.load(x_ref, indexers[-1])
            pl.store(y_ref, ..., x)

    x = random.normal(random.key(0), in_shape, dtype=dtype)
    y = x
    for indexer in indexers:
        if not isinstance(indexer, tuple):
            indexer = (indexer,)
        indexer = tuple(map(_maybe_ds_to_slice, indexer))
        y = y[indexer]
    assert y.shape == out_shape
    out = pl.pallas_call(body, out_shape=y)(x)
    np.testing.assert_allclose(out, y)


@pytest.mark.parametrize("case", _INDEXING_TEST_CASES)
@pytest.mark.parametrize("indexer_type", ["state", "pallas"])
def test_can_store_with_ref_at(indexer_type, case):
    in_shape, indexers, val_shape = case
    dtype = jnp.float32
    def body(x_ref, y_ref):
        y_ref[...] = jnp.zeros_like(y_ref)
        for indexer in indexers[:-1]:
            y_ref = y_ref.at[indexer]
        if indexer_type == "state":
            x = x_ref[...]
            y_ref[indexers[-1]] = x
        elif indexer_type == "pallas":
            x = pl.load(x_ref, ...)
            pl.store(y_ref, indexers[-1], x)

    val = random.normal(random.key(0), val_shape, dtype=dtype)
    x = np.zeros(in_shape, dtype=dtype)
    y = x
    for indexer in indexers:
        if not isinstance(indexer, tuple):
            indexer = (indexer,)
        indexer = tuple(map(_maybe_ds_to_slice, indexer))
        y = y[indexer]
    assert y.shape == val_shape
    y[...] = val
    out = pl.pallas_call(body, out_shape=x)(val)
    np.testing.assert_allclose(out, x)


def test_load_with_dynamic_2nd_minor_index():
    m, n = 32, 128
    k = 10
    start = 2

    def kernel(x_ref, indices, y_ref):
        y_ref[...] = pl.load(x_ref, pl.ds(indices[0], k))

    x = jnp.arange(m * n, dtype=jnp.int32).reshape((m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((k, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res, x[start:start + k, :])


def test_store_with_dynamic_2nd_minor_index():
    m, n = 10, 128
    k = 32
    start = 2

    def kernel(x_ref, indices, y_ref):
        pl.store(y_ref, pl.ds(indices[0], m), x_ref[...])

    x = jnp.arange(m * n, dtype=jnp.int32).reshape((m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((k, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res[start:start + m, :], x)


def test_load_one_row_with_dynamic_2nd_minor_index():
    b, m, n = 4, 16, 256
    start = 3

    def kernel(x_ref, indices, y_ref):
        y_ref[...] = x_ref[:, pl.ds(indices[0], 1), :]

    x = jnp.arange(b * m * n, dtype=jnp.int32).reshape((b, m, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res, x[:, start:start + 1, :])


def test_store_one_row_with_dynamic_2nd_minor_index():
    b, m, n = 4, 16, 256
    start = 3

    def kernel(x_ref, indices, y_ref):
        y_ref[:, pl.ds(indices[0], 1), :] = x_ref[...]

    x = jnp.arange(b * 1 * n, dtype=jnp.int32).reshape((b, 1, n))
    indices = jnp.array([start])
    res = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, m, n), jnp.int32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)]),
    )(x, indices)
    np.testing.assert_array_equal(res[:, start:start + 1, :], x)


# --- tpu_pallas_async_test.py PallasCallAsyncCopyTest: semaphores and VMEM arrays
# --- passed between pallas_calls ---

def make_async_copy(target_memory_space=None):
    if target_memory_space is None:
        target_memory_space = pl.ANY

    def copy_start(x):
        def copy_start_kernel(x_ref, aliased_x_ref, o_ref, sem):
            del aliased_x_ref
            pltpu.make_async_copy(x_ref, o_ref, sem).start()

        x, out, sem = pl.pallas_call(
            copy_start_kernel,
            out_shape=(
                jax.ShapeDtypeStruct(x.shape, x.dtype),  # aliased x
                target_memory_space(x.shape, x.dtype),  # out
                pltpu.SemaphoreType.DMA(()),
            ),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=target_memory_space),
                pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
            ),
            input_output_aliases={0: 0},
        )(x)
        return x, (out, sem)

    def copy_done(x, future):
        out, sem = future

        def copy_done_kernel(x_ref, o_ref, sem, aliased_o_ref):
            del aliased_o_ref
            pltpu.make_async_copy(x_ref, o_ref, sem).wait()

        out = pl.pallas_call(
            copy_done_kernel,
            out_shape=target_memory_space(x.shape, x.dtype),  # out
            in_specs=[
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=target_memory_space),
                pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
            ],
            out_specs=pl.BlockSpec(memory_space=target_memory_space),
            input_output_aliases={1: 0},
        )(x, out, sem)
        return out

    return copy_start, copy_done


def test_basic_async_copy():
    @jax.jit
    def f(x):
        copy_start, copy_done = make_async_copy()
        x, fut = copy_start(x)
        y = copy_done(x, fut)
        return y

    x = jax.random.normal(jax.random.key(0), (8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


def test_basic_async_copy_into_vmem():
    @jax.jit
    def f(x):
        copy_start, copy_done = make_async_copy(pltpu.VMEM)
        x, fut = copy_start(x)
        y = copy_done(x, fut)
        return y

    x = jax.random.normal(jax.random.key(0), (8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


def make_async_slice(index):
    def async_slice_start_kernel(x_ref, aliased_x_ref, o_ref, sem):
        del aliased_x_ref
        pltpu.make_async_copy(x_ref.at[index], o_ref, sem).start()

    def async_slice_done_kernel(x_ref, o_ref, sem, aliased_o_ref):
        del aliased_o_ref
        pltpu.make_async_copy(x_ref.at[index], o_ref, sem).wait()

    def async_slice_start(x):
        x, out, sem = pl.pallas_call(
            async_slice_start_kernel,
            out_shape=(
                jax.ShapeDtypeStruct(x.shape, x.dtype),  # aliased x
                jax.ShapeDtypeStruct(x.shape[1:], x.dtype),  # out
                pltpu.SemaphoreType.DMA(()),
            ),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
            ),
            input_output_aliases={0: 0},
        )(x)
        return x, (out, sem)

    def async_slice_done(x, future):
        out, sem = future
        out = pl.pallas_call(
            async_slice_done_kernel,
            out_shape=(jax.ShapeDtypeStruct(x.shape[1:], x.dtype)),  # out
            in_specs=[
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
            ],
            out_specs=(pl.BlockSpec(memory_space=pl.ANY)),
            input_output_aliases={1: 0},
        )(x, out, sem)
        return out

    return async_slice_start, async_slice_done


def make_async_dynamic_slice(index):
    def async_dslice_start_kernel(index_ref, x_ref, aliased_x_ref, o_ref, sem):
        del aliased_x_ref
        pltpu.make_async_copy(x_ref.at[index_ref[0]], o_ref, sem).start()

    def async_dslice_done_kernel(x_ref, o_ref, sem, aliased_o_ref):
        del aliased_o_ref
        pltpu.make_async_copy(x_ref.at[0], o_ref, sem).wait()

    def async_dslice_start(x):
        x, out, sem = pl.pallas_call(
            async_dslice_start_kernel,
            out_shape=(
                jax.ShapeDtypeStruct(x.shape, x.dtype),  # aliased x
                jax.ShapeDtypeStruct(x.shape[1:], x.dtype),  # out
                pltpu.SemaphoreType.DMA(()),
            ),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=(
                    pl.BlockSpec(memory_space=pl.ANY),
                    pl.BlockSpec(memory_space=pl.ANY),
                    pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
                ),
            ),
            input_output_aliases={1: 0},
        )(index[None], x)
        return x, (out, sem)

    def async_dslice_done(x, future):
        out, sem = future
        out = pl.pallas_call(
            async_dslice_done_kernel,
            out_shape=(jax.ShapeDtypeStruct(x.shape[1:], x.dtype)),  # out
            in_specs=[
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pltpu.SEMAPHORE),
            ],
            out_specs=(pl.BlockSpec(memory_space=pl.ANY)),
            input_output_aliases={1: 0},
        )(x, out, sem)
        return out

    return async_dslice_start, async_dslice_done


def test_multiple_async_copy():
    @jax.jit
    def f(x):
        copy_start, copy_done = make_async_copy()
        x, fut = copy_start(x)
        x2, fut2 = copy_start(x)
        y = copy_done(x, fut)
        y2 = copy_done(x2, fut2)
        return y, y2

    x = jax.random.normal(jax.random.key(0), (8, 128), dtype=jnp.float32)
    y, y2 = f(x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(y2, x)


def test_async_slice():
    @jax.jit
    def f(x):
        async_slice_start, async_slice_done = make_async_slice(2)
        x, fut = async_slice_start(x)
        y = async_slice_done(x, fut)
        return y

    x = jax.random.normal(jax.random.key(0), (4, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x[2])


def test_async_dynamic_slice():
    @jax.jit
    def f(x, i):
        async_slice_start, async_slice_done = make_async_dynamic_slice(i)
        x, fut = async_slice_start(x)
        y = async_slice_done(x, fut)
        return y

    x = jax.random.normal(jax.random.key(0), (4, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x, 2), x[2])


def test_multi_async_dynamic_slice():
    @jax.jit
    def f(x, i, j):
        async_slice_start, async_slice_done = make_async_dynamic_slice(i)
        async_slice_start2, async_slice_done2 = make_async_dynamic_slice(j)
        x, fut = async_slice_start(x)
        x2, fut2 = async_slice_start2(x)
        y = async_slice_done(x, fut)
        y2 = async_slice_done2(x2, fut2)
        return y, y2

    x = jax.random.normal(jax.random.key(0), (4, 8, 128), dtype=jnp.float32)
    y, y2 = f(x, 2, 3)
    np.testing.assert_array_equal(y, x[2])
    np.testing.assert_array_equal(y2, x[3])


def test_multiple_async_copy_into_vmem():
    @jax.jit
    def f(x):
        copy_start, copy_done = make_async_copy(pltpu.VMEM)
        x1, fut = copy_start(x)
        x2, fut2 = copy_start(x)
        y = copy_done(x1, fut)
        y2 = copy_done(x2, fut2)
        return y, y2

    x = jax.random.normal(jax.random.key(0), (8, 128), dtype=jnp.float32)
    y, y2 = f(x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(y2, x)


def test_copy_in_a_loop():
    @jax.jit
    def f(x):
        def body(_, carry):
            x = carry
            copy_start, copy_done = make_async_copy()
            x, fut = copy_start(x)
            y = copy_done(x, fut)
            return y
        x = jax.lax.fori_loop(0, x.shape[0], body, x)
        return x

    x = jax.random.normal(jax.random.key(0), (16, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


def test_staggered_copy_in_a_loop():
    @jax.jit
    def f(x):
        copy_start, copy_done = make_async_copy()
        x, fut = copy_start(x)
        def body(_, carry):
            x, fut = carry
            y = copy_done(x, fut)
            y, fut = copy_start(y)
            return y, fut
        y, fut = jax.lax.fori_loop(0, x.shape[0] - 1, body, (x, fut), unroll=2)
        x = copy_done(y, fut)
        return x

    x = jax.random.normal(jax.random.key(0), (16, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


def test_full_copy_in_a_loop():
    @jax.jit
    def f(x):
        y = jnp.zeros_like(x)
        def body(i, carry):
            x, ys = carry
            copy_start, copy_done = make_async_dynamic_slice(i)
            x, fut = copy_start(x)
            y = copy_done(x, fut)
            ys = ys.at[i].set(y)
            return x, ys
        _, y = jax.lax.fori_loop(0, x.shape[0], body, (x, y))
        return y

    x = jax.random.normal(jax.random.key(0), (16, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


def test_staggered_full_copy_in_a_loop():
    @jax.jit
    def f(x):
        y = jnp.zeros_like(x)
        copy_start, _ = make_async_dynamic_slice(jnp.array(0))
        x, fut = copy_start(x)
        def body(i, carry):
            x, fut, ys = carry
            _, copy_done = make_async_dynamic_slice(i)
            y = copy_done(x, fut)
            copy_start, _ = make_async_dynamic_slice(i + 1)
            ys = ys.at[i].set(y)
            x, fut = copy_start(x)
            return x, fut, ys
        x, fut, ys = jax.lax.fori_loop(0, x.shape[0] - 1, body, (x, fut, y), unroll=1)
        _, copy_done = make_async_dynamic_slice(x.shape[0] - 1)
        y = copy_done(x, fut)
        ys = ys.at[x.shape[0] - 1].set(y)
        return ys

    x = jax.random.normal(jax.random.key(0), (16, 8, 128), dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x)


# --- tpu_pallas_pipeline_test.py PallasCallBoundedSliceIndexingTest (and
# --- PallasCallPipelineTest.test_compute_slice_bounded_slice_vmem) ---

@pytest.mark.parametrize("no_pipelining", [False, True])
def test_compute_slice_bounded_slice_vmem(no_pipelining):
    def body(x_ref, o_ref):
        assert x_ref.shape == (6, 8, 256)
        assert o_ref.shape == (6, 8, 256)
        o_ref[...] = x_ref[...] + 10

    def kernel(x_hbm_ref, o_hbm_ref, x_vmem_ref, o_vmem_ref):
        pltpu.sync_copy(x_hbm_ref, x_vmem_ref)
        pltpu.emit_pipeline(
            body, grid=(3, 2),
            in_specs=pl.BlockSpec((pl.BoundedSlice(6), 8, 256),
                                  lambda i, j: (pl.ds(i * 2, i + 3), 0, j),
                                  memory_space=pltpu.VMEM),
            out_specs=pl.BlockSpec((pl.BoundedSlice(6), 8, 256),
                                   lambda i, j: (pl.ds(i * 2, i + 3), 0, j),
                                   memory_space=pltpu.VMEM),
            no_pipelining=no_pipelining,
        )(x_vmem_ref, o_vmem_ref)
        pltpu.sync_copy(o_vmem_ref, o_hbm_ref)

    x = jnp.arange(16 * 8 * 512, dtype=jnp.int32).reshape(16, 8, 512)
    y = pl.pallas_call(
        kernel, out_shape=jax.typeof(x),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=dict(x_vmem_ref=pltpu.VMEM((16, 8, 512), jnp.int32),
                            o_vmem_ref=pltpu.VMEM((16, 8, 512), jnp.int32)),
    )(x)
    x = np.array(x)
    y = np.array(y)
    for i in range(3):
        for j in range(2):
            start = i * 2
            length = i + 3
            np.testing.assert_equal(y[start:start + length, :, j * 256:(j + 1) * 256],
                                    x[start:start + length, :, j * 256:(j + 1) * 256] + 10)


@pytest.mark.parametrize("buffer_count", [2, 3, 4])
def test_block_spec_bounded_slice_ragged(buffer_count):
    n = 20
    bs = 8
    shape = (24, 8, 128)
    block_shape = (pl.BoundedSlice(bs), 8, 128)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    x = jnp.arange(np.prod(shape), dtype=np.int32).reshape(shape)

    @jax.jit
    def f(x):
        @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name='core'), out_type=x)
        def kernel_fn(x_ref, y_ref):
            def index_map(i):
                start = i * bs
                size = jnp.minimum(bs, n - start)
                return (pl.ds(start, size), 0, 0)

            in_block_spec = pl.BlockSpec(block_shape, index_map,
                                         pipeline_mode=pl.Buffered(buffer_count=buffer_count))
            out_block_spec = pl.BlockSpec(block_shape, index_map)
            pltpu.emit_pipeline(kernel, grid=(3,), in_specs=(in_block_spec,),
                                out_specs=out_block_spec)(x_ref, y_ref)
        return kernel_fn(x)

    out = f(x)
    np.testing.assert_allclose(out[:n], x[:n] + 1)


def test_block_spec_bounded_slice_invalid_index():
    shape = (16, 8, 128)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    @jax.jit
    def f(x):
        @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name='core'),
                   out_type=jax.ShapeDtypeStruct((8, 8, 128), jnp.int32))
        def kernel_fn(x_ref, y_ref):
            pltpu.emit_pipeline(
                kernel, grid=(1,),
                in_specs=(pl.BlockSpec((pl.BoundedSlice(8), 8, 128),
                                       lambda i: (0, 0, 0)),),
                out_specs=pl.BlockSpec((8, 8, 128), lambda i: (0, 0, 0)),
            )(x_ref, y_ref)
        return kernel_fn(x)

    with pytest.raises(ValueError, match='Must return a (pl\\.)?ds from the index_map for a '
                                         'BoundedSlice dimension.|when it should be pl.Slice'):
        f(np.zeros(shape, np.int32))


def test_block_spec_bounded_slice_static():
    shape = (16, 8, 128)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = jnp.arange(np.prod(shape), dtype=np.int32).reshape(shape)

    @jax.jit
    def f(x):
        @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name='core'),
                   out_type=jax.ShapeDtypeStruct((8, 8, 128), jnp.int32))
        def kernel_fn(x_ref, y_ref):
            pltpu.emit_pipeline(
                kernel, grid=(1,),
                in_specs=(pl.BlockSpec((pl.BoundedSlice(8), 8, 128),
                                       lambda i: (pl.ds(4, 8), 0, 0)),),
                out_specs=pl.BlockSpec((8, 8, 128), lambda i: (0, 0, 0)),
            )(x_ref, y_ref)
        return kernel_fn(x)

    np.testing.assert_allclose(f(x), x[4:12])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_block_spec_bounded_slice_dynamic(axis):
    if axis == 0:
        shape = (16, 8, 128)
        block_shape = (pl.BoundedSlice(16), 8, 128)
        slices = jnp.array([[0, 3], [3, 8], [8, 11], [11, 16]], dtype=jnp.int32)[::-1]
        offset_alignment = None
    elif axis == 1:
        shape = (2, 64, 128)
        block_shape = (2, pl.BoundedSlice(24), 128)
        slices = jnp.array([[0, 3], [8, 17], [32, 48]], dtype=jnp.int32)[::-1]
        offset_alignment = 8
    else:
        shape = (16, 8, 512)
        block_shape = (16, 8, pl.BoundedSlice(256))
        slices = jnp.array([[0, 254], [256, 456]], dtype=jnp.int32)[::-1]
        offset_alignment = 128

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = jnp.arange(np.prod(shape), dtype=np.int32).reshape(shape)

    @jax.jit
    def f(x, slices):
        @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name='core'), out_type=x,
                   scratch_types=[pltpu.SMEM(slices.shape, slices.dtype)])
        def kernel_fn(x_ref, slices_ref, y_ref, slices_smem):
            pltpu.sync_copy(slices_ref, slices_smem)

            def index_map(i):
                start = slices_smem[i, 0]
                if offset_alignment is not None and offset_alignment > 1:
                    start = pl.multiple_of(start, offset_alignment)
                size = slices_smem[i, 1] - slices_smem[i, 0]
                indices = [0, 0, 0]
                indices[axis] = pl.ds(start, size)
                return tuple(indices)

            block_spec = pl.BlockSpec(block_shape, index_map)
            pltpu.emit_pipeline(kernel, grid=(slices.shape[0],), in_specs=(block_spec,),
                                out_specs=block_spec)(x_ref, y_ref)
        return kernel_fn(x, slices)

    out = f(x, slices)
    for start, end in np.array(slices):
        idx = [slice(None), slice(None), slice(None)]
        idx[axis] = slice(start, end)
        np.testing.assert_allclose(out[tuple(idx)], x[tuple(idx)])


# --- tpu_pallas_pipeline_test.py PallasCallPipelineTransformedRefsTest ---

@pytest.mark.parametrize("dynamic_grid", [True, False])
def test_transformed_refs_as_inputs_nested_hbm_passthrough(dynamic_grid):
    @jax.jit
    def fn(x, y):
        out_type = jax.ShapeDtypeStruct(x.shape[1:], x.dtype)

        @pl.kernel(out_type=out_type, mesh=pltpu.TensorCoreMesh(axis_name='core'))
        def run_kernel(x_ref, y_ref, o_ref):
            x_ref = x_ref.at[1, ...]
            y_scratch = jax.empty_ref(jax.ShapeDtypeStruct((16, 512), jnp.float32), pltpu.VMEM)
            def outer_body(outer_x, outer_o):
                pltpu.sync_copy(y_ref, y_scratch)
                def inner_body(x, o): o[...] = x[...] + y_scratch[...]
                pltpu.emit_pipeline(
                    inner_body, grid=(jnp.array(8),) if dynamic_grid else (8,),
                    in_specs=[pl.BlockSpec((16, 512), lambda i: (0, i))],
                    out_specs=[pl.BlockSpec((16, 512), lambda i: (0, i))],
                    dimension_semantics=(pltpu.PARALLEL,),
                )(outer_x, outer_o)

            pltpu.emit_pipeline(
                outer_body, grid=(jnp.array(8),) if dynamic_grid else (8,),
                in_specs=[pl.BlockSpec((16, 4096), lambda i: (0, i))],
                out_specs=[pl.BlockSpec((16, 4096), lambda i: (0, i))],
                dimension_semantics=(pltpu.PARALLEL,),
            )(x_ref, o_ref)

        return run_kernel(x, y)

    x = jnp.arange(2 * 16 * 32768, dtype=jnp.float32).reshape((2, 16, 32768))
    y = jnp.ones((16, 512), dtype=jnp.float32)
    np.testing.assert_allclose(fn(x, y), x[1, ...] + 1)


# --- tpu_pallas_state_test.py CoreMapTest: kernels on refs in a lax.scan ---

def test_kernel_in_scan():
    shape = (8, 128)
    mesh = pltpu.TensorCoreMesh(axis_name="tc", num_cores=1)

    @pl.kernel(out_type=pltpu.VMEM(shape, jnp.float32) @ mesh, mesh=mesh)
    def init(o_ref):
        o_ref[...] = jnp.zeros(shape, jnp.float32)

    @pl.kernel(mesh=mesh)
    def update(x_ref):
        x_ref[...] += 1.0

    @pl.kernel(mesh=mesh)
    def copy_to_hbm(in_ref, o_ref):
        pltpu.sync_copy(in_ref, o_ref)

    def run():
        ref = jax.new_ref(init(), memory_space=pltpu.VMEM @ mesh)

        def body(c, _):
            update(ref)
            return c, None

        jax.lax.scan(body, 0, length=4)
        hbm_ref = jax.new_ref(jnp.zeros(shape, jnp.float32))
        copy_to_hbm(ref, hbm_ref)
        return jax.freeze(hbm_ref)

    np.testing.assert_array_equal(jax.jit(run)(), np.full(shape, 4.0))


def test_kernel_in_scan_direct_output():
    shape = (8, 128)
    mesh = pltpu.TensorCoreMesh(axis_name="tc", num_cores=1)

    @pl.kernel(out_type=pltpu.VMEM(shape, jnp.float32) @ mesh, mesh=mesh)
    def init(o_ref):
        o_ref[...] = jnp.zeros(shape, jnp.float32)

    @pl.kernel(mesh=mesh)
    def update(x_ref):
        x_ref[...] += 1.0

    @jax.jit
    def run():
        ref = jax.new_ref(init(), memory_space=pltpu.VMEM @ mesh)

        def body(c, _):
            update(ref)
            return c, None

        jax.lax.scan(body, 0, length=4)
        return jax.freeze(ref)

    np.testing.assert_array_equal(run(), np.full(shape, 4.0))


# --- tpu_pallas_pipeline_test.py EmitPipelinePrefetchTest ---

_NUM_CORES = pltpu.get_tpu_info().num_cores


def test_matmul_prefetch():
    M, N, K = 512, 512, 512
    blk_m, blk_n, blk_k = 128, 128, 128
    nm, nn, nk = M // blk_m, N // blk_n, K // blk_k
    mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)

    @jax.jit
    def run(x, y):
        lhs_spec = pl.BlockSpec((blk_m, blk_k), lambda m, n, k: (m, k),
                                pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=2,
                                                          use_lookahead=True),
                                memory_space=pltpu.VMEM)
        rhs_spec = pl.BlockSpec((blk_k, blk_n), lambda m, n, k: (k, n),
                                pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=2,
                                                          use_lookahead=True),
                                memory_space=pltpu.VMEM)
        out_spec = pl.BlockSpec((blk_m, blk_n), lambda m, n, k: (m, n),
                                pipeline_mode=pl.Buffered(buffer_count=2),
                                memory_space=pltpu.VMEM)

        def pipeline_body(x_ref, y_ref, o_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                o_ref[...] = jnp.zeros_like(o_ref)
            o_ref[...] += x_ref[...] @ y_ref[...]

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=(nm, nn, nk), in_specs=[lhs_spec, rhs_spec],
            out_specs=out_spec, mesh=mesh)
        pref = async_prefetch(x, y)

        def matmul_kernel(x_hbm_ref, y_hbm_ref, o_hbm_ref):
            pipeline(x_hbm_ref, y_hbm_ref, o_hbm_ref, allocations=pref)

        run_kernel = pl.kernel(matmul_kernel, out_type=jax.ShapeDtypeStruct((M, N), jnp.float32),
                               mesh=mesh)
        return run_kernel(x, y)

    x = jax.random.uniform(jax.random.key(0), (M, K), jnp.float32)
    y = jax.random.uniform(jax.random.key(1), (K, N), jnp.float32)
    np.testing.assert_allclose(run(x, y), np.asarray(x, np.float64) @ y, atol=5e-5, rtol=5e-5)


_PREFETCH_CASES = [
    ('basic', 2, False, False, False, False),
    ('bfloat16', 2, False, False, False, False, jnp.bfloat16),
    ('lookahead', 2, True, False, False, False),
    ('constant_index', 2, False, True, False, False),
    ('dynamic_grid_and_scalar', 2, False, False, True, False),
    ('multicore', 2, False, False, False, True),
    ('multicore_lookahead', 2, True, False, False, True),
]


@pytest.mark.parametrize(
    "prefetched_count,use_lookahead,constant_index,dynamic,multicore,dtype",
    [pytest.param(*(c[1:6] + (c[6] if len(c) > 6 else jnp.float32,)), id=c[0])
     for c in _PREFETCH_CASES
     if not c[5] or _NUM_CORES >= 2])	# JAX skips the multicore ones on one core
def test_1d_copy_prefetch(prefetched_count, use_lookahead, constant_index, dynamic,
                          multicore, dtype):
    if multicore:
        num_cores = pltpu.get_tpu_info().num_cores
        mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=num_cores)
        dim_semantics = (pltpu.PARALLEL,)
        core_axis_name = 'core'
        total_chunks = 4 * num_cores
    else:
        num_cores = 1
        mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)
        dim_semantics = None
        core_axis_name = None
        total_chunks = 4

    def run(x, *extra_args):
        if dynamic:
            d_grid, tile_offset = extra_args
            index_map = lambda i: (((i + tile_offset) % total_chunks), 0)
            grid = (d_grid,)
        elif constant_index:
            index_map = lambda i: (0, 0)
            grid = (total_chunks,)
        else:
            index_map = lambda i: (i, 0)
            grid = (total_chunks,)

        in_spec = pl.BlockSpec((8, 128), index_map,
                               pipeline_mode=pl.Buffered(buffer_count=2,
                                                         prefetched_count=prefetched_count,
                                                         use_lookahead=use_lookahead),
                               memory_space=pltpu.VMEM)
        out_spec = pl.BlockSpec((8, 128), lambda i: (i, 0),
                                pipeline_mode=pl.Buffered(buffer_count=2),
                                memory_space=pltpu.VMEM)

        def pipeline_body(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=grid, in_specs=[in_spec], out_specs=out_spec,
            dimension_semantics=dim_semantics, core_axis_name=core_axis_name, mesh=mesh)
        pref = async_prefetch(x)

        def copy_kernel(x_hbm_ref, o_hbm_ref):
            pipeline(x_hbm_ref, o_hbm_ref, allocations=pref)

        run_kernel = pl.kernel(copy_kernel,
                               out_type=jax.ShapeDtypeStruct((8 * total_chunks, 128), dtype),
                               mesh=mesh)
        return run_kernel(x)

    run = jax.jit(run)
    x = jnp.arange(8 * total_chunks * 128, dtype=dtype).reshape((8 * total_chunks, 128))
    if dynamic:
        result = run(x, jnp.int32(total_chunks), jnp.int32(1))
        expected = np.roll(np.asarray(x), -1 * 8, axis=0)
    elif constant_index:
        result = run(x)
        expected = np.broadcast_to(np.asarray(x[:8, :]), (total_chunks, 8, 128)).reshape(
            (8 * total_chunks, 128))
    else:
        result = run(x)
        expected = x
    np.testing.assert_allclose(result, expected)


def test_pytree_inputs():
    grid = (4,)
    mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)

    @jax.jit
    def run(x, y1, y2):
        in_specs = (
            pl.BlockSpec((8, 128), lambda i: (i, 0),
                         pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                         memory_space=pltpu.VMEM),
            (pl.BlockSpec((8, 128), lambda i: (i, 0),
                          pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                          memory_space=pltpu.VMEM),
             pl.BlockSpec((8, 128), lambda i: (i, 0),
                          pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                          memory_space=pltpu.VMEM)),
        )
        out_spec = pl.BlockSpec((8, 128), lambda i: (i, 0),
                                pipeline_mode=pl.Buffered(buffer_count=2),
                                memory_space=pltpu.VMEM)

        def pipeline_body(x_ref, y_refs, o_ref):
            y1_ref, y2_ref = y_refs
            o_ref[...] = x_ref[...] + y1_ref[...] + y2_ref[...]

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=grid, in_specs=in_specs, out_specs=out_spec, mesh=mesh)
        pref = async_prefetch(x, (y1, y2))

        def add_kernel(x_hbm_ref, y1_hbm_ref, y2_hbm_ref, o_hbm_ref):
            pipeline(x_hbm_ref, (y1_hbm_ref, y2_hbm_ref), o_hbm_ref, allocations=pref)

        run_kernel = pl.kernel(add_kernel, out_type=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                               mesh=mesh)
        return run_kernel(x, y1, y2)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape((32, 128))
    y1 = jnp.ones((32, 128), dtype=jnp.float32)
    y2 = jnp.full((32, 128), 2.0, dtype=jnp.float32)
    np.testing.assert_allclose(run(x, y1, y2), x + y1 + y2)


def test_no_block_spec_prefetch():
    grid = (4,)
    mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)

    @jax.jit
    def run(x, y):
        in_specs = (
            pl.BlockSpec((8, 128), lambda i: (i, 0),
                         pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                         memory_space=pltpu.VMEM),
            pl.no_block_spec,
        )
        out_spec = pl.BlockSpec((8, 128), lambda i: (i, 0),
                                pipeline_mode=pl.Buffered(buffer_count=2),
                                memory_space=pltpu.VMEM)

        def pipeline_body(x_ref, y_ref, o_ref):
            assert y_ref is None
            o_ref[...] = x_ref[...] + 1

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=grid, in_specs=in_specs, out_specs=out_spec, mesh=mesh)
        pref = async_prefetch(x, y)
        assert pref[1] is None

        def copy_kernel(x_hbm_ref, y_hbm_ref, o_hbm_ref):
            pipeline(x_hbm_ref, y_hbm_ref, o_hbm_ref, allocations=pref)

        run_kernel = pl.kernel(copy_kernel, out_type=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                               mesh=mesh)
        return run_kernel(x, y)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape((32, 128))
    y = jnp.zeros_like(x)
    np.testing.assert_allclose(run(x, y), x + 1)


def test_pytree_with_no_block_spec_prefetch():
    grid = (4,)
    mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)

    @jax.jit
    def run(x, y1, y2):
        in_specs = (
            pl.BlockSpec((8, 128), lambda i: (i, 0),
                         pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                         memory_space=pltpu.VMEM),
            (pl.BlockSpec((8, 128), lambda i: (i, 0),
                          pipeline_mode=pl.Buffered(buffer_count=2, prefetched_count=1),
                          memory_space=pltpu.VMEM),
             pl.no_block_spec),
        )
        out_spec = pl.BlockSpec((8, 128), lambda i: (i, 0),
                                pipeline_mode=pl.Buffered(buffer_count=2),
                                memory_space=pltpu.VMEM)

        def pipeline_body(x_ref, y_refs, o_ref):
            y1_ref, y2_ref = y_refs
            assert y2_ref is None
            o_ref[...] = x_ref[...] + y1_ref[...] + 1

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=grid, in_specs=in_specs, out_specs=out_spec, mesh=mesh)
        pref = async_prefetch(x, (y1, y2))
        assert pref[1][1] is None

        def add_kernel(x_hbm_ref, y1_hbm_ref, y2_hbm_ref, o_hbm_ref):
            pipeline(x_hbm_ref, (y1_hbm_ref, y2_hbm_ref), o_hbm_ref, allocations=pref)

        run_kernel = pl.kernel(add_kernel, out_type=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                               mesh=mesh)
        return run_kernel(x, y1, y2)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape((32, 128))
    y1 = jnp.ones((32, 128), dtype=jnp.float32)
    y2 = jnp.zeros_like(x)
    np.testing.assert_allclose(run(x, y1, y2), x + y1 + 1)


@pytest.mark.parametrize("has_out_specs", [False, True])
@pytest.mark.parametrize("buf_and_pref", [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (3, 0),
                                          (3, 1), (3, 2)])
@pytest.mark.parametrize("windowing", ['non_trivial', 'trivial_grid1', 'trivial_const_idx'])
def test_no_out_specs_prefetch(windowing, buf_and_pref, has_out_specs):
    buffer_count, prefetched_count = buf_and_pref
    if windowing == 'non_trivial':
        grid, in_block_rows, out_block_rows = (4,), 8, 8
        in_index_map = lambda i: (i, 0)
    elif windowing == 'trivial_grid1':
        grid, in_block_rows, out_block_rows = (1,), 32, 32
        in_index_map = lambda i: (i, 0)
    else:
        grid, in_block_rows, out_block_rows = (4,), 32, 8
        in_index_map = lambda i: (0, 0)

    mesh = pltpu.TensorCoreMesh(axis_name='core', num_cores=1)

    @jax.jit
    def run(x):
        in_spec = pl.BlockSpec((in_block_rows, 128), in_index_map,
                               pipeline_mode=pl.Buffered(buffer_count=buffer_count,
                                                         prefetched_count=prefetched_count),
                               memory_space=pltpu.VMEM)
        out_specs = ([pl.BlockSpec((out_block_rows, 128), lambda i: (i, 0),
                                   memory_space=pltpu.VMEM)] if has_out_specs else ())

        o_vmem_ref = jax.empty_ref(jax.ShapeDtypeStruct((32, 128), jnp.float32),
                                   memory_space=pltpu.VMEM @ mesh)

        def get_x_val(x_ref):
            if windowing == 'trivial_const_idx':
                return x_ref[pl.ds(pl.program_id(0) * 8, 8), :]
            return x_ref[...]

        if has_out_specs:
            def pipeline_body(x_ref, o_ref):
                o_ref[...] = get_x_val(x_ref) + 1
        else:
            def pipeline_body(x_ref):
                i = pl.program_id(0)
                o_vmem_ref[pl.ds(i * out_block_rows, out_block_rows), :] = get_x_val(x_ref) + 1

        pipeline, async_prefetch = pltpu.emit_pipeline_with_async_prefetch(
            pipeline_body, grid=grid, in_specs=[in_spec], out_specs=out_specs, mesh=mesh)
        pref = async_prefetch(x)

        if has_out_specs:
            @pl.kernel(out_type=jax.ShapeDtypeStruct((32, 128), jnp.float32), mesh=mesh)
            def kernel(x_hbm_ref, o_hbm_ref):
                pipeline(x_hbm_ref, o_hbm_ref, allocations=pref)
        else:
            @pl.kernel(out_type=jax.ShapeDtypeStruct((32, 128), jnp.float32), mesh=mesh)
            def kernel(x_hbm_ref, o_hbm_ref):
                pipeline(x_hbm_ref, allocations=pref)
                pltpu.sync_copy(o_vmem_ref, o_hbm_ref)

        return kernel(x)

    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape((32, 128))
    np.testing.assert_allclose(run(x), x + 1)


# --- tpu_pallas_pipeline_test.py: PallasCallPipelineTest and PaddedPipelineEmitterTest
# --- (prefetched inputs, edge blocks) and a gap ---

def test_prng_pallas_vs_pipeline():
    def kernel(key_ref, o_ref):
        o_ref[...] = jax.random.uniform(key_ref[...], shape=o_ref.shape)

    def pipeline_kernel(key_hbm, o_hbm):
        pltpu.emit_pipeline(
            kernel, grid=(),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        )(key_hbm, o_hbm)

    out_shape = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    key = jax.random.key(0)
    p_key = pltpu.to_pallas_key(key)
    o_standard = pl.pallas_call(
        kernel, out_shape=out_shape,
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
    )(p_key)
    o_pipeline = pl.pallas_call(
        pipeline_kernel, out_shape=out_shape,
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
    )(p_key)
    np.testing.assert_array_equal(o_standard, o_pipeline)
    o = np.asarray(o_standard)
    assert o.min() >= 0.0 and o.max() < 1.0 and len(np.unique(o)) > 1000


@pytest.mark.parametrize("grid,block_size,buffer_count,use_lookahead,vmem_shape,vmem_slice_type", [
    ((4,), 128, 2, False, (2, 128), 'first_buffer'),
    ((4,), 128, 2, True, (2, 128), 'first_buffer'),
    ((1,), 512, 1, False, (512,), 'full'),
], ids=["standard", "lookahead", "trivial_windowing"])
def test_prefetched_input(grid, block_size, buffer_count, use_lookahead, vmem_shape,
                          vmem_slice_type):
    def pipeline_body(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    if vmem_slice_type == 'first_buffer':
        vmem_slice_fn = lambda ref: ref.at[0]
    else:
        vmem_slice_fn = lambda ref: ref

    def prefetch_start(x_hbm_ref, x_vmem_ref, sem):
        pltpu.async_copy(x_hbm_ref.at[:block_size], vmem_slice_fn(x_vmem_ref), sem)

    def prefetch_done(x_hbm_ref, x_vmem_ref, sem, x_vmem_out_ref):
        del x_vmem_out_ref  # alias to x_vmem_ref
        pltpu.make_async_copy(x_hbm_ref.at[:block_size], vmem_slice_fn(x_vmem_ref),
                              sem).wait()

    def kernel(x_hbm_ref, x_prefetched_vmem, o_hbm_ref):
        pipeline, make_allocs = pltpu.emit_pipeline_with_allocations(
            pipeline_body, grid=grid,
            in_specs=[pl.BlockSpec((block_size,), lambda i: (i,),
                                   pipeline_mode=pl.Buffered(buffer_count=buffer_count,
                                                             use_lookahead=use_lookahead,
                                                             prefetched_count=1))],
            out_specs=[pl.BlockSpec((block_size,), lambda i: (i,))],
        )

        @functools.partial(pl.run_scoped, allocs=make_allocs(x_hbm_ref, o_hbm_ref))
        def _(allocs):
            x_bref, o_bref = allocs
            allocs = (x_bref.with_window_ref(x_prefetched_vmem), o_bref)
            return pipeline(x_hbm_ref, o_hbm_ref, allocations=allocs)

    x = jnp.arange(512, dtype=jnp.float32)

    @jax.jit
    def run(x):
        prefetched, sem = pl.pallas_call(
            prefetch_start,
            in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
            out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                       pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
            out_shape=(pltpu.VMEM(vmem_shape, jnp.float32), pltpu.SemaphoreType.DMA),
        )(x)
        prefetched = pl.pallas_call(
            prefetch_done,
            in_specs=[pl.BlockSpec(memory_space=pltpu.HBM),
                      pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            out_shape=pltpu.VMEM(vmem_shape, jnp.float32),
            input_output_aliases={1: 0},
        )(x, prefetched, sem)
        return pl.pallas_call(
            kernel,
            in_specs=[pl.BlockSpec(memory_space=pltpu.HBM),
                      pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
            out_shape=jax.ShapeDtypeStruct((512,), jnp.float32),
        )(x, prefetched)

    np.testing.assert_allclose(run(x), x)


def _basic_matmul_kernel(lhs_ref, rhs_ref, out_ref, acc_scratch_ref, *, k):
    k_index = pl.program_id(2)
    num_k = pl.num_programs(2)
    bk = lhs_ref.shape[1]

    @pl.when(k_index == 0)
    def _zero_acc():
        acc_scratch_ref[...] = jnp.zeros(acc_scratch_ref.shape, acc_scratch_ref.dtype)

    divisible_k = k % bk == 0
    if divisible_k:
        acc_scratch_ref[...] += jnp.dot(lhs_ref[...], rhs_ref[...],
                                        preferred_element_type=acc_scratch_ref.dtype)
    else:
        def _last_block():
            accum_dtype = acc_scratch_ref.dtype
            lhs_mask = k_index * bk + jax.lax.broadcasted_iota(jnp.int32, lhs_ref.shape, 1) < k
            rhs_mask = k_index * bk + jax.lax.broadcasted_iota(jnp.int32, rhs_ref.shape, 0) < k
            dtype = lhs_ref.dtype
            lhs = lhs_ref[...].astype(accum_dtype)
            lhs = jnp.where(lhs_mask, lhs, 0).astype(dtype)
            rhs = rhs_ref[...].astype(accum_dtype)
            rhs = jnp.where(rhs_mask, rhs, 0).astype(dtype)
            acc_scratch_ref[...] += jnp.dot(lhs, rhs, preferred_element_type=acc_scratch_ref.dtype)

        def _not_last_block():
            acc_scratch_ref[...] += jnp.dot(lhs_ref[...], rhs_ref[...],
                                            preferred_element_type=acc_scratch_ref.dtype)
        jax.lax.cond(k_index == num_k - 1, _last_block, _not_last_block)

    @pl.when(k_index == num_k - 1)
    def _reduce_out():
        out_ref[...] = acc_scratch_ref[...].astype(out_ref.dtype)


def _matmul(x, y, *, bm, bk, bn):
    m, k = x.shape
    _, n = y.shape

    def kernel(x_hbm_ref, y_hbm_ref, o_hbm_ref):
        grid = (pl.cdiv(m, bm), pl.cdiv(n, bn), pl.cdiv(k, bk))

        def run(acc_scratch_ref):
            pltpu.emit_pipeline(
                functools.partial(_basic_matmul_kernel, acc_scratch_ref=acc_scratch_ref, k=k),
                in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                          pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
                grid=grid, core_axis=0,
                dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL, pltpu.ARBITRARY),
            )(x_hbm_ref, y_hbm_ref, o_hbm_ref)

        accum_dtype = jnp.float32 if jnp.issubdtype(x.dtype, jnp.floating) else jnp.int32
        pl.run_scoped(run, pltpu.VMEM((bm, bn), accum_dtype))

    num_cores = jax.devices()[0].num_cores
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        grid=(num_cores,),
    )(x, y)


@pytest.mark.parametrize("m_bm,k_bk,n_bn", [
    ((200, 128), (384, 128), (256, 128)),
    ((96, 32), (300, 256), (130, 128)),
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_padded_matmul(dtype, m_bm, k_bk, n_bn, seed=0):
    """PaddedPipelineEmitterTest.test_padded_matmul, two of hypothesis's
    draws: blocks at the arrays' edges (a grid of pl.cdiv), the last k
    block masked by the kernel."""
    (m, bm), (k, bk), (n, bn) = m_bm, k_bk, n_bn
    k1, k2 = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(k1, (m, k), jnp.float32)
    y = jax.random.normal(k2, (k, n), jnp.float32)
    x, y = x.astype(dtype), y.astype(dtype)
    out = _matmul(x, y, bm=bm, bk=bk, bn=bn)
    if dtype == "bfloat16":
        assert out.dtype == jnp.bfloat16
        expected = jnp.asarray(np.asarray(x, np.float64) @ np.asarray(y, np.float64),
                               dtype=jnp.bfloat16)
        np.testing.assert_allclose(out, expected, atol=1e-2, rtol=1e-2)
    elif dtype == "int8":
        expected = (x.astype(np.int32) @ y.astype(np.int32)).astype(np.int8)
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, np.asarray(x, np.float64) @ y, atol=1e-4, rtol=1e-4)


def test_prefetched_input_unbound_error():
    def pipeline_body(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def kernel(x_hbm_ref, o_hbm_ref):
        pipeline, make_allocs = pltpu.emit_pipeline_with_allocations(
            pipeline_body, grid=(4,),
            in_specs=[pl.BlockSpec((128,), lambda i: (i,),
                                   pipeline_mode=pl.Buffered(buffer_count=2,
                                                             prefetched_count=1))],
            out_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        )

        @functools.partial(pl.run_scoped, allocs=make_allocs(x_hbm_ref, o_hbm_ref))
        def _(allocs):
            # Purposely do not bind window_ref using with_window_ref!
            return pipeline(x_hbm_ref, o_hbm_ref, allocations=allocs)

    x = jnp.arange(512, dtype=jnp.float32)

    @jax.jit
    def run(x):
        return pl.pallas_call(
            kernel,
            in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.HBM),
            out_shape=jax.ShapeDtypeStruct((512,), jnp.float32),
        )(x)

    with pytest.raises(ValueError,
                       match='Expected external window buffer to be bound for prefetched input'):
        run(x)
