# SPDX-License-Identifier: MIT
"""Index maps: Python lambdas on symbolic grid indices and scalar-prefetch refs."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
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


def test_rank3_scalar_prefetch_in_index_maps_and_body():
    # splash attention's [heads, q blocks, kv blocks] tables: a rank-3
    # prefetch (held 2-D in SMEM), read s[h, i, j] in an index map and in the
    # body, its shape known to both (s.shape[0] == 1 picks head 0)
    table = np.array([[[2, 0, 1], [1, 1, 0]], [[0, 2, 2], [2, 1, 0]]], dtype=np.int8)
    x = np.random.default_rng(1).standard_normal((3 * 8, 128), dtype=np.float32)
    seen = []

    def imap(h, i, j, t_ref):
        seen.append(t_ref.shape)
        return t_ref[h, i, j].astype(jnp.int32), 0

    def k(t_ref, x_ref, o_ref):
        h, i, j = pl.program_id(0), pl.program_id(1), pl.program_id(2)
        o_ref[...] = x_ref[...] * t_ref[h, i, j].astype(jnp.float32)

    out = pl.pallas_call(k, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2, 2, 3),
        in_specs=[pl.BlockSpec((8, 128), imap)],
        out_specs=pl.BlockSpec((None, 8, 128), lambda h, i, j, t: (h * 6 + i * 3 + j, 0, 0))),
        out_shape=jax.ShapeDtypeStruct((12, 8, 128), jnp.float32))(table, x)
    assert seen and all(s == (2, 2, 3) for s in seen)
    for n, (h, i, j) in enumerate(np.ndindex(2, 2, 3)):
        b = int(table[h, i, j])
        np.testing.assert_array_equal(out[n], x[b * 8:(b + 1) * 8] * b)


def test_rank3_scalar_prefetch_needs_every_index():
    table = np.zeros((2, 2, 2), np.int32)

    def k(t_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + t_ref[0, 1]

    with pytest.raises(pl.TraceError, match="scalar prefetch 't_ref' of shape \\(2, 2, 2\\)"):
        pl.pallas_call(k, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,), in_specs=[pl.BlockSpec((8, 128), lambda i, t: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, t: (0, 0))),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(table, np.zeros((8, 128), np.float32))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_lax_div_and_rem_of_grid_indices(d):
    # lax.div(h, d) and lax.rem(h, d) in index maps (grid indices are int32;
    # the sign test becomes the index-map language's 'and')
    x = np.arange(6 * 8 * 128, dtype=np.float32).reshape(6 * 8, 128)

    def k(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 1000.0 + y_ref[...]

    out = pl.pallas_call(k, grid=(6,),
                         in_specs=[pl.BlockSpec((8, 128), lambda h: (lax.div(h, d), 0)),
                                   pl.BlockSpec((8, 128), lambda h: (lax.rem(h, d), 0))],
                         out_specs=pl.BlockSpec((None, 8, 128), lambda h: (h, 0, 0)),
                         out_shape=jax.ShapeDtypeStruct((6, 8, 128), jnp.float32))(x, x)
    for h in range(6):
        b, r = h // d, h % d
        np.testing.assert_array_equal(out[h], x[b * 8:(b + 1) * 8] * 1000.0 + x[r * 8:(r + 1) * 8])
    assert " and " in _index_map_text(lambda h: (lax.div(h, 2), 0), 1, [], "x")


def test_rank4_scalar_prefetch_elements_are_row_major():
    t = np.arange(2 * 3 * 2 * 5, dtype=np.int32).reshape(2, 3, 2, 5) * 3 + 1
    idxs = [(0, 0, 0, 0), (1, 2, 1, 4), (0, 2, 1, 3), (1, 0, 1, 0), (-1, 1, 0, -2)]

    def k(t_ref, o_ref):
        for n, ix in enumerate(idxs):
            o_ref[0, n] = t_ref[ix]

    out = pl.pallas_call(k, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,),
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM)),
        out_shape=jax.ShapeDtypeStruct((1, len(idxs)), jnp.int32))(t)
    np.testing.assert_array_equal(np.asarray(out)[0], [t[ix] for ix in idxs])
