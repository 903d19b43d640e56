# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/paged_attention/util.py:
grouped_query_attention_reference, its math in NumPy float64 (the
reference paged_attention is tested against)."""
import numpy as np

import tpuemu.numpy as jnp

from .paged_attention_kernel import DEFAULT_MASK_VALUE
from .quantization_utils import QuantizedTensor, unquantize_from_int8


MASK_VALUE = DEFAULT_MASK_VALUE


def _f32(x):
    return np.asarray(x, np.float32)


def grouped_query_attention_reference(queries, k_pages, v_pages, seq_lens, soft_cap=None):
    """Grouped query attention with a single query per request, float64."""
    if isinstance(k_pages, QuantizedTensor):
        k_pages = _f32(unquantize_from_int8(k_pages, dtype=jnp.float32))
    if isinstance(v_pages, QuantizedTensor):
        v_pages = _f32(unquantize_from_int8(v_pages, dtype=jnp.float32))
    queries, k_pages, v_pages = (np.asarray(x, np.float64) for x in (queries, k_pages, v_pages))
    batch_size, num_q_heads, head_dim = queries.shape
    _, num_kv_heads, max_seq_len, _ = k_pages.shape
    num_groups = num_q_heads // num_kv_heads
    queries = queries.reshape(batch_size, num_kv_heads, num_groups, head_dim)
    qk = np.einsum("bhgd,bhtd->bhgt", queries, k_pages)
    if soft_cap is not None and soft_cap != 0.0:
        qk = np.tanh(qk / soft_cap) * soft_cap
    mask = np.arange(max_seq_len)[None] < np.asarray(seq_lens)[:, None]
    qk = qk + np.where(mask, 0.0, MASK_VALUE)[:, None, None, :]
    qk = qk - qk.max(axis=-1, keepdims=True)
    probs = np.exp(qk)
    probs /= probs.sum(axis=-1, keepdims=True)
    attention = np.einsum("bhgt,bhtd->bhgd", probs, v_pages)
    return attention.reshape(batch_size, num_q_heads, head_dim)
