# SPDX-License-Identifier: MIT
"""JAX's Pallas TPU library kernels as the package holds them
(tpuemu/pallas/ops/tpu/...), imported by JAX's paths under
tpuemu.experimental as a port of JAX code imports them, each run on one
small case against a NumPy float64 reference written here. The kernels'
own tests are test_jax_ports9.py (flash_attention), test_jax_ports9b.py
(paged_attention), test_jax_ports9c.py (megablox, matmul),
test_jax_ports9d.py (quantized_matmul), test_jax_ports10.py and
test_jax_ports10b.py (splash_attention) and test_jax_ports11.py (ragged_paged_attention). Inputs are multiples of
1/8 below 2, exact in bfloat16, so kernels that feed the MXU bfloat16
(paged_attention's pages) compute on what the reference does."""
import importlib

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu.experimental.pallas.ops.tpu import flash_attention
from tpuemu.experimental.pallas.ops.tpu import matmul as matmul_lib
from tpuemu.experimental.pallas.ops.tpu import megablox
from tpuemu.experimental.pallas.ops.tpu import paged_attention
from tpuemu.experimental.pallas.ops.tpu import quantized_matmul
from tpuemu.experimental.pallas.ops.tpu import ragged_paged_attention as rpa
from tpuemu.experimental.pallas.ops.tpu import splash_attention


def _eighths(rng, shape):
    return (rng.integers(-15, 16, shape) / 8).astype(np.float32)


def _softmax_attention(q, k, v, mask):
    """softmax(q k^T + mask) v over the last two axes, float64; @mask True
    where a query may attend."""
    s = np.einsum("...qd,...kd->...qk", q, k)
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v)


@pytest.mark.parametrize("name", [
    "flash_attention", "matmul", "megablox", "megablox.gmm", "megablox.ops",
    "megablox.common", "paged_attention", "paged_attention.paged_attention_kernel",
    "paged_attention.quantization_utils", "paged_attention.util",
    "ragged_paged_attention", "ragged_paged_attention.kernel",
    "ragged_paged_attention.tuned_block_sizes", "quantized_matmul",
    "quantized_matmul.kernel", "quantized_matmul.util", "splash_attention",
    "splash_attention.splash_attention_kernel", "splash_attention.splash_attention_mask",
    "splash_attention.splash_attention_mask_info", "random", "random.threefry",
    "random.philox"])
def test_jax_path_is_the_package_module(name):
    # one module under both names: tpuemu.experimental's alias finder hands
    # out the module tpuemu.pallas.ops.tpu holds
    assert (importlib.import_module("tpuemu.experimental.pallas.ops.tpu." + name)
            is importlib.import_module("tpuemu.pallas.ops.tpu." + name))


def test_public_names_as_jax_exports_them():
    assert callable(flash_attention.flash_attention)
    assert flash_attention.BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    assert flash_attention.SegmentIds(q=None, kv=None) is not None
    assert callable(flash_attention.mha_reference)
    assert paged_attention.paged_attention is \
        paged_attention.paged_attention_kernel.paged_attention
    assert megablox.gmm is megablox.ops.gmm and megablox.tgmm is megablox.ops.tgmm
    for name in ("cdiv", "dynamic_validate_inputs", "ragged_paged_attention",
                 "ref_ragged_paged_attention", "static_validate_inputs",
                 "get_tuned_block_sizes"):
        assert callable(getattr(rpa, name)), name
    assert rpa.cdiv(10, 4) == 3
    for name in ("BlockSizes", "make_splash_mha", "make_splash_mha_single_device",
                 "make_splash_mqa", "make_splash_mqa_single_device", "QKVLayout",
                 "SegmentIds", "CausalMask", "FullMask", "LocalMask", "make_causal_mask",
                 "make_local_attention_mask", "make_random_mask", "Mask", "MultiHeadMask",
                 "NumpyMask"):
        assert hasattr(splash_attention, name), name


def test_flash_attention_causal():
    rng = np.random.default_rng(0)
    q, k, v = (_eighths(rng, (1, 2, 256, 128)) for _ in range(3))
    sm_scale = 0.125
    o = flash_attention.flash_attention(q, k, v, causal=True, sm_scale=sm_scale)
    mask = np.tril(np.ones((256, 256), bool))
    ref = _softmax_attention(np.float64(q) * sm_scale, np.float64(k), np.float64(v), mask)
    assert o.shape == q.shape and o.dtype == np.float32
    np.testing.assert_allclose(o, ref, atol=1e-4, rtol=1e-4)


def test_paged_attention():
    # two sequences of 5 and 100 tokens over 16-token pages, 8 a sequence,
    # shuffled in the page table; two q heads a kv head
    rng = np.random.default_rng(1)
    num_kv_heads, num_q_heads, head_dim, page_size, pages_per_seq = 1, 2, 128, 16, 8
    lengths = np.array([5, 100], np.int32)
    batch = len(lengths)
    k_pages = _eighths(rng, (num_kv_heads, batch * pages_per_seq, page_size, head_dim))
    v_pages = _eighths(rng, (num_kv_heads, batch * pages_per_seq, page_size, head_dim))
    page_indices = rng.permutation(batch * pages_per_seq).astype(np.int32).reshape(batch, -1)
    q = _eighths(rng, (batch, num_q_heads, head_dim))
    o = paged_attention.paged_attention(q, k_pages, v_pages, lengths, page_indices,
                                        pages_per_compute_block=4)
    assert o.shape == q.shape and o.dtype == np.float32
    for b in range(batch):
        k = np.float64(k_pages[:, page_indices[b]].reshape(num_kv_heads, -1, head_dim))
        v = np.float64(v_pages[:, page_indices[b]].reshape(num_kv_heads, -1, head_dim))
        mask = np.arange(k.shape[1]) < lengths[b]
        for h in range(num_q_heads):
            kv = h // (num_q_heads // num_kv_heads)
            ref = _softmax_attention(np.float64(q[b, h])[None], k[kv], v[kv], mask[None])
            np.testing.assert_allclose(o[b, h], ref[0], atol=1e-4, rtol=1e-4)


def test_megablox_gmm_and_tgmm():
    # three groups of rows, one of them empty
    rng = np.random.default_rng(2)
    m, k, n = 256, 128, 128
    group_sizes = np.array([100, 0, 156], np.int32)
    lhs = _eighths(rng, (m, k))
    rhs = _eighths(rng, (3, k, n))
    out = megablox.gmm(lhs, rhs, group_sizes)
    ends = np.cumsum(group_sizes)
    starts = ends - group_sizes
    ref = np.zeros((m, n))
    for g in range(3):
        rows = slice(starts[g], ends[g])
        ref[rows] = np.float64(lhs[rows]) @ np.float64(rhs[g])
    assert out.shape == (m, n)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)

    # tgmm: one (k, n) product a group, lhs given transposed
    rhs2 = _eighths(rng, (m, n))
    out_t = megablox.tgmm(lhs.T, rhs2, group_sizes)
    ref_t = np.stack([np.float64(lhs[starts[g]:ends[g]]).T @ np.float64(rhs2[starts[g]:ends[g]])
                      for g in range(3)])
    assert out_t.shape == (3, k, n)
    np.testing.assert_allclose(out_t, ref_t, rtol=1e-6, atol=1e-6)


def test_ragged_paged_attention():
    # one decode token (kv 40) and one 8-token prefill (kv 24), page size 16
    rng = np.random.default_rng(3)
    num_q_heads, num_kv_heads, head_dim, page_size = 4, 2, 128, 16
    seqs = [(1, 40), (8, 24)]
    pages_per_seq, num_pages, max_tokens, max_seqs = 4, 16, 16, 4
    q = _eighths(rng, (max_tokens, num_q_heads, head_dim))
    kv_pages = _eighths(rng, (num_pages, page_size, 2 * num_kv_heads, head_dim))
    page_indices = np.zeros((max_seqs, pages_per_seq), np.int32)
    page_indices[0, :3] = [5, 2, 9]
    page_indices[1, :2] = [0, 12]
    cu_q_lens = np.array([0, 1, 9, 9, 9], np.int32)
    kv_lens = np.array([40, 24, 0, 0], np.int32)
    num_seqs = np.array([2], np.int32)
    rpa.dynamic_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs)
    o = rpa.ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                                   sm_scale=0.125, num_kv_pages_per_block=2,
                                   num_queries_per_block=8)
    assert o.shape == q.shape and o.dtype == np.float32
    group = num_q_heads // num_kv_heads
    for i, (q_len, kv_len) in enumerate(seqs):
        pages = kv_pages[page_indices[i]].reshape(-1, 2 * num_kv_heads, head_dim)[:kv_len]
        qs = np.float64(q[cu_q_lens[i]:cu_q_lens[i + 1]]) * 0.125
        # causal: query j (of q_len, the sequence's last) sees kv up to
        # kv_len - q_len + j
        mask = np.arange(kv_len)[None] <= (kv_len - q_len + np.arange(q_len))[:, None]
        for h in range(num_q_heads):
            kv = h // group
            k = np.float64(pages[:, 2 * kv])	# k and v heads interleaved
            v = np.float64(pages[:, 2 * kv + 1])
            ref = _softmax_attention(qs[:, h], k, v, mask)
            np.testing.assert_allclose(o[cu_q_lens[i]:cu_q_lens[i + 1], h], ref, atol=1e-4,
                                       rtol=1e-4)


def test_matmul():
    rng = np.random.default_rng(4)
    x, y = _eighths(rng, (256, 512)), _eighths(rng, (512, 256))
    out = matmul_lib.matmul(x, y, block_shape=(128, 128))
    np.testing.assert_allclose(out, np.float64(x) @ np.float64(y), rtol=1e-6, atol=1e-6)


def test_quantized_matmul():
    # int8 weights with a scale a row; x quantized to int8 a token in the
    # kernel (x / (max|x| / 127), rounded), the product exact in int32
    rng = np.random.default_rng(5)
    x = _eighths(rng, (128, 256))
    w_q, w_scale = quantized_matmul.util.quantize_tensor(_eighths(rng, (128, 256)))
    w_scale = np.squeeze(w_scale)
    out = quantized_matmul.kernel.quantized_matmul_kernel(
        x, w_q, w_scale, quantize_activation=True, batch_block_size=128,
        out_block_size=128, in_block_size=128)
    x_scale = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
    x_q = np.rint(x / x_scale).astype(np.int64)
    ref = (x_q @ np.asarray(w_q, np.int64).T) * np.float64(x_scale) * np.float64(w_scale)
    assert out.shape == (128, 128) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_splash_attention_causal_mha():
    # two heads, a causal mask each, 128 blocks: half the kv blocks skipped
    rng = np.random.default_rng(6)
    heads, seq, d = 2, 256, 128
    q = _eighths(rng, (heads, seq, d)) * np.float32(0.125)
    k, v = _eighths(rng, (heads, seq, d)), _eighths(rng, (heads, seq, d))
    mask = splash_attention.MultiHeadMask(
        [splash_attention.CausalMask((seq, seq)) for _ in range(heads)])
    attn = splash_attention.make_splash_mha_single_device(
        mask, block_sizes=splash_attention.BlockSizes(block_q=128, block_kv=128))
    o = attn(q, k, v)
    ref = _softmax_attention(np.float64(q), np.float64(k), np.float64(v),
                             np.tril(np.ones((seq, seq), bool)))
    assert o.shape == q.shape and o.dtype == np.float32
    np.testing.assert_allclose(o, ref, atol=1e-4, rtol=1e-4)


def test_random_impls_still_draw():
    # ops.tpu.random beside the kernels: its PRNG impls by name
    key = jax.random.key(0, impl="pallas_threefry2x32")
    bits = jax.random.bits(key, (8, 128))
    assert bits.shape == (8, 128) and bits.dtype == jnp.uint32
