# SPDX-License-Identifier: MIT
"""dtypes: float32, bfloat16 (uint16 carrier), int8, int32; and results
equal to the same kernel written through C (tpurt_matmul)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu._lib import ffi, lib, check, device


def test_bf16_helpers_match_libtpurt():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(1000, dtype=np.float32) * 100,
                        np.array([0.0, -0.0, 1.0, np.inf, -np.inf, 1.00390625,
                                  1.01171875, 3.4e38], dtype=np.float32)])
    h = jax.to_bf16(x)
    assert h.dtype == np.uint16
    for v, b in zip(x, h):
        assert lib.tpurt_f32_to_bf16(float(v)) == int(b), v
    back = jax.from_bf16(h)
    assert back.dtype == np.float32
    for b, f in zip(h, back):
        assert lib.tpurt_bf16_to_f32(int(b)) == f
    assert np.isnan(jax.from_bf16(jax.to_bf16(np.float32(np.nan))))


def test_dtype_objects():
    assert jnp.float32 == np.float32 and jnp.int8 == np.dtype("int8")
    assert jnp.bfloat16 == np.uint16 and jnp.int32 != jnp.float32
    with pytest.raises(TypeError, match="unsupported dtype"):
        pl.pallas_call(lambda x_ref, o_ref: None,
                       out_shape=jax.ShapeDtypeStruct((8, 128), np.float64))(
            np.zeros((8, 128), np.float32))


def test_int8_matmul_int32_out():
    def k(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.int32)

    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (128, 256), dtype=np.int8)
    y = rng.integers(-128, 128, (256, 128), dtype=np.int8)
    r = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.int32),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        grid=(1, 1, 2))(x, y)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, x.astype(np.int32) @ y.astype(np.int32))


def test_int32_elementwise():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3 + 7

    x = np.arange(8 * 128, dtype=np.int32).reshape(8, 128) - 500
    r = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32))(x)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, x * 3 + 7)


def test_bf16_matmul_scratch():
    def k(x_ref, y_ref, z_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)
        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            z_ref[...] = acc_ref[...].astype(z_ref.dtype)

    rng = np.random.default_rng(2)
    x = jax.to_bf16(rng.standard_normal((128, 256), dtype=np.float32))
    y = jax.to_bf16(rng.standard_normal((256, 128), dtype=np.float32))
    z = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.bfloat16),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(1, 1, 2),
            in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)]))(x, y)
    ref = jax.to_bf16(jax.from_bf16(x) @ jax.from_bf16(y))
    np.testing.assert_allclose(jax.from_bf16(z), jax.from_bf16(ref), rtol=1e-2, atol=0.1)
