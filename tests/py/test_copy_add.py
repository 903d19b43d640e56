# SPDX-License-Identifier: MIT
"""pltpu.sync_copy and async_copy with add=True (a DMA that accumulates
into its destination: here made as values, the destination read, added
to, stored back; the async copy's wait still counts), and sync_copy of
pytrees of refs, leaf by leaf."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_ANY = pl.BlockSpec(memory_space=pl.ANY)


def test_add_into_hbm_and_vmem():
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)

    def kernel(x_hbm, o_hbm, buf, sem):
        pltpu.sync_copy(x_hbm, o_hbm)				# o = x
        pltpu.sync_copy(x_hbm.at[0:8], buf)
        pltpu.sync_copy(buf, o_hbm.at[8:16], add=True)		# o[8:] += x[:8]
        copy = pltpu.async_copy(x_hbm.at[8:16], o_hbm.at[0:8], sem, add=True)
        copy.wait()						# o[:8] += x[8:]
        pltpu.sync_copy(x_hbm.at[0:8], buf, add=True)		# buf = 2 x[:8]
        pltpu.sync_copy(buf, o_hbm.at[0:8], add=True)		# o[:8] += 2 x[:8]

    out = pl.pallas_call(kernel, in_specs=[_ANY], out_specs=_ANY,
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                         pltpu.SemaphoreType.DMA])(x)
    want = x.copy()
    want[8:] += x[:8]
    want[:8] += x[8:] + 2 * x[:8]
    np.testing.assert_array_equal(out, want)


def test_sync_copy_of_pytrees():
    a = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    b = np.arange(8 * 128, dtype=np.int32).reshape(8, 128) * 3

    def kernel(a_hbm, b_hbm, oa, ob):
        pltpu.sync_copy({"a": a_hbm, "b": b_hbm}, {"a": oa, "b": ob})
        pltpu.sync_copy((a_hbm,), (oa,), add=True)

    oa, ob = pl.pallas_call(kernel, in_specs=[_ANY, _ANY], out_specs=(_ANY, _ANY),
                            out_shape=(jax.ShapeDtypeStruct(a.shape, a.dtype),
                                       jax.ShapeDtypeStruct(b.shape, b.dtype)))(a, b)
    np.testing.assert_array_equal(oa, 2 * a)
    np.testing.assert_array_equal(ob, b)

    def mismatched(a_hbm, b_hbm, oa, ob):
        pltpu.sync_copy((a_hbm, b_hbm), (oa,))
    with pytest.raises(ValueError, match="trees differ"):
        pl.pallas_call(mismatched, in_specs=[_ANY, _ANY], out_specs=(_ANY, _ANY),
                       out_shape=(jax.ShapeDtypeStruct(a.shape, a.dtype),
                                  jax.ShapeDtypeStruct(b.shape, b.dtype)))(a, b)
