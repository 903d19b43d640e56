# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/ragged_paged_attention/tuned_block_sizes.py,
transcribed against tpuemu (only the imports changed): the lookup as JAX
writes it; of its table, the rows test_jax_ports11.py's shapes use (the
full table is ~1800 rows of TPU timings), so other shapes get its
default block sizes."""
import re

import tpuemu as jax
import tpuemu.numpy as jnp


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
