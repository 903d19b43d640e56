# SPDX-License-Identifier: MIT
"""lax.rem of scalar-core values (program ids): C's fmod sign, and usable
as a window index (ref.at[lax.rem(i, 2)], the distributed guide's
working slot). Before, its select expanded past what one scalar-core
expression holds ('scalar expression too long'); make_async_copy took
JAX's keyword names src_ref/dst_ref/sem only positionally."""
import math

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


@pytest.mark.parametrize("off,d", [(0, 2), (-3, 2), (-5, 3), (2, -3), (-7, -4)])
def test_rem_of_program_id(off, d):
    n = 8

    def body(o_ref):
        o_ref[pl.program_id(0)] = lax.rem(pl.program_id(0) + off, d)
    r = pl.pallas_call(body, grid=(n,), out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       out_shape=jax.ShapeDtypeStruct((n,), jnp.int32))()
    np.testing.assert_array_equal(np.asarray(r), [int(math.fmod(i + off, d)) for i in range(n)])


@pytest.mark.parametrize("keywords", [False, True])
def test_rem_slot_as_window_index(keywords):
    """Step i copies x into slot rem(i, 2) of a double buffer."""
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)

    def body(x_ref, o_ref, sem):
        slot = lax.rem(pl.program_id(0), 2)
        c = pltpu.make_async_copy(src_ref=x_ref, dst_ref=o_ref.at[slot], sem=sem) if keywords \
            else pltpu.make_async_copy(x_ref, o_ref.at[slot], sem)
        c.start()
        c.wait()
    r = pl.pallas_call(body, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
    np.testing.assert_array_equal(np.asarray(r), np.stack([x, x]))
