# SPDX-License-Identifier: MIT
"""pl.HOST (pinned host memory): operands a kernel moves by DMA only, as
pl.ANY's. Held in the device's HBM here, so copies into and out of them,
their windows and their semaphores behave as HBM's; loads from them and
host memory allocated inside a kernel are refused, as Mosaic's."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def test_host_window_through_vmem_and_back():
    """Rows 8..16 of a host input copied into VMEM, doubled, and copied
    into a window of a host output (pl.MemoryRef out_shape)."""
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)

    def kernel(x_host, o_host, buf, sem):
        o_copy = pltpu.make_async_copy(x_host, o_host, sem)
        o_copy.start()
        o_copy.wait()
        pltpu.sync_copy(x_host.at[8:16], buf)
        buf[...] = buf[...] * 2
        pltpu.sync_copy(buf, o_host.at[0:8])

    out = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.HOST)],
        out_specs=pl.BlockSpec(memory_space=pltpu.MemorySpace.HOST),
        out_shape=pl.MemoryRef(jax.ShapeDtypeStruct((32, 128), jnp.float32), pl.HOST),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)
    want = x.copy()
    want[0:8] = x[8:16] * 2
    np.testing.assert_array_equal(out, want)


def test_host_refs_are_not_loaded_or_allocated():
    x = np.zeros((8, 128), np.float32)

    def load(x_host, o_ref):
        o_ref[...] = x_host[...]
    with pytest.raises(pl.TraceError):
        pl.pallas_call(load, in_specs=[pl.BlockSpec(memory_space=pl.HOST)],
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)

    def scoped(x_ref, o_ref):
        pl.run_scoped(lambda h: None, pl.HOST((8, 128), jnp.float32))
    with pytest.raises(ValueError, match=r"Cannot allocate HOST in `run_scoped`"):
        pl.pallas_call(scoped, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)


def test_memory_space_constraint_names_host():
    y = pltpu.with_memory_space_constraint(np.ones((8, 128), np.float32), pl.HOST)
    assert jax.typeof(y).memory_space is pl.HOST
    assert repr(pl.HOST) == "HOST"
