# SPDX-License-Identifier: MIT
"""pltpu.delay (and pl.delay): a stall of N nanoseconds the device's
timing model charges to the step, and nothing else: the results are the
same, the modeled time grows by N a step (or a trip), and a delay outside
1 to 10^9 ns or a traced one is refused by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _run(delay, trips=0):
    def trip(i, carry):
        pltpu.delay(delay)
        return carry

    def kernel(x_ref, o_ref):
        if delay and trips:
            lax.fori_loop(0, trips, trip, 0)
        elif delay:
            pl.delay(delay)
        o_ref[...] = x_ref[...] * 2

    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(32, 128)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                         grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                         out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))(x)
    np.testing.assert_array_equal(out, x * 2)
    return jax.last_stats()["model_time_ps"]


def test_the_modeled_time_grows_by_the_delay_each_step():
    base = _run(0)
    grown = _run(100_000)	# 100 us a step, 4 steps
    assert abs((grown - base) - 4 * 100_000_000) < 0.01 * 4 * 100_000_000, (base, grown)
    looped = _run(5_000, trips=8)	# 8 trips of 5 us a step
    assert abs((looped - base) - 4 * 8 * 5_000_000) < 0.01 * 4 * 8 * 5_000_000, (base, looped)


@pytest.mark.parametrize("bad,match", [(0, "1 to 10"), (10**9 + 1, "1 to 10"),
                                       (1.5, "a Python int")])
def test_refusals(bad, match):
    def kernel(x_ref, o_ref):
        pltpu.delay(bad)
        o_ref[...] = x_ref[...]

    with pytest.raises(pl.TraceError, match=match):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
            np.zeros((8, 128), np.float32))
