# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_mesh_test.py (ShmallasTest):
shard_map over a pltpu.create_tensorcore_mesh mesh as a kernel launcher
(pl.core_map's), refs from run_state, lax.psum(1, axis) the core count.
The expected values use the device's core count, as JAX's do."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu._src.state import discharge as state_discharge
from tpuemu.experimental import shard_map
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def test_can_create_tensorcore_mesh():
    _ = pltpu.create_tensorcore_mesh("x")


def test_can_trivially_shard_map_with_pallas_mesh():
    mesh = pltpu.create_tensorcore_mesh("x")
    _ = shard_map.shard_map(lambda: None, mesh, in_specs=(), out_specs=None)()


def test_can_run_basic_pallas_kernel_with_shard_map():
    mesh = pltpu.create_tensorcore_mesh("x")

    @jax.jit
    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            def kernel():
                def alloc(sem):
                    pltpu.async_copy(x_ref, y_ref, sem).wait()
                pl.run_scoped(alloc, pltpu.SemaphoreType.DMA)
            shard_map.shard_map(kernel, mesh, in_specs=(), out_specs=None,
                                check_rep=False)()
        _, y = state_discharge.run_state(inner)((x, y))
        return y
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape((8, 128))
    y = f(x)
    np.testing.assert_array_equal(y, x)


def test_can_query_core_index_pallas_kernel_with_shard_map():
    mesh = pltpu.create_tensorcore_mesh("x")

    @jax.jit
    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            def kernel():
                num_cores = jax.lax.psum(1, "x")
                slc_size = 16 // num_cores

                def alloc(x_vmem_ref, y_vmem_ref, sem):
                    core_index = jax.lax.axis_index("x")
                    slc = pl.ds(core_index * slc_size, slc_size)
                    pltpu.async_copy(
                        x_ref.at[slc],
                        x_vmem_ref,
                        sem,
                    ).wait()
                    y = x_vmem_ref[...] + jax.lax.axis_index("x")
                    y_vmem_ref[...] = y
                    pltpu.async_copy(y_vmem_ref, y_ref.at[slc], sem).wait()
                pl.run_scoped(
                    alloc,
                    pltpu.VMEM((slc_size, 128), x_ref.dtype),
                    pltpu.VMEM((slc_size, 128), y_ref.dtype),
                    pltpu.SemaphoreType.DMA,
                )
            shard_map.shard_map(kernel, mesh, in_specs=(), out_specs=None,
                                check_rep=False)()
        _, y = state_discharge.run_state(inner)((x, y))
        return y
    num_cores = jax.devices()[0].num_cores
    x = jnp.arange(16 * 128, dtype=jnp.int32).reshape((16, 128))
    expected_out = (
        np.asarray(x).reshape((num_cores, -1, 128)) + np.arange(num_cores)[..., None, None]
    ).reshape(x.shape)
    y = f(x)
    np.testing.assert_array_equal(y, expected_out)


def test_shard_map_refusals():
    """tpuemu: a device mesh, arguments or outputs are refused by name."""
    mesh = pltpu.create_tensorcore_mesh("x")
    with pytest.raises(NotImplementedError, match="pltpu.create_tensorcore_mesh"):
        jax.shard_map(lambda: None, "devices", in_specs=(), out_specs=None)
    with pytest.raises(NotImplementedError, match="no arguments and no outputs"):
        jax.shard_map(lambda x: x, mesh, in_specs=(None,), out_specs=None)
