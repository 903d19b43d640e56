#!/usr/bin/python3
# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
# The Pallas TPU guide's first matmul kernel, its imports changed only:
# a (m // bm, n // bn, k // bk) grid accumulating into the output block.
# Run: TPURT_DEVICE=sim PYTHONPATH=python /usr/bin/python3 samples/py/matmul.py
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tpuemu as jax  # noqa: E402
import tpuemu.numpy as jnp  # noqa: E402
from tpuemu import pallas as pl  # noqa: E402
from tpuemu.pallas import tpu as pltpu  # noqa: E402


def matmul_kernel(x_ref, y_ref, z_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        z_ref[...] = jnp.zeros_like(z_ref)

    z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def matmul(x, y, *, bm=128, bk=128, bn=128):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        grid=(m // bm, n // bn, k // bk),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def main():
    rng = np.random.default_rng(0)
    # small enough for NumPy's reference on the guest's emulated CPU
    x = rng.standard_normal((256, 512), dtype=np.float32)
    y = rng.standard_normal((512, 256), dtype=np.float32)
    z = matmul(x, y)
    ref = x @ y
    ok = np.allclose(z, ref, rtol=1e-4, atol=1e-3)
    st = jax.last_stats()
    print("matmul f32 %s x %s: max error %.3g, %d steps, wall %.3f ms, modeled %.3f us"
          % (x.shape, y.shape, np.abs(z - ref).max(), st["steps"],
             st["call_wall_ns"] / 1e6, st["model_time_ps"] / 1e6))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
