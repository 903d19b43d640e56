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
bfloat16. The reference is ref_ragged_paged_attention's math in NumPy
float64."""
import functools
import re

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import dtypes
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


# --- tuned_block_sizes.py (the lookup as JAX writes it; of its table, the
# rows for the shapes below: the full table is ~1800 rows of TPU timings) ---

# The page size is too small. We only have 32 SREGs in TC. If the pages
# per seq is too large, SREGs will spill.
MAX_PAGES_PER_SEQ = 16

# key:
#     - q_dtype_name
#     - kv_dtype_name
#     - num_q_heads_per_blk
#     - num_kv_heads_per_blk
#     - head_dim
#     - page_size
#     - max_num_batched_tokens
#     - max_model_len = page_size * pages_per_seq
# value:
#     - num_kv_pages_per_block
#     - num_queries_per_block
TUNED_BLOCK_SIZES = {
    'TPU v6': {
        ('bfloat16', 'bfloat16', 32, 8, 128, 16, 512, 128): (8, 32),
        ('bfloat16', 'bfloat16', 32, 8, 128, 16, 512, 256): (16, 32),
        ('bfloat16', 'bfloat16', 32, 8, 128, 16, 512, 64): (4, 32),
        ('bfloat16', 'bfloat16', 4, 1, 128, 16, 1024, 128): (8, 128),
    },
}


def next_power_of_2(x: int):
  """Finds the smallest power of 2 >= x using bit manipulation."""
  assert x > 0
  if x == 1:
    return 1
  return 1 << (x - 1).bit_length()


def simplify_key(key):
  """Simplify the key to reduce the number of combinations."""
  (
      q_dtype,
      kv_dtype,
      num_q_heads_per_blk,
      num_kv_heads_per_blk,
      head_dim,
      page_size,
      max_num_batched_tokens,
      pages_per_seq,
  ) = key
  return (
      jnp.dtype(q_dtype).name,
      jnp.dtype(kv_dtype).name,
      next_power_of_2(num_q_heads_per_blk),
      next_power_of_2(num_kv_heads_per_blk),
      (head_dim + 127) // 128 * 128,
      next_power_of_2(page_size),
      next_power_of_2(max_num_batched_tokens),
      next_power_of_2(page_size * pages_per_seq),
  )


def get_tpu_version() -> int:
  """Returns the numeric version of the TPU, or -1 if not on TPU."""
  kind = jax.devices()[0].device_kind
  if 'TPU' not in kind:
    return -1
  if kind == 'TPU7x':
    return 7
  match = re.search(r'TPU\s*v?(\d+)', kind, re.IGNORECASE)
  assert match is not None, kind
  return int(match.group(1))


def get_device_name(num_devices: int | None = None):
  kind = jax.devices()[0].device_kind
  match = re.search(r'TPU\s*v?(\d+)', kind, re.IGNORECASE)
  name = f'TPU v{match.group(1)}' if match else ' '.join(kind.split()[:2])
  if num_devices is not None:
    name += f'-{num_devices}'
  return name


def get_tuned_block_sizes(
    q_dtype,
    kv_dtype,
    num_q_heads_per_blk,
    num_kv_heads_per_blk,
    head_dim,
    page_size,
    max_num_batched_tokens,
    pages_per_seq,
) -> tuple[int, int]:
  """Look up for the best (num_kv_pages_per_blk, num_queries_per_blk) from auto-tuned table."""
  tpu_version = get_tpu_version()
  if tpu_version < 4:
    raise NotImplementedError('TPU version must be 4 or higher.')
  key = (
      q_dtype,
      kv_dtype,
      num_q_heads_per_blk,
      num_kv_heads_per_blk,
      head_dim,
      page_size,
      max_num_batched_tokens,
      pages_per_seq,
  )
  key = simplify_key(key)
  device_name = get_device_name()

  # Default block sizes.
  bkv, bq = (128, 32)
  if tpu_version == 4:
    # This default block size is not tuned, only make sure there's no
    # OOM in vmem
    bkv, bq = (32, 32)
  elif device_name in TUNED_BLOCK_SIZES:
    if key in TUNED_BLOCK_SIZES[device_name]:
      bkv, bq = TUNED_BLOCK_SIZES[device_name][key]
  return (min(pages_per_seq, bkv), min(max_num_batched_tokens, bq))


def get_min_page_size(max_model_len, min_page_size=16):
  """Recommended min page size for high-performance kernel."""
  return max(next_power_of_2(max_model_len) // MAX_PAGES_PER_SEQ, min_page_size)


# --- kernel.py ---

DEFAULT_MASK_VALUE = -0.7 * float(jnp.finfo(jnp.dtype("float32")).max)


class MultiPageAsyncCopyDescriptor:
  """Descriptor for async copy of multiple K/V pages from HBM."""

  def __init__(
      self,
      pages_hbm_ref,  # [total_num_pages, page_size, num_combined_kv_heads_per_blk, head_dim]
      vmem_buf,  # [num_kv_pages_per_blk, page_size, num_combined_kv_heads_per_blk, head_dim]
      sem,
      page_indices_ref,  # i32[max_num_seqs, pages_per_seq]
      metadata,  # [seq_idx, start_page_idx, end_page_idx]
  ):
    self._vmem_buf = vmem_buf
    seq_id, start_page_idx, end_page_idx = metadata
    self._async_copies = []
    # TODO(jevinjiang): Only fetch dynamic shape in need! This will insert
    # a bunch of if-ops. Check the performance when we have benchmarking setup.
    for i in range(vmem_buf.shape[0]):
      page_idx = start_page_idx + i
      page_idx = jax.lax.select(page_idx < end_page_idx, page_idx, 0)
      self._async_copies.append(
          pltpu.make_async_copy(
              pages_hbm_ref.at[page_indices_ref[seq_id, page_idx]],
              vmem_buf.at[i],
              sem,
          )
      )

  def start(self):
    """Starts the async copies."""
    for async_copy in self._async_copies:
      async_copy.start()

  def wait(self):
    for async_copy in self._async_copies:
      async_copy.wait()
    return self._vmem_buf


def ref_ragged_paged_attention(
    queries: jax.Array,  # [max_num_batched_tokens, num_q_heads, head_dim]
    kv_pages: jax.Array,  # [total_num_pages, page_size, num_combined_kv_heads, head_dim]
    kv_lens: jax.Array,  # i32[max_num_seqs]
    page_indices: jax.Array,  # i32[max_num_seqs, pages_per_seq]
    cu_q_lens: jax.Array,  # i32[max_num_seqs + 1]
    num_seqs: jax.Array,  # i32[1],
    *,
    sm_scale: float = 1.0,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    mask_value: float | None = DEFAULT_MASK_VALUE,
    k_scale: float | None = None,
    v_scale: float | None = None,
):
  static_validate_inputs(
      queries,
      kv_pages,
      kv_lens,
      page_indices,
      cu_q_lens,
      num_seqs,
      sm_scale=sm_scale,
      k_scale=k_scale,
      v_scale=v_scale,
      sliding_window=sliding_window,
      soft_cap=soft_cap,
      mask_value=mask_value,
  )
  if mask_value is None:
    mask_value = DEFAULT_MASK_VALUE
  _, _, num_combined_kv_heads, head_dim = kv_pages.shape
  assert num_combined_kv_heads % 2 == 0
  num_kv_heads = num_combined_kv_heads // 2
  num_q_heads = queries.shape[1]
  assert num_q_heads % num_kv_heads == 0
  num_query_per_kv = num_q_heads // num_kv_heads
  outputs = []
  for i in range(num_seqs[0]):
    q_start = cu_q_lens[i]
    q_end = cu_q_lens[i + 1]
    q_len = q_end - q_start
    kv_len = kv_lens[i]
    indices = page_indices[i]
    q = queries[q_start:q_end]
    k = kv_pages[indices, :, 0::2, :].reshape(-1, num_kv_heads, head_dim)[
        :kv_len
    ]
    v = kv_pages[indices, :, 1::2, :].reshape(-1, num_kv_heads, head_dim)[
        :kv_len
    ]
    if k_scale is not None:
      k = k.astype(jnp.float32) * k_scale
      k = k.astype(q.dtype)
    if v_scale is not None:
      v = v.astype(jnp.float32) * v_scale
      v = v.astype(q.dtype)
    k = jnp.repeat(k, num_query_per_kv, axis=1)
    v = jnp.repeat(v, num_query_per_kv, axis=1)
    attn = jnp.einsum("qhd,khd->hqk", q, k, preferred_element_type=jnp.float32)
    attn *= sm_scale
    q_span = (kv_len - q_len) + jax.lax.broadcasted_iota(
        jnp.int32, attn.shape, 1
    )
    kv_span = jax.lax.broadcasted_iota(jnp.int32, attn.shape, 2)
    mask = q_span < kv_span
    if sliding_window is not None:
      mask = jnp.logical_or(mask, q_span - sliding_window >= kv_span)
    if soft_cap is not None:
      attn = soft_cap * jnp.tanh(attn / soft_cap)
    attn += jnp.where(mask, mask_value, 0.0)
    attn = jax.nn.softmax(attn, axis=-1).astype(v.dtype)
    out = jnp.einsum("hqk,khd->qhd", attn, v).astype(queries.dtype)
    outputs.append(out)

  return jnp.concatenate(outputs, axis=0)


# Expect to run these checks during runtime.
def dynamic_validate_inputs(
    q: jax.Array,  # [max_num_batched_tokens, num_q_heads, head_dim]
    kv_pages: jax.Array,  # [total_num_pages, page_size, num_combined_kv_heads, head_dim]
    kv_lens: jax.Array,  # i32[max_num_seqs]
    page_indices: jax.Array,  # i32[max_num_seqs, pages_per_seq]
    cu_q_lens: jax.Array,  # i32[max_num_seqs + 1]
    num_seqs: jax.Array,  # i32[1]
    *,
    # These inputs are optional. If not specified, we will not validate them.
    sm_scale: float | None = None,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    mask_value: float | None = None,
    k_scale: float | None = None,
    v_scale: float | None = None,
    # Kernel tuning params.
    num_kv_pages_per_block: int | None = None,
    num_queries_per_block: int | None = None,
    vmem_limit_bytes: int | None = None,
):
  static_validate_inputs(
      q,
      kv_pages,
      kv_lens,
      page_indices,
      cu_q_lens,
      num_seqs,
      sm_scale=sm_scale,
      sliding_window=sliding_window,
      soft_cap=soft_cap,
      mask_value=mask_value,
      k_scale=k_scale,
      v_scale=v_scale,
      num_kv_pages_per_block=num_kv_pages_per_block,
      num_queries_per_block=num_queries_per_block,
      vmem_limit_bytes=vmem_limit_bytes,
  )
  max_num_batched_tokens = q.shape[0]
  page_size = kv_pages.shape[1]
  max_num_seqs, pages_per_seq = page_indices.shape
  if num_seqs[0] > max_num_seqs:
    raise ValueError(f"{num_seqs[0]=} must be less or equal to {max_num_seqs=}")
  max_kv_len = jnp.max(kv_lens)
  min_pages_per_seq = pl.cdiv(max_kv_len, page_size)
  if pages_per_seq < min_pages_per_seq:
    raise ValueError(
        f"{pages_per_seq=} must be greater or equal to"
        f" {min_pages_per_seq=} given {max_kv_len=} and {page_size=}."
    )
  if cu_q_lens[num_seqs[0]] > max_num_batched_tokens:
    raise ValueError(
        f"Total q tokens {cu_q_lens[num_seqs[0]]} must be less or equal to"
        f" {max_num_batched_tokens=}."
    )
  for i in range(num_seqs[0]):
    q_len = cu_q_lens[i + 1] - cu_q_lens[i]
    kv_len = kv_lens[i]
    if q_len > kv_len:
      raise ValueError(
          f"{q_len=} must be less or equal to {kv_len=} at sequence {i}."
      )


# Expect to run these checks during compile time.
def static_validate_inputs(
    q: jax.Array,  # [max_num_batched_tokens, num_q_heads, head_dim]
    kv_pages: jax.Array,  # [total_num_pages, page_size, num_combined_kv_heads, head_dim]
    kv_lens: jax.Array,  # i32[max_num_seqs]
    page_indices: jax.Array,  # i32[max_num_seqs, pages_per_seq]
    cu_q_lens: jax.Array,  # i32[max_num_seqs + 1]
    num_seqs: jax.Array,  # i32[1]
    *,
    # These inputs are optional. If not specified, we will not validate them.
    sm_scale: float | None = None,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    mask_value: float | None = None,
    k_scale: float | None = None,
    v_scale: float | None = None,
    # Kernel tuning params.
    num_kv_pages_per_block: int | None = None,
    num_queries_per_block: int | None = None,
    vmem_limit_bytes: int | None = None,
):
  _, num_q_heads, head_dim = q.shape
  _, _, num_combined_kv_heads, head_dim_k = kv_pages.shape
  assert num_combined_kv_heads % 2 == 0
  assert isinstance(k_scale, float) or k_scale is None
  assert isinstance(v_scale, float) or v_scale is None
  num_kv_heads = num_combined_kv_heads // 2
  max_num_seqs, pages_per_seq = page_indices.shape
  if num_seqs.shape != (1,):
    raise ValueError(f"{num_seqs.shape=} must be (1,)")
  if head_dim_k != head_dim:
    raise ValueError(
        f"Q head_dim {head_dim} must be the same as that of K/V {head_dim_k}."
    )
  if kv_lens.shape != (max_num_seqs,):
    raise ValueError(
        f"Expected {kv_lens.shape=} to be ({max_num_seqs},) where"
        " `max_num_seqs` is `page_indices.shape[0]`."
    )
  if cu_q_lens.shape != (max_num_seqs + 1,):
    raise ValueError(
        f"Expected {cu_q_lens.shape=} to be ({max_num_seqs + 1},)  where"
        " `max_num_seqs` is `page_indices.shape[0]`."
    )
  if (
      kv_lens.dtype != jnp.int32
      or page_indices.dtype != jnp.int32
      or cu_q_lens.dtype != jnp.int32
  ):
    raise ValueError(
        "The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be"
        f" int32. Got {kv_lens.dtype=}, {page_indices.dtype=},"
        f" {cu_q_lens.dtype=}."
    )
  if num_q_heads % num_kv_heads != 0:
    raise ValueError(f"{num_q_heads=} must be divisible by {num_kv_heads=}")
  if sliding_window is not None and sliding_window <= 0:
    raise ValueError(f"{sliding_window=} must be positive.")
  if soft_cap is not None and soft_cap == 0.0:
    raise ValueError(f"{soft_cap=} must not be 0.0.")
  if (
      num_kv_pages_per_block is not None
      and not 0 < num_kv_pages_per_block <= pages_per_seq
  ):
    raise ValueError(
        f"{num_kv_pages_per_block=} must be in range (0, {pages_per_seq}]."
    )
  if num_queries_per_block is not None and num_queries_per_block <= 0:
    raise ValueError(f"{num_queries_per_block=} must be positive.")
  if vmem_limit_bytes is not None and vmem_limit_bytes <= 0:
    raise ValueError(f"{vmem_limit_bytes=} must be positive.")
  del sm_scale  # No constraints on sm_scale.
  del mask_value  # No consstraints on mask_value.


def ragged_paged_attention_kernel(
    # Prefetch
    kv_lens_ref,  # [max_num_seqs]
    page_indices_ref,  # [max_num_seqs, pages_per_seq]
    cu_q_lens_ref,  # [max_num_seqs + 1]
    seq_buf_idx_ref,
    # TODO(jevinjiang): if OOM in SMEM, consider pack to other scalar refs.
    num_seqs_ref,
    # Input
    q_ref,  # [num_q_per_blk, num_q_heads_per_blk, head_dim]
    kv_pages_hbm_ref,  # [total_num_pages, page_size, num_combined_kv_heads, head_dim]
    # Output
    o_ref,  # [num_q_per_blk, num_q_heads_per_blk, head_dim]
    # Scratch
    kv_bufs,  # [2, num_kv_pages_per_blk, page_size, num_combined_kv_heads_per_blk, head_dim]
    sems,  # [2, 2]
    l_ref,  # [num_kv_heads_per_blk, num_q_per_blk * num_q_heads_per_kv_head, 128]
    m_ref,  # [num_kv_heads_per_blk, num_q_per_blk * num_q_heads_per_kv_head, 128]
    acc_ref,  # [num_q_per_blk, num_q_heads_per_blk, head_dim]
    *,
    sm_scale: float,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    mask_value: float | None = DEFAULT_MASK_VALUE,
    k_scale: float | None = None,
    v_scale: float | None = None,
):
  if mask_value is None:
    mask_value = DEFAULT_MASK_VALUE
  num_q_per_blk, num_q_heads_per_blk, head_dim = q_ref.shape
  pages_per_seq = page_indices_ref.shape[-1]
  num_seqs = num_seqs_ref[0]
  _, num_kv_pages_per_blk, page_size, num_combined_kv_heads_per_blk, _ = (
      kv_bufs.shape
  )
  num_kv_heads_per_blk = num_combined_kv_heads_per_blk // 2
  num_kv_per_blk = num_kv_pages_per_blk * page_size
  num_q_heads_per_kv_head = num_q_heads_per_blk // num_kv_heads_per_blk
  heads_blk_idx, q_blk_idx = (
      pl.program_id(0),
      pl.program_id(1),
  )
  num_heads_blks = pl.num_programs(0)
  init_seq_idx = seq_buf_idx_ref[0]
  init_buf_idx = seq_buf_idx_ref[1]
  q_len_start = q_blk_idx * num_q_per_blk
  q_len_end = q_len_start + num_q_per_blk

  def create_kv_async_copy_descriptors(
      heads_blk_idx, seq_idx, kv_blk_idx, buf_idx
  ):
    start_kv_page_idx = kv_blk_idx * num_kv_pages_per_blk
    end_kv_page_idx = jnp.minimum(
        pages_per_seq, pl.cdiv(kv_lens_ref[seq_idx], page_size)
    )
    metadata = (seq_idx, start_kv_page_idx, end_kv_page_idx)
    heads_start = heads_blk_idx * num_combined_kv_heads_per_blk
    async_copy_kv = MultiPageAsyncCopyDescriptor(
        kv_pages_hbm_ref.at[
            :, :, pl.ds(heads_start, num_combined_kv_heads_per_blk), :
        ],
        kv_bufs.at[buf_idx],
        sems.at[buf_idx],
        page_indices_ref,
        metadata,
    )
    return async_copy_kv

  # TODO(jevinjiang): Add these to Mosaic:
  # 1. Support arbitrary strided load/store for int4 and int8 dtype.
  # 2. Support arbitrary strided load/store for any last dimension.
  def strided_load_kv(ref, start, step):
    packing = get_dtype_packing(ref.dtype)
    if packing == 1:
      return [ref[start::step, :]], [ref[start + 1 :: step, :]]
    assert packing in (2, 4, 8)
    assert step % packing == 0
    k_list, v_list = [], []
    b_start = start // packing
    b_step = step // packing
    b_ref = ref.bitcast(jnp.uint32)
    b = b_ref[b_start::b_step, :]

    # TODO(chengjiyao): use the general strided loading logic for bf16 after
    # fixing the issue in mosaic's infer vector layout pass
    if ref.dtype == jnp.bfloat16:
      bk = b << 16
      bv = b & jnp.uint32(0xFFFF0000)
      k = pltpu.bitcast(bk, jnp.float32).astype(jnp.bfloat16)
      v = pltpu.bitcast(bv, jnp.float32).astype(jnp.bfloat16)
      k_list.append(k)
      v_list.append(v)
    else:
      bitwidth = 32 // packing
      bitcast_dst_dtype = jnp.dtype(f"uint{bitwidth}")
      for i in range(0, packing, 2):
        bk = b >> (i * bitwidth)
        k = pltpu.bitcast(bk.astype(bitcast_dst_dtype), ref.dtype)
        k_list.append(k)
        bv = b >> ((i + 1) * bitwidth)
        v = pltpu.bitcast(bv.astype(bitcast_dst_dtype), ref.dtype)
        v_list.append(v)

    return k_list, v_list

  def fold_on_2nd_minor(vec):
    assert vec.dtype == jnp.bfloat16 or vec.dtype == jnp.float32
    assert len(vec.shape) >= 2
    last_dim = vec.shape[-1]
    packing = get_dtype_packing(vec.dtype)
    if vec.shape[-2] % packing != 0:
      vec = vec.astype(jnp.float32)
    return vec.reshape(-1, last_dim)

  @pl.when(heads_blk_idx + q_blk_idx == 0)
  def prefetch_first_kv_blk():
    async_copy_kv = create_kv_async_copy_descriptors(
        heads_blk_idx, init_seq_idx, 0, init_buf_idx
    )
    async_copy_kv.start()

  def is_cur_q_blk_needed(q_states):
    done, cur_seq_idx, _ = q_states
    should_run = jnp.logical_and(q_len_start < cu_q_lens_ref[num_seqs],
                                 cur_seq_idx < num_seqs)
    return jnp.logical_and(done == 0, should_run)

  def compute_with_cur_q_blk(q_states):
    done, cur_seq_idx, cur_buf_idx = q_states
    q_start = cu_q_lens_ref[cur_seq_idx]
    q_end = cu_q_lens_ref[cur_seq_idx + 1]
    q_len = q_end - q_start
    kv_len = kv_lens_ref[cur_seq_idx]

    def get_next_prefetch_ids(
        heads_blk_idx, cur_seq_idx, kv_blk_idx, cur_buf_idx
    ):
      next_kv_blk_idx = kv_blk_idx + 1
      is_last_kv_blk = next_kv_blk_idx * num_kv_per_blk >= kv_len
      next_kv_blk_idx = lax.select(
          is_last_kv_blk,
          0,
          next_kv_blk_idx,
      )
      is_cur_seq_end_in_cur_q_blk = q_end <= q_len_end
      next_seq_idx = lax.select(
          is_last_kv_blk,
          lax.select(is_cur_seq_end_in_cur_q_blk, cur_seq_idx + 1, cur_seq_idx),
          cur_seq_idx,
      )
      is_last_seq = next_seq_idx == num_seqs
      next_seq_idx = lax.select(
          is_last_seq,
          0,
          next_seq_idx,
      )
      next_heads_blk_idx = lax.select(
          is_last_seq,
          heads_blk_idx + 1,
          heads_blk_idx,
      )
      next_buf_idx = lax.select(cur_buf_idx == 0, 1, 0)
      return next_heads_blk_idx, next_seq_idx, next_kv_blk_idx, next_buf_idx

    def flash_attention(
        q,  # [num_q_per_blk * num_q_heads_per_kv_head, head_dim]
        k,  # [num_kv_per_blk, head_dim]
        v,  # [num_kv_per_blk, head_dim]
        head_l_ref,  # [num_q_per_blk * num_q_heads_per_kv_head, 128]
        head_m_ref,  # [num_q_per_blk * num_q_heads_per_kv_head, 128]
        head_acc_ref,  # [num_q_per_blk, num_q_heads_per_kv_head, head_dim]
        *,
        kv_blk_idx,
    ):
      assert q.shape == (
          num_q_per_blk * num_q_heads_per_kv_head,
          head_dim,
      )
      assert (
          k.shape
          == v.shape
          == (
              num_kv_per_blk,
              head_dim,
          )
      )
      assert k.dtype == v.dtype
      assert (
          head_m_ref.shape
          == head_l_ref.shape
          == (
              num_q_per_blk * num_q_heads_per_kv_head,
              128,
          )
      )
      assert head_acc_ref.shape == (
          num_q_per_blk,
          num_q_heads_per_kv_head,
          head_dim,
      )
      kv_len_start = kv_blk_idx * num_kv_per_blk

      def masked_store(ref, val, start, end, group=1):
        iota = lax.broadcasted_iota(jnp.int32, ref.shape, 0) // group
        pltpu.store(ref, val, mask=jnp.logical_and(iota >= start, iota < end))

      def load_with_init(ref, init_val):
        return jnp.where(
            kv_blk_idx == 0, jnp.full_like(ref, init_val), ref[...]
        )

      # kv lens will be contracting dim, we should mask out the NaNs.
      kv_mask = (
          lax.broadcasted_iota(jnp.int32, k.shape, 0) < kv_len - kv_len_start
      )
      k = jnp.where(kv_mask, k.astype(jnp.float32), 0).astype(k.dtype)
      v = jnp.where(kv_mask, v.astype(jnp.float32), 0).astype(v.dtype)

      qk = (
          jnp.einsum("nd,md->nm", q, k, preferred_element_type=jnp.float32)
          * sm_scale
      )
      store_start = jnp.maximum(q_start - q_len_start, 0)
      store_end = jnp.minimum(q_end - q_len_start, num_q_per_blk)

      row_ids = (
          (kv_len - q_len)
          + q_len_start
          - q_start
          + jax.lax.broadcasted_iota(
              jnp.int32,
              (num_q_per_blk * num_q_heads_per_kv_head, num_kv_per_blk),
              0,
          )
          // num_q_heads_per_kv_head
      )
      col_ids = kv_len_start + jax.lax.broadcasted_iota(
          jnp.int32,
          (num_q_per_blk * num_q_heads_per_kv_head, num_kv_per_blk),
          1,
      )
      causal_mask = row_ids < col_ids
      if sliding_window is not None:
        causal_mask = jnp.logical_or(causal_mask,
                                     row_ids - sliding_window >= col_ids)
      if soft_cap is not None:
        qk = soft_cap * jnp.tanh(qk / soft_cap)
      qk += jnp.where(causal_mask, mask_value, 0.0)
      m_curr = jnp.max(qk, axis=1, keepdims=True)
      s_curr = jnp.exp(qk - m_curr)
      qkv = jnp.dot(s_curr, v, preferred_element_type=jnp.float32)
      lm_store_shape = head_m_ref.shape
      m_curr = jnp.broadcast_to(m_curr, lm_store_shape)
      l_curr = jnp.broadcast_to(
          s_curr.sum(axis=1, keepdims=True), lm_store_shape
      )
      m_prev = load_with_init(head_m_ref, -jnp.inf)
      l_prev = load_with_init(head_l_ref, 0.0)
      m_next = jnp.maximum(m_prev, m_curr)
      masked_store(
          head_m_ref, m_next, store_start, store_end, num_q_heads_per_kv_head
      )
      alpha = jnp.exp(m_prev - m_next)
      beta = jnp.exp(m_curr - m_next)
      l_alpha = alpha * l_prev
      l_next = l_alpha + beta * l_curr
      l_next_safe = jnp.where(l_next == 0.0, 1.0, l_next)
      masked_store(
          head_l_ref,
          l_next_safe,
          store_start,
          store_end,
          num_q_heads_per_kv_head,
      )

      def broadcast_to_shape(arr, shape):
        if arr.shape == shape:
          return arr
        assert len(arr.shape) == len(shape)
        assert arr.shape[0] == shape[0]
        assert shape[1] % arr.shape[1] == 0
        # no-op concatenation.
        return jnp.concatenate(
            [arr for _ in range(shape[1] // arr.shape[1])], axis=1
        )

      o_curr = load_with_init(head_acc_ref, 0.0).reshape(-1, head_dim)
      l_alpha = broadcast_to_shape(l_alpha, qkv.shape)
      beta = broadcast_to_shape(beta, qkv.shape)
      l_next_safe = broadcast_to_shape(l_next_safe, qkv.shape)
      out = lax.div(
          l_alpha * o_curr + beta * qkv,
          l_next_safe,
      )
      masked_store(
          head_acc_ref,
          out.reshape(head_acc_ref.shape),
          store_start,
          store_end,
      )

    def is_valid_kv_blk_in_cur_seq(kv_states):
      kv_blk_idx, _ = kv_states
      return kv_blk_idx * num_kv_per_blk < kv_len

    def compute_with_kv_blk_in_cur_seq(kv_states):
      kv_blk_idx, cur_buf_idx = kv_states
      next_heads_blk_idx, next_seq_idx, next_kv_blk_idx, next_buf_idx = (
          get_next_prefetch_ids(
              heads_blk_idx, cur_seq_idx, kv_blk_idx, cur_buf_idx
          )
      )

      @pl.when(next_heads_blk_idx < num_heads_blks)
      def prefetch_next_kv_blk():
        # TODO(jevinjiang): reuse the same buffer if it is already prefetched!
        # TODO(jevinjiang): only fetch effective dynamic size to hold kv_len and
        # DMA to fixed size buffer!
        next_async_copy_kv = create_kv_async_copy_descriptors(
            next_heads_blk_idx, next_seq_idx, next_kv_blk_idx, next_buf_idx
        )
        next_async_copy_kv.start()

      cur_async_copy_kv = create_kv_async_copy_descriptors(
          heads_blk_idx, cur_seq_idx, kv_blk_idx, cur_buf_idx
      )
      kv_ref = cur_async_copy_kv.wait().reshape(
          num_kv_pages_per_blk * page_size * num_combined_kv_heads_per_blk,
          head_dim,
      )
      kv_packing = get_dtype_packing(kv_ref.dtype)
      # NOTE: kv_packing is divided by 2 because k and v are packed together.
      kv_load_step = max(1, kv_packing // 2)
      for kv_head_chunk_idx in range(0, num_kv_heads_per_blk, kv_load_step):
        k_list, v_list = strided_load_kv(
            kv_ref, kv_head_chunk_idx * 2, num_combined_kv_heads_per_blk
        )
        for step_idx in range(kv_load_step):
          k = k_list[step_idx]
          v = v_list[step_idx]
          if k_scale is not None:
            # NOTE: Conversion between arbitrary data types is not supported.
            # That's why it is converted to float32 first.
            k = k.astype(jnp.float32) * k_scale
            k = k.astype(q_ref.dtype)
          if v_scale is not None:
            v = v.astype(jnp.float32) * v_scale
            v = v.astype(q_ref.dtype)
          kv_head_idx = kv_head_chunk_idx + step_idx
          q_head_idx = kv_head_idx * num_q_heads_per_kv_head
          # TODO(jevinjiang): extra handling for packed type that can start at
          # unaligned position!
          q = fold_on_2nd_minor(
              q_ref[:, q_head_idx : q_head_idx + num_q_heads_per_kv_head, :]
          )
          flash_attention(
              q,
              k,
              v,
              l_ref.at[kv_head_idx],
              m_ref.at[kv_head_idx],
              acc_ref.at[
                  :, q_head_idx : q_head_idx + num_q_heads_per_kv_head, :
              ],
              kv_blk_idx=kv_blk_idx,
          )
      return kv_blk_idx + 1, next_buf_idx

    _, next_buf_idx = lax.while_loop(
        is_valid_kv_blk_in_cur_seq,
        compute_with_kv_blk_in_cur_seq,
        (0, cur_buf_idx),  # (kv_blk_idx, buf_idx)
    )
    next_seq_idx = lax.select(q_end <= q_len_end, cur_seq_idx + 1, cur_seq_idx)
    done = lax.select(q_end < q_len_end, done, 1)
    return done, next_seq_idx, next_buf_idx

  _, seq_idx, buf_idx = lax.while_loop(
      is_cur_q_blk_needed,
      compute_with_cur_q_blk,
      (0, init_seq_idx, init_buf_idx),  # (done, seq_idx, buf_idx)
  )
  # Reset seq_idx for next kv_heads_blk if run out of seqs!
  seq_buf_idx_ref[0] = lax.select(seq_idx < num_seqs, seq_idx, 0)
  seq_buf_idx_ref[1] = buf_idx
  o_ref[...] = acc_ref[...].astype(q_ref.dtype)


def get_dtype_packing(dtype):
  bits = dtypes.itemsize_bits(dtype)
  return 32 // bits


def get_min_heads_per_blk(
    num_q_heads, num_combined_kv_heads, q_dtype, kv_dtype
):
  q_packing = get_dtype_packing(q_dtype)
  kv_packing = get_dtype_packing(kv_dtype)

  def can_be_xla_fully_tiled(x, packing):
    if x % packing != 0:
      return False
    x //= packing
    return x in (1, 2, 4, 8) or x % 8 == 0

  # TODO(jevinjiang): support unaligned number of heads!
  if not can_be_xla_fully_tiled(num_combined_kv_heads, kv_packing):
    raise ValueError(
        f"Not implemented: {num_combined_kv_heads=} can not be XLA fully tiled."
    )
  assert num_combined_kv_heads % 2 == 0
  num_kv_heads = num_combined_kv_heads // 2
  assert num_q_heads % num_kv_heads == 0
  ratio = num_q_heads // num_kv_heads
  # TODO(jevinjiang): we can choose smaller tiling for packed type if large
  # second minor tiling is not on.
  max_combined_kv_tiling = 8 * kv_packing
  min_combined_kv_heads = (
      max_combined_kv_tiling
      if num_combined_kv_heads % max_combined_kv_tiling == 0
      else num_combined_kv_heads
  )
  min_q_heads = min_combined_kv_heads // 2 * ratio
  if can_be_xla_fully_tiled(min_q_heads, q_packing):
    return min_q_heads, min_combined_kv_heads
  return num_q_heads, num_combined_kv_heads


@functools.partial(
    jax.jit,
    static_argnames=[
        "sm_scale",
        "mask_value",
        "num_kv_pages_per_block",
        "num_queries_per_block",
        "vmem_limit_bytes",
        "sliding_window",
        "soft_cap",
        "k_scale",
        "v_scale",
    ],
)
def ragged_paged_attention(
    q: jax.Array,  # [max_num_batched_tokens, num_q_heads, head_dim]
    # TODO(jevinjiang): create a write_to_kv_cache kernel!
    kv_pages: jax.Array,  # [total_num_pages, page_size, num_combined_kv_heads, head_dim]
    kv_lens: jax.Array,  # i32[max_num_seqs]
    page_indices: jax.Array,  # i32[max_num_seqs, pages_per_seq]
    cu_q_lens: jax.Array,  # i32[max_num_seqs + 1]
    num_seqs: jax.Array,  # i32[1]
    *,
    sm_scale: float = 1.0,
    sliding_window: int | None = None,
    soft_cap: float | None = None,
    mask_value: float | None = DEFAULT_MASK_VALUE,
    k_scale: float | None = None,
    v_scale: float | None = None,
    num_kv_pages_per_block: int | None = None,
    num_queries_per_block: int | None = None,
    vmem_limit_bytes: int | None = None,
):
  """Ragged paged attention that supports mixed prefill and decode.

  Args:
    q: concatenated all sequences' queries.
    kv_pages: paged KV cache. Normally in HBM.
    kv_lens: padded kv lengths. Only the first num_seqs values are valid.
    page_indices: the first index indicates which page to use in the kv cache
      for each sequence. Only the first num_seqs values are valid.
    cu_q_lens: the cumulative sum of the effective query lengths. Similar to
      kv_lens, only the first num_seqs+1 values are valid.
    num_seqs: the dynamic number of sequences.
    sm_scale: the softmax scale which will be applied to the Q@K^T.
    sliding_window: the sliding window size for the attention.
    soft_cap: the logit soft cap for the attention.
    mask_value: mask value for causal mask.
    k_scale: the scale for the key cache.
    v_scale: the scale for the value cache.
    num_kv_pages_per_block: number of kv pages to be processed in one flash
      attention block in the pallas kernel.
    num_queries_per_block: number of kv pages to be processed in one flash
      attention block in the pallas kernel.
    vmem_limit_bytes: the vmem limit for the pallas kernel.

  Returns:
    The output of the attention.
  """
  static_validate_inputs(
      q,
      kv_pages,
      kv_lens,
      page_indices,
      cu_q_lens,
      num_seqs,
      sm_scale=sm_scale,
      sliding_window=sliding_window,
      soft_cap=soft_cap,
      mask_value=mask_value,
      k_scale=k_scale,
      v_scale=v_scale,
      num_kv_pages_per_block=num_kv_pages_per_block,
      num_queries_per_block=num_queries_per_block,
      vmem_limit_bytes=vmem_limit_bytes,
  )
  if mask_value is None:
    mask_value = DEFAULT_MASK_VALUE
  num_q_tokens, num_q_heads, head_dim = q.shape
  _, page_size, num_combined_kv_heads, _ = kv_pages.shape
  assert num_combined_kv_heads % 2 == 0
  num_kv_heads = num_combined_kv_heads // 2
  _, pages_per_seq = page_indices.shape
  num_q_heads_per_blk, num_combined_kv_heads_per_blk = get_min_heads_per_blk(
      num_q_heads, num_combined_kv_heads, q.dtype, kv_pages.dtype
  )
  num_q_per_blk = num_queries_per_block
  num_kv_pages_per_blk = num_kv_pages_per_block
  if num_q_per_blk is None or num_kv_pages_per_blk is None:
    num_kv_pages_per_blk, num_q_per_blk = get_tuned_block_sizes(
        q.dtype,
        kv_pages.dtype,
        num_q_heads_per_blk,
        num_combined_kv_heads_per_blk // 2,
        head_dim,
        page_size,
        num_q_tokens,
        pages_per_seq,
    )
  num_q_heads_per_kv_head = num_q_heads // num_kv_heads
  num_q_blks = pl.cdiv(num_q_tokens, num_q_per_blk)
  assert num_combined_kv_heads_per_blk % 2 == 0
  num_kv_heads_per_blk = num_combined_kv_heads_per_blk // 2
  assert num_q_heads_per_blk % num_q_heads_per_kv_head == 0
  num_heads_blks = num_q_heads // num_q_heads_per_blk
  grid = (num_heads_blks, num_q_blks)

  def q_index_map(heads_blk_idx, q_blk_idx, *_):
    return (q_blk_idx, heads_blk_idx, 0)

  q_block_spec = pl.BlockSpec(
      (num_q_per_blk, num_q_heads_per_blk, head_dim),
      q_index_map,
  )
  in_specs = [
      q_block_spec,
      pl.BlockSpec(memory_space=pltpu.ANY),
  ]
  out_specs = q_block_spec
  lm_scratch = pltpu.VMEM(
      # TODO(jevinjiang): use 128 instead of 1 is due to Mosaic does not support
      # unaligned slicing!
      (num_kv_heads_per_blk, num_q_per_blk * num_q_heads_per_kv_head, 128),
      jnp.float32,
  )
  acc_scratch = pltpu.VMEM(
      (num_q_per_blk, num_q_heads_per_blk, head_dim),
      jnp.float32,
  )
  double_buf_scratch = pltpu.VMEM(
      (
          2,  # For double buffering during DMA copies.
          num_kv_pages_per_blk,
          page_size,
          num_combined_kv_heads_per_blk,
          head_dim,
      ),
      kv_pages.dtype,
  )
  scratch_shapes = [
      double_buf_scratch,  # kv_bufs
      pltpu.SemaphoreType.DMA((2,)),  # Semaphores for double buffers.
      lm_scratch,  # l_ref
      lm_scratch,  # m_ref
      acc_scratch,
  ]
  scalar_prefetches = (
      kv_lens,
      page_indices,
      cu_q_lens,
      jnp.array((0, 0), jnp.int32),  # seq_idx, buf_idx
      num_seqs,
  )
  kernel = pl.pallas_call(
      functools.partial(
          ragged_paged_attention_kernel,
          sm_scale=sm_scale,
          sliding_window=sliding_window,
          soft_cap=soft_cap,
          mask_value=mask_value,
          k_scale=k_scale,
          v_scale=v_scale,
      ),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=len(scalar_prefetches),
          in_specs=in_specs,
          out_specs=out_specs,
          grid=grid,
          scratch_shapes=scratch_shapes,
      ),
      compiler_params=pltpu.CompilerParams(
          dimension_semantics=(
              "arbitrary",
              "arbitrary",
          ),
          vmem_limit_bytes=vmem_limit_bytes,
      ),
      out_shape=jax.ShapeDtypeStruct(shape=q.shape, dtype=q.dtype),
      name="ragged_paged_attention_kernel",
  )

  return kernel(*scalar_prefetches, q, kv_pages)


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
  # JAX's runs on TPU v5+ only; tpuemu has no float8 dtypes, refused where
  # the inputs are made
  with pytest.raises(TypeError, match="float8"):
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
