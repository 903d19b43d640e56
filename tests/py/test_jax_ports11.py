# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, eleventh round:
jax/experimental/pallas/ops/tpu/ragged_paged_attention (kernel.py and
tuned_block_sizes.py's lookup), transcribed as a user would write them
against tpuemu (only the imports changed: `from jax._src import dtypes` is
`from tpuemu import dtypes`), and JAX's tests/pallas/
tpu_ragged_paged_attention_test.py at smaller sizes (sequences of tens of
tokens rather than hundreds, 16 or fewer pages each): mixed prefill and
decode over a paged kv cache, the kv pages double-buffered by hand (DMA
semaphores, copies started one block ahead, across sequences and head
blocks) inside two nested lax.while_loops whose conditions are SMEM
values, sliding windows, the logits soft cap, k/v scales, float32 and
bfloat16. The kernel is in tpuemu.pallas.ops.tpu.ragged_paged_attention
(kernel.py, tuned_block_sizes.py), imported here by JAX's path
(tpuemu.experimental.pallas.ops.tpu.ragged_paged_attention). The
reference is ref_ragged_paged_attention's math in NumPy float64."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu.experimental.pallas.ops.tpu.ragged_paged_attention import (
    dynamic_validate_inputs, get_tuned_block_sizes, ragged_paged_attention)
from tpuemu.experimental.pallas.ops.tpu.ragged_paged_attention.kernel import (
    DEFAULT_MASK_VALUE)
from tpuemu.experimental.pallas.ops.tpu.ragged_paged_attention.tuned_block_sizes import (
    get_device_name, get_min_page_size, get_tpu_version, simplify_key)


# --- ref_ragged_paged_attention's math, in NumPy float64 ---

def _f64(x):
  return np.asarray(x, np.float64)


def _bf16(x):
  return np.asarray(jnp.asarray(np.asarray(x, np.float32)).astype(jnp.bfloat16), np.float64)


def ref_ragged_paged_attention_np(queries, kv_pages, kv_lens, page_indices, cu_q_lens,
                                  num_seqs, *, sm_scale=1.0, sliding_window=None,
                                  soft_cap=None, mask_value=DEFAULT_MASK_VALUE,
                                  k_scale=None, v_scale=None):
  """ref_ragged_paged_attention in float64: k and v scaled (and, as the
  reference casts them to q's dtype, rounded to bfloat16 when q is), the
  causal (and sliding-window) mask, the soft cap, softmax, the product."""
  q_bf16 = queries.dtype == jnp.bfloat16
  queries, kv_pages = _f64(queries), _f64(kv_pages)
  _, _, num_combined_kv_heads, head_dim = kv_pages.shape
  num_kv_heads = num_combined_kv_heads // 2
  num_query_per_kv = queries.shape[1] // num_kv_heads
  outputs = []
  for i in range(int(num_seqs[0])):
    q_start, q_end = int(cu_q_lens[i]), int(cu_q_lens[i + 1])
    q_len, kv_len = q_end - q_start, int(kv_lens[i])
    indices = np.asarray(page_indices[i])
    q = queries[q_start:q_end]
    k = kv_pages[indices, :, 0::2, :].reshape(-1, num_kv_heads, head_dim)[:kv_len]
    v = kv_pages[indices, :, 1::2, :].reshape(-1, num_kv_heads, head_dim)[:kv_len]
    if k_scale is not None:
      k = _bf16(k * k_scale) if q_bf16 else k * k_scale
    if v_scale is not None:
      v = _bf16(v * v_scale) if q_bf16 else v * v_scale
    k = np.repeat(k, num_query_per_kv, axis=1)
    v = np.repeat(v, num_query_per_kv, axis=1)
    attn = np.einsum("qhd,khd->hqk", q, k) * sm_scale
    q_span = (kv_len - q_len) + np.arange(q_len)[None, :, None]
    kv_span = np.arange(kv_len)[None, None, :]
    mask = q_span < kv_span
    if sliding_window is not None:
      mask = np.logical_or(mask, q_span - sliding_window >= kv_span)
    if soft_cap is not None:
      attn = soft_cap * np.tanh(attn / soft_cap)
    attn = attn + np.where(mask, mask_value, 0.0)
    attn = np.exp(attn - attn.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    outputs.append(np.einsum("hqk,khd->qhd", attn, v))
  return np.concatenate(outputs, axis=0)


# --- RaggedPagedAttentionKernelTest ---

NUM_PAGES = 64	# JAX's test: 1000


def _make_inputs(seq_lens, num_heads, head_dim, page_size, q_dtype, kv_dtype, num_pages,
                 max_num_batched_tokens, max_num_seqs, seed=1234):
  """The test's inputs: queries, each sequence's kv pages padded with NaN
  (the kernel must mask them out), page tables padded as JAX's jnp.pad of
  int32 with NaN gives (0), cu_q_lens and kv_lens padded with zeros."""
  rng = np.random.default_rng(seed)
  cu_q_lens = [0]
  kv_lens = []
  for q_len, kv_len in seq_lens:
    assert q_len <= kv_len
    cu_q_lens.append(cu_q_lens[-1] + q_len)
    kv_lens.append(kv_len)
  max_num_batched_tokens = max(cu_q_lens[-1], max_num_batched_tokens)
  max_num_seq = max(len(seq_lens), max_num_seqs)
  max_kv_len = max(kv_lens)
  pages_per_seq = pl.cdiv(max_kv_len, page_size)
  num_q_heads, num_kv_heads = num_heads

  def cast(x, dtype):
    return jnp.asarray(x.astype(np.float32), dtype=dtype)

  q = cast(rng.standard_normal((max_num_batched_tokens, num_q_heads, head_dim)), q_dtype)
  page_cnt = 0
  page_indices_list = []
  kv_pages_list = []
  for kv_len in kv_lens:
    kv = rng.standard_normal((kv_len, num_kv_heads * 2, head_dim))
    n = pl.cdiv(kv_len, page_size)
    kv = np.pad(kv, ((0, n * page_size - kv_len), (0, 0), (0, 0)),
                constant_values=np.nan).reshape(-1, page_size, num_kv_heads * 2, head_dim)
    indices = page_cnt + np.arange(n, dtype=np.int32)
    indices = np.pad(indices, (0, pages_per_seq - n))
    page_indices_list.append(indices)
    page_cnt += n
    kv_pages_list.append(kv)
  kv_pages = np.concatenate(kv_pages_list, axis=0)
  kv_pages = np.pad(kv_pages, ((0, num_pages - kv_pages.shape[0]), (0, 0), (0, 0), (0, 0)),
                    constant_values=np.nan)
  kv_pages = cast(kv_pages, kv_dtype)
  page_indices = np.stack(page_indices_list, axis=0)
  page_indices = np.pad(page_indices, ((0, max_num_seq - page_indices.shape[0]), (0, 0)))
  cu_q_lens = np.pad(np.array(cu_q_lens, np.int32), (0, max_num_seq + 1 - len(cu_q_lens)))
  kv_lens = np.pad(np.array(kv_lens, np.int32), (0, max_num_seq - len(kv_lens)))
  num_seqs = np.array([len(seq_lens)], np.int32)
  return (q, kv_pages, kv_lens.astype(np.int32), page_indices.astype(np.int32),
          cu_q_lens.astype(np.int32), num_seqs), pages_per_seq


def _test_ragged_paged_attention(seq_lens, num_heads, head_dim, page_size, q_dtype, kv_dtype,
                                 num_pages, *, num_kv_pages_per_block=8,
                                 num_queries_per_block=64, vmem_limit_bytes=32 * 1024 * 1024,
                                 max_num_batched_tokens=64, max_num_seq=8,
                                 sliding_window=None, soft_cap=None, k_scale=None,
                                 v_scale=None):
  args, pages_per_seq = _make_inputs(seq_lens, num_heads, head_dim, page_size, q_dtype,
                                     kv_dtype, num_pages, max_num_batched_tokens, max_num_seq)
  q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs = args
  dynamic_validate_inputs(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                          sliding_window=sliding_window, soft_cap=soft_cap)
  actual_num_q_tokens = cu_q_lens[num_seqs[0]]
  output = ragged_paged_attention(
      q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs=num_seqs,
      num_kv_pages_per_block=min(num_kv_pages_per_block, pages_per_seq),
      num_queries_per_block=num_queries_per_block, vmem_limit_bytes=vmem_limit_bytes,
      sliding_window=sliding_window, soft_cap=soft_cap, k_scale=k_scale,
      v_scale=v_scale)[:actual_num_q_tokens]
  expected = ref_ragged_paged_attention_np(q, kv_pages, kv_lens, page_indices, cu_q_lens,
                                           num_seqs, sliding_window=sliding_window,
                                           soft_cap=soft_cap, k_scale=k_scale,
                                           v_scale=v_scale)
  assert output.dtype == q.dtype and output.shape == expected.shape
  # JAX's test allows 0.15 (f32) and 0.2 (bf16): here f32 is float32's own
  # error, bf16 the output's rounding (2^-8) over values of order 1
  tol = 2e-2 if q_dtype == jnp.bfloat16 else 1e-4
  np.testing.assert_allclose(np.asarray(output, np.float64), expected, atol=tol, rtol=tol)
  return output


SEQ_LENS_BASIC = [(48, 164), (32, 90), (16, 255)]	# JAX's: (192, 328), (128, 180), (64, 255)
# JAX's decode, prefill and mixed lists, kv lengths over 5 (at most 255:
# 16 pages a sequence), queries over 4
SEQ_LENS_DECODE = [(1, 18), (1, 129), (1, 119), (1, 122), (1, 64), (1, 64), (1, 92), (1, 181)]
SEQ_LENS_PREFILL = [(5, 18), (4, 129), (30, 119), (25, 122), (5, 64), (8, 64), (62, 92),
                    (10, 181)]
SEQ_LENS_MIXED = [(5, 18), (1, 129), (30, 119), (1, 122), (1, 64), (8, 64), (62, 92),
                  (1, 181)]

def _dtypes():
  return [jnp.float32, jnp.bfloat16]


@pytest.mark.parametrize("dtype", _dtypes())
def test_ragged_paged_attention_basic(dtype):
  _test_ragged_paged_attention(SEQ_LENS_BASIC, (8, 2), 128, 16, dtype, dtype, NUM_PAGES,
                               num_queries_per_block=32)


@pytest.mark.parametrize("kv_dtype", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize("kv_scales", [(0.5, 0.5), (None, None)])
def test_ragged_paged_attention_quantized_kv_cache(kv_dtype, kv_scales):
  # JAX's runs on TPU v5+ only; tpuemu holds float8 pages one value to a
  # 32-bit word, so the kernel loads them unpacked
  _test_ragged_paged_attention(SEQ_LENS_BASIC, (8, 2), 128, 16, jnp.bfloat16,
                               getattr(jnp, kv_dtype), NUM_PAGES, k_scale=kv_scales[0],
                               v_scale=kv_scales[1])


@pytest.mark.parametrize("kv_scales", [(0.5, 0.25), (2.0, None)])
def test_ragged_paged_attention_kv_scales(kv_scales):
  # the k/v scale path on float32 pages (JAX's test scales float8 pages)
  _test_ragged_paged_attention(SEQ_LENS_BASIC, (8, 2), 128, 16, jnp.float32, jnp.float32,
                               NUM_PAGES, num_queries_per_block=32, k_scale=kv_scales[0],
                               v_scale=kv_scales[1])


@pytest.mark.parametrize("dtype", _dtypes())
def test_ragged_paged_attention_decode_only(dtype):
  _test_ragged_paged_attention(SEQ_LENS_DECODE, (8, 2), 128, 16, dtype, dtype, NUM_PAGES,
                               num_queries_per_block=32)


@pytest.mark.parametrize("dtype", _dtypes())
def test_ragged_paged_attention_prefill_only(dtype):
  _test_ragged_paged_attention(SEQ_LENS_PREFILL, (8, 2), 128, 16, dtype, dtype, NUM_PAGES,
                               num_queries_per_block=32, max_num_batched_tokens=160)


@pytest.mark.parametrize("dtype", _dtypes())
def test_ragged_paged_attention_mixed(dtype):
  _test_ragged_paged_attention(SEQ_LENS_MIXED, (8, 2), 128, 16, dtype, dtype, NUM_PAGES,
                               num_queries_per_block=32, max_num_batched_tokens=128)


def _random_seq_lens(num_seqs):
  rng = np.random.default_rng(1234)
  q_lens = rng.integers(1, 40, num_seqs)	# JAX's: 1 to 100
  kv_lens = q_lens + rng.integers(0, 50, num_seqs)
  return list(zip(q_lens.tolist(), kv_lens.tolist()))


@pytest.mark.parametrize("num_seqs", [1, 5])
@pytest.mark.parametrize("num_heads", [(32, 8), (32, 16), (16, 2), (4, 4), (8, 1)])
@pytest.mark.parametrize("num_kv_pages_per_block", [4, 8])
@pytest.mark.parametrize("num_queries_per_block", [32, 64])
def test_ragged_paged_attention_complex(num_seqs, num_heads, num_kv_pages_per_block,
                                        num_queries_per_block):
  _test_ragged_paged_attention(_random_seq_lens(num_seqs), num_heads, 128, 16, jnp.float32,
                               jnp.float32, NUM_PAGES,
                               num_kv_pages_per_block=num_kv_pages_per_block,
                               num_queries_per_block=num_queries_per_block)


@pytest.mark.parametrize("num_kv_pages_per_block", [4, 8])
@pytest.mark.parametrize("num_queries_per_block", [32, 64])
@pytest.mark.parametrize("sliding_window", [None, 5, 128])
def test_ragged_paged_attention_sliding_window(num_kv_pages_per_block, num_queries_per_block,
                                               sliding_window):
  _test_ragged_paged_attention(_random_seq_lens(5), (4, 4), 128, 16, jnp.float32, jnp.float32,
                               NUM_PAGES, num_kv_pages_per_block=num_kv_pages_per_block,
                               num_queries_per_block=num_queries_per_block,
                               sliding_window=sliding_window)


@pytest.mark.parametrize("num_kv_pages_per_block", [4, 8])
@pytest.mark.parametrize("num_queries_per_block", [32, 64])
@pytest.mark.parametrize("soft_cap", [None, 50.0])
def test_ragged_paged_attention_logit_soft_capping(num_kv_pages_per_block,
                                                   num_queries_per_block, soft_cap):
  _test_ragged_paged_attention(_random_seq_lens(2), (16, 2), 128, 16, jnp.float32,
                               jnp.float32, NUM_PAGES,
                               num_kv_pages_per_block=num_kv_pages_per_block,
                               num_queries_per_block=num_queries_per_block, soft_cap=soft_cap)


@pytest.mark.parametrize("sliding_window", [5, 128])
@pytest.mark.parametrize("soft_cap", [None, 50.0])
def test_ragged_paged_attention_window_and_cap_fitting(sliding_window, soft_cap):
  # the sliding window and the soft cap at the block shape that fits
  _test_ragged_paged_attention(SEQ_LENS_MIXED, (8, 2), 128, 16, jnp.float32, jnp.float32,
                               NUM_PAGES, num_queries_per_block=32, max_num_batched_tokens=128,
                               sliding_window=sliding_window, soft_cap=soft_cap)


def test_ragged_paged_attention_sliding_window_should_be_positive():
  for sliding_window in (0, -1):
    with pytest.raises(ValueError, match="must be positive"):
      _test_ragged_paged_attention(SEQ_LENS_BASIC, (8, 2), 128, 16, jnp.float32, jnp.float32,
                                   NUM_PAGES, sliding_window=sliding_window)


def test_ragged_paged_attention_soft_cap_cannot_be_zero():
  with pytest.raises(ValueError, match="must not be 0.0"):
    _test_ragged_paged_attention(SEQ_LENS_BASIC, (8, 2), 128, 16, jnp.float32, jnp.float32,
                                 NUM_PAGES, soft_cap=0.0)


def test_tuned_block_sizes():
  # tpuemu's device is a v5e-like one: TPU v5, not in the table, so the
  # default (128, 32), capped by the pages and tokens
  assert get_tpu_version() == 5 and get_device_name() == "TPU v5"
  assert get_tuned_block_sizes(jnp.bfloat16, jnp.bfloat16, 32, 8, 128, 16, 512, 16) == (16, 32)
  assert get_tuned_block_sizes(jnp.float32, jnp.float32, 8, 1, 128, 16, 8, 200) == (128, 8)
  assert simplify_key((jnp.bfloat16, jnp.bfloat16, 12, 2, 100, 16, 600, 8)) == \
      ("bfloat16", "bfloat16", 16, 2, 128, 16, 1024, 128)
  assert get_min_page_size(1000) == 64 and get_min_page_size(100) == 16


def test_default_block_sizes_run():
  # no block sizes given: get_tuned_block_sizes picks them
  args, _ = _make_inputs([(3, 120), (5, 37)], (4, 1), 128, 16, jnp.float32, jnp.float32, 16,
                         32, 2)
  out = ragged_paged_attention(*args)[:8]
  np.testing.assert_allclose(out, ref_ragged_paged_attention_np(*args), atol=2e-5, rtol=2e-5)


# --- what porting the kernel found: each of these failed before ---

def test_rank5_scratch_indexed_by_slot():
  # pltpu.VMEM of rank 5 (the kernel's kv double buffer): .at[slot] with a
  # traced slot is a rank-4 window, reshaped and sliced again
  def kernel(s_ref, x_ref, o_ref, buf):
    slot = s_ref[0]
    for i in range(2):
      buf.at[slot][i] = x_ref[...] * (i + 1)
    o_ref[...] = buf.at[slot].reshape(16, 4, 128)[8:16].reshape(32, 128) + \
        buf[slot, 0, 1, 0]
  x = np.arange(8 * 4 * 128, dtype=np.float32).reshape(8, 4, 128)
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
                     grid_spec=pltpu.PrefetchScalarGridSpec(
                         num_scalar_prefetch=1, grid=(1,),
                         in_specs=[pl.BlockSpec((8, 4, 128), lambda i, s: (0, 0, 0))],
                         out_specs=pl.BlockSpec((32, 128), lambda i, s: (0, 0)),
                         scratch_shapes=[pltpu.VMEM((2, 2, 8, 4, 128), jnp.float32)]))
  out = f(np.array([1], np.int32), x)
  np.testing.assert_array_equal(out, (2 * x).reshape(32, 128) + x[1, 0])



def test_strided_rows_of_a_reshaped_window():
  # ref.at[...].reshape(rows, d)[h::H]: the base window's h-th head of
  # every (page, token), as strided_load_kv reads k and v
  def kernel(x_ref, k_ref, v_ref):
    kv = x_ref.at[pl.ds(1, 2)].reshape(2 * 8 * 4, 128)
    k_ref[...] = kv[2::4, :]
    v_ref[...] = kv[3::4, :]
  x = np.random.default_rng(0).standard_normal((3, 8, 4, 128)).astype(np.float32)
  k, v = pl.pallas_call(kernel, out_shape=[jax.ShapeDtypeStruct((16, 128), jnp.float32)] * 2)(x)
  np.testing.assert_array_equal(k, x[1:3, :, 2].reshape(16, 128))
  np.testing.assert_array_equal(v, x[1:3, :, 3].reshape(16, 128))


def test_like_functions_of_windows():
  # jnp.full_like / zeros_like / ones_like of a ref's window take its shape
  # and dtype (they were sent to the device as a ref to read)
  def kernel(x_ref, o_ref, m_ref):
    w = m_ref.at[1]
    w[...] = x_ref[...]
    o_ref[...] = jnp.full_like(w, 3.0) + jnp.ones_like(w) + jnp.zeros_like(w) + w[...]
  x = np.ones((8, 128), np.float32)
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32)])(x)
  np.testing.assert_array_equal(out, x + 4)


def test_minimum_of_scalars_indexes_smem():
  # jnp.minimum of scalar-core integers is one (a page index clamped by an
  # SMEM length), not a vector value
  def kernel(n_ref, t_ref, o_ref):
    last = jnp.minimum(3, pl.cdiv(n_ref[0], 8)) - 1
    o_ref[0] = t_ref[jnp.maximum(last, 0)]
  for n, want in ((5, 10), (9, 20), (100, 30), (0, 10)):
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
                         in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
                         out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))(
                             np.array([n], np.int32), np.array([10, 20, 30, 40], np.int32))
    assert out[0] == want, (n, out)


def test_while_loop_with_a_long_condition():
  # a condition long enough to be spilled into SMEM was computed once,
  # before the loop, so the loop ran forever (or not at all); now it is
  # computed again at the end of every trip
  def kernel(s_ref, o_ref):
    def cond(c):
      i, acc = c
      return jnp.logical_and(jnp.logical_and(i < s_ref[0], acc + s_ref[1] * i < s_ref[2] * 100),
                             jnp.logical_and(s_ref[3] + i >= 0, i * s_ref[1] < s_ref[2] * 50))

    def body(c):
      i, acc = c
      return i + 1, acc + i
    i, acc = lax.while_loop(cond, body, (0, 0))
    o_ref[0] = i
    o_ref[1] = acc
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))(
                           np.array([7, 1, 100, 0], np.int32))
  assert list(out) == [7, 21]
  assert jax.last_stats()["loop_trips"] == 7


def test_many_unrolled_values_share_temporaries():
  # 40 rounds of held values (more locals than libtpurt's 64 temporaries),
  # each dead before the next: names and scratch slots are shared
  def kernel(x_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.zeros_like(acc_ref)
    for r in range(40):
      a = x_ref[...] * (r + 1)
      b = jnp.exp(a * 0.001)
      acc_ref[...] += a
      acc_ref[...] += b
    o_ref[...] = acc_ref[...]
  x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])(x)
  want = sum(x.astype(np.float64) * (r + 1) + np.exp(x.astype(np.float64) * (r + 1) * 0.001)
             for r in range(40))
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_bitcast_of_a_reshaped_window_reads_packed_rows():
  # strided_load_kv's bf16 path: kv.reshape(rows, d).bitcast(jnp.uint32)
  # [c::H // 2] is the uint32 words of bf16 heads 2c (low half) and 2c + 1
  # of every page and token; k = bits << 16, v = bits & 0xFFFF0000
  def kernel(x_ref, k_ref, v_ref):
    kv = x_ref.at[pl.ds(0, 2)].reshape(2 * 8 * 4, 128)
    b = kv.bitcast(jnp.uint32)[1::2, :]
    k_ref[...] = pltpu.bitcast(b << 16, jnp.float32).astype(jnp.bfloat16)
    v_ref[...] = pltpu.bitcast(b & jnp.uint32(0xFFFF0000), jnp.float32).astype(jnp.bfloat16)
  x = jnp.asarray(np.random.default_rng(2).standard_normal((3, 8, 4, 128)).astype(np.float32),
                  dtype=jnp.bfloat16)
  k, v = pl.pallas_call(kernel, out_shape=[jax.ShapeDtypeStruct((16, 128), jnp.bfloat16)] * 2)(x)
  np.testing.assert_array_equal(np.asarray(k, np.float32), np.asarray(x, np.float32)[:2, :, 2].reshape(16, 128))
  np.testing.assert_array_equal(np.asarray(v, np.float32), np.asarray(x, np.float32)[:2, :, 3].reshape(16, 128))
