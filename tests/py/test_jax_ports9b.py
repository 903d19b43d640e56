# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (b):
jax/experimental/pallas/ops/tpu/paged_attention (paged_attention_kernel.py
with quantization_utils.py and util.py's reference), transcribed as a user
would write them against tpuemu, and JAX's tests/pallas/
tpu_paged_attention_kernel_test.py: JaxGroupedQueryAttentionReferenceTest
and PagedAttentionKernelTest.test_paged_attention at smaller sizes (kv
length 256 rather than 2048), with and without the sequence dimension
inlined, megacore modes "batch" and "kv_head" (on a 2-core device, in a
child process, as JAX runs them only on v4 and v5p), the logits soft cap
and int8 kv pages. The kernel and the reference are in
tpuemu.pallas.ops.tpu.paged_attention (paged_attention_kernel.py,
quantization_utils.py, util.py), imported here by JAX's path
(tpuemu.experimental.pallas.ops.tpu.paged_attention). The references
are NumPy."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu.experimental.pallas.ops.tpu.paged_attention import paged_attention
from tpuemu.experimental.pallas.ops.tpu.paged_attention.paged_attention_kernel import (
    _CLAMP_NEXT_LENGTH)
from tpuemu.experimental.pallas.ops.tpu.paged_attention.quantization_utils import (
    QuantizedTensor, quantize_to_int8, unquantize_from_int8)
from tpuemu.experimental.pallas.ops.tpu.paged_attention.util import (
    _f32, grouped_query_attention_reference)


# --- JaxGroupedQueryAttentionReferenceTest: the reference's own cases ---

_REFERENCE_CASES = [
    # seq_lens, queries, k_pages, v_pages, expected (the test's hand values)
    ([2], [[[1.2]]], [[[[0.1], [0.2], [0.3], [0.4]]]], [[[[4.0], [3.0], [2.0], [1.0]]]],
     [[[3.47]]]),
    ([3], [[[1.7]]], [[[[0.12], [0.23], [0.34], [0.45]]]],
     [[[[4.32], [3.21], [2.10], [1.09]]]], [[[3.0723]]]),
    ([4], [[[1.3], [9.7]]], [[[[0.12], [0.23], [0.34], [0.45]]]],
     [[[[4.32], [3.21], [2.10], [1.09]]]], [[[2.488], [1.576]]]),
    ([2], [[[1.2, 9.0]]], [[[[0.1, 0.2], [0.2, 0.3], [0.3, 0.4], [0.4, 0.5]]]],
     [[[[4.0, 5.0], [3.0, 6.0], [2.0, 7.0], [1.0, 8.0]]]], [[[3.265, 5.735]]]),
]


@pytest.mark.parametrize("case", range(4))
def test_grouped_query_attention(case):
    seq_lens, queries, k_pages, v_pages, expected = _REFERENCE_CASES[case]
    attention = grouped_query_attention_reference(
        np.array(queries), np.array(k_pages), np.array(v_pages), np.array(seq_lens))
    np.testing.assert_allclose(attention, expected, atol=2e-3, rtol=2e-3)


# --- PagedAttentionKernelTest ---

def _generate_random_qkv(seq_lens, page_size, max_seq_len, num_kv_heads, num_q_heads,
                         head_dim, prng_key, dtype=jnp.float32, are_kv_quantized=False):
    assert max_seq_len % page_size == 0
    pages_per_sequence = max_seq_len // page_size
    batch_size = len(seq_lens)
    total_pages = batch_size * pages_per_sequence
    k1, k2, k3, k4 = jax.random.split(prng_key, 4)
    k_pages = jax.random.normal(k1, (num_kv_heads, total_pages, page_size, head_dim),
                                dtype=dtype)
    v_pages = jax.random.normal(k2, (num_kv_heads, total_pages, page_size, head_dim),
                                dtype=dtype)
    if are_kv_quantized:
        k_pages = quantize_to_int8(k_pages)
        v_pages = quantize_to_int8(v_pages)
    page_indices = jnp.arange(batch_size * pages_per_sequence, dtype=jnp.int32)
    page_indices = jax.random.permutation(k3, page_indices)
    page_indices = page_indices.reshape(batch_size, pages_per_sequence)
    q = jax.random.normal(k4, (batch_size, num_q_heads, head_dim), dtype=dtype)
    return q, k_pages, v_pages, page_indices


def _reconstruct_kv(page_indices, pages):
    if isinstance(pages, QuantizedTensor):
        pages = _f32(unquantize_from_int8(pages, dtype=jnp.float32))
    pages = np.asarray(pages, np.float32)
    batch_size = page_indices.shape[0]
    num_kv_heads, _, _, head_dim = pages.shape
    gathered = np.stack([np.take(pages, np.asarray(page_indices)[b], axis=1)
                         for b in range(batch_size)])
    return gathered.reshape(batch_size, num_kv_heads, -1, head_dim)


MAX_KV_LEN = 256
SEQ_LENS = [0, 3, 64, 129, 255, 256]


def _check_paged_attention(dtype, page_size, num_kv_heads, q_kv_head_ratio, head_dim,
                           megacore_mode, attn_logits_soft_cap, are_kv_quantized,
                           inline_seq_dim=True, block_size=64):
    seq_lens = np.asarray(SEQ_LENS, np.int32)
    q, k_pages, v_pages, page_indices = _generate_random_qkv(
        seq_lens, page_size, MAX_KV_LEN, num_kv_heads, num_kv_heads * q_kv_head_ratio,
        head_dim, jax.random.key(0), dtype, are_kv_quantized=are_kv_quantized)
    o = paged_attention(q, k_pages, v_pages, seq_lens, page_indices,
                        pages_per_compute_block=block_size // page_size,
                        megacore_mode=megacore_mode, attn_logits_soft_cap=attn_logits_soft_cap,
                        inline_seq_dim=inline_seq_dim)
    k = _reconstruct_kv(page_indices, k_pages)
    v = _reconstruct_kv(page_indices, v_pages)
    if not are_kv_quantized:
        # the kernel's wait_and_get_loaded casts unquantized pages to
        # bfloat16 (_maybe_dequantize's default dtype), float32 ones too
        k, v = (np.asarray(jnp.asarray(x).astype(jnp.bfloat16), np.float32) for x in (k, v))
    o_ref = grouped_query_attention_reference(q, k, v, seq_lens, attn_logits_soft_cap)
    assert o.shape == q.shape and o.dtype == q.dtype
    if dtype == jnp.bfloat16:
        atol, rtol = 1e-2, 2e-2	# JAX's test's; the output rounded to bf16
    else:
        # float32 pages: summation order alone moves near-zero outputs by a
        # few 1e-5 (JAX's own test takes 1e-2 or 2e-1 for every dtype)
        atol, rtol = 1e-4, 1e-4
    live = np.where(seq_lens > 0)
    np.testing.assert_allclose(np.asarray(o, np.float32)[live], o_ref[live], atol=atol,
                               rtol=rtol)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("page_size", [16, 32, 64])
@pytest.mark.parametrize("num_kv_heads,q_kv_head_ratio", [(1, 1), (2, 4), (1, 8), (8, 1)])
def test_paged_attention(dtype, page_size, num_kv_heads, q_kv_head_ratio):
    _check_paged_attention(dtype, page_size, num_kv_heads, q_kv_head_ratio, 128, None, None,
                           False)


@pytest.mark.parametrize("attn_logits_soft_cap", [1.0, None])
@pytest.mark.parametrize("are_kv_quantized", [False, True])
def test_paged_attention_soft_cap_and_quantized(attn_logits_soft_cap, are_kv_quantized):
    _check_paged_attention(jnp.float32, 16, 2, 4, 128, None, attn_logits_soft_cap,
                           are_kv_quantized)


@pytest.mark.parametrize("q_kv_head_ratio", [1, 8])
def test_paged_attention_grid_over_seq(q_kv_head_ratio):
    # inline_seq_dim=False: the kv blocks a grid dimension, not a loop
    _check_paged_attention(jnp.float32, 16, 2, q_kv_head_ratio, 128, None, None, False,
                           inline_seq_dim=False)


def test_paged_attention_head_dim_256():
    _check_paged_attention(jnp.float32, 32, 1, 4, 256, None, None, False)


_MEGACORE_CHILD = r"""
import os, sys
sys.path[:0] = [%r, os.path.join(%r, "..", "..", "python")]
import test_jax_ports9b as t
import tpuemu as jax
assert jax.devices()[0].num_cores == 2
for mode in ("batch", "kv_head"):
    for inline in (True, False):
        t._check_paged_attention(t.jnp.float32, 16, 2, 4, 128, mode, None, False,
                                 inline_seq_dim=inline)
print("megacore ok")
"""


def test_paged_attention_megacore():
    # megacore_mode "batch" and "kv_head" split the kernel over the grid's
    # first (parallel) dimension, one TensorCore each: JAX runs them only
    # on 2-core chips, so on a 2-core device (each core its own SMEM copy
    # of the step and buffer-index scalars)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TPURT_DEVICE="sim:cores=2")
    r = subprocess.run([sys.executable, "-c", _MEGACORE_CHILD % (here, here)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "megacore ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(jax.devices()[0].num_cores != 1, reason="a 1-core device")
def test_paged_attention_megacore_on_one_core_fails():
    # "set this only if megacore is enabled, otherwise the kernel may hang":
    # on one core the second half's first block is never prefetched (its
    # step_ref is past 0), so its wait finds no copy in flight, which the
    # device reports instead of hanging
    with pytest.raises(jax.TpurtError, match="waits on semaphore .* 0 in flight"):
        _check_paged_attention(jnp.float32, 16, 2, 4, 128, "batch", None, False)


# JAX's kernel reads lengths_ref[batch_size], one past the scalar-prefetch
# array, at the last sequence (lax.cond's predicate jnp.logical_and(next_b <
# batch_size, lengths_ref[next_b] == 0) evaluates both sides) and drops the
# value: as on a TPU, the load reads the SMEM word there (the next array's)
def test_paged_attention_as_jax_writes_it():
    _CLAMP_NEXT_LENGTH[0] = False
    try:
        _check_paged_attention(jnp.float32, 16, 1, 1, 128, None, None, False)
    finally:
        _CLAMP_NEXT_LENGTH[0] = True


# --- what porting the kernel found: each of these failed before ---

def test_store_into_scalar_prefetch_keeps_across_steps():
    # step_ref[0] = step + 1: scalar prefetch is SMEM the kernel may store
    # into, its value kept across the grid's steps (refused before as a
    # store into an input)
    def kernel(step_ref, x_ref, o_ref):
        step = step_ref[0]
        o_ref[...] = x_ref[...] + step.astype(jnp.float32)
        step_ref[0] = step + 1
    x = np.zeros((32, 128), np.float32)
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, grid=(4,),
                           in_specs=[pl.BlockSpec((8, 128), lambda i, s: (i, 0))],
                           out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0))))(
        np.array([10], np.int32), x)
    np.testing.assert_array_equal(o, np.repeat(np.arange(10, 14, dtype=np.float32), 8)[:, None]
                                  * np.ones((1, 128), np.float32))


def test_scalar_snapshot_before_store():
    # b = s_ref[0]; s_ref[0] = 1 - b; then b used: the old value, as
    # Python holds it (libtpurt refused the stale local before)
    def kernel(s_ref, o_ref):
        b = s_ref[0]
        s_ref[0] = 1 - b
        o_ref[...] = jnp.full((8, 128), b.astype(jnp.float32)) + s_ref[0].astype(jnp.float32) * 10
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, grid=(1,),
                           out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0))))(
        np.array([0], np.int32))
    np.testing.assert_array_equal(o, np.full((8, 128), 10.0, np.float32))


def test_long_nested_conditions_and_not_in_loop_predicate():
    # nested lax.conds under a device loop: the and-ed predicate passed the
    # scalar core's expression text (now spilled to SMEM), and a loop
    # predicate with ~ of a compare (now 'not') was refused
    def kernel(n_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        def body(i, c):
            def inner():
                return lax.cond(jnp.logical_and((i + 1) * 64 >= n_ref[0] * 64 - n_ref[1] * 16,
                                                n_ref[1] + (i + 1) * 3 > n_ref[0] + 2),
                                lambda: i * 100,
                                lambda: lax.fori_loop(n_ref[1] - 3, n_ref[1] * (i + 1),
                                                      lambda _, x: x + 2, i))
            r = lax.cond((i * 64 + 32) >= (n_ref[0] * 64 - n_ref[1] * 8), lambda: -1, inner)
            o_ref[pl.ds(i, 1), :] = jnp.full((1, 128), r.astype(jnp.float32))
            return c
        lax.fori_loop(0, n_ref[0], body, 0)
    n = np.array([5, 3], np.int32)
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, grid=(1,),
                           out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0))))(n)
    want = []
    for i in range(5):
        if i * 64 + 32 >= 5 * 64 - 3 * 8:
            want.append(-1)
        elif (i + 1) * 64 >= 5 * 64 - 3 * 16 and 3 + (i + 1) * 3 > 5 + 2:
            want.append(i * 100)
        else:
            want.append(i + 2 * 3 * (i + 1))
    np.testing.assert_array_equal(o[:5, 0], np.array(want, np.float32))
    np.testing.assert_array_equal(o[5:], 0)


def test_pallas_call_results_are_host_arrays():
    # out.astype(jnp.bfloat16) of a float32 result (a NumPy TypeError
    # before), as the kernel's wrapper returns out.astype(q.dtype)
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0
    x = np.full((8, 128), 1.0 / 3.0, np.float32)
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    b = o.astype(jnp.bfloat16)
    assert b.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(b, np.float32), np.float32(1.0))
    np.testing.assert_array_equal(o.at[0, 0].set(5.0)[0, 0], 5.0)


def test_when_block_storing_into_its_condition_ref():
    # pl.when(s[0] == 0) whose block stores s[0] = 1 first: JAX decides the
    # block once; the device evaluated the predicate at each statement, so
    # the rest of the block was skipped (a silent wrong result before)
    def kernel(s_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(s_ref[0] == 0)
        def _():
            s_ref[0] = 1
            o_ref[...] = jnp.ones_like(o_ref)

        def other():
            s_ref[0] = 5
        lax.cond(s_ref[0] == 1, other, lambda: None)	# one branch only

        @pl.when(s_ref[0] == 5)
        def _():
            o_ref[...] += 2.0
    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=1, grid=(1,),
                           out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0))))(
        np.array([0], np.int32))
    np.testing.assert_array_equal(o, np.full((8, 128), 3.0, np.float32))
