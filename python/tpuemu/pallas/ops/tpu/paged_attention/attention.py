# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/paged_attention/attention.py:
grouped_query_attention, plain (not a kernel) grouped query attention of
one query per request over each request's first seq_lens tokens. Here it
runs on the host in float32 (bf16 operands widened exactly) and returns
the queries' dtype."""
import numpy as np

import tpuemu.numpy as jnp

from .paged_attention_kernel import DEFAULT_MASK_VALUE


def grouped_query_attention(queries, k_pages, v_pages, seq_lens,
                            mask_value=DEFAULT_MASK_VALUE):
    """queries (batch, q_heads, head_dim); k_pages and v_pages (batch,
    kv_heads, max_seq_len, head_dim); seq_lens (batch,): the attention
    of each query head over its kv head's group, masked past seq_len."""
    dtype = queries.dtype
    q, k, v = (np.asarray(x, np.float32) for x in (queries, k_pages, v_pages))
    batch_size, num_q_heads, head_dim = q.shape
    _, num_kv_heads, max_seq_len, _ = k.shape
    if num_q_heads % num_kv_heads:
        raise ValueError("grouped_query_attention: %d query heads are not a multiple of "
                         "%d kv heads" % (num_q_heads, num_kv_heads))
    q = q.reshape(batch_size, num_kv_heads, num_q_heads // num_kv_heads, head_dim)
    logits = np.einsum("bhgd,bhtd->bhgt", q, k)
    mask = np.arange(max_seq_len)[None] < np.asarray(seq_lens)[:, None]
    logits = np.where(mask[:, None, None, :], logits, np.float32(mask_value))
    logits = logits - logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = np.einsum("bhgt,bhtd->bhgd", weights, v).reshape(batch_size, num_q_heads, head_dim)
    return jnp.asarray(out.astype(np.float32), dtype=dtype)
