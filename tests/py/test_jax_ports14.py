# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_memory_space_test.py, the
runtime half of each test (the results). Left out: every HLO-text and
backend_config assertion (input_memory_space_colors,
output_memory_space_colors, jax.export and .lower().compile()), which are
XLA lowering details with no meaning on tpuemu; the pl.HOST output case's
pinned_host out_sharding is dropped (one device, no shardings). Strict
xfails name what tpuemu does not have yet. jax_core.ShapedArray is
spelled jax.ShapeDtypeStruct(..., memory_space=...) (tpuemu has no
jax._src.core). The sim device has one TensorCore, so
pltpu.TensorCoreMesh has num_cores 1: test_smem_async_copy_megacore skips
as JAX's does on one core, and the >1-core VMEM error branch of
test_basic_ref_memory_space_constraint is not taken."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

partial = functools.partial
_MISSING = (AttributeError, TypeError, jax.TraceError, jax.TpurtError, NotImplementedError)


def test_hbm_inputs_are_constrained_at_custom_call_boundary():
    """PallasCallHBMInputLoweringTest.test_hbm_inputs_are_constrained_at_
    custom_call_boundary: the run on a device (the export's colours are
    left out)."""
    source_shape = (2, 256)
    unused_shape = (16, 128)
    out_shape = (1, 256)

    def kernel(source_hbm, unused_hbm, out_hbm, staging):
        del unused_hbm
        pltpu.sync_copy(source_hbm.at[pl.ds(0, 1), :], staging)
        pltpu.sync_copy(staging, out_hbm)

    def hbm(shape):
        return pl.BlockSpec(shape, memory_space=pltpu.HBM)

    copy_first_row = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(out_shape, jnp.float32),
        in_specs=[hbm(source_shape), hbm(unused_shape)],
        out_specs=hbm(out_shape),
        scratch_shapes=[pltpu.VMEM(out_shape, jnp.float32)],
        grid=(1,),
    )

    def run(source):
        return copy_first_row(source, jnp.ones(unused_shape, jnp.float32))

    source = np.arange(np.prod(source_shape), dtype=np.float32).reshape(source_shape)
    np.testing.assert_array_equal(jax.jit(run)(source), source[:1])


# named, not taken at import, so one space tpuemu lacks fails its own tests only
_IN_SPACES = [("pltpu.VMEM", 1), ("pltpu.SMEM", 4), ("pltpu.HBM", 0), ("pl.ANY", None)]


def _space(name):
    module, attr = name.split(".")
    return getattr({"pl": pl, "pltpu": pltpu}[module], attr)


@pytest.mark.parametrize("memory_space,color", _IN_SPACES)
def test_basic_input_memory_space_constraint(memory_space, color):
    """TPUPallasCallMemorySpaceTest.test_basic_input_memory_space_constraint."""
    memory_space = _space(memory_space)
    def kernel(x_ref, y_ref):
        pltpu.sync_copy(x_ref, y_ref)

    def g(x):
        return pl.pallas_call(
            kernel,
            out_shape=x,
            in_specs=[pl.BlockSpec(memory_space=memory_space)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
        )(x)

    @jax.jit
    def f(x):
        x = pltpu.with_memory_space_constraint(x, memory_space=memory_space)
        if color is not None:
            assert jax.typeof(x).memory_space == memory_space
        x = g(x)
        return x

    x = jnp.ones((8, 128), dtype=jnp.float32)
    y = f(x)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("memory_space,color", _IN_SPACES + [("pl.HOST", 5)])
def test_basic_output_memory_space_constraint(memory_space, color):
    """TPUPallasCallMemorySpaceTest.test_basic_output_memory_space_constraint."""
    memory_space = _space(memory_space)
    if color is None:
        out_shape_ctor = jax.ShapeDtypeStruct
    else:
        out_shape_ctor = lambda shape, dtype: jax.ShapeDtypeStruct(
            shape, dtype, memory_space=memory_space
        )

    def kernel(x_ref, y_ref):
        pltpu.sync_copy(x_ref, y_ref)

    def g(x):
        return pl.pallas_call(
            kernel,
            out_shape=out_shape_ctor(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=memory_space),
        )(x)

    @jax.jit
    def f(x):
        x = g(x)
        return x

    x = jnp.ones((8, 128), dtype=jnp.float32)
    y = f(x)
    np.testing.assert_array_equal(y, x)


def test_tuple_output_memory_space_constraint():
    """TPUPallasCallMemorySpaceTest.test_tuple_output_memory_space_constraint."""
    memory_space = pltpu.VMEM

    def kernel(x_ref, y_ref, z_ref):
        pltpu.sync_copy(x_ref, y_ref)
        pltpu.sync_copy(x_ref, z_ref)

    def g(x):
        return pl.pallas_call(
            kernel,
            out_shape=(
                pltpu.VMEM(x.shape, x.dtype),
                pltpu.VMEM(x.shape, x.dtype),
            ),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(
                pl.BlockSpec(memory_space=memory_space),
                pl.BlockSpec(memory_space=memory_space),
            ),
        )(x)

    @jax.jit
    def f(x):
        y, z = g(x)
        return y, z

    x = jnp.ones((8, 128), dtype=jnp.float32)
    y, z = f(x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, x)


def _make_run_kernel(use_core_map, **kwargs):
    if use_core_map:
        return pl.core_map(**kwargs)

    return lambda fn: pl.kernel(**kwargs)(fn)()


@pytest.mark.parametrize("use_core_map", [True, False])
@pytest.mark.parametrize("memory_space,color", _IN_SPACES)
def test_basic_ref_memory_space_constraint(memory_space, color, use_core_map):
    """TPUCoreMapMemorySpaceTest.test_basic_ref_memory_space_constraint."""
    memory_space = _space(memory_space)
    def f(x):
        x_ref = jax.new_ref(x, memory_space=memory_space)
        y_ref = jax.new_ref(pl.empty_like(x), memory_space=memory_space)

        assert jax.typeof(x_ref).memory_space == memory_space
        assert jax.typeof(y_ref).memory_space == memory_space

        run_kernel = _make_run_kernel(
            mesh=pltpu.TensorCoreMesh(axis_name='core'),
            use_core_map=use_core_map,
        )

        @run_kernel
        def _():
            if jax.typeof(x_ref).memory_space is pltpu.VMEM:
                y_ref[...] = x_ref[...]
            else:
                pltpu.sync_copy(x_ref, y_ref)

        return y_ref[...]

    x = jnp.arange(1024, dtype=jnp.float32).reshape((8, 128))
    num_cores = jax.devices()[0].num_cores
    if num_cores > 1 and memory_space is pltpu.VMEM and use_core_map:
        with pytest.raises(
            NotImplementedError,
            match='TensorCoreMesh does not support VMEM inputs/outputs when there are'
            ' >1 cores. Use HBM or ANY instead.',
        ):
            f(x)
        return
    y = f(x)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("use_core_map", [False, True])
def test_smem_copy(use_core_map):
    """TPUCoreMapMemorySpaceTest.test_smem_copy."""
    mesh = pltpu.TensorCoreMesh(axis_name='core')
    if mesh.num_cores > 1:
        pytest.skip('Only one core is supported for this test.')

    run_kernel = _make_run_kernel(mesh=mesh, use_core_map=use_core_map)

    @jax.jit
    def f():
        y_ref = pl.empty_ref_like(pltpu.SMEM((8,), jnp.int32))

        @run_kernel
        def _():
            for i in range(y_ref.shape[0]):
                y_ref[i] = i

        @run_kernel
        def _():
            for i in range(y_ref.shape[0]):
                y_ref[i] = y_ref[i] + 1

        return y_ref[...]

    np.testing.assert_array_equal(f(), np.arange(8) + 1)


@pytest.mark.parametrize("use_core_map", [False, True])
def test_smem_async_copy(use_core_map):
    """TPUCoreMapMemorySpaceTest.test_smem_async_copy."""
    mesh = pltpu.TensorCoreMesh(axis_name='core')
    if mesh.num_cores > 1:
        pytest.skip('Only one core is supported for this test.')

    run_kernel = _make_run_kernel(mesh=mesh, use_core_map=use_core_map)

    @jax.jit
    def f():
        y_ref = pl.empty_ref_like(pltpu.SMEM((8,), jnp.int32))

        @run_kernel
        def _():
            for i in range(y_ref.shape[0]):
                y_ref[i] = i

        @run_kernel
        def _():
            for i in range(y_ref.shape[0]):
                y_ref[i] = y_ref[i] + 1

        y_out_ref = pl.empty_ref_like(pltpu.HBM((8,), jnp.int32))

        sem = pl.empty_ref_like(pltpu.SemaphoreType.DMA(()))

        @run_kernel
        def _():
            pltpu.make_async_copy(y_ref, y_out_ref, sem).start()

        @run_kernel
        def _():
            pltpu.make_async_copy(y_ref, y_out_ref, sem).wait()

        return y_out_ref[...]

    np.testing.assert_array_equal(f(), np.arange(8) + 1)


@pytest.mark.parametrize("use_core_map", [False, True])
def test_smem_async_copy_megacore(use_core_map):
    """TPUCoreMapMemorySpaceTest.test_smem_async_copy_megacore."""
    mesh = pltpu.TensorCoreMesh(axis_name='core')
    num_cores = mesh.num_cores
    if num_cores == 1:
        pytest.skip('Only megacore is supported for this test.')

    run_kernel = _make_run_kernel(mesh=mesh, use_core_map=use_core_map)
    n = 256

    @jax.jit
    def f():
        y_ref = pl.empty_ref_like(pltpu.SMEM((1, n), jnp.int32))

        @run_kernel
        def _():
            core_i = jax.lax.axis_index('core')
            for i in range(n):
                y_ref[0, i] = i + core_i * n

        @run_kernel
        def _():
            for i in range(n):
                y_ref[0, i] = y_ref[0, i] + 1

        y_out_ref = pl.empty_ref_like(pltpu.HBM((num_cores, 1, n), jnp.int32))

        sem = pl.empty_ref_like(pltpu.SemaphoreType.DMA(()))

        @run_kernel
        def _():
            core_i = jax.lax.axis_index('core')
            pltpu.make_async_copy(y_ref, y_out_ref.at[core_i, ...], sem).start()

        @run_kernel
        def _():
            core_i = jax.lax.axis_index('core')
            pltpu.make_async_copy(y_ref, y_out_ref.at[core_i, ...], sem).wait()

        return y_out_ref[...]

    np.testing.assert_array_equal(
        f(), np.arange(num_cores * n).reshape((num_cores, 1, n)) + 1
    )
