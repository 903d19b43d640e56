# SPDX-License-Identifier: MIT
"""Index maps: Python lambdas on symbolic grid indices and scalar-prefetch refs."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu.pallas import _index_map_text


def test_lambda_text():
    assert _index_map_text(lambda i, j, k: (i, k), 3, [], "x") == "i, j, k -> i, k"
    assert _index_map_text(lambda i, j, k: (k, j), 3, [], "y") == "i, j, k -> k, j"
    assert _index_map_text(lambda i: (i * 2 + 1, 0), 1, [], "x") == "i -> ((i * 2) + 1), 0"
    assert _index_map_text(lambda i: i // 2, 1, [], "x") == "i -> (i // 2)"


def test_lambda_scalar_prefetch_text():
    t = _index_map_text(lambda i, j, s: (s[i], j), 2, ["s"], "x")
    assert t == "i, j, s -> s[i], j"


def test_scalar_prefetch_gather():
    # out block i is x's block idx[i]: the block-sparse pattern's index map
    def k(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    x = np.random.default_rng(0).standard_normal((32, 128), dtype=np.float32)
    idx = np.array([3, 0, 2, 2], dtype=np.int32)
    f = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct((32, 128), np.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0))))
    r = f(idx, x)
    ref = np.concatenate([x[8 * b:8 * b + 8] for b in idx]) + 1.0
    np.testing.assert_allclose(r, ref)


def test_scalar_prefetch_in_body():
    # an SMEM element read in the kernel body is a scalar operand
    def k(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[pl.program_id(0)]

    x = np.ones((16, 128), dtype=np.float32)
    s = np.array([2, 5], dtype=np.int32)
    r = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0))))(s, x)
    np.testing.assert_allclose(r[:8], 2.0)
    np.testing.assert_allclose(r[8:], 5.0)


def test_default_block_is_whole_array():
    def k(x_ref, o_ref):
        o_ref[...] = jnp.maximum(x_ref[...], 0.0)

    x = np.random.default_rng(1).standard_normal((8, 256), dtype=np.float32)
    r = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_allclose(r, np.maximum(x, 0))
