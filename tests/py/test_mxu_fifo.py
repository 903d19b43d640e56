# SPDX-License-Identifier: MIT
"""The explicit MXU ops (pltpu.matmul_push_rhs, matmul_lhs_fifo,
matmul_pop_fifo), beyond JAX's test_fifo (test_jax_ports22.py): two MXUs
and two staging registers at once, a product fixed at its LHS push, and
each misuse refused by name."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu.pallas.mosaic.error_handling import MosaicError


def _f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(kernel, out_shape, *args):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, jnp.float32))(*args)


def test_two_mxus_and_staging_registers():
    """MXU 0 multiplies by a and then b (staged together in registers 0
    and 1), MXU 1 by b transposed; pops of one MXU do not take the
    other's products."""
    x, a, b = _f32((16, 128), 1), _f32((128, 128), 2), _f32((128, 128), 3)

    def kernel(x_ref, a_ref, b_ref, o_ref):
        pltpu.matmul_push_rhs(a_ref[...], mxu_index=0, staging_register=0)
        pltpu.matmul_push_rhs(b_ref[...], mxu_index=0, staging_register=1)
        pltpu.matmul_push_rhs(b_ref[...], mxu_index=1, staging_register=0, transpose=True)
        pltpu.matmul_lhs_fifo(x_ref[0:8], mxu_index=0, load_staged_rhs=0)
        pltpu.matmul_lhs_fifo(x_ref[0:8], mxu_index=1, load_staged_rhs=0)
        pltpu.matmul_lhs_fifo(x_ref[8:16], mxu_index=0)			# still a
        pltpu.matmul_lhs_fifo(x_ref[8:16], mxu_index=0, load_staged_rhs=1)	# b
        o_ref[0:8] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32, mxu_index=1)
        o_ref[8:16] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32, mxu_index=0)
        o_ref[16:24] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32, mxu_index=0)
        o_ref[24:32] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32, mxu_index=0)

    out = _run(kernel, (32, 128), x, a, b)
    want = np.concatenate([x[:8] @ b.T, x[:8] @ a, x[8:] @ a, x[8:] @ b])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_product_is_fixed_at_its_lhs_push():
    # the lhs ref is overwritten between the push and the pop: the popped
    # product is of the values pushed
    x, w = _f32((8, 128), 4), _f32((128, 128), 5)

    def kernel(x_ref, w_ref, o_ref, s_ref):
        s_ref[...] = x_ref[...]
        pltpu.matmul_push_rhs(w_ref[...])
        pltpu.matmul_lhs_fifo(s_ref[...], load_staged_rhs=0)
        s_ref[...] = jnp.zeros_like(s_ref)
        o_ref[...] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                         scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x, w)
    np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)


def _misuse(body, match, exc=pl.TraceError):
    x, w = _f32((8, 128), 6), _f32((128, 128), 7)

    def kernel(x_ref, w_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        body(x_ref, w_ref, o_ref)

    with pytest.raises(exc, match=match):
        _run(kernel, (8, 128), x, w)


def test_misuse_is_refused_by_name():
    _misuse(lambda x, w, o: pltpu.matmul_lhs_fifo(x[...]), "no gains loaded", MosaicError)
    _misuse(lambda x, w, o: pltpu.matmul_lhs_fifo(x[...], load_staged_rhs=1),
            "nothing was pushed into that staging register", MosaicError)
    _misuse(lambda x, w, o: pltpu.matmul_push_rhs(w[...], mxu_index=4), "mxu_index=4")
    _misuse(lambda x, w, o: pltpu.matmul_push_rhs(w[...], staging_register=2),
            "staging registers 0 and 1")
    _misuse(lambda x, w, o: pltpu.matmul_push_rhs(jnp.zeros((256, 128), jnp.float32)),
            "larger than the 128x128 MXU")

    def wrong_shape(x, w, o):
        pltpu.matmul_push_rhs(w[...])
        pltpu.matmul_lhs_fifo(x[...], load_staged_rhs=0)
        o[...] = pltpu.matmul_pop_fifo(shape=(16, 128), dtype=jnp.float32)
    _misuse(wrong_shape, r"the oldest product in MXU 0's FIFO is \(8, 128\)")

    def not_contracting(x, w, o):
        pltpu.matmul_push_rhs(w[0:64])
        pltpu.matmul_lhs_fifo(x[...], load_staged_rhs=0)
    _misuse(not_contracting, "does not contract")

    def across_when(x, w, o):
        pltpu.matmul_push_rhs(w[...])
        pltpu.matmul_lhs_fifo(x[...], load_staged_rhs=0)

        @pl.when(pl.program_id(0) == 0)
        def _():
            o[...] = pltpu.matmul_pop_fifo(shape=(8, 128), dtype=jnp.float32)
    _misuse(across_when, "one straight-line region")
