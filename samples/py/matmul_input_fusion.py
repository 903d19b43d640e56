#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The guide's first exercise, input fusion: x is int8 in HBM with a
# per-column (per-k) f32 scale; each x block is dequantised in VMEM,
# (x * scale).astype(bf16), right before the bf16 dot, so x crosses HBM as
# one byte an element instead of two. Beside it the plain kernel on an x
# dequantised beforehand: the two must agree bit for bit (the same bf16
# values meet the same sums), and both match NumPy. samples/
# matmul_input_fusion.c is the C one (tpurt_matmul's x_fusion).
# Run: TPURT_DEVICE=sim /usr/bin/python3 samples/py/matmul_input_fusion.py
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tpuemu as jax  # noqa: E402
import tpuemu.numpy as jnp  # noqa: E402
from tpuemu import pallas as pl  # noqa: E402
from tpuemu.pallas import tpu as pltpu  # noqa: E402

BM = BK = BN = 128
PARAMS = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))


def fused_kernel(x_ref, s_ref, y_ref, z_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        z_ref[...] = jnp.zeros_like(z_ref)

    x = (x_ref[...].astype(jnp.float32) * s_ref[...]).astype(jnp.bfloat16)
    z_ref[...] += jnp.dot(x, y_ref[...], preferred_element_type=jnp.float32)


def plain_kernel(x_ref, y_ref, z_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        z_ref[...] = jnp.zeros_like(z_ref)

    z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def specs(m, k, n):
    return dict(
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        grid=(m // BM, n // BN, k // BK),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        compiler_params=PARAMS)


def fused_matmul(q, scale, y):
    (m, k), n = q.shape, y.shape[1]
    return pl.pallas_call(
        fused_kernel,
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((1, BK), lambda i, j, k: (0, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        **specs(m, k, n))(q, scale.reshape(1, k), y)


def plain_matmul(x, y):
    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        plain_kernel,
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        **specs(m, k, n))(x, y)


def main():
    m = k = n = 256
    rng = np.random.default_rng(41)
    q = rng.integers(-8, 8, (m, k), dtype=np.int8)
    # scales 1/64 .. 1/8: the int8 range [-8, 8) maps to about [-1, 1)
    scale = ((1 + np.arange(k) % 8) / 64).astype(np.float32)
    y = jax.to_bf16(rng.standard_normal((k, n), dtype=np.float32))
    xd = jax.to_bf16(q.astype(np.float32) * scale)

    z = fused_matmul(q, scale, y)
    fused = jax.last_stats()
    z0 = plain_matmul(xd, y)
    plain = jax.last_stats()
    ref = jax.from_bf16(xd) @ jax.from_bf16(y)
    same = np.array_equal(z, z0)
    close = np.allclose(z, ref, rtol=1e-5, atol=1e-4)
    print("matmul_input_fusion: (int8 x * scale).astype(bf16) @ y, %dx%dx%d: HBM bytes in "
          "fused %d, plain %d; fused %s plain bit for bit; max error from NumPy %.3g"
          % (m, k, n, fused["hbm_bytes_in"], plain["hbm_bytes_in"],
             "equals" if same else "DIFFERS from", np.abs(z - ref).max()))
    ok = same and close and fused["hbm_bytes_in"] < plain["hbm_bytes_in"]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
