# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (a):
jax/experimental/pallas/ops/tpu/flash_attention.py, its forward kernel
(the multi-step online softmax and the single-step one, causal or not,
segment ids, an attention bias, the logits soft cap, block_b > 1, the l
and m residuals) and its two backward kernels (dkv and dq) called as its
VJP calls them and through jax.vjp / jax.grad (its jax.custom_vjp),
transcribed as a user would write them against tpuemu (only the imports
changed) in
tpuemu.pallas.ops.tpu.flash_attention, imported here by JAX's path
(tpuemu.experimental.pallas.ops.tpu.flash_attention). JAX ships no public test
of this kernel; the tests here follow the shapes its users run, small,
and compare with a NumPy reference in float64 (mha_reference's math)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.experimental.pallas.ops.tpu.flash_attention import (
    DEFAULT_MASK_VALUE, BlockSizes, SegmentIds, _flash_attention_bwd_dkv,
    _flash_attention_bwd_dq, flash_attention, mha_reference)


def _qkv(batch, heads, q_len, kv_len, d, dtype=jnp.float32, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(k1, (batch, heads, q_len, d), dtype=dtype)
    k = jax.random.normal(k2, (batch, heads, kv_len, d), dtype=dtype)
    v = jax.random.normal(k3, (batch, heads, kv_len, d), dtype=dtype)
    return q, k, v


def _segment_ids(batch, seq, seed):
    """Runs of equal ids, as packed sequences have them: a few segments a row."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch, seq), np.int32)
    for b in range(batch):
        cuts = np.sort(rng.choice(np.arange(1, seq), size=3, replace=False))
        ids[b] = np.searchsorted(cuts, np.arange(seq), side="right")
    return ids


# --- the forward kernel ---

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd(causal, block_k):
    # block_k 128 of kv 256: two kv steps of the online softmax; 256: the
    # single-step kernel (block_k == kv_seq_len)
    q, k, v = _qkv(1, 2, 256, 256, 64)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, causal=causal, sm_scale=0.125, block_sizes=bs)
    assert o.shape == q.shape and o.dtype == jnp.float32
    ref = mha_reference(q, k, v, causal=causal, sm_scale=0.125)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_fwd_inner_kv_loop(causal):
    # block_k_major 256 loaded at once, the pl.loop walking it in 128s
    q, k, v = _qkv(1, 1, 128, 512, 128, seed=1)
    bs = BlockSizes(block_q=128, block_k_major=256, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=causal, block_sizes=bs)
    ref = mha_reference(q, k, v, causal=causal)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_segment_ids(block_k):
    q, k, v = _qkv(2, 1, 256, 256, 64, seed=2)
    seg = SegmentIds(q=_segment_ids(2, 256, 3), kv=_segment_ids(2, 256, 3))
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, segment_ids=seg, causal=True, block_sizes=bs)
    ref = mha_reference(q, k, v, segment_ids=seg, causal=True)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_bias_and_soft_cap(block_k):
    q, k, v = _qkv(1, 2, 256, 256, 64, seed=4)
    ab = jax.random.normal(jax.random.key(5), (1, 2, 256, 256), dtype=jnp.float32)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o = flash_attention(q, k, v, ab, causal=True, sm_scale=0.5, attn_logits_soft_cap=5.0,
                        block_sizes=bs)
    ref = mha_reference(q, k, v, ab, causal=True, sm_scale=0.5, attn_logits_soft_cap=5.0)
    np.testing.assert_allclose(o, ref, atol=2e-5, rtol=1e-4)


def test_flash_attention_fwd_block_b():
    # two batch elements a block: the kernel loops over them in Python
    q, k, v = _qkv(2, 1, 128, 256, 64, seed=6)
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=2)
    o = flash_attention(q, k, v, causal=False, block_sizes=bs)
    np.testing.assert_allclose(o, mha_reference(q, k, v), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [128, 256])
def test_flash_attention_fwd_residuals(block_k):
    q, k, v = _qkv(1, 1, 256, 256, 128, seed=7)
    bs = BlockSizes(block_q=128, block_k_major=block_k, block_k=block_k, block_b=1)
    o, l, m = flash_attention(q, k, v, causal=True, block_sizes=bs, save_residuals=True)
    ro, rl, rm = mha_reference(q, k, v, causal=True, save_residuals=True)
    assert l.shape == m.shape == (1, 1, 256)
    np.testing.assert_allclose(o, ro, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(m, rm, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(l, rl, rtol=1e-4)


@pytest.mark.parametrize("block_k_major", [128, 256])
def test_flash_attention_fwd_debug_mode(block_k_major):
    # debug=True (the device's poison and hazard checks): the kernel reads
    # nothing it did not write, and its parallel dimensions do not race
    q, k, v = _qkv(1, 2, 256, 256, 64, seed=13)
    bs = BlockSizes(block_q=128, block_k_major=block_k_major, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=True, block_sizes=bs, debug=True)
    np.testing.assert_allclose(o, mha_reference(q, k, v, causal=True), atol=2e-5, rtol=1e-4)


def test_flash_attention_fwd_bf16():
    q, k, v = _qkv(1, 2, 256, 256, 128, dtype=jnp.bfloat16, seed=8)
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    o = flash_attention(q, k, v, causal=True, sm_scale=128 ** -0.5, block_sizes=bs)
    assert o.dtype == jnp.bfloat16
    ref = mha_reference(q, k, v, causal=True, sm_scale=128 ** -0.5)
    # p is rounded to bf16 before the PV product, the output to bf16 after
    np.testing.assert_allclose(np.asarray(o, np.float32), ref, atol=2e-2, rtol=2e-2)
# --- the backward kernels, as _flash_attention_bwd calls them ---

def flash_attention_bwd(q, k, v, ab, segment_ids, o, l, m, do, *, causal, sm_scale, block,
                        minor=None):
    """_flash_attention_bwd with the major backward blocks @block and the
    minor ones (the kernels' inner loops) @minor."""
    minor = minor or block
    di = jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1)
    dk, dv = _flash_attention_bwd_dkv(
        q, k, v, ab, segment_ids, l, m, do, di, block_q_major=block, block_k_major=block,
        block_k=minor, block_q=minor, sm_scale=sm_scale, causal=causal,
        mask_value=DEFAULT_MASK_VALUE)
    dq, ds = _flash_attention_bwd_dq(
        q, k, v, ab, segment_ids, l, m, do, di, block_q_major=block, block_k_major=block,
        block_k=minor, sm_scale=sm_scale, causal=causal, mask_value=DEFAULT_MASK_VALUE,
        debug=False)
    return dq, dk, dv, ds


def mha_reference_grads(q, k, v, ab, segment_ids, do, *, causal, sm_scale):
    """The gradients of mha_reference's output against @do, float64."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    s = np.einsum("bhqc,bhkc->bhqk", q, k)
    if ab is not None:
        s = s + np.asarray(ab, np.float64)
    s = s * sm_scale
    mask = None
    if segment_ids is not None:
        mask = (np.asarray(segment_ids.q)[:, :, None] ==
                np.asarray(segment_ids.kv)[:, None, :])[:, None]
    if causal:
        cm = np.tril(np.ones((q.shape[2], k.shape[2]), bool))[None, None]
        mask = cm if mask is None else mask & cm
    if mask is not None:
        s = s + np.where(mask, 0.0, DEFAULT_MASK_VALUE)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = np.einsum("bhqk,bhqc->bhkc", p, do)
    dp = np.einsum("bhqc,bhkc->bhqk", do, v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * sm_scale
    dq = np.einsum("bhqk,bhkc->bhqc", ds, k)
    dk = np.einsum("bhqk,bhqc->bhkc", ds, q)
    return dq, dk, dv, ds


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_ab,with_segments,minor", [(False, False, None), (True, False, None),
                                                         (False, True, None),
                                                         (False, False, 128)])
def test_flash_attention_bwd(causal, with_ab, with_segments, minor):
    # the forward's residuals (l, m) then the dkv and dq kernels, as the
    # custom VJP runs them, against the gradients of the math in NumPy
    q, k, v = _qkv(1, 2, 256, 256, 128, seed=9)
    do = jax.random.normal(jax.random.key(10), q.shape, dtype=jnp.float32)
    ab = jax.random.normal(jax.random.key(11), (1, 2, 256, 256), dtype=jnp.float32) \
        if with_ab else None
    seg = SegmentIds(q=_segment_ids(1, 256, 12), kv=_segment_ids(1, 256, 12)) \
        if with_segments else None
    sm_scale = 128 ** -0.5
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    o, l, m = flash_attention(q, k, v, ab, seg, causal=causal, sm_scale=sm_scale,
                              block_sizes=bs, save_residuals=True)
    # minor 128: 256-row major blocks walked by the kernels' inner loops
    dq, dk, dv, ds = flash_attention_bwd(q, k, v, ab, seg, o, l, m, do, causal=causal,
                                         sm_scale=sm_scale, block=256 if minor else 128,
                                         minor=minor)
    rdq, rdk, rdv, rds = mha_reference_grads(q, k, v, ab, seg, do, causal=causal,
                                             sm_scale=sm_scale)
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-3)
    if with_ab:
        np.testing.assert_allclose(ds, rds, atol=2e-5, rtol=1e-3)
    else:
        assert ds is None


@pytest.mark.parametrize("causal,with_ab", [(False, False), (True, True)])
def test_flash_attention_grad_runs_the_custom_vjp(causal, with_ab):
    """jax.vjp and jax.grad of flash_attention: its jax.custom_vjp saves
    the residuals and runs the dkv and dq kernels (BlockSizes.get_default's
    backward blocks), against the NumPy gradients."""
    q, k, v = _qkv(1, 2, 256, 256, 128, seed=21)
    do = jax.random.normal(jax.random.key(22), q.shape, dtype=jnp.float32)
    ab = jax.random.normal(jax.random.key(23), (1, 2, 256, 256), dtype=jnp.float32) \
        if with_ab else None
    sm_scale = 128 ** -0.5

    def attend(q, k, v, ab):
        return flash_attention(q, k, v, ab, causal=causal, sm_scale=sm_scale)
    o, vjp_fn = jax.vjp(attend, q, k, v, ab)
    np.testing.assert_allclose(o, mha_reference(q, k, v, ab, causal=causal, sm_scale=sm_scale),
                               atol=2e-5, rtol=1e-4)
    dq, dk, dv, dab = vjp_fn(do)
    rdq, rdk, rdv, rds = mha_reference_grads(q, k, v, ab, None, do, causal=causal,
                                             sm_scale=sm_scale)
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)) + (((dab, rds),) if with_ab else ()):
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-3)
    gq = jax.grad(lambda q: jnp.sum(attend(q, k, v, ab) * do))(q)
    np.testing.assert_allclose(gq, rdq, atol=2e-4, rtol=1e-3)


def test_flash_attention_grad_needs_backward_blocks():
    q, k, v = _qkv(1, 1, 128, 128, 128, seed=24)
    bs = BlockSizes(block_q=128, block_k_major=128, block_k=128, block_b=1)
    assert not bs.has_backward_blocks
    with pytest.raises(ValueError, match="not all backward blocks are specified"):
        jax.grad(lambda q: jnp.sum(flash_attention(q, k, v, block_sizes=bs)))(q)


# --- what porting the kernel found: each of these failed before ---

def _whole(kernel, out_shape, *args, **kw):
    return pl.pallas_call(kernel, out_shape=out_shape, **kw)(*args)


def test_value_index_newaxis_and_ellipsis():
    # jnp.max(s, axis=1)[:, None] (a TraceError before), x[...], x[None, :, 0]
    def kernel(x_ref, o_ref, p_ref):
        s = x_ref[...]
        m = jnp.max(s, axis=1)[:, None]
        o_ref[...] = s[...] - m
        p_ref[...] = jnp.sum(s, axis=0)[None, :] + s[None, :, 0][:, :8].sum()
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) % 17
    o, p = _whole(kernel, (jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((1, 128), jnp.float32)), x)
    np.testing.assert_array_equal(o, x - x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(p, x.sum(axis=0, keepdims=True) + x[:, 0].sum())


def test_lax_select_in_index_map():
    # lax.select of grid indices in an index map (libtpurt refused the text
    # 'jnp.where' there): block j, or block 0 above the diagonal
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(32, 128)
    o = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((4 * 4 * 8, 128), jnp.float32), grid=(4, 4),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (lax.select(j <= i, j, 0), 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i * 4 + j, 0)))(x)
    for i in range(4):
        for j in range(4):
            src = j if j <= i else 0
            np.testing.assert_array_equal(o[(i * 4 + j) * 8:(i * 4 + j + 1) * 8],
                                          x[src * 8:(src + 1) * 8])


def test_large_python_float_constant():
    # -0.7 * finfo(float32).max, a float64 not exact in float32, rounded as
    # JAX's weak types are (libtpurt refused it as an inexact immediate)
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.where(x_ref[...] > 0, 0.0, DEFAULT_MASK_VALUE)
    x = np.array([[1.0, -1.0] * 64] * 8, np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x)
    np.testing.assert_array_equal(o, x + np.where(x > 0, 0.0, np.float32(DEFAULT_MASK_VALUE)))


def test_lax_dot_and_dslice_none():
    # lax.dot (missing before) and pl.dslice(None), the whole dimension
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jax.lax.dot(x_ref[pl.dslice(None), pl.dslice(0, 128)], y_ref[...],
                                 preferred_element_type=jnp.float32)
    x = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x, y)
    np.testing.assert_allclose(o, x[:, :128].astype(np.float64) @ y, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(jax.lax.dot(x[:, :128], y), x[:, :128] @ y, rtol=1e-5)


def test_host_broadcast_in_dim():
    ids = np.array([[0, 0, 1, 2], [3, 3, 3, 4]], np.int32)
    q = jax.lax.broadcast_in_dim(ids, (2, 4, 128), (0, 1))
    kv = jax.lax.broadcast_in_dim(ids, (2, 8, 4), (0, 2))
    np.testing.assert_array_equal(q, np.broadcast_to(ids[:, :, None], (2, 4, 128)))
    np.testing.assert_array_equal(kv, np.broadcast_to(ids[:, None, :], (2, 8, 4)))


def test_many_live_temporaries():
    # twenty values of different shapes alive at once: more scratch slots
    # than the job's 16 before (now 32), more temporaries than 32 (now 64)
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        vals = [x * float(i + 1) for i in range(12)]
        cols = [jnp.sum(v, axis=1, keepdims=True) for v in vals]
        ints = [lax.broadcasted_iota(jnp.int32, (8, 128), 1) + i for i in range(6)]
        acc = jnp.zeros((8, 128), jnp.float32)
        for v, c in zip(vals, cols):
            o_ref[...] = acc
            acc = acc + v - c
        for i in ints:
            acc = acc + i.astype(jnp.float32)
        o_ref[...] = acc
    x = np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32)
    o = _whole(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x)
    ref = sum(x * (i + 1) - (x * (i + 1)).sum(axis=1, keepdims=True) for i in range(12)) + \
        sum(np.arange(128)[None, :] + i for i in range(6))
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-3)


def test_dead_snapshots_are_dropped():
    # m_prev still held when m_ref is stored to is bound first, in case
    # Python uses it again; it never is, so its statement (a temporary and
    # a copy: two a trip in flash attention's loop) is dropped
    def kernel(x_ref, m_ref, o_ref):
        m_ref[...] = x_ref[...]
        m_prev = m_ref[...]
        m_next = jnp.maximum(m_prev, 2.0)
        o_ref[...] = m_next
        m_ref[...] = m_next * 2.0
        o_ref[...] += m_ref[...]
    f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) % 5
    m, o = f(x)
    np.testing.assert_array_equal(m, np.maximum(x, 2.0) * 2.0)
    np.testing.assert_array_equal(o, np.maximum(x, 2.0) * 3.0)
    assert not any(s.split(" = ")[-1] == "m_ref[...]" for s in f.statements), f.statements
