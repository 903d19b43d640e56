# SPDX-License-Identifier: MIT
"""SMEM refs of rank 3 and 4 indexed element by element: each index
counts, row-major (before, s[i, j, k] read the word at s[i, j] of the
last dimension's rows: a silent wrong value)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 1, 2), (1, 1, 1, 2), (2, 2, 3, 2)])
def test_smem_input_read_each_element(shape):
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape) * 7 + 100
    idxs = list(np.ndindex(*shape))

    def body(s_ref, o_ref):
        for n, ix in enumerate(idxs):
            o_ref[0, n] = s_ref[ix]
    r = pl.pallas_call(body, in_specs=[SMEM], out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct((1, len(idxs)), jnp.int32))(x)
    np.testing.assert_array_equal(np.asarray(r)[0], x.reshape(-1))


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 2, 3)])
def test_smem_output_store_each_element(shape):
    idxs = list(np.ndindex(*shape))

    def body(o_ref):
        for n, ix in enumerate(idxs):
            o_ref[ix] = n * 3 + 1
    r = pl.pallas_call(body, out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct(shape, jnp.int32))()
    np.testing.assert_array_equal(np.asarray(r),
                                  (np.arange(len(idxs)) * 3 + 1).reshape(shape))


def test_wrong_index_count_refused():
    def body(s_ref, o_ref):
        o_ref[0, 0] = s_ref[0, 1, 2, 0]
    with pytest.raises(pl.TraceError, match="has 3 dimensions: index each, not 4"):
        pl.pallas_call(body, in_specs=[SMEM], out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct((1, 1), jnp.int32))(
            np.zeros((2, 3, 4), np.int32))
