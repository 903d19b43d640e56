# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_attention_test.py:
paged_attention.grouped_query_attention on four hand-computed cases, in
float32 and bfloat16 (jtu.with_config is jax.config.option; the
jax.debug.print lines print on the host)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu.experimental.pallas.ops.tpu import paged_attention


def _generate_qkv_simplest(dtype):
    """Generates queries with one query head, kv pages, and attention."""
    max_seq_len = 4
    seq_lens = jnp.asarray([max_seq_len // 2])
    assert seq_lens.shape == (1,)
    queries = jnp.asarray([[[1.2]]], dtype)
    assert queries.shape == (1, 1, 1)
    k_pages = jnp.asarray([[[[0.1], [0.2], [0.3], [0.4]]]], dtype)
    v_pages = jnp.asarray([[[[4.0], [3.0], [2.0], [1.0]]]], dtype)
    assert k_pages.shape == (1, 1, 4, 1)
    assert v_pages.shape == k_pages.shape
    # softmax(q*k) * v: .47*4 + .53*3 + 0*... = 3.47
    attention = jnp.asarray([[[3.47]]], dtype)
    assert attention.shape == queries.shape
    return seq_lens, queries, k_pages, v_pages, attention


def _generate_qkv_with_one_q_head(dtype):
    """Generates queries with one query head, kv pages, and attention."""
    max_seq_len = 4
    seq_lens = jnp.asarray([max_seq_len - 1])
    queries = jnp.asarray([[[1.7]]], dtype)
    k_pages = jnp.asarray([[[[0.12], [0.23], [0.34], [0.45]]]], dtype)
    v_pages = jnp.asarray([[[[4.32], [3.21], [2.10], [1.09]]]], dtype)
    # softmax(q*k) * v: .273*4.32 + .330*3.21 + .397*2.10 + 0*... = 3.0723
    attention = jnp.asarray([[[3.0723]]], dtype)
    return seq_lens, queries, k_pages, v_pages, attention


def _generate_qkv_with_two_q_heads(dtype):
    """Generates queries with two query heads, kv pages, and attention."""
    max_seq_len = 4
    seq_lens = jnp.asarray([max_seq_len])
    queries = jnp.asarray([[[1.3], [9.7]]], dtype)
    assert queries.shape == (1, 2, 1)
    k_pages = jnp.asarray([[[[0.12], [0.23], [0.34], [0.45]]]], dtype)
    v_pages = jnp.asarray([[[[4.32], [3.21], [2.10], [1.09]]]], dtype)
    attention = jnp.asarray([[[2.488], [1.576]]], dtype)
    return seq_lens, queries, k_pages, v_pages, attention


def _generate_qkv_with_head_dim_two(dtype):
    """Generates queries, kv pages, and attention with head_dim=2."""
    max_seq_len = 4
    seq_lens = jnp.asarray([max_seq_len // 2])
    queries = jnp.asarray([[[1.2, 9.0]]], dtype)
    assert queries.shape == (1, 1, 2)
    k_pages = jnp.asarray(
        [[[[0.1, 0.2], [0.2, 0.3], [0.3, 0.4], [0.4, 0.5]]]], dtype)
    v_pages = jnp.asarray(
        [[[[4.0, 5.0], [3.0, 6.0], [2.0, 7.0], [1.0, 8.0]]]], dtype)
    assert k_pages.shape == (1, 1, 4, 2)
    attention = jnp.asarray([[[3.265, 5.735]]], dtype)
    return seq_lens, queries, k_pages, v_pages, attention


def _generate_qkv(dtype, case):
    return [_generate_qkv_simplest, _generate_qkv_with_one_q_head,
            _generate_qkv_with_two_q_heads, _generate_qkv_with_head_dim_two][case](dtype)


@pytest.mark.parametrize("case", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_grouped_query_attention(dtype, case):
    """StandardAttentionTest.test_grouped_query_attention."""
    dtype = getattr(jnp, dtype)
    with jax.config.option("jax_numpy_dtype_promotion", "standard"):
        seq_lens, queries, k_pages, v_pages, expected = _generate_qkv(dtype, case)
        jax.debug.print("seq_lens: {seq_lens}", seq_lens=seq_lens)
        jax.debug.print("queries: {queries}", queries=queries)
        jax.debug.print("expected: {expected}", expected=expected)
        attention = paged_attention.grouped_query_attention(
            queries, k_pages, v_pages, seq_lens)
        jax.debug.print("attention: {attention}", attention=attention)
        assert attention.dtype == dtype
        atol, rtol = (3e-3, 5e-3) if dtype == jnp.bfloat16 else (2e-4, 2e-4)
        np.testing.assert_allclose(np.asarray(attention, np.float32),
                                   np.asarray(expected, np.float32), atol=atol, rtol=rtol)


def test_strict_promotion_is_refused():
    with pytest.raises(NotImplementedError, match="standard mode only"):
        jax.config.update("jax_numpy_dtype_promotion", "strict")
