# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""JAX's docs/pallas/tpu/core_map.md ("Pallas Core-specific Programming"),
its code with the imports changed, on one device (the guide's shard_map
over devices dropped: each device runs the same per-core code): per-core
copies in pl.core_map + pl.run_scoped, the pl.kernel form, emit_pipeline
split over the cores (core_axis_name, PARALLEL), and scalar prefetch with
work split by hand by jax.lax.axis_index. The cores' swap through
pltpu.make_async_remote_copy and the barrier semaphore, and SparseCore
meshes, are gaps (strict xfails)."""
from functools import partial

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

tc_mesh = pltpu.create_tensorcore_mesh('core')
num_cores = len(tc_mesh.devices)


def test_mesh_of_cores():
    assert tc_mesh.axis_names == ('core',) and num_cores >= 1


# --- A simple per-core kernel: each core its slice, without the swap ---

def scale_cores_kernel(in_hbm, out_hbm, in_vmem, out_vmem, sem):
    core_index = jax.lax.axis_index('core')
    num_cores = jax.lax.axis_size('core')
    slc_size = in_hbm.shape[-1] // num_cores
    slc = pl.ds(core_index * slc_size, slc_size)
    pltpu.async_copy(in_hbm.at[:, slc], in_vmem, sem).wait()
    out_vmem[...] = in_vmem[...] * 2
    pltpu.async_copy(out_vmem, out_hbm.at[:, slc], sem).wait()


input_shape = (32, 256)
local_vmem_shape = (32, 256 // num_cores)


def test_per_core_kernel_core_map_run_scoped():
    def scale_cores(x):
        x_hbm_ref = jax.new_ref(x)
        o_hbm_ref = jax.new_ref(jnp.zeros(x.shape, x.dtype))

        @pl.core_map(tc_mesh)
        def _():
            pl.run_scoped(
                partial(scale_cores_kernel, x_hbm_ref, o_hbm_ref),
                *([pltpu.VMEM(local_vmem_shape, x.dtype)] * 2),
                pltpu.SemaphoreType.DMA,
            )
        return o_hbm_ref[...]

    x = jax.random.normal(jax.random.key(0), input_shape, jnp.float32)
    y = np.asarray(scale_cores(x))
    np.testing.assert_array_equal(y, np.asarray(x) * 2)


def test_per_core_kernel_pl_kernel():
    def scale_cores(x):
        scratch_shapes = [pltpu.VMEM(local_vmem_shape, x.dtype)] * 2 + \
            [pltpu.SemaphoreType.DMA]
        return pl.kernel(scale_cores_kernel, out_shape=x, mesh=tc_mesh,
                         scratch_shapes=scratch_shapes)(x)
    x = jax.random.normal(jax.random.key(0), input_shape, jnp.float32)
    np.testing.assert_array_equal(np.asarray(scale_cores(x)), np.asarray(x) * 2)


def swap_cores_kernel(in_hbm, out_hbm, in_vmem, scratch_vmem, out_vmem,
                      sem, send_sem, recv_sem):
    core_index = jax.lax.axis_index('core')
    num_cores = jax.lax.axis_size('core')
    slc_size = in_hbm.shape[-1] // num_cores
    slc = pl.ds(core_index * slc_size, slc_size)
    pltpu.async_copy(in_hbm.at[:, slc], in_vmem, sem).wait()
    dst_core = (core_index + 1) % num_cores
    sem0 = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(sem0, 1, device_id={'core': dst_core})
    pl.semaphore_wait(sem0, 1)
    the_copy = pltpu.make_async_remote_copy(
        in_vmem, scratch_vmem, send_sem, recv_sem, device_id={'core': dst_core})
    the_copy.start()
    the_copy.wait()
    out_vmem[...] = scratch_vmem[...] * 2
    pltpu.async_copy(out_vmem, out_hbm.at[:, slc], sem).wait()


@pytest.mark.xfail(strict=True, raises=(pl.TraceError, AttributeError, TypeError), reason=(
    "copies between cores (pltpu.make_async_remote_copy with device_id={'core': ...}) "
    "and the barrier semaphore (pltpu.get_barrier_semaphore) are not supported"))
def test_swap_cores():
    """Core c gets core c - 1's slice (with the guide's 2 cores, the halves swap)."""
    x = jax.random.normal(jax.random.key(0), input_shape, jnp.float32)
    scratch_shapes = [pltpu.VMEM(local_vmem_shape, x.dtype)] * 3 + \
        [pltpu.SemaphoreType.DMA] * 3
    y = np.asarray(pl.kernel(swap_cores_kernel, out_shape=x, mesh=tc_mesh,
                             scratch_shapes=scratch_shapes,
                             compiler_params=pltpu.CompilerParams(collective_id=0))(x))
    w = 256 // num_cores
    x = np.asarray(x)
    for c in range(num_cores):
        src = (c - 1) % num_cores
        np.testing.assert_array_equal(y[:, c * w:(c + 1) * w], x[:, src * w:(src + 1) * w] * 2)


# --- Pipelining with core_map ---

def add_one_body(in_vmem, out_vmem):
    out_vmem[...] = in_vmem[...] + 1


def add_one_kernel(x_hbm_ref, o_hbm_ref):
    in_shape = x_hbm_ref.shape
    pltpu.emit_pipeline(
        add_one_body,
        grid=(in_shape[0] // 8, in_shape[1] // 128),
        in_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i, j: (i, j))],
        out_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i, j: (i, j))],
        core_axis_name='core',
        dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY),
    )(x_hbm_ref, o_hbm_ref)


def test_add_one_emit_pipeline_parallel_cores():
    def add_one(x):
        return pl.kernel(add_one_kernel, out_shape=x, mesh=tc_mesh, scratch_shapes=[])(x)
    x = jax.random.normal(jax.random.key(0), (1024, 1024), jnp.float32)
    np.testing.assert_array_equal(np.asarray(add_one(x)), np.asarray(x) + 1)


# --- Scalar prefetch, work split among cores by hand ---

output_shape = (1024, 512)


def indexed_add_one_kernel(in_refs, out_refs, i_smem_ref):
    (x_hbm_ref, i_hbm_ref), o_hbm_ref = in_refs, out_refs
    in_shape = x_hbm_ref.shape
    pltpu.sync_copy(i_hbm_ref, i_smem_ref)

    core_idx = jax.lax.axis_index('core')
    core_slc_size = in_shape[0] // num_cores
    i_map = lambda i: core_idx * core_slc_size // 8 + i  # noqa: E731
    j_map = lambda j: i_smem_ref[0] // 128 + j  # noqa: E731

    pltpu.emit_pipeline(
        add_one_body,
        grid=(core_slc_size // 8, output_shape[1] // 128),
        in_specs=[pl.BlockSpec(block_shape=(8, 128),
                               index_map=lambda i, j: (i_map(i), j_map(j)))],
        out_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i, j: (i_map(i), j))]
    )(x_hbm_ref, o_hbm_ref)


@pytest.mark.parametrize("idx", [256, 0, 384])
def test_indexed_add_one(idx):
    def indexed_add_one(x, index):
        out_shape = jax.ShapeDtypeStruct((x.shape[0], x.shape[1] // 2), x.dtype)
        return pl.kernel(indexed_add_one_kernel, out_shape=out_shape, mesh=tc_mesh,
                         scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])((x, index))
    xs = jax.random.normal(jax.random.key(0), (1024, 1024), jnp.float32)
    y = np.asarray(indexed_add_one(xs, jnp.array([idx])))
    np.testing.assert_array_equal(y, np.asarray(xs)[:, idx:idx + 512] + 1)
