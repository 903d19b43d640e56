# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""The Pallas kernels of the flash attention guide (docs/pallas/tpu/flash1.md,
"The Math of Flash Attention") as written there, BlockSpec(index_map,
block_shape) argument order included: attention without softmax (two
matmuls, the output accumulated over the kv grid dimension), attention with
the whole row in VMEM, and that kernel running out of VMEM at 16k tokens."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl


@jax.jit
def softmax(x, axis: int = -1):
    x_max = jnp.max(x, axis=axis, keepdims=True)
    x_shifted = x - x_max
    x_numerator = jnp.exp(x_shifted)
    return x_numerator / jnp.sum(x_numerator, axis=axis, keepdims=True)


def attention_without_softmax_kernel(q_ref, k_ref, v_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref[...])
    q = q_ref[...] / jnp.sqrt(q_ref.shape[1])
    transpose_dims = ((1,), (1,)), ((), ())
    qk = jax.lax.dot_general(q, k_ref[...], transpose_dims)
    o_ref[...] += qk @ v_ref[...]


def attention_without_softmax_pallas(q, k, v, *, bq=128, bkv=128):
    seq_len, head_dim = q.shape
    return pl.pallas_call(
        attention_without_softmax_kernel,
        out_shape=q,
        grid=(seq_len // bq, seq_len // bkv),
        in_specs=[
            pl.BlockSpec(lambda i, j: (i, 0), (bq, head_dim)),
            pl.BlockSpec(lambda i, j: (j, 0), (bkv, head_dim)),
            pl.BlockSpec(lambda i, j: (j, 0), (bkv, head_dim)),
        ],
        out_specs=pl.BlockSpec(lambda i, j: (i, 0), (bq, head_dim)),
    )(q, k, v)


def attention_with_softmax_kernel(q_ref, k_ref, v_ref, o_ref):
    q = q_ref[...] / jnp.sqrt(q_ref.shape[1])
    transpose_dims = ((1,), (1,)), ((), ())
    qk = jax.lax.dot_general(q, k_ref[...], transpose_dims)
    probs = softmax(qk)
    o_ref[...] = probs @ v_ref[...]


def attention_pallas(q, k, v, *, bq=128):
    seq_len, head_dim = q.shape
    return pl.pallas_call(
        attention_with_softmax_kernel,
        out_shape=q,
        grid=(seq_len // bq,),
        in_specs=[
            pl.BlockSpec(lambda i: (i, 0), (bq, head_dim)),
            pl.BlockSpec(lambda i: (0, 0), (seq_len, head_dim)),
            pl.BlockSpec(lambda i: (0, 0), (seq_len, head_dim)),
        ],
        out_specs=pl.BlockSpec(lambda i: (i, 0), (bq, head_dim)),
    )(q, k, v)


def _qkv(seq_len, head_dim=256, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((seq_len, head_dim)).astype(np.float32)
                 for _ in range(3))


def _logits(q, k):
    return q.astype(np.float64) @ k.T.astype(np.float64) / np.sqrt(q.shape[1])


def test_attention_without_softmax():
    q, k, v = _qkv(1024)
    np.testing.assert_allclose(attention_without_softmax_pallas(q, k, v),
                           _logits(q, k) @ v, rtol=1e-3, atol=1e-3)


def test_attention_with_softmax_whole_rows_in_vmem():
    q, k, v = _qkv(1024, seed=1)
    lg = _logits(q, k)
    p = np.exp(lg - lg.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(attention_pallas(q, k, v), ref, atol=1e-3, rtol=1e-3)


def test_attention_with_softmax_runs_out_of_vmem_at_16k():
    # k and v whole, double-buffered: 64 MiB of blocks, over the 16 MiB
    # scoped default, as the guide's "Ran out of memory!"
    q, k, v = _qkv(16384, seed=2)
    with pytest.raises(jax.TpurtError, match="VMEM"):
        attention_pallas(q, k, v)
