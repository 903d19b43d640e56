#!/usr/bin/python3
# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
# The guide's bf16 matmul: a float32 VMEM scratch accumulator, zeroed at the
# first k step and cast into the bf16 output at the last. bf16 arrays are
# carried as uint16 (tpuemu.to_bf16/from_bf16).
# Run: TPURT_DEVICE=sim PYTHONPATH=python /usr/bin/python3 samples/py/matmul_bf16.py
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tpuemu as jax  # noqa: E402
import tpuemu.numpy as jnp  # noqa: E402
from tpuemu import pallas as pl  # noqa: E402
from tpuemu.pallas import tpu as pltpu  # noqa: E402


def matmul_kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == nsteps - 1)
    def _():
        z_ref[...] = acc_ref[...].astype(z_ref.dtype)


def matmul(x, y, *, bm=128, bk=128, bn=128):
    m, k = x.shape
    _, n = y.shape
    import functools
    return pl.pallas_call(
        functools.partial(matmul_kernel, nsteps=k // bk),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                      pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            grid=(m // bm, n // bn, k // bk)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def main():
    rng = np.random.default_rng(0)
    x = jax.to_bf16(rng.standard_normal((256, 512), dtype=np.float32))
    y = jax.to_bf16(rng.standard_normal((512, 256), dtype=np.float32))
    z = jax.from_bf16(matmul(x, y))
    ref = jax.from_bf16(jax.to_bf16(jax.from_bf16(x) @ jax.from_bf16(y)))
    ok = np.allclose(z, ref, rtol=2e-2, atol=0.1)
    st = jax.last_stats()
    print("matmul bf16 %s x %s: max error %.3g, wall %.3f ms, modeled %.3f us"
          % (x.shape, y.shape, np.abs(z - ref).max(),
             st["call_wall_ns"] / 1e6, st["model_time_ps"] / 1e6))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
