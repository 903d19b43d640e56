#!/usr/bin/python3
# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
# Flash attention's forward pass as the Pallas TPU ops library writes it
# (jax/experimental/pallas/ops/tpu/flash_attention.py), imports changed:
# q, k, v of shape (batch * heads, seq, d) in bf16, an online softmax over
# key blocks with f32 m, l and acc scratch, causal or not. samples/
# flash_attention.c is the same kernel through libtpurt's statement text.
# Checked against NumPy's softmax(q k^T / sqrt(d)) v of the same bf16 values.
# Run: TPURT_DEVICE=sim /usr/bin/python3 samples/py/flash_attention.py
import functools
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tpuemu as jax  # noqa: E402
import tpuemu.numpy as jnp  # noqa: E402
from tpuemu import lax  # noqa: E402
from tpuemu import pallas as pl  # noqa: E402
from tpuemu.pallas import tpu as pltpu  # noqa: E402


def flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, causal, bq, bk):
    qi, kj = pl.program_id(1), pl.program_id(2)

    @pl.when(kj == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)

    def body():
        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        if causal:
            q_ids = lax.broadcasted_iota(jnp.int32, (bq, bk), 0) + qi * bq
            k_ids = lax.broadcasted_iota(jnp.int32, (bq, bk), 1) + kj * bk
            s = jnp.where(k_ids <= q_ids, s, -jnp.inf)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = acc_ref[...] * alpha
        acc_ref[...] += jnp.dot(p.astype(v_ref.dtype), v_ref[...],
                                preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    if causal:
        # key blocks wholly above the diagonal contribute nothing
        pl.when(kj * bk <= qi * bq + bq - 1)(body)
    else:
        body()

    @pl.when(kj == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def flash_attention(q, k, v, *, causal, bq=128, bk=128):
    bh, seq, d = q.shape
    kernel = functools.partial(flash_kernel, scale=1.0 / math.sqrt(d), causal=causal,
                               bq=bq, bk=bk)
    return pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(bh, seq // bq, seq // bk),
            in_specs=[pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
                      pl.BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0)),
                      pl.BlockSpec((None, bk, d), lambda b, i, j: (b, j, 0))],
            out_specs=pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
            scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32),
                            pltpu.VMEM((bq, 1), jnp.float32),
                            pltpu.VMEM((bq, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q.shape, jnp.bfloat16),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(q, k, v)


def reference(q, k, v, causal):
    q, k, v = (jax.from_bf16(a).astype(np.float64) for a in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def main():
    rng = np.random.default_rng(0)
    bh, seq, d = 2, 256, 128
    q, k, v = (jax.to_bf16(rng.standard_normal((bh, seq, d), dtype=np.float32))
               for _ in range(3))
    ok = True
    for causal in (False, True):
        o = jax.from_bf16(flash_attention(q, k, v, causal=causal))
        err = np.abs(o - reference(q, k, v, causal)).max()
        st = jax.last_stats()
        good = err < 2e-2
        ok = ok and good
        print("flash attention %s (bh %d, seq %d, d %d): max error %.3g%s, %d steps, "
              "wall %.3f ms, modeled %.3f us"
              % ("causal" if causal else "non-causal", bh, seq, d, err,
                 "" if good else " (over 2e-2)", st["steps"], st["call_wall_ns"] / 1e6,
                 st["model_time_ps"] / 1e6))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
