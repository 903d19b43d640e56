# SPDX-License-Identifier: MIT
"""Scalar loads past an SMEM array's end, as a TPU does them: inside the
job's SMEM they read the word there (the scalar-prefetch arrays lie back
to back, so one past a's end is b[0]); outside it they are refused, and so
is every store past an array's end (it would change another operand)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

A = np.array([1, 2, 3], np.int32)
B = np.array([40, 50], np.int32)


def _call(body, n=3):
    return pl.pallas_call(body, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2, grid=(1,),
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM)),
        out_shape=jax.ShapeDtypeStruct((n,), jnp.int32))(A, B)


def test_load_past_a_prefetch_array_reads_the_next():
    def body(a_ref, b_ref, o_ref):
        i = a_ref[2]			# 3: a's length, known only at run time
        o_ref[0] = a_ref[i]		# b[0]
        o_ref[1] = a_ref[i + 1]		# b[1]
        o_ref[2] = b_ref[i - 3]
    np.testing.assert_array_equal(np.asarray(_call(body)), [40, 50, 40])


def test_load_past_a_prefetch_array_in_an_index_map():
    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(32, 128)

    def body(a_ref, b_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
    # block a[3] - 40 = b[0] - 40 = 0 at step 0
    r = pl.pallas_call(body, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2, grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, a, b: (a[i + 3] - 40, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, a, b: (0, 0))),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(A, B, x)
    np.testing.assert_array_equal(np.asarray(r), x[:8])


def test_load_past_the_jobs_smem_is_refused():
    def body(a_ref, b_ref, o_ref):
        o_ref[0] = a_ref[a_ref[2] + 100]	# past a, b and o's two blocks
    with pytest.raises(jax.TpurtError, match=r"SMEM index 103 outside scalar-prefetch "
                       r"'a_ref' \(3 elements, 11 to the end of the job's SMEM\)"):
        _call(body)


def test_store_past_a_prefetch_array_is_refused():
    def body(a_ref, b_ref, o_ref):
        a_ref[a_ref[2]] = 7		# would be b[0]
        o_ref[0] = b_ref[0]
    with pytest.raises(jax.TpurtError, match=r"index 3 outside .*a_ref.* \(3 elements\)"):
        _call(body, 1)
