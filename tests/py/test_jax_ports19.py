# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's three TPU workaround tests: tests/pallas/
test_tpu_int8_shift_workaround.py (a nibble unpack through int32
shifts), test_tpu_vmem_limit_workaround.py (CompilerParams'
vmem_limit_bytes) and test_tpu_concat_unpack.py (a 4-bit weight matmul
without strided slices). JAX's run the math on the host only; each here
also runs it inside a kernel, where the workarounds matter.

test_concat_unpack_correctness as JAX has it (N, K, BK = 64, 32, 16)
does not hold in NumPy either: concat_unpack_matmul puts all K/2 even
columns before all odd ones, block_local_permute orders them within each
BK block, and the two orders agree only when BK == K (NumPy's own
float64 error is 0.35 against atol 1e-3). It is ported with BK = K, the
layout the docstring describes for one tile; the kernel version runs one
(8, 256) x (256, 128) tile."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def nibble_unpack_int32_workaround(packed_uint8):
    w = packed_uint8.astype(jnp.int32)  # Cast to int32 BEFORE shifting
    lo = (w & 0xF)
    hi = (w >> 4) & 0xF
    lo = jnp.where(lo >= 8, lo - 16, lo)
    hi = jnp.where(hi >= 8, hi - 16, hi)
    return jnp.stack([lo, hi], axis=-1).reshape(
        *packed_uint8.shape[:-1], packed_uint8.shape[-1] * 2
    ).astype(jnp.int8)


def _packed():
    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, (64, 128)).astype(np.int8)
    n = q.astype(np.int32) & 0xF
    return q, (n[:, 0::2] | (n[:, 1::2] << 4)).astype(np.uint8)


def test_int32_shift_correctness():
    """Int8ShiftWorkaroundTest.test_int32_shift_correctness."""
    q, packed = _packed()
    unpacked = nibble_unpack_int32_workaround(jnp.asarray(packed))
    np.testing.assert_array_equal(np.asarray(unpacked), q)


def test_int32_shift_correctness_in_a_kernel():
    """The same unpack in a kernel body (the case the workaround is for)."""
    q, packed = _packed()

    def kernel(p_ref, o_ref):
        o_ref[...] = nibble_unpack_int32_workaround(p_ref[...])

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(q.shape, jnp.int8))(packed)
    np.testing.assert_array_equal(np.asarray(out), q)


def test_vmem_limit_parameter_exists():
    """VmemLimitWorkaroundTest.test_vmem_limit_parameter_exists."""
    params = pltpu.CompilerParams(vmem_limit_bytes=134217728)
    assert params is not None


def test_vmem_limit_in_a_call():
    """The documented pattern run: a call with vmem_limit_bytes=128 MiB."""
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)

    def kernel(x_ref, o_ref, acc):
        acc[...] = x_ref[...] * 2
        o_ref[...] = acc[...] + 1

    out = pl.pallas_call(
        kernel, grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=134217728))(x)
    np.testing.assert_array_equal(np.asarray(out), x * 2 + 1)


def block_local_permute(x, block_k):
    B, K = x.shape
    xb = x.reshape(B, K // block_k, block_k)
    xp = jnp.concatenate([xb[:, :, 0::2], xb[:, :, 1::2]], axis=2)
    return xp.reshape(B, K)


def concat_unpack_matmul(x_perm, packed_uint8, scale, block_k):
    w32 = packed_uint8.astype(jnp.int32)
    lo = (w32 & 0xF)
    hi = (w32 >> 4) & 0xF
    lo = jnp.where(lo >= 8, lo - 16, lo).astype(jnp.bfloat16)
    hi = jnp.where(hi >= 8, hi - 16, hi).astype(jnp.bfloat16)
    w = jnp.concatenate([lo, hi], axis=1)  # [N, K] in [even|odd] order
    out = (x_perm.astype(jnp.bfloat16) @ w.T).astype(jnp.float32)
    return out * scale[None, :]


def _quantized(n, k, b):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((n, k)).astype(np.float32) * 0.02
    s = np.maximum(np.abs(W).max(axis=1, keepdims=True) / 7.0, 1e-9)
    q = np.clip(np.round(W / s), -8, 7).astype(np.int8)
    x = rng.standard_normal((b, k)).astype(np.float32)
    nib = q.astype(np.int32) & 0xF
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return x, q, s, packed


def test_concat_unpack_correctness():
    """ConcatUnpackTest.test_concat_unpack_correctness with BK = K (see
    the docstring: JAX's BK = 16 of K = 32 fails in NumPy too)."""
    N, K, B = 64, 32, 4
    BK = K
    x, q, s, packed = _quantized(N, K, B)
    ref = x @ (q * s).T
    x_perm = np.asarray(block_local_permute(jnp.asarray(x), BK))
    sf = jnp.asarray(s.reshape(N).astype(np.float32))
    out = concat_unpack_matmul(jnp.asarray(x_perm), jnp.asarray(packed), sf, BK)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-2, atol=1e-3)


def test_concat_unpack_in_a_kernel():
    """One tile of the same matmul in a kernel: the permuted activation
    and the unpacked weight's halves concatenated in VMEM."""
    N, K, B = 128, 256, 8
    x, q, s, packed = _quantized(N, K, B)
    x_perm = np.asarray(block_local_permute(jnp.asarray(x), K))

    def kernel(x_ref, p_ref, s_ref, o_ref):
        o_ref[...] = concat_unpack_matmul(x_ref[...], p_ref[...], s_ref[...], K)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((B, N), jnp.float32))(
        x_perm, packed, s.reshape(N).astype(np.float32))
    # bf16 activations: about 2^-8 relative of each product
    np.testing.assert_allclose(np.asarray(out), x @ (q * s).T, rtol=2e-2, atol=2e-2)
