# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/flash_attention.py, transcribed against
tpuemu (only the imports changed): flash_attention's forward kernel (the
multi-step online softmax and the single-step one, causal or not, segment
ids, an attention bias, the logits soft cap, block_b > 1, the l and m
residuals with save_residuals=True) and the two backward kernels,
_flash_attention_bwd_dkv and _flash_attention_bwd_dq, which its
jax.custom_vjp runs on the forward's residuals, so jax.grad of a loss of
flash_attention runs them (the soft cap has no backward here).
mha_reference is mha_reference_no_custom_vjp's math in NumPy float64 (a
reference to test against, not a kernel). Tests: test_jax_ports9.py."""
import dataclasses
import functools
from typing import NamedTuple

import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max)
NUM_LANES = 128
NUM_SUBLANES = 8
MIN_BLOCK_SIZE = 128
TRANS_B_DIM_NUMBERS = (((1,), (1,)), ((), ()))


class SegmentIds(NamedTuple):
    q: object	# [batch_size, q_seq_len]
    kv: object	# [batch_size, kv_seq_len]


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    block_q: int
    block_k_major: int
    block_k: int
    block_b: int

    block_q_major_dkv: int | None = None
    block_k_major_dkv: int | None = None
    block_k_dkv: int | None = None
    block_q_dkv: int | None = None

    block_k_major_dq: int | None = None
    block_k_dq: int | None = None
    block_q_dq: int | None = None

    def __post_init__(self):
        def verify_major_minor(prefix, suffix, major, minor):
            if minor > major:
                raise ValueError(f"{prefix}{suffix}={minor} should be smaller than"
                                 f" {prefix}_major{suffix}={major}")
            if major % minor != 0:
                raise ValueError(f"{prefix}{suffix}={minor} should divide"
                                 f" {prefix}_major{suffix}={major}")

        verify_major_minor("block_k", "", self.block_k_major, self.block_k)
        if self.block_q_dkv is not None and self.block_q_major_dkv is not None:
            verify_major_minor("block_q", "_dkv", self.block_q_major_dkv, self.block_q_dkv)
        if self.block_k_major_dkv is not None and self.block_k_dkv is not None:
            verify_major_minor("block_k", "_dkv", self.block_k_major_dkv, self.block_k_dkv)
        if self.block_k_major_dq is not None and self.block_k_dq is not None:
            verify_major_minor("block_k", "_dq", self.block_k_major_dq, self.block_k_dq)

    @property
    def has_backward_blocks(self) -> bool:
        backward_blocks = (
            self.block_q_major_dkv, self.block_k_major_dkv, self.block_q_dkv,
            self.block_k_dkv, self.block_k_major_dq, self.block_k_dq, self.block_q_dq,
        )
        return all(b is not None for b in backward_blocks)

    @classmethod
    def get_default(cls, batch_size, num_heads, q_seq_len, kv_len, d_model):
        del batch_size, num_heads, q_seq_len, kv_len, d_model	# unused, as JAX's
        return BlockSizes(
            block_q=128, block_k_major=128, block_k=128, block_b=1,
            block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
            block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128,
        )


def below_or_on_diag(r, r_blk_size, c, c_blk_size):
    # a block is below or on the diagonal as long as its bottom left corner is
    return ((r + 1) * r_blk_size - 1) > (c * c_blk_size)


def _flash_attention_kernel(q_tile_ref, *args, **kwargs):
    block_b = q_tile_ref.shape[0]
    if kwargs["block_k"] == kwargs["kv_seq_len"]:
        kernel = _flash_attention_kernel_single_batch_single_step
    else:
        kernel = _flash_attention_kernel_single_batch
    for batch_idx in range(block_b):
        kernel((batch_idx, 0), q_tile_ref, *args, **kwargs)


def _flash_attention_kernel_single_batch(
        batch_idx, q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref,
        q_segment_ids_tile_ref, kv_segment_ids_tile_ref, o_tile_ref, l_ref, m_ref,
        m_scratch_ref, l_scratch_ref, acc_scratch_ref, *, causal, sm_scale,
        attn_logits_soft_cap, block_k, kv_seq_len, mask_value):
    block_k_major = k_tile_ref.shape[2]
    block_q = q_tile_ref.shape[2]
    head_dim = q_tile_ref.shape[-1]

    kv_seq_idx = pl.program_id(3)

    @pl.when(kv_seq_idx == 0)
    def start_new_sequence():
        m_scratch_ref[batch_idx] = jnp.full(m_scratch_ref.shape[2:], -jnp.inf, jnp.float32)
        l_scratch_ref[batch_idx] = jnp.zeros(l_scratch_ref.shape[2:], jnp.float32)
        acc_scratch_ref[batch_idx] = jnp.zeros(acc_scratch_ref.shape[2:], jnp.float32)

    q_seq_idx = pl.program_id(2)
    if causal:
        should_run = below_or_on_diag(q_seq_idx, block_q, kv_seq_idx, block_k_major)
    else:
        should_run = True

    @pl.when(should_run)
    def run():
        @pl.loop(0, block_k_major, step=block_k, unroll=True)
        def _body(start_k):
            m_prev = m_scratch_ref[batch_idx]
            l_prev = l_scratch_ref[batch_idx]
            q = q_tile_ref[batch_idx]	# [block_q, head_dim]
            k = k_tile_ref[(*batch_idx, pl.dslice(start_k, block_k), slice(None))]

            s = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                    preferred_element_type=jnp.float32)

            if ab_tile_ref is not None:
                ab = ab_tile_ref[(*batch_idx, pl.dslice(None),
                                  pl.dslice(start_k, block_k))].astype(jnp.float32)
                s += ab

            if attn_logits_soft_cap is not None:
                capped_s = jnp.tanh(s / attn_logits_soft_cap)
                s = capped_s * attn_logits_soft_cap

            if sm_scale != 1.0:
                s *= sm_scale

            mask = None
            if q_segment_ids_tile_ref is not None:
                repeats, rem = divmod(block_k, NUM_LANES)
                if rem:
                    raise NotImplementedError(
                        f"kv block size must be a multiple of {NUM_LANES}")
                q_segment_ids = jnp.tile(q_segment_ids_tile_ref[batch_idx[0]], (1, repeats))
                kv_segment_ids = kv_segment_ids_tile_ref[
                    batch_idx[0], :1, pl.dslice(start_k, block_k)]	# [1, block_k]
                mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

            if causal:
                mask_shape = (block_q, block_k)
                row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
                row_ids += q_seq_idx * block_q
                col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
                col_ids += kv_seq_idx * block_k_major + start_k
                causal_mask = col_ids <= row_ids
                mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)

            s = s if mask is None else s + jnp.where(mask, 0.0, mask_value)

            m_curr = jnp.max(s, axis=1)[:, None]	# row max, [block_q, 1]
            m_next = jnp.maximum(m_prev, m_curr)	# [block_q, 128]

            block_k_repeats, rem = divmod(block_k, MIN_BLOCK_SIZE)
            if rem:
                raise NotImplementedError(
                    f"{block_k=} should be a multiple of {MIN_BLOCK_SIZE}")
            p = jnp.exp(s - jnp.tile(m_next, (1, block_k_repeats)))

            alpha = jnp.exp(m_prev - m_next)
            l_corr = alpha * l_prev
            l_next = jnp.sum(p, axis=1)[:, None] + l_corr

            head_dim_repeats, rem = divmod(head_dim, MIN_BLOCK_SIZE)

            def l_broadcast(l):
                return jnp.tile(l, (1, head_dim_repeats))
            if rem:
                if head_dim_repeats == 0:
                    def l_broadcast(l):
                        return l[:, :head_dim]
                else:
                    raise NotImplementedError(
                        f"{head_dim=} should be a multiple of {MIN_BLOCK_SIZE} if larger")
            l_scratch_ref[batch_idx] = l_next
            m_scratch_ref[batch_idx] = m_next

            l_next_inv_safe = jnp.where(l_next == 0.0, 1.0, 1.0 / l_next)
            acc_scratch_ref[batch_idx] *= l_broadcast(l_corr * l_next_inv_safe)
            v = v_tile_ref[(*batch_idx, pl.dslice(start_k, block_k), slice(None))]
            o_curr = jax.lax.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
            acc_scratch_ref[batch_idx] += o_curr * l_broadcast(l_next_inv_safe)

    @pl.when(kv_seq_idx == (kv_seq_len // block_k_major) - 1)
    def store_output():
        o_tile_ref[batch_idx] = acc_scratch_ref[batch_idx].astype(o_tile_ref.dtype)
        if l_ref is not None:
            l_ref[batch_idx] = l_scratch_ref[batch_idx].astype(l_ref.dtype)
        if m_ref is not None:
            m_ref[batch_idx] = m_scratch_ref[batch_idx].astype(m_ref.dtype)


def _flash_attention_kernel_single_batch_single_step(
        batch_idx, q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref,
        q_segment_ids_tile_ref, kv_segment_ids_tile_ref, o_tile_ref, l_ref=None,
        m_ref=None, *, causal, sm_scale, attn_logits_soft_cap, block_k, kv_seq_len,
        mask_value):
    block_k_major = k_tile_ref.shape[2]
    block_q = q_tile_ref.shape[2]

    assert kv_seq_len == block_k_major == block_k

    q = q_tile_ref[batch_idx]	# [block_q, head_dim]
    k = k_tile_ref[batch_idx]	# [block_k, head_dim]
    s = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)

    if ab_tile_ref is not None:
        s += ab_tile_ref[batch_idx].astype(jnp.float32)

    if attn_logits_soft_cap is not None:
        capped_s = jnp.tanh(s / attn_logits_soft_cap)
        s = capped_s * attn_logits_soft_cap

    if sm_scale != 1.0:
        s *= sm_scale

    mask = None
    if q_segment_ids_tile_ref is not None:
        repeats, rem = divmod(block_k, NUM_LANES)
        if rem:
            raise NotImplementedError(f"kv block size must be a multiple of {NUM_LANES}")
        q_segment_ids = q_segment_ids_tile_ref[batch_idx[0]]	# [block_q, NUM_LANES]
        q_segment_ids = jnp.tile(q_segment_ids, (1, repeats))	# [block_q, block_k]
        kv_segment_ids = kv_segment_ids_tile_ref[batch_idx[0], :1]	# [1, block_k]
        mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

    if causal:
        q_seq_idx = pl.program_id(2)
        mask_shape = (block_q, block_k)
        row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
        row_ids += q_seq_idx * block_q
        col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
        causal_mask = col_ids <= row_ids
        mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)
    s = s if mask is None else s + jnp.where(mask, 0.0, mask_value)

    m = jnp.max(s, axis=1)[:, None]
    p = jnp.exp(s - m)
    l = jnp.sum(p, axis=1)[:, None]
    p /= l

    if m_ref is not None:
        m_ref[batch_idx] = lax.broadcast_in_dim(m, m_ref.shape[2:], range(2))
    if l_ref is not None:
        l_ref[batch_idx] = lax.broadcast_in_dim(l, l_ref.shape[2:], range(2))

    v = v_tile_ref[batch_idx]
    o_tile_ref[batch_idx] = jax.lax.dot(
        p.astype(v.dtype), v, preferred_element_type=jnp.float32).astype(o_tile_ref.dtype)


def _verify_block(block_name, dim_name, block, dim, should_divide=True):
    if block > dim:
        raise ValueError(f"{block_name}={block} should be smaller or equal to "
                         f"{dim_name}={dim}")
    if should_divide and dim % block != 0:
        raise ValueError(f"{dim_name}={dim} should be divisible by {block_name}={block}")


def _flash_attention_impl(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale,
                          attn_logits_soft_cap, block_b, block_q, block_k_major, block_k,
                          debug):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q", "q_seq_len", block_q, q_seq_len, should_divide=False)
    _verify_block("block_k_major", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k", "kv_seq_len", block_k, kv_seq_len)
    _verify_block("block_b", "batch", block_b, batch_size, should_divide=False)

    grid = (pl.cdiv(batch_size, block_b), num_heads, pl.cdiv(q_seq_len, block_q),
            kv_seq_len // block_k_major)

    def q_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    def kv_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            # a skipped kv block prefetches the next valid one, the 0th
            next_kv_index = lax.select(
                below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major),
                kv_seq_index, 0)
        else:
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_kv_index, 0)

    def ab_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            should_run = below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major)
            next_q_index = lax.select(
                should_run, q_seq_index,
                lax.select(q_seq_index == (q_seq_len // block_q) - 1, 0, q_seq_index + 1))
            next_kv_index = lax.select(should_run, kv_seq_index, 0)
        else:
            next_q_index = q_seq_index
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_q_index, next_kv_index)

    def o_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    def lm_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    kernel = functools.partial(
        _flash_attention_kernel, causal=causal, mask_value=DEFAULT_MASK_VALUE,
        sm_scale=sm_scale, attn_logits_soft_cap=attn_logits_soft_cap, block_k=block_k,
        kv_seq_len=kv_seq_len)
    out_shape = [jax.ShapeDtypeStruct(shape=q.shape, dtype=q.dtype)]
    out_specs = [pl.BlockSpec((block_b, 1, block_q, head_dim), o_index_map)]

    if block_k != kv_seq_len:
        m_scratch = pltpu.VMEM((block_b, 1, block_q, MIN_BLOCK_SIZE), jnp.float32)
        l_scratch = pltpu.VMEM((block_b, 1, block_q, MIN_BLOCK_SIZE), jnp.float32)
        acc_scratch = pltpu.VMEM((block_b, 1, block_q, head_dim), jnp.float32)
        scratch_shapes = [m_scratch, l_scratch, acc_scratch]
    else:
        scratch_shapes = []

    if save_residuals:
        out_specs = [
            *out_specs,
            pl.BlockSpec((block_b, 1, block_q, MIN_BLOCK_SIZE), lm_index_map),
            pl.BlockSpec((block_b, 1, block_q, MIN_BLOCK_SIZE), lm_index_map),
        ]
        l = jax.ShapeDtypeStruct((batch_size, num_heads, q_seq_len, MIN_BLOCK_SIZE),
                                 dtype=jnp.float32)
        m = jax.ShapeDtypeStruct((batch_size, num_heads, q_seq_len, MIN_BLOCK_SIZE),
                                 dtype=jnp.float32)
        out_shape = (*out_shape, l, m)
    else:
        out_specs = [*out_specs, None, None]
        out_shape = (*out_shape, None, None)

    ab_block_spec = (pl.BlockSpec((block_b, 1, block_q, block_k_major), ab_index_map)
                     if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, q_seq_index, _):
            del head_index
            return (batch_index, q_seq_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
            del head_index
            if causal:
                next_kv_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q, kv_seq_index, block_k_major),
                    kv_seq_index, 0)
            else:
                next_kv_index = kv_seq_index
            return (batch_index, 0, next_kv_index)

        q_segment_ids_spec = pl.BlockSpec((block_b, block_q, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((block_b, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)

        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [
        pl.BlockSpec((block_b, 1, block_q, head_dim), q_index_map),
        pl.BlockSpec((block_b, 1, block_k_major, head_dim), kv_index_map),
        pl.BlockSpec((block_b, 1, block_k_major, head_dim), kv_index_map),
        ab_block_spec,
        q_segment_ids_spec,
        kv_segment_ids_spec,
    ]

    o, *aux = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shape,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids)
    if save_residuals:
        l, m = (v[..., 0] for v in aux[-2:])
        return (o, l, m)
    return o


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal=False, sm_scale=1.0,
                    attn_logits_soft_cap=None, block_sizes=None, debug=False,
                    save_residuals=False):
    if block_sizes is None:
        block_sizes = BlockSizes.get_default(*q.shape[:3], k.shape[2], q.shape[3])
    return _flash_attention(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale,
                            attn_logits_soft_cap, block_sizes, debug)


@functools.partial(jax.custom_vjp, nondiff_argnums=range(5, 11))
def _flash_attention(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale,
                     attn_logits_soft_cap, block_sizes, debug):
    return _flash_attention_impl(
        q, k, v, ab, segment_ids, save_residuals, causal, sm_scale, attn_logits_soft_cap,
        block_sizes.block_b, block_sizes.block_q, block_sizes.block_k_major,
        block_sizes.block_k, debug)


def _flash_attention_fwd(q, k, v, ab, segment_ids, save_residuals, causal, sm_scale,
                         attn_logits_soft_cap, block_sizes, debug):
    if save_residuals:
        raise NotImplementedError("Higher-order AD not supported")
    o, l, m = _flash_attention(q, k, v, ab, segment_ids, True, causal, sm_scale,
                               attn_logits_soft_cap, block_sizes, debug)
    return o, (q, k, v, ab, segment_ids, o, l, m)


def _flash_attention_bwd(save_residuals, causal, sm_scale, attn_logits_soft_cap, block_sizes,
                         debug, residuals, do):
    """VJP rule for FlashAttention."""
    if save_residuals:
        raise NotImplementedError("Higher-order AD not supported")
    if attn_logits_soft_cap is not None:
        # the backward kernels below differentiate the uncapped logits
        raise NotImplementedError("the backward pass with attn_logits_soft_cap")
    (q, k, v, ab, segment_ids, o, l, m) = residuals
    if not block_sizes.has_backward_blocks:
        raise ValueError("Program is being differentiated, but not all backward blocks "
                         "are specified")

    di = jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1)

    dk, dv = _flash_attention_bwd_dkv(
        q, k, v, ab, segment_ids, l, m, do, di,
        block_q_major=block_sizes.block_q_major_dkv,
        block_k_major=block_sizes.block_k_major_dkv,
        block_k=block_sizes.block_k_dkv,
        block_q=block_sizes.block_q_dkv,
        sm_scale=sm_scale, causal=causal, mask_value=DEFAULT_MASK_VALUE, debug=debug)

    dq, ds = _flash_attention_bwd_dq(
        q, k, v, ab, segment_ids, l, m, do, di,
        block_q_major=block_sizes.block_q_dq,
        block_k_major=block_sizes.block_k_major_dq,
        block_k=block_sizes.block_k_dq,
        sm_scale=sm_scale, causal=causal, mask_value=DEFAULT_MASK_VALUE, debug=debug)
    return dq, dk, dv, ds, None


_flash_attention.defvjp(fwd=_flash_attention_fwd, bwd=_flash_attention_bwd)


# --- the reference: mha_reference_no_custom_vjp's math, in NumPy float64 ---

def mha_reference(q, k, v, ab=None, segment_ids=None, *, causal=False,
                  mask_value=DEFAULT_MASK_VALUE, sm_scale=1.0, attn_logits_soft_cap=None,
                  save_residuals=False):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    logits = np.einsum("bhqc,bhkc->bhqk", q, k)
    if ab is not None:
        logits = logits + np.asarray(ab, np.float64)
    if attn_logits_soft_cap is not None:
        logits = np.tanh(logits / attn_logits_soft_cap) * attn_logits_soft_cap
    if sm_scale != 1.0:
        logits = logits * sm_scale
    mask = None
    if segment_ids is not None:
        mask = (np.asarray(segment_ids.q)[:, :, None] ==
                np.asarray(segment_ids.kv)[:, None, :])[:, None, :, :]
    if causal:
        qlen, klen = q.shape[2], k.shape[2]
        causal_mask = np.tril(np.ones((qlen, klen), bool))[None, None]
        mask = causal_mask if mask is None else np.logical_and(mask, causal_mask)
    if mask is not None:
        logits = logits + np.where(mask, 0.0, mask_value)
    m = logits.max(axis=-1)
    unnormalized = np.exp(logits - m[..., None])
    l = unnormalized.sum(axis=-1)
    out = np.einsum("bhqk,bhkc->bhqc", unnormalized / l[..., None], v)
    if save_residuals:
        return out, l, m
    return out


# --- the backward kernels, as _flash_attention_bwd calls them ---

def _flash_attention_dkv_kernel(
        q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref, q_segment_ids_tile_ref,
        kv_segment_ids_tile_ref, l_tile_ref, m_tile_ref, do_tile_ref, di_tile_ref,
        dk_tile_ref, dv_tile_ref, dk_scratch_ref, dv_scratch_ref, *, sm_scale, causal,
        mask_value, q_seq_len, block_q, block_k):
    _, _, block_q_major, _ = q_tile_ref.shape
    _, _, block_k_major, _ = k_tile_ref.shape

    q_seq_index = pl.program_id(axis=3)
    kv_seq_index = pl.program_id(axis=2)

    @pl.when(q_seq_index == 0)
    def start_new_sequence():
        dk_scratch_ref[:, :] = jnp.zeros(dk_scratch_ref.shape, dk_scratch_ref.dtype)
        dv_scratch_ref[:, :] = jnp.zeros(dv_scratch_ref.shape, dv_scratch_ref.dtype)

    def q_body(j, _):
        start_q = j * block_q

        def k_body(i, _):
            start_k = i * block_k
            k = k_tile_ref[0, 0, pl.ds(start_k, block_k), :]
            v = v_tile_ref[0, 0, pl.ds(start_k, block_k), :]
            q = q_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, head_dim]
            l = l_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, 128]
            m = m_tile_ref[0, 0, pl.ds(start_q, block_q), :]	# [block_q, 128]
            do = do_tile_ref[0, 0, pl.ds(start_q, block_q), :]
            di = di_tile_ref[0, 0, pl.ds(start_q, block_q), :].astype(jnp.float32)

            capped_logits = lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                            preferred_element_type=jnp.float32)

            if ab_tile_ref is not None:
                ab = ab_tile_ref[0, 0, pl.dslice(j * block_q, block_q),
                                 pl.dslice(i * block_k, block_k)].astype(jnp.float32)
                capped_logits += ab

            if sm_scale != 1.0:
                capped_logits *= sm_scale

            mask = None
            if q_segment_ids_tile_ref is not None:
                repeats, rem = divmod(block_k, NUM_LANES)
                if rem:
                    raise NotImplementedError()
                q_segment_ids = q_segment_ids_tile_ref[0, pl.ds(start_q, block_q), :]
                q_segment_ids = jnp.tile(q_segment_ids, (1, repeats))
                kv_segment_ids = kv_segment_ids_tile_ref[:, 0, pl.ds(start_k, block_k)]
                mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

            if causal:
                mask_shape = (block_q, block_k)
                row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
                row_ids += q_seq_index * block_q_major + start_q
                col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
                col_ids += kv_seq_index * block_k_major + start_k
                causal_mask = col_ids <= row_ids
                mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)

            capped_logits = (capped_logits if mask is None
                             else capped_logits + jnp.where(mask, 0.0, mask_value))

            p = jnp.exp(capped_logits - jnp.tile(m, (1, block_k // MIN_BLOCK_SIZE)))
            p = p * jnp.tile(1 / l, (1, block_k // MIN_BLOCK_SIZE))
            dv = lax.dot(p.T.astype(do.dtype), do, preferred_element_type=jnp.float32)
            dv_scratch_ref[pl.ds(start_k, block_k), :] += dv.astype(dv_scratch_ref.dtype)

            dp = lax.dot_general(do, v, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
            ds = (dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))) * p

            if sm_scale != 1.0:
                ds = ds * sm_scale

            dk = lax.dot(ds.T.astype(do.dtype), q, preferred_element_type=jnp.float32)
            dk_scratch_ref[pl.ds(start_k, block_k), :] += dk.astype(dk_scratch_ref.dtype)
        lax.fori_loop(0, block_k_major // block_k, k_body, None, unroll=True)

    if causal:
        should_run = below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major)
    else:
        should_run = True

    @pl.when(should_run)
    def run():
        lax.fori_loop(0, block_q_major // block_q, q_body, None, unroll=True)

    @pl.when(q_seq_index == q_seq_len // block_q_major - 1)
    def end_of_q_sequence():
        dv_tile_ref[0, 0, :, :] = dv_scratch_ref[...].astype(dv_tile_ref.dtype)
        dk_tile_ref[0, 0, :, :] = dk_scratch_ref[...].astype(dk_tile_ref.dtype)


def _flash_attention_bwd_dkv(q, k, v, ab, segment_ids, l, m, do, di, *, block_q_major,
                             block_q, block_k_major, block_k, sm_scale, causal=False,
                             mask_value=DEFAULT_MASK_VALUE, debug=False):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q_major_dkv", "q_seq_len", block_q_major, q_seq_len)
    _verify_block("block_q_dkv", "q_seq_len", block_q, q_seq_len)
    _verify_block("block_k_major_dkv", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k_dkv", "kv_seq_len", block_k, kv_seq_len)

    # the scalars broadcast across lanes
    m = jnp.broadcast_to(m[..., None], (*m.shape, MIN_BLOCK_SIZE))
    l = jnp.broadcast_to(l[..., None], (*l.shape, MIN_BLOCK_SIZE))
    di = jnp.broadcast_to(di[..., None], (*di.shape, MIN_BLOCK_SIZE))

    # kv before q: q is the contracting dimension
    grid = (batch_size, num_heads, kv_seq_len // block_k_major, q_seq_len // block_q_major)

    def qo_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
        if causal:
            next_q_index = lax.select(
                below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                q_seq_index, 0)
        else:
            next_q_index = q_seq_index
        return (batch_index, head_index, next_q_index, 0)

    qo_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    do_spec = qo_spec

    def kv_index_map(batch_index, head_index, kv_seq_index, _):
        return (batch_index, head_index, kv_seq_index, 0)

    kv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), kv_index_map)

    def lm_index_map(batch_index, head_index, _, q_seq_index):
        return (batch_index, head_index, q_seq_index, 0)

    lm_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), lm_index_map)
    di_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), qo_index_map)

    def ab_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
        return (batch_index, head_index, q_seq_index, kv_seq_index)

    dab_spec = (pl.BlockSpec((1, 1, block_q_major, block_k_major), ab_index_map)
                if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, kv_seq_index, q_seq_index):
            del head_index
            if causal:
                next_q_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                    q_seq_index, 0)
            else:
                next_q_index = q_seq_index
            return (batch_index, next_q_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, kv_seq_index, _):
            del head_index
            return (batch_index, 0, kv_seq_index)

        q_segment_ids_spec = pl.BlockSpec((1, block_q_major, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((1, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)
        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [qo_spec, kv_spec, kv_spec, dab_spec, q_segment_ids_spec, kv_segment_ids_spec,
                lm_spec, lm_spec, do_spec, di_spec]

    out_shapes = [
        jax.ShapeDtypeStruct((batch_size, num_heads, kv_seq_len, head_dim), k.dtype),
        jax.ShapeDtypeStruct((batch_size, num_heads, kv_seq_len, head_dim), v.dtype),
    ]

    def dkv_index_map(batch_index, head_index, kv_seq_index, _):
        return (batch_index, head_index, kv_seq_index, 0)

    dkv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), dkv_index_map)
    out_specs = [dkv_spec, dkv_spec]
    scratch_shapes = [pltpu.VMEM((block_k_major, head_dim), jnp.float32),
                      pltpu.VMEM((block_k_major, head_dim), jnp.float32)]

    kernel = functools.partial(_flash_attention_dkv_kernel, block_q=block_q, block_k=block_k,
                               sm_scale=sm_scale, causal=causal, mask_value=mask_value,
                               q_seq_len=q_seq_len)
    dk, dv = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shapes,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids, l, m, do, di)
    assert dk.shape == k.shape
    assert dv.shape == v.shape
    return dk, dv


def _flash_attention_dq_kernel(
        q_tile_ref, k_tile_ref, v_tile_ref, ab_tile_ref, q_segment_ids_tile_ref,
        kv_segment_ids_tile_ref, l_tile_ref, m_tile_ref, do_tile_ref, di_tile_ref,
        dq_tile_ref, ds_tile_ref, dq_scratch_ref, *, sm_scale, causal, mask_value,
        kv_seq_len, block_k):
    _, _, block_k_major, _ = k_tile_ref.shape
    _, _, block_q_major, _ = q_tile_ref.shape

    kv_seq_index = pl.program_id(axis=3)
    q_seq_index = pl.program_id(axis=2)

    @pl.when(kv_seq_index == 0)
    def start_new_sequence():
        dq_scratch_ref[:, :] = jnp.zeros(dq_scratch_ref.shape, dq_scratch_ref.dtype)

    def body(i, _):
        k_slice = pl.ds(i * block_k, block_k)
        q = q_tile_ref[0, 0, :, :]
        k = k_tile_ref[0, 0, k_slice, :]	# [block_k, head_dim]
        v = v_tile_ref[0, 0, k_slice, :]	# [block_k, head_dim]
        l = l_tile_ref[0, 0, :, :]	# [block_q_major, 128]
        m = m_tile_ref[0, 0, :, :]	# [block_q_major, 128]
        do = do_tile_ref[0, 0, :, :]	# [block_q_major, head_dim]
        di = di_tile_ref[0, 0, :].astype(jnp.float32)	# [block_q_major, 128]

        capped_logits = jax.lax.dot_general(q, k, TRANS_B_DIM_NUMBERS,
                                            preferred_element_type=jnp.float32)

        if ab_tile_ref is not None:
            ab = ab_tile_ref[0, 0, :, pl.dslice(i * block_k, block_k)].astype(jnp.float32)
            capped_logits += ab

        if sm_scale != 1.0:
            capped_logits *= sm_scale

        mask = None
        if q_segment_ids_tile_ref is not None:
            repeats, rem = divmod(block_k, NUM_LANES)
            if rem:
                raise NotImplementedError(f"kv block size must be a multiple of {NUM_LANES}")
            q_segment_ids = jnp.tile(q_segment_ids_tile_ref[0], (1, repeats))
            kv_segment_ids = kv_segment_ids_tile_ref[:, 0, k_slice]	# [1, block_k]
            mask = jnp.equal(q_segment_ids, kv_segment_ids).astype(jnp.bool_)

        if causal:
            mask_shape = (block_q_major, block_k)
            row_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 0)
            row_ids += q_seq_index * block_q_major
            col_ids = jax.lax.broadcasted_iota(jnp.int32, mask_shape, 1)
            col_ids += kv_seq_index * block_k_major + i * block_k
            causal_mask = col_ids <= row_ids
            mask = causal_mask if mask is None else jnp.logical_and(mask, causal_mask)
        capped_logits = (capped_logits if mask is None
                         else capped_logits + jnp.where(mask, 0.0, mask_value))

        p = jnp.exp(capped_logits - jnp.tile(m, (1, block_k // MIN_BLOCK_SIZE)))
        p = p * jnp.tile(1 / l, (1, block_k // MIN_BLOCK_SIZE))

        dp = jax.lax.dot_general(do, v, TRANS_B_DIM_NUMBERS, preferred_element_type=jnp.float32)
        ds = (dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))) * p

        if sm_scale != 1.0:
            ds = ds * sm_scale

        if ds_tile_ref is not None:
            ds_tile_ref[0, 0, :, pl.dslice(i * block_k, block_k)] = ds.astype(ds_tile_ref.dtype)

        dq_scratch_ref[:, :] += lax.dot(ds.astype(k.dtype), k,
                                        preferred_element_type=jnp.float32
                                        ).astype(dq_scratch_ref.dtype)

    if causal:
        should_run = below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major)
        should_not_run = lax.select(should_run, False, True)
    else:
        should_run = True
        should_not_run = False

    @pl.when(should_run)
    def run():
        lax.fori_loop(0, block_k_major // block_k, body, None, unroll=True)

    @pl.when(should_not_run)
    def zero_out_ds():
        if ds_tile_ref is not None:
            ds_tile_ref[...] = jnp.zeros_like(ds_tile_ref)

    @pl.when(kv_seq_index == kv_seq_len // block_k_major - 1)
    def end_of_kv_sequence():
        dq_tile_ref[0, 0, :, :] = dq_scratch_ref[...].astype(dq_tile_ref.dtype)
        dq_scratch_ref[...] = jnp.zeros_like(dq_scratch_ref)


def _flash_attention_bwd_dq(q, k, v, ab, segment_ids, l, m, do, di, *, block_q_major,
                            block_k_major, block_k, sm_scale, causal, mask_value, debug):
    batch_size, num_heads, q_seq_len, head_dim = q.shape
    _, _, kv_seq_len, _ = k.shape
    _verify_block("block_q_dq", "q_seq_len", block_q_major, q_seq_len)
    _verify_block("block_k_major_dq", "kv_seq_len", block_k_major, kv_seq_len)
    _verify_block("block_k_dq", "block_k", block_k, kv_seq_len)

    m = jnp.broadcast_to(m[..., None], (*m.shape, MIN_BLOCK_SIZE))
    l = jnp.broadcast_to(l[..., None], (*l.shape, MIN_BLOCK_SIZE))
    di = jnp.broadcast_to(di[..., None], (*di.shape, block_k_major))

    grid = (batch_size, num_heads, q_seq_len // block_q_major, kv_seq_len // block_k_major)

    def qo_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    qo_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    do_spec = qo_spec

    def kv_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        if causal:
            next_kv_index = lax.select(
                below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                kv_seq_index, 0)
        else:
            next_kv_index = kv_seq_index
        return (batch_index, head_index, next_kv_index, 0)

    kv_spec = pl.BlockSpec((1, 1, block_k_major, head_dim), kv_index_map)

    def lm_index_map(batch_index, head_index, q_seq_index, _):
        return (batch_index, head_index, q_seq_index, 0)

    lm_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), lm_index_map)
    di_spec = pl.BlockSpec((1, 1, block_q_major, MIN_BLOCK_SIZE), qo_index_map)

    def ab_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
        return (batch_index, head_index, q_seq_index, kv_seq_index)

    dab_spec = (pl.BlockSpec((1, 1, block_q_major, block_k_major), ab_index_map)
                if ab is not None else None)

    q_segment_ids_spec = kv_segment_ids_spec = None
    q_segment_ids = kv_segment_ids = None
    if segment_ids is not None:
        def q_segment_ids_index_map(batch_index, head_index, q_seq_index, _):
            del head_index
            return (batch_index, q_seq_index, 0)

        def kv_segment_ids_index_map(batch_index, head_index, q_seq_index, kv_seq_index):
            del head_index
            if causal:
                next_kv_index = lax.select(
                    below_or_on_diag(q_seq_index, block_q_major, kv_seq_index, block_k_major),
                    kv_seq_index, 0)
            else:
                next_kv_index = kv_seq_index
            return (batch_index, 0, next_kv_index)

        q_segment_ids_spec = pl.BlockSpec((1, block_q_major, NUM_LANES),
                                          q_segment_ids_index_map)
        kv_segment_ids_spec = pl.BlockSpec((1, NUM_SUBLANES, block_k_major),
                                           kv_segment_ids_index_map)
        q_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.q, (batch_size, q_seq_len, NUM_LANES), (0, 1))
        kv_segment_ids = jax.lax.broadcast_in_dim(
            segment_ids.kv, (batch_size, NUM_SUBLANES, kv_seq_len), (0, 2))

    in_specs = [qo_spec, kv_spec, kv_spec, dab_spec, q_segment_ids_spec, kv_segment_ids_spec,
                lm_spec, lm_spec, do_spec, di_spec]

    out_shapes = [jax.ShapeDtypeStruct(q.shape, q.dtype),
                  jax.ShapeDtypeStruct(ab.shape, ab.dtype) if ab is not None else None]
    dq_spec = pl.BlockSpec((1, 1, block_q_major, head_dim), qo_index_map)
    out_specs = [dq_spec, dab_spec]
    scratch_shapes = [pltpu.VMEM((block_q_major, head_dim), jnp.float32)]

    kernel = functools.partial(_flash_attention_dq_kernel, sm_scale=sm_scale, causal=causal,
                               mask_value=mask_value, block_k=block_k, kv_seq_len=kv_seq_len)
    dq, ds = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=grid, in_specs=in_specs, out_specs=out_specs,
            scratch_shapes=scratch_shapes),
        out_shape=out_shapes,
        debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(q, k, v, ab, q_segment_ids, kv_segment_ids, l, m, do, di)
    return dq, ds	# dab is ds
