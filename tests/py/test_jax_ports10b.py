# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, tenth round (b): splash
attention's masks and their preprocessing,
jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_mask.py
and splash_attention_mask_info.py (pure NumPy, as JAX writes them: the
lazy masks, MaskInfo and process_mask/process_mask_dkv with grid
shrinking, process_dynamic_mask on jnp arrays), and
tests/pallas/tpu_splash_attention_mask_test.py's cases. test_jax_ports10.py
runs the kernel on these MaskInfos."""
from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
import dataclasses
import functools
import math
from typing import Any, NamedTuple

import numpy as np
import pytest

import tpuemu.numpy as jnp


# --- splash_attention_mask.py, as JAX writes it ---

class Mask:
    """A base class for splash attention masks."""

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def __getitem__(self, idx) -> np.ndarray:
        raise NotImplementedError

    def __bool__(self) -> bool:
        raise NotImplementedError(
            'Conversion to bool is unsupported. Could be caused by using logical'
            ' instead of bitwise operations on masks.')

    def __or__(self, other: Mask) -> Mask:
        if self.shape != other.shape:
            raise ValueError(f'Invalid shape for other: {other.shape}, expected: {self.shape}')
        return LogicalOr(self, other)

    def __and__(self, other: Mask) -> Mask:
        if self.shape != other.shape:
            raise ValueError(f'Invalid shape for other: {other.shape}, expected: {self.shape}')
        return LogicalAnd(self, other)


def make_causal_mask(shape: tuple[int, int], offset: int = 0) -> np.ndarray:
    """Makes a causal attention mask."""
    q_seq_len, kv_seq_len = shape
    q_idx = np.arange(q_seq_len, dtype=np.int32)
    kv_idx = np.arange(kv_seq_len, dtype=np.int32)
    return (q_idx[:, None] + offset >= kv_idx[None, :]).astype(np.bool_)


def make_local_attention_mask(shape: tuple[int, int], window_size: tuple[int | None, int | None],
                              *, offset: int = 0) -> np.ndarray:
    """Makes a local attention mask."""
    q_seq_len, kv_seq_len = shape
    q_idx = np.arange(q_seq_len, dtype=np.int32)
    kv_idx = np.arange(kv_seq_len, dtype=np.int32)
    mask = np.ones((q_seq_len, kv_seq_len), dtype=np.bool_)
    left, right = window_size
    if left is not None:
        mask = mask & (q_idx[:, None] - left + offset <= kv_idx[None, :])
    if right is not None:
        mask = mask & (q_idx[:, None] + right + offset >= kv_idx[None, :])
    return mask.astype(np.bool_)


def make_chunk_attention_mask(shape: tuple[int, int], chunk_size: int) -> np.ndarray:
    """Makes a chunked causal attention mask."""
    if chunk_size <= 0:
        raise ValueError('chunk_size must be positive')

    q_seq_len, kv_seq_len = shape
    q_idx = np.arange(q_seq_len, dtype=np.int32)
    kv_idx = np.arange(kv_seq_len, dtype=np.int32)

    # chunk mask calculation
    same_chunk = (q_idx[:, None] // chunk_size) == (kv_idx[None, :] // chunk_size)
    mask = same_chunk & (q_idx[:, None] >= kv_idx[None, :])
    return mask


def make_random_mask(shape: tuple[int, int], sparsity: float, seed: int) -> np.ndarray:
    """Makes a random attention mask."""
    np.random.seed(seed)
    return np.random.binomial(n=1, p=1.0 - sparsity, size=shape).astype(np.bool_)


@dataclasses.dataclass
class LogicalOr(Mask):
    left: Mask
    right: Mask

    def __init__(self, left: Mask, right: Mask):
        if left.shape != right.shape:
            raise ValueError('Masks must have the same shape')
        self.left = left
        self.right = right

    @property
    def shape(self) -> tuple[int, ...]:
        return self.left.shape

    def __getitem__(self, idx) -> np.ndarray:
        return self.left[idx] | self.right[idx]

    def __hash__(self):
        return hash((type(self),) + (self.left, self.right))


@dataclasses.dataclass
class LogicalAnd(Mask):
    left: Mask
    right: Mask

    def __init__(self, left: Mask, right: Mask):
        if left.shape != right.shape:
            raise ValueError('Masks must have the same shape')
        self.left = left
        self.right = right

    @property
    def shape(self) -> tuple[int, ...]:
        return self.left.shape

    def __getitem__(self, idx) -> np.ndarray:
        return self.left[idx] & self.right[idx]

    def __hash__(self):
        return hash((type(self),) + (self.left, self.right))


@dataclasses.dataclass
class MultiHeadMask(Mask):
    """Lazy multihead mask, combines multiple lazy masks one per head."""

    masks: Sequence[Mask]

    def __post_init__(self):
        if not self.masks:
            raise ValueError('Unsupported empty tuple of masks')

        shape = self.masks[0].shape
        for mask in self.masks[1:]:
            if shape != mask.shape:
                raise ValueError(f'Unexpected mask shape, got: {mask.shape}, expected: {shape}')

        if not all(isinstance(mask, Mask) for mask in self.masks):
            raise ValueError('masks should be of type Mask')

        if any(isinstance(mask, MultiHeadMask) for mask in self.masks):
            raise ValueError('Nesting MultiHeadMasks is not supported')

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.masks),) + self.masks[0].shape

    def __getitem__(self, idx) -> np.ndarray:
        if len(idx) != 3:
            raise NotImplementedError(f'Unsupported slice: {idx}')

        head_slice = idx[0]
        if isinstance(head_slice, int):
            assert head_slice >= 0 and head_slice <= len(self.masks)
            return self.masks[head_slice][idx[1:]]
        else:
            slice_masks = [mask[idx[1:]] for mask in self.masks[head_slice]]
            return np.stack(slice_masks)

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return NotImplemented

        return self.masks == other.masks

    def __hash__(self):
        return hash((type(self),) + tuple(hash(mask) for mask in self.masks))


class _ComputableMask(Mask):
    """Superclass for all masks that can be computed inside the kernel using a
    callable object."""

    _shape: tuple[int, int]
    q_sequence: np.ndarray
    mask_function: Callable[..., Any]

    def __init__(self, shape: tuple[int, int], mask_function: Callable[..., Any],
                 shard_count: int = 1):
        self._shape = shape
        self.mask_function = mask_function
        q_seq_len = self.shape[0]

        if q_seq_len % (shard_count * shard_count) != 0:
            raise ValueError(
                f'Shard count squared ({shard_count * shard_count}) must'
                f' divide Q seq_len ({self.shape[0]}) evenly.')

        self.q_sequence = np.arange(q_seq_len, dtype=np.int32)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def __getitem__(self, idx) -> np.ndarray:
        if len(idx) != 2:
            raise NotImplementedError(f'Unsupported slice: {idx}')

        q_slice, kv_slice = idx
        if not isinstance(q_slice, slice) or not isinstance(kv_slice, slice):
            raise NotImplementedError(f'Unsupported slice: {idx}')

        q_slice = _fill_slice(q_slice, self.shape[0])
        kv_slice = _fill_slice(kv_slice, self.shape[1])

        rows = self.q_sequence[q_slice]
        cols = np.arange(kv_slice.start, kv_slice.stop)

        return self.mask_function(rows[:, None], cols[None, :])

    def __eq__(self, other: object):
        raise NotImplementedError()

    def __hash__(self):
        raise NotImplementedError()


class CausalMask(_ComputableMask):
    """Lazy causal mask, prevents the model from attending to future tokens."""

    offset: int

    def __init__(self, shape: tuple[int, int], offset: int = 0, shard_count: int = 1):
        self.offset = offset

        def causal_mask_function(q_ids, kv_ids):
            # When evaluating the mask in _process_mask we typically work with numpy
            # array views.
            # Avoid the addition when possible to avoid instantiating an actual array.
            if self.offset == 0:
                return q_ids >= kv_ids
            else:
                return q_ids + self.offset >= kv_ids

        mask_function = causal_mask_function

        super().__init__(shape=shape, mask_function=mask_function, shard_count=shard_count)

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return NotImplemented

        return (self.shape == other.shape and self.offset == other.offset
                and np.array_equal(self.q_sequence, other.q_sequence))

    def __hash__(self):
        return hash((type(self), self.shape, self.offset,
                     self.q_sequence.tobytes() if self.q_sequence is not None else None))


class ChunkedCausalMask(_ComputableMask):
    """Lazy chunked causal mask."""

    chunk_size: int

    def __init__(self, shape: tuple[int, int], chunk_size: int, shard_count: int = 1):
        if chunk_size <= 0:
            raise ValueError('chunk_size must be positive')
        self.chunk_size = chunk_size

        # Define the mask function for chunk attention
        def chunked_causal_mask_function(q_ids, kv_ids):
            """Computes the mask logic for the given slice indices."""
            # Condition 1: Same chunk
            same_chunk = (q_ids // self.chunk_size) == (kv_ids // self.chunk_size)

            # Condition 2: Causal
            causal = q_ids >= kv_ids

            return same_chunk & causal

        super().__init__(shape=shape, mask_function=chunked_causal_mask_function,
                         shard_count=shard_count)

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return NotImplemented

        return (self.shape == other.shape and self.chunk_size == other.chunk_size
                and np.array_equal(self.q_sequence, other.q_sequence))

    def __hash__(self):
        return hash((type(self), self.shape, self.chunk_size,
                     self.q_sequence.tobytes() if self.q_sequence is not None else None))


class LocalMask(_ComputableMask):
    """Lazy local mask, prevents model from attending to tokens outside window."""

    window_size: tuple[int | None, int | None]
    offset: int

    def __init__(self, shape: tuple[int, int], window_size: tuple[int | None, int | None],
                 offset: int, shard_count: int = 1):
        self.window_size = window_size
        self.offset = offset

        def local_mask_function(q_ids, kv_ids):
            """Computes the local attention mask for the given slice indices."""
            left_size, right_size = self.window_size

            assert q_ids.ndim == 2
            assert kv_ids.ndim == 2

            if left_size is None and right_size is None:
                return np.ones((q_ids.shape[0], kv_ids.shape[1]), dtype=np.bool_)

            # Avoid the addition when possible to avoid instantiating an actual array.
            if offset != 0:
                shifted_q_ids = q_ids + self.offset
            else:
                shifted_q_ids = q_ids

            mask = None
            if left_size is not None:
                mask = shifted_q_ids - left_size <= kv_ids
            if right_size is not None:
                if mask is None:
                    mask = shifted_q_ids + right_size >= kv_ids
                else:
                    mask &= shifted_q_ids + right_size >= kv_ids
            return mask

        super().__init__(shape=shape, mask_function=local_mask_function,
                         shard_count=shard_count)

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return False

        return (self.shape == other.shape and self.window_size == other.window_size
                and self.offset == other.offset
                and np.array_equal(self.q_sequence, other.q_sequence))

    def __hash__(self):
        return hash((type(self), self.shape, self.window_size, self.offset,
                     self.q_sequence.tobytes() if self.q_sequence is not None else None))


@dataclasses.dataclass
class NumpyMask(Mask):
    """A mask backed by a dense numpy array."""

    array: np.ndarray

    def __post_init__(self):
        if self.array.ndim != 2:
            raise ValueError('Expected a 2-dim array')

        if self.array.dtype != np.bool_:
            raise ValueError('Mask must be a boolean array')

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def __getitem__(self, idx) -> np.ndarray:
        return self.array[idx]

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return NotImplemented

        return np.array_equal(self.array, other.array, equal_nan=True)

    def __hash__(self):
        return hash((type(self), self.array.tobytes()))


def _fill_slice(inp_slice: slice, size: int) -> slice:
    assert inp_slice.step is None or inp_slice.step == 1
    start = 0 if inp_slice.start is None else inp_slice.start
    stop = size if inp_slice.stop is None else inp_slice.stop
    assert start >= 0
    assert stop <= size
    return slice(start, stop, None)


@dataclasses.dataclass(frozen=True)
class FullMask(Mask):
    """Lazy full mask, allows all tokens to attend to all other tokens."""

    _shape: tuple[int, int]

    def __post_init__(self):
        if not isinstance(self.shape, tuple):
            raise ValueError(f'Unsupported shape type: {type(self.shape)}')

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def __getitem__(self, idx) -> np.ndarray:
        if len(idx) != 2:
            raise NotImplementedError(f'Unsupported slice: {idx}')
        i, j = idx
        if not isinstance(i, slice) or not isinstance(j, slice):
            raise NotImplementedError(f'Unsupported slice: {idx}')
        i = _fill_slice(i, self.shape[0])
        j = _fill_slice(j, self.shape[1])
        return np.ones((i.stop - i.start, j.stop - j.start), dtype=np.bool_)

    def __eq__(self, other: object):
        if not isinstance(other, type(self)):
            return NotImplemented

        return self.shape == other.shape

    def __hash__(self):
        return hash((type(self), self.shape))


# --- splash_attention_mask_info.py, as JAX writes it ---

class MaskInfo(NamedTuple):
    """Contains runtime masking information for the Splash attention kernel
    (partial_mask_blocks are bool, as the kernel's version of JAX makes them).

    data_next, mask_next and block_mask go to scalar memory (int8, int16 or
    int32, the smallest that holds them); partial_mask_blocks holds the
    blocks of the mask that mix zeros and ones; q_sequence the q token
    indices a mask_function is evaluated on."""

    data_next: np.ndarray | None
    mask_next: np.ndarray | None
    block_mask: np.ndarray | None
    partial_mask_blocks: np.ndarray | None
    q_sequence: np.ndarray | None


def _downcast_to_small_type(array: np.ndarray) -> np.ndarray:
    """Downcast numpy array to the smallest of int8, int16 that holds it."""

    if array.dtype != np.int32:
        raise ValueError('Expected int32 input.')

    if not np.all(array >= 0):
        raise ValueError('Expected non-negative array.')

    if array.size == 0:
        return array

    max_value = np.max(array)

    if max_value <= np.iinfo(np.int8).max:
        return array.astype(np.int8)
    elif max_value <= np.iinfo(np.int16).max:
        return array.astype(np.int16)
    else:
        return array.astype(np.int32)


def _check_mask(mask: Mask) -> None:
    """Check that the given mask is valid (no all-zero row along kv)."""

    assert len(mask.shape) == 2

    exception_message = (
        'Some rows of the mask (along the kv dimension) are all zeros.\nThis is'
        ' would result in a division by zero when computing the attention'
        ' softmax.')

    is_row_non_zero = np.zeros(mask.shape[0], dtype=np.bool_)
    for col in range(mask.shape[1]):
        # Mask only supports slice indices.
        is_row_non_zero = np.logical_or(
            is_row_non_zero, mask[(slice(0, mask.shape[0]), slice(col, col + 1))][:, 0])
    if not is_row_non_zero.all():
        raise ValueError(exception_message)


class _HashableNDArray:
    """Helper to make a numpy array hashable: can be added associative containers."""
    array: np.ndarray

    def __init__(self, array: np.ndarray):
        self.array = array

    def __hash__(self):
        return hash(self.array.tobytes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _HashableNDArray):
            return NotImplemented
        return np.array_equal(self.array, other.array, equal_nan=True)


def _get_mask_info_for_shard(
        output_shape: tuple[int, int, int], has_mask_next: bool, mask: MultiHeadMask,
        block_shape: tuple[int, int],
        coords_to_partial_mask_block_index: dict[tuple[int, int, int], int],
        masks_per_head_shard: int, head_start: int, num_heads: int, q_seq_start: int,
        q_seq_shard_size: int, blocked_q_seq_start: int, is_dkv: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Process a slice of the mask to compute data_next and mask_next."""
    _, _, kv_seq_len = mask.shape

    q_block_size, kv_block_size = block_shape
    q_block_count, q_mod = divmod(q_seq_shard_size, q_block_size)
    kv_block_count, kv_mod = divmod(kv_seq_len, kv_block_size)

    assert q_mod == 0
    assert kv_mod == 0

    blocked_shape = ((kv_block_count, num_heads, q_block_count) if is_dkv
                     else (num_heads, q_block_count, kv_block_count))

    data_coords = []
    mask_coords = []
    for idx in np.ndindex(blocked_shape):
        if is_dkv:
            kv_index, h_index, q_index = idx
        else:
            h_index, q_index, kv_index = idx

        h_index = h_index if masks_per_head_shard == 1 else head_start + h_index

        chunk = mask[(
            h_index,
            slice(q_seq_start + q_index * q_block_size,
                  q_seq_start + (q_index + 1) * q_block_size),
            slice(kv_index * kv_block_size, (kv_index + 1) * kv_block_size),
        )]
        if chunk.any():
            data_coords.append(idx)
            if not chunk.all():
                mask_coords.append(idx)

    # Initialize the output arrays.
    mask_next = None
    if has_mask_next:
        mask_next = np.zeros(output_shape, dtype=np.int32)
    data_next = np.zeros(output_shape, dtype=np.int32)

    # If the mask is completely zero'd out return freshly initialized outputs.
    if not data_coords:
        return data_next, mask_next

    data_coords_iter = iter(data_coords)
    first_j = coord_j = next(data_coords_iter)
    if mask_next is not None and mask_coords:
        mask_coords_iter = iter(mask_coords)
        first_m = coord_m = next(mask_coords_iter)
    else:
        first_m, coord_m, mask_coords_iter = None, None, None

    for idx in np.ndindex(blocked_shape):
        if is_dkv:
            kv_index, h_index, q_index = idx
            chunk_idx: tuple[int, ...] = (h_index, q_index, kv_index)
            data_dim = 2
        else:
            chunk_idx = idx
            data_dim = 2

        is_next = idx > coord_j

        if is_next:
            try:
                coord_j = next(data_coords_iter)
            except StopIteration:
                coord_j = first_j
        data_next[chunk_idx] = coord_j[data_dim]

        if mask_next is not None and mask_coords:
            assert coord_m is not None
            is_next_mask = idx > coord_m
            if is_next_mask:
                try:
                    coord_m = next(mask_coords_iter)  # type: ignore
                except StopIteration:
                    coord_m = first_m

            if is_dkv:
                assert coord_m is not None
                coord_m_global = (coord_m[1] + head_start, coord_m[2] + blocked_q_seq_start,
                                  coord_m[0])
            else:
                assert coord_m is not None
                coord_m_global = (coord_m[0] + head_start, coord_m[1] + blocked_q_seq_start,
                                  coord_m[2])

            mask_next[chunk_idx] = coords_to_partial_mask_block_index[coord_m_global]

    return data_next, mask_next


def _process_dynamic_mask(
        mask, block_shape: tuple[int, int], is_dkv: bool, *, downcast_smem_data: bool = True,
        head_shards: int = 1, q_seq_shards: int = 1, shrink_grid: bool = True,
) -> tuple[MaskInfo, None]:
    """Similar to `_process_mask` but the mask must be a dynamic array: the
    whole mask goes to partial_mask_blocks, fully-masked blocks are still
    skipped."""

    del shrink_grid, head_shards, q_seq_shards

    if len(mask.shape) != 3:
        raise ValueError(f'Expected a 3-dim mask, instead got: {mask.shape}.')

    if mask.dtype != jnp.bool:
        raise ValueError(f'Expected a bool mask, instead got: {mask.dtype}.')

    head_count, q_seq_len, kv_seq_len = mask.shape
    q_block_size, kv_block_size = block_shape
    q_blocks_count, q_mod = divmod(q_seq_len, q_block_size)
    kv_blocks_count, kv_mod = divmod(kv_seq_len, kv_block_size)

    if q_mod != 0:
        raise ValueError(f'{q_block_size=} should divide {q_seq_len=}.')
    if kv_mod != 0:
        raise ValueError(f'{kv_block_size=} should divide {kv_seq_len=}.')

    block_mask_shape = (head_count, q_blocks_count, kv_blocks_count)

    # Tile the last 2 dimensions of the mask into 2D tiles of size `block_shape`.
    partial_mask_blocks = (
        mask.reshape(head_count, q_blocks_count, q_block_size, kv_seq_len)
        .swapaxes(-1, -2)
        .reshape(*block_mask_shape, kv_block_size, q_block_size)
        .swapaxes(-1, -2)
        .astype(np.bool_))

    # The block mask is 2 for all blocks with all entries set to True and 1 for
    # blocks with a mix of True and False entries.
    is_full_mask = jnp.all(partial_mask_blocks, axis=(-1, -2))
    is_empty_mask = jnp.logical_not(jnp.any(partial_mask_blocks, axis=(-1, -2)))

    block_mask = jnp.ones(block_mask_shape, dtype=np.int32)
    block_mask = jnp.where(is_full_mask, 2, block_mask)
    block_mask = jnp.where(is_empty_mask, 0, block_mask)

    mask_next = jnp.where(
        jnp.logical_or(is_empty_mask, is_full_mask), 0,
        jnp.arange(math.prod(block_mask_shape), dtype=np.int32).reshape(block_mask_shape))

    # data_next stores the index of the next non-empty block in the sequence.
    # The indices of empty blocks are set to 0 to avoid copying extra data when
    # pipeling.
    if is_dkv:
        data_next = jnp.arange(q_blocks_count, dtype=np.int32)[None, :, None]
    else:
        data_next = jnp.arange(kv_blocks_count, dtype=np.int32)[None, None, :]
    data_next = jnp.broadcast_to(data_next, block_mask_shape)
    data_next = jnp.where(is_empty_mask, 0, data_next)

    partial_mask_blocks = partial_mask_blocks.reshape(-1, *block_shape)
    if is_dkv:
        partial_mask_blocks = partial_mask_blocks.swapaxes(-1, -2)

    def _downcast(array, max_value: int):
        if array.size == 0:
            return array

        if array.dtype != np.int32:
            raise ValueError(f'Expected int32 input, but got {array.dtype}.')

        if max_value <= np.iinfo(np.int8).max:
            return array.astype(np.int8)
        elif max_value <= np.iinfo(np.int16).max:
            return array.astype(np.int16)
        else:
            return array.astype(np.int32)

    if downcast_smem_data:
        block_mask = block_mask.astype(np.int8)  # values are in the range [0, 1, 2]
        data_next = _downcast(data_next, kv_seq_len if is_dkv else q_seq_len)
        mask_next = _downcast(mask_next, math.prod(block_mask_shape))

    return (MaskInfo(data_next=data_next, mask_next=mask_next, block_mask=block_mask,
                     partial_mask_blocks=partial_mask_blocks, q_sequence=None), None)


# When used in a transformer network with multiple layers, the SplashAttention
# kernel is created serveral times with the same mask. Cache MaskInfo to avoid
# blowing up compile times.
@functools.lru_cache(maxsize=12)
def _process_mask(
        mask: MultiHeadMask,  # [num_heads, q_seq_len, kv_seq_len]
        block_shape: tuple[int, int], is_dkv: bool, *, downcast_smem_data: bool = True,
        head_shards: int = 1, q_seq_shards: int = 1, shrink_grid: bool = True,
):
    """Transform a dense mask into a sparse representation."""

    if len(mask.shape) != 3:
        raise ValueError(f'Expected a 3-dim mask, instead got: {mask.shape=}')

    head_count, q_seq_len, kv_seq_len = mask.shape
    q_block_size, kv_block_size = block_shape
    q_blocks_count, q_mod = divmod(q_seq_len, q_block_size)
    kv_blocks_count, kv_mod = divmod(kv_seq_len, kv_block_size)

    if q_mod != 0:
        raise ValueError(f'{q_block_size=} should divide {q_seq_len=}.')
    if kv_mod != 0:
        raise ValueError(f'{kv_block_size=} should divide {kv_seq_len=}.')

    q_seq_len_per_shard, mod = divmod(q_seq_len, q_seq_shards)
    if mod != 0:
        raise ValueError(f'{q_seq_shards=} should divide {q_seq_len=}.')

    q_blocks_per_shard, mod = divmod(q_seq_len_per_shard, q_block_size)
    if mod != 0:
        raise ValueError(f'{q_block_size=} should divide {q_seq_len_per_shard=}.')

    heads_per_shard, mod = divmod(head_count, head_shards)
    if mod != 0:
        raise ValueError(f'{head_shards=} should divide {head_count=}.')

    first_mask_size = mask.masks[0].shape
    for h in range(head_count):
        if mask.masks[h].shape != first_mask_size:
            raise ValueError(
                f'First head mask has shape {first_mask_size}, but head mask {h} has'
                f' shape {mask.masks[h].shape}. All head masks must have the same'
                ' shape.')

    # Uniquify the masks: assign a unique ID to every unique mask.

    def assign_unique_ids(objects):
        id_map = collections.defaultdict(lambda: len(id_map))
        return {obj: id_map[obj] for obj in objects}

    unique_masks_dict: dict[Mask, int] = assign_unique_ids(head_mask for head_mask in mask.masks)

    # Build a mapping of heads to unique masks and masks to unique masks.

    head_to_mask_id: list[int] = [0] * head_count
    head_shard_to_mask_ids: list[set[int]] = [set() for _ in range(head_shards)]
    mask_id_to_heads: list[list[int]] = [[] for _ in range(len(unique_masks_dict))]
    mask_id_to_head_shards: list[set[int]] = [set() for _ in range(len(unique_masks_dict))]

    for head in range(head_count):
        mask_id = unique_masks_dict[mask.masks[head]]
        head_to_mask_id[head] = mask_id
        head_shard = head // heads_per_shard
        head_shard_to_mask_ids[head_shard].add(mask_id)
        mask_id_to_heads[mask_id].append(head)
        mask_id_to_head_shards[mask_id].add(head_shard)

    # If we have at most one unique mask per each head shard, then we can broadcast
    # the mask to all the heads in the shard. This is the common case.
    # If we have more than one mask in each head shard, then the optimization
    # cannot kick in and we use one mask for each head.
    max_masks_per_head_shard = max(len(x) for x in head_shard_to_mask_ids)
    masks_per_head_shard = 1 if max_masks_per_head_shard == 1 else heads_per_shard

    unique_masks = [pair[0] for pair in sorted(unique_masks_dict.items(), key=lambda x: x[1])]

    partial_mask_block_ids: dict[_HashableNDArray, int] = collections.defaultdict(
        lambda: len(partial_mask_block_ids))
    block_id_to_block_coords: dict[int, list[tuple[int, ...]]] = collections.defaultdict(list)

    # Shape of the block_mask, mask_next and data_next fields of MaskInfo.
    block_mask_shape = (
        head_shards if masks_per_head_shard == 1 else head_count,
        q_blocks_count,
        kv_blocks_count,
    )

    block_mask = np.zeros(block_mask_shape, dtype=np.int32)

    def set_block_mask(mask_id: int, q_index: int, kv_index: int, value: int):
        if masks_per_head_shard == 1:
            for shard_index in mask_id_to_head_shards[mask_id]:
                block_mask[shard_index, q_index, kv_index] = value
        else:
            for head_index in mask_id_to_heads[mask_id]:
                block_mask[head_index, q_index, kv_index] = value

    q_sequence = None
    mask_function = None
    if len(unique_masks) == 1:
        unique_mask = unique_masks[0]
        # The mask object either define q_sequence and mask_function or none of
        # them.
        assert hasattr(unique_mask, 'q_sequence') == hasattr(unique_mask, 'mask_function')

        # If the mask object defines a q_sequence and a mask_function, then make use
        # of these in the kernel rather. This is preferable over loading the mask
        # from memory. When using a mask_function, then mask_next and
        # partial_mask_blocks are left undefined and not used in the kernel.
        if hasattr(unique_mask, 'q_sequence') and hasattr(unique_mask, 'mask_function'):
            q_sequence = unique_mask.q_sequence
            mask_function = unique_mask.mask_function

    # Identify the partial mask blocks and the value of the block mask for each
    # block. The partial mask blocks are "global" and uniquified.
    for mask_id, unique_mask in enumerate(unique_masks):
        for coords in np.ndindex((q_blocks_count, kv_blocks_count)):
            (q_index, kv_index) = coords
            chunk = unique_mask[(
                slice(q_index * q_block_size, (q_index + 1) * q_block_size),
                slice(kv_index * kv_block_size, (kv_index + 1) * kv_block_size),
            )]
            has_nonzero = chunk.any()
            if has_nonzero:
                all_nonzero = chunk.all()
                if not all_nonzero:
                    set_block_mask(mask_id, q_index, kv_index, 1)
                    partial_mask_block_id = partial_mask_block_ids[_HashableNDArray(chunk)]
                    for head_index in mask_id_to_heads[mask_id]:
                        block_id_to_block_coords[partial_mask_block_id].append(
                            (head_index,) + coords)
                else:
                    set_block_mask(mask_id, q_index, kv_index, 2)

    unique_partial_mask_blocks = [
        pair[0] for pair in sorted(partial_mask_block_ids.items(), key=lambda x: x[1])]

    # For each position in the in q, kv grid that contains a partial mask block
    # record the index of its partial mask block.
    coords_to_partial_mask_block_index = {}
    for partial_mask_block_id, coords in block_id_to_block_coords.items():
        for coo in coords:
            coords_to_partial_mask_block_index[coo] = partial_mask_block_id

    partial_mask_blocks = None
    has_mask_next = False
    if len(unique_partial_mask_blocks) == 1:
        partial_mask_blocks = [x.array for x in unique_partial_mask_blocks]
        partial_mask_blocks = partial_mask_blocks[0][None].astype(np.bool_)
        has_mask_next = True
    elif len(unique_partial_mask_blocks) > 1:
        partial_mask_blocks = [x.array for x in unique_partial_mask_blocks]
        partial_mask_blocks = np.stack(partial_mask_blocks, axis=0).astype(np.bool_)
        has_mask_next = True
    if is_dkv and partial_mask_blocks is not None:
        partial_mask_blocks = np.swapaxes(partial_mask_blocks, -1, -2)

    all_head_shards_identical = all(
        head_shard_to_mask_ids[0] == x and len(x) == 1 for x in head_shard_to_mask_ids)
    # When all the head shards are identical, we can process only one and
    # broadcast the result across all the head shards, this avoids redundant work.
    shards_to_process = 1 if all_head_shards_identical else head_shards

    # Iterate over the shards: the data indices are relative to the current
    # slice of the mask.

    q_sequence_axis = 1
    head_axis = 0

    # Collect mask_info shards along the head dimension, concatentate (or
    # broadcast) them after the loop.
    data_next_per_head_list, mask_next_per_head_list = [], []
    for head_shard in range(shards_to_process):
        # Collect mask_info shards along the q_sequence dimension, concatenate them
        # after the loop.
        data_next_sequence_slices, mask_next_sequence_slices = [], []
        for q_seq_len_shard in range(q_seq_shards):
            head_start = head_shard * heads_per_shard
            q_seq_len_shard_size = q_blocks_per_shard * q_block_size
            q_seq_len_start = q_seq_len_shard * q_seq_len_shard_size

            blocked_q_seq_len_start = q_seq_len_shard * q_blocks_per_shard
            blocked_q_seq_len_slice = slice(blocked_q_seq_len_start,
                                            (q_seq_len_shard + 1) * q_blocks_per_shard)

            if masks_per_head_shard == 1:
                unique_mask = unique_masks[head_to_mask_id[head_start]]
                unique_mask = MultiHeadMask((unique_mask,))
                current_mask = unique_mask
                mask_head_slice = slice(head_shard, head_shard + 1)
            else:
                current_mask = mask
                mask_head_slice = slice(head_start, (head_shard + 1) * heads_per_shard)

            # The current iteration of the loop processes a slice of the mask info
            # tensors of this shape:
            mask_info_slice_shape = (
                mask_head_slice.stop - mask_head_slice.start,
                blocked_q_seq_len_slice.stop - blocked_q_seq_len_slice.start,
                kv_blocks_count,
            )
            # Generate data_next and mask_next for the current slice.
            data_next_slice, mask_next_slice = _get_mask_info_for_shard(
                output_shape=mask_info_slice_shape,
                has_mask_next=has_mask_next,
                mask=current_mask,
                block_shape=block_shape,
                coords_to_partial_mask_block_index=coords_to_partial_mask_block_index,
                head_start=head_start,
                masks_per_head_shard=masks_per_head_shard,
                num_heads=1 if masks_per_head_shard == 1 else heads_per_shard,
                q_seq_start=q_seq_len_start,
                q_seq_shard_size=q_seq_len_shard_size,
                blocked_q_seq_start=blocked_q_seq_len_start,
                is_dkv=is_dkv,
            )
            data_next_sequence_slices.append(data_next_slice)
            mask_next_sequence_slices.append(mask_next_slice)

        # Concatenate the sequence shards.
        data_next_per_head = np.concatenate(data_next_sequence_slices, axis=q_sequence_axis)
        data_next_per_head_list.append(data_next_per_head)
        if has_mask_next:
            mask_next_per_head = np.concatenate(mask_next_sequence_slices, axis=q_sequence_axis)
            mask_next_per_head_list.append(mask_next_per_head)

    # Concatenate (or broadcast) the head shards.
    mask_next = None
    if all_head_shards_identical:
        assert len(data_next_per_head_list) == 1
        data_next_shard = data_next_per_head_list[0]
        assert data_next_shard.shape == (1, q_blocks_count, kv_blocks_count)
        data_next = np.broadcast_to(data_next_shard,
                                    (head_shards, q_blocks_count, kv_blocks_count))
        if has_mask_next:
            assert len(mask_next_per_head_list) == 1
            mask_next_shard = mask_next_per_head_list[0]
            assert mask_next_shard.shape == (1, q_blocks_count, kv_blocks_count)
            mask_next = np.broadcast_to(mask_next_shard,
                                        (head_shards, q_blocks_count, kv_blocks_count))
    else:
        data_next = np.concatenate(data_next_per_head_list, axis=head_axis)
        if has_mask_next:
            mask_next = np.concatenate(mask_next_per_head_list, axis=head_axis)

    # Shrink the width of the mask info when possible.
    if shrink_grid and block_mask.shape[0] == head_shards and len(unique_masks) == 1:
        rows_per_q_shard = block_mask.shape[1] // q_seq_shards
        block_mask_shards = []
        data_next_shards = []
        mask_next_shards = []

        # Slice the mask info arrays along the Q dimension. This simulates Q
        # sharding and enabled shrinking each Q shard of the MaskInfo arrays
        # independently.
        for q_seq_len_shard in range(q_seq_shards):
            rows = slice(q_seq_len_shard * rows_per_q_shard,
                         (q_seq_len_shard + 1) * rows_per_q_shard)
            current_block_mask = block_mask[:, rows, :]
            current_data_next = data_next[:, rows, :]
            current_mask_next = mask_next[:, rows, :] if mask_next is not None else None

            shrink_function = _shrink_mask_info_dkv if is_dkv else _shrink_mask_info

            current_block_mask, current_data_next, current_mask_next = shrink_function(
                block_mask=current_block_mask,
                data_next=current_data_next,
                mask_next=current_mask_next,
                head_shards=head_shards,
            )

            assert current_block_mask.size > 0
            assert current_data_next.size > 0
            assert current_mask_next is None or current_mask_next.size > 0
            assert current_block_mask.shape == current_data_next.shape
            assert (current_mask_next is None
                    or current_block_mask.shape == current_mask_next.shape)

            block_mask_shards.append(current_block_mask)
            data_next_shards.append(current_data_next)
            mask_next_shards.append(current_mask_next)

        if q_seq_shards == 1:
            block_mask = block_mask_shards[0]
            data_next = data_next_shards[0]
            mask_next = mask_next_shards[0]
        else:
            # Since shrinking happens independently for each shard along Q we might
            # end up with uneven mask info shards. Insert padding where necessary to
            # maintain the SPMD paradigm.
            padding_axis = 1 if is_dkv else 2

            max_size = max(x.shape[padding_axis] for x in block_mask_shards)
            padded_block_mask_shards = []
            padded_data_next_shards = []
            padded_mask_next_shards = []
            assert len(block_mask_shards) == len(data_next_shards) == len(mask_next_shards)
            for (current_block_mask, current_data_next,
                 current_mask_next) in zip(block_mask_shards, data_next_shards, mask_next_shards):
                # For dKV shrinking happens along axis Q (the rows of MaskInfo), for
                # fwd and dQ shrinking happens along axis KV (the columns of MaskInfo).
                if is_dkv:
                    pad_width = ((0, 0), (0, max_size - current_block_mask.shape[padding_axis]),
                                 (0, 0))
                else:
                    pad_width = ((0, 0), (0, 0),
                                 (0, max_size - current_block_mask.shape[padding_axis]))

                padded_block_mask_shards.append(
                    np.pad(current_block_mask, pad_width=pad_width, constant_values=0))
                # By padding data_next and mask_next with 'edge' policy we avoid
                # fetching new blocks thanks to 'immediate revisiting'.
                padded_data_next_shards.append(
                    np.pad(current_data_next, pad_width=pad_width, mode='edge'))
                if current_mask_next is not None:
                    padded_mask_next_shards.append(
                        np.pad(current_mask_next, pad_width=pad_width, mode='edge'))

            block_mask = np.concatenate(padded_block_mask_shards, axis=1)
            data_next = np.concatenate(padded_data_next_shards, axis=1)
            mask_next = np.concatenate(padded_mask_next_shards, axis=1)

    if downcast_smem_data:
        data_next = _downcast_to_small_type(data_next)
        block_mask = _downcast_to_small_type(block_mask)
        if mask_next is not None:
            mask_next = _downcast_to_small_type(mask_next)

    assert (mask_function is not None) == (q_sequence is not None)
    # When the mask can be computed inside the kernel with a mask_function,
    # there is no need to load it from memory. So mask_next and
    # partial_mask_blocks are unused.
    return (
        MaskInfo(
            data_next=data_next,
            mask_next=mask_next if mask_function is None else None,
            block_mask=block_mask,
            partial_mask_blocks=partial_mask_blocks if mask_function is None else None,
            q_sequence=q_sequence,
        ),
        mask_function,
    )


def _shrink_mask_info(*, block_mask: np.ndarray, data_next: np.ndarray,
                      mask_next: np.ndarray, head_shards: int):
    assert block_mask.ndim == 3
    assert data_next.ndim == 3
    assert mask_next is None or mask_next.ndim == 3

    head_block_mask = block_mask[0]

    grouped_non_zero_cols = []
    # Group non-zero columns based on which row they belong to.
    for row_index in range(head_block_mask.shape[0]):
        head_block_mask_row = head_block_mask[row_index, :]
        non_zero_cols = np.nonzero(head_block_mask_row)[0]
        grouped_non_zero_cols.append(non_zero_cols)

    # Pad each row in the non-zero indices to match the width of the longest
    # row. This avoids having jagged rows.
    max_non_zero_cols = max(len(x) for x in grouped_non_zero_cols)
    padded_non_zero_cols = []
    padding = -1
    for row in grouped_non_zero_cols:
        padded_non_zero_cols.append(
            np.pad(row, pad_width=(0, max_non_zero_cols - row.shape[0]),
                   constant_values=padding))

    padded_non_zero_cols = np.stack(padded_non_zero_cols, axis=0)

    assert padded_non_zero_cols.shape[0] == block_mask.shape[1], (
        padded_non_zero_cols.shape, block_mask.shape)

    # For each row of array, select the columns indices in padded_non_zero_cols,
    # ignore padding.
    def select_cols(array):
        assert array.ndim == 2
        assert padded_non_zero_cols.ndim == 2
        assert array.shape[0] == padded_non_zero_cols.shape[0]
        assert array.shape[1] >= padded_non_zero_cols.shape[1]
        selected_rows = []
        for row in range(array.shape[0]):
            col = padded_non_zero_cols[row]
            selected = array[row][col]
            selected = np.where(col != padding, selected, 0)
            selected_rows.append(selected)

        return np.stack(selected_rows, axis=0)

    return _slice_mask_info(block_mask=block_mask, data_next=data_next, mask_next=mask_next,
                            head_shards=head_shards, slice_function=select_cols)


def _shrink_mask_info_dkv(*, block_mask: np.ndarray, data_next: np.ndarray,
                          mask_next: np.ndarray, head_shards: int):
    assert block_mask.ndim == 3
    assert data_next.ndim == 3
    assert mask_next is None or mask_next.ndim == 3

    head_block_mask = block_mask[0]
    grouped_non_zero_rows = []
    # Group non-zero rows based on which column they belong to.
    for col_index in range(head_block_mask.shape[1]):
        col = head_block_mask[:, col_index]
        non_zero_rows = np.nonzero(col)[0]
        grouped_non_zero_rows.append(non_zero_rows)

    # Pad each col in the non-zero indices to match the height of the longest
    # col. This avoids having jagged cols.
    max_non_zero_rows = max(len(x) for x in grouped_non_zero_rows)
    padded_non_zero_rows = []
    padding = -1
    for col in grouped_non_zero_rows:
        padded_non_zero_rows.append(
            np.pad(col, pad_width=(max_non_zero_rows - col.shape[0], 0),
                   constant_values=padding))

    padded_non_zero_rows = np.stack(padded_non_zero_rows, axis=1)

    assert padded_non_zero_rows.shape[1] == block_mask.shape[2], (
        padded_non_zero_rows.shape, block_mask.shape)

    # For each col of array, select the rows indices in padded_non_zero_rows,
    # ignore padding.
    def select_rows(array):
        assert array.ndim == 2
        assert padded_non_zero_rows.ndim == 2
        assert array.shape[1] == padded_non_zero_rows.shape[1]
        assert array.shape[0] >= padded_non_zero_rows.shape[0]
        selected_cols = []
        for col in range(array.shape[1]):
            row = padded_non_zero_rows[:, col]
            selected = array[:, col][row]
            selected = np.where(row != padding, selected, 0)
            selected_cols.append(selected)

        return np.stack(selected_cols, axis=1)

    return _slice_mask_info(block_mask=block_mask, data_next=data_next, mask_next=mask_next,
                            head_shards=head_shards, slice_function=select_rows)


def _slice_mask_info(*, block_mask: np.ndarray, data_next: np.ndarray, mask_next: np.ndarray,
                     head_shards: int, slice_function: Callable[[np.ndarray], np.ndarray]):
    new_block_mask = []
    new_data_next = []
    new_mask_next = []
    for head_shard in range(head_shards):
        head_block_mask = block_mask[head_shard]
        head_block_mask = slice_function(head_block_mask)
        new_block_mask.append(head_block_mask)

        head_data_next = data_next[head_shard]
        head_data_next = slice_function(head_data_next)
        new_data_next.append(head_data_next)

        if mask_next is not None:
            head_mask_next = mask_next[head_shard]
            head_mask_next = slice_function(head_mask_next)
            new_mask_next.append(head_mask_next)

    block_mask = np.stack(new_block_mask, axis=0)
    data_next = np.stack(new_data_next, axis=0)
    if mask_next is not None:
        mask_next = np.stack(new_mask_next, axis=0)

    return block_mask, data_next, mask_next


process_mask = functools.partial(_process_mask, is_dkv=False)
process_mask_dkv = functools.partial(_process_mask, is_dkv=True)

process_dynamic_mask = functools.partial(_process_dynamic_mask, is_dkv=False)
process_dynamic_mask_dkv = functools.partial(_process_dynamic_mask, is_dkv=True)


# --- tpu_splash_attention_mask_test.py, its cases with pytest's parameters ---

def _make_lazy_causal_mask(*args, **kwargs):
    mask = CausalMask(*args, **kwargs)
    return mask[:, :]


def _make_causal_mask(*args, **kwargs):
    return make_causal_mask(*args, **kwargs)


def _make_lazy_local_attention_mask(*args, **kwargs):
    mask = LocalMask(*args, **kwargs)
    return mask[:, :]


def _make_local_attention_mask(*args, **kwargs):
    return make_local_attention_mask(*args, **kwargs)


def _b(rows):
    return np.array(rows, dtype=np.bool_)


@pytest.mark.parametrize("make", [_make_lazy_causal_mask, _make_causal_mask])
def test_causal_mask(make):
    np.testing.assert_array_equal(make((1, 1)), _b([[1]]))
    np.testing.assert_array_equal(make((4, 4)), _b(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((4, 6)), _b(
        [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]]))
    np.testing.assert_array_equal(make((6, 4)), _b(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((4, 4), -1), _b(
        [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]))
    np.testing.assert_array_equal(make((4, 4), 1), _b(
        [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]))


@pytest.mark.parametrize("make", [_make_lazy_local_attention_mask, _make_local_attention_mask])
def test_local_attention_mask(make):
    np.testing.assert_array_equal(make((1, 1), (0, None), offset=0), _b([[1]]))
    np.testing.assert_array_equal(make((4, 4), (1, None), offset=0), _b(
        [[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]]))
    np.testing.assert_array_equal(make((4, 4), (None, 2), offset=0), _b(
        [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((4, 4), (1, 1), offset=0), _b(
        [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]))
    np.testing.assert_array_equal(make((4, 4), (1, 0), offset=0), _b(
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]))
    np.testing.assert_array_equal(make((4, 4), (0, 2), offset=0), _b(
        [[1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]]))


@pytest.mark.parametrize("make", [_make_lazy_local_attention_mask, _make_local_attention_mask])
def test_local_attention_mask_wide_rectangle(make):
    np.testing.assert_array_equal(make((4, 6), (1, None), offset=0), _b(
        [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((4, 6), (None, 2), offset=0), _b(
        [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((4, 6), (1, 1), offset=0), _b(
        [[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0]]))
    np.testing.assert_array_equal(make((4, 6), (1, 0), offset=0), _b(
        [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0], [0, 0, 1, 1, 0, 0]]))
    np.testing.assert_array_equal(make((4, 6), (0, 2), offset=0), _b(
        [[1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]))


@pytest.mark.parametrize("make", [_make_lazy_local_attention_mask, _make_local_attention_mask])
def test_local_attention_mask_tall_rectangle(make):
    np.testing.assert_array_equal(make((6, 4), (1, None), offset=0), _b(
        [[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(make((6, 4), (None, 2), offset=0), _b(
        [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]))
    np.testing.assert_array_equal(make((6, 4), (1, 1), offset=0), _b(
        [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(make((6, 4), (1, 0), offset=0), _b(
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(make((6, 4), (0, 2), offset=0), _b(
        [[1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]]))


def _compare_masks(dense_mask, lazy_mask, block_size):
    assert dense_mask.shape == lazy_mask.shape

    *prefix, width, height = dense_mask.shape

    assert width % block_size[0] == 0
    assert height % block_size[1] == 0

    full_lazy_mask = lazy_mask[(*[slice(p) for p in prefix], slice(None), slice(None))]
    np.testing.assert_array_equal(dense_mask, full_lazy_mask)
    for i, j in np.ndindex(width // block_size[0], height // block_size[1]):
        indexer = (
            *[slice(p) for p in prefix],
            slice(i * block_size[0], (i + 1) * block_size[0]),
            slice(j * block_size[1], (j + 1) * block_size[1]),
        )
        np.testing.assert_array_equal(dense_mask[indexer], lazy_mask[indexer])


@pytest.mark.parametrize("block_size", [(256, 256), (256, 128), (128, 256)])
@pytest.mark.parametrize("shape", [(1024, 1024), (1024, 2048), (2048, 1024)])
def test_lazy_causal_mask_chunking(block_size, shape):
    _compare_masks(make_causal_mask(shape=shape), CausalMask(shape), block_size)


@pytest.mark.parametrize("block_size,shape,window_size,offset", [
    ((256, 256), (1024, 1024), (128, None), 0),
    ((256, 128), (1024, 1024), (128, None), 16),
    ((128, 256), (1024, 1024), (128, 256), 16),
    ((256, 128), (1024, 1024), (None, 256), 32),
    ((256, 128), (1024, 2048), (128, 256), 0),
    ((128, 256), (1024, 2048), (None, 256), 32),
    ((256, 256), (2048, 1024), (128, None), 0),
    ((128, 256), (2048, 1024), (128, 256), 16),
])
def test_lazy_local_mask_chunking(block_size, shape, window_size, offset):
    _compare_masks(make_local_attention_mask(shape, window_size, offset=offset),
                   LocalMask(shape, window_size, offset), block_size)


@pytest.mark.parametrize("shape,chunk_size", [((256, 256), 64), ((512, 256), 128),
                                              ((256, 512), 96)])
def test_lazy_chunked_causal_mask(shape, chunk_size):
    _compare_masks(make_chunk_attention_mask(shape, chunk_size),
                   ChunkedCausalMask(shape, chunk_size), (128, 128))
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        ChunkedCausalMask(shape, 0)


def test_using_logical_operators_raises_exception():
    mask_1 = NumpyMask(make_random_mask((256, 256), 0.5, seed=1))
    mask_2 = NumpyMask(make_random_mask((256, 256), 0.5, seed=2))

    with pytest.raises(NotImplementedError):
        res = mask_1 or mask_2
        del res

    with pytest.raises(NotImplementedError):
        res = mask_1 and mask_2
        del res


@pytest.mark.parametrize("shape", [(256, 256), (512, 256)])
def test_lazy_mask_or_and(shape):
    mask_1 = make_random_mask(shape, 0.5, seed=1)
    mask_2 = make_random_mask(shape, 0.5, seed=2)

    _compare_masks(np.logical_or(mask_1, mask_2), NumpyMask(mask_1) | NumpyMask(mask_2),
                   (256, 256))
    _compare_masks(np.logical_and(mask_1, mask_2), NumpyMask(mask_1) & NumpyMask(mask_2),
                   (256, 256))


@pytest.mark.parametrize("shape", [(256, 256), (512, 256)])
def test_lazy_multi_head_mask(shape):
    mask_1 = make_random_mask(shape, 0.5, seed=1)
    mask_2 = make_random_mask(shape, 0.5, seed=2)

    lazy_multi_head = MultiHeadMask((NumpyMask(mask_1), NumpyMask(mask_2)))
    dense = np.stack((mask_1, mask_2), axis=0)

    _compare_masks(dense, lazy_multi_head, (256, 256))


@pytest.mark.parametrize("shape", [(256, 256), (512, 256)])
def test_lazy_full_mask(shape):
    _compare_masks(np.ones(shape, dtype=np.bool_), FullMask(shape), (256, 256))


# SplashAttentionMaskInfoTest: the construction of MaskInfo from Mask

def _assert_mask_info_match(actual, expected):

    def assert_array_is_positive(array):
        if array is None:
            return
        assert np.all(array >= 0)

    assert_array_is_positive(actual.mask_next)
    assert_array_is_positive(actual.partial_mask_blocks)
    assert_array_is_positive(actual.block_mask)
    assert_array_is_positive(actual.data_next)

    assert (actual.data_next is not None) == (expected.data_next is not None)
    assert (actual.block_mask is not None) == (expected.block_mask is not None)
    assert (actual.mask_next is not None) == (expected.mask_next is not None)
    assert (actual.partial_mask_blocks is not None) == (expected.partial_mask_blocks is not None)
    assert (actual.q_sequence is not None) == (expected.q_sequence is not None)

    if actual.partial_mask_blocks is not None:
        np.testing.assert_array_equal(actual.partial_mask_blocks, expected.partial_mask_blocks,
                                      err_msg="partial_mask_blocks", verbose=True)

    if actual.q_sequence is not None:
        np.testing.assert_array_equal(actual.q_sequence, expected.q_sequence,
                                      err_msg="q_sequence", verbose=True)

    np.testing.assert_array_equal(actual.block_mask, expected.block_mask,
                                  err_msg="block_mask", verbose=True)
    assert actual.block_mask.dtype == expected.block_mask.dtype

    if actual.data_next is not None and actual.block_mask is not None:
        assert actual.data_next.shape == actual.block_mask.shape

    if actual.block_mask is not None:
        is_non_zero_block = np.where(expected.block_mask > 0, True, False)
        np.testing.assert_array_equal(np.where(is_non_zero_block, actual.data_next, -1),
                                      expected.data_next, err_msg="data_next", verbose=True)

    if actual.mask_next is not None:
        is_partial_block = np.where(expected.block_mask == 1, True, False)
        np.testing.assert_array_equal(np.where(is_partial_block, actual.mask_next, -1),
                                      expected.mask_next, err_msg="mask_next", verbose=True)


def _process_both(*args, **kwargs):
    mask_info, mask_function = process_mask(*args, **kwargs)
    mask_info_dkv, dkv_mask_function = process_mask_dkv(*args, **kwargs)
    assert mask_function == dkv_mask_function
    return mask_info, mask_info_dkv, mask_function


def _i8(rows):
    return np.array(rows, dtype=np.int8)


_expected_full_block_mask = _i8([[2, 2, 2, 2]] * 4)
_expected_full_data_next = _i8([[0, 1, 2, 3]] * 4)
_expected_full_data_next_dkv = _i8([[0] * 4, [1] * 4, [2] * 4, [3] * 4])


# The mask_next array for a full mask is typically empty. The exception to
# this is when one head has a full mask and other heads have non-full masks.
# In that case the mask_next array is full, but none of its elements are
# actually relevant (they are never read).
def _expected_full_mask_next():
    return _i8([[-1] * 4] * 4)


_expected_causal_block_mask = _i8([[1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0], [2, 2, 2, 1]])
_expected_causal_data_next = _i8([[0, -1, -1, -1], [0, 1, -1, -1], [0, 1, 2, -1],
                                  [0, 1, 2, 3]])
_expected_causal_data_next_dkv = _i8([[0, -1, -1, -1], [1, 1, -1, -1], [2, 2, 2, -1],
                                      [3, 3, 3, 3]])


def _expected_causal_mask_next(mask_base_index):
    zero = mask_base_index
    return _i8([[zero, -1, -1, -1], [-1, zero, -1, -1], [-1, -1, zero, -1],
                [-1, -1, -1, zero]])


_expected_local_block_mask = _i8([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]])
_expected_local_data_next = _i8([[0, 1, -1, -1], [0, 1, 2, -1], [-1, 1, 2, 3],
                                 [-1, -1, 2, 3]])
_expected_local_data_next_dkv = _i8([[0, 0, -1, -1], [1, 1, 1, -1], [-1, 2, 2, 2],
                                     [-1, -1, 3, 3]])


def _expected_local_mask_next(mask_base_index):
    zero = mask_base_index
    one = mask_base_index + 1
    two = mask_base_index + 2
    return _i8([[zero, one, -1, -1], [two, zero, one, -1], [-1, two, zero, one],
                [-1, -1, two, zero]])


_expected_local_mask_next_dkv = _expected_local_mask_next


def _causal(sequence_lengths, is_lazy_mask):
    if is_lazy_mask:
        return CausalMask(sequence_lengths)
    return NumpyMask(make_causal_mask(sequence_lengths))


def _local(sequence_lengths, window_size, is_lazy_mask):
    if is_lazy_mask:
        return LocalMask(sequence_lengths, window_size=window_size, offset=0)
    return NumpyMask(make_local_attention_mask(sequence_lengths, window_size=window_size,
                                               offset=0))


def _tril_block(block_shape):
    return np.expand_dims(np.tril(np.ones(block_shape, dtype=np.int32)), 0)


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_full_mask(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)

    if is_lazy_mask:
        full_mask = MultiHeadMask((FullMask(sequence_lengths),))
    else:
        full_mask = MultiHeadMask((NumpyMask(np.ones(sequence_lengths, dtype=np.bool_)),))

    mask_info, mask_info_dkv, mask_function = _process_both(full_mask, block_shape)
    assert mask_function is None

    _assert_mask_info_match(mask_info, MaskInfo(
        _expected_full_data_next[None], None, _expected_full_block_mask[None], None, None))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        _expected_full_data_next_dkv[None], None, _expected_full_block_mask[None], None, None))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_two_causal_masks(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    causal_mask = _causal(sequence_lengths, is_lazy_mask)
    multi_head = MultiHeadMask((causal_mask, causal_mask))

    mask_info, mask_info_dkv, mask_function = _process_both(multi_head, block_shape)
    assert (mask_function is not None) == is_lazy_mask

    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None
    _assert_mask_info_match(mask_info, MaskInfo(
        _expected_causal_data_next[None],
        _expected_causal_mask_next(0)[None] if not is_lazy_mask else None,
        _expected_causal_block_mask[None],
        _tril_block(block_shape) if not is_lazy_mask else None,
        q_sequence))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        _expected_causal_data_next_dkv[None],
        _expected_causal_mask_next(0)[None] if not is_lazy_mask else None,
        _expected_causal_block_mask[None],
        _tril_block(block_shape).swapaxes(-1, -2) if not is_lazy_mask else None,
        q_sequence))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_rectangular_wide_causal_mask(is_lazy_mask):
    sequence_lengths = (64, 128)
    block_shape = (16, 16)
    multi_head = MultiHeadMask((_causal(sequence_lengths, is_lazy_mask),))

    mask_info, mask_info_dkv, mask_function = _process_both(multi_head, block_shape)
    assert (mask_function is not None) == is_lazy_mask

    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None
    _assert_mask_info_match(mask_info, MaskInfo(
        _expected_causal_data_next[None],
        _expected_causal_mask_next(0)[None] if not is_lazy_mask else None,
        _expected_causal_block_mask[None],
        _tril_block(block_shape) if not is_lazy_mask else None,
        q_sequence))

    pad = [-1] * 4
    expected_causal_data_next_dkv = _i8([[
        [0, -1, -1, -1] + pad, [1, 1, -1, -1] + pad, [2, 2, 2, -1] + pad, [3, 3, 3, 3] + pad]])
    expected_causal_mask_next_dkv = _i8([[
        [0, -1, -1, -1] + pad, [-1, 0, -1, -1] + pad, [-1, -1, 0, -1] + pad,
        [-1, -1, -1, 0] + pad]])
    zeros = [0] * 4
    expected_causal_block_mask_dkv = _i8([[
        [1, 0, 0, 0] + zeros, [2, 1, 0, 0] + zeros, [2, 2, 1, 0] + zeros,
        [2, 2, 2, 1] + zeros]])
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        expected_causal_data_next_dkv,
        expected_causal_mask_next_dkv if not is_lazy_mask else None,
        expected_causal_block_mask_dkv,
        _tril_block(block_shape).swapaxes(-1, -2) if not is_lazy_mask else None,
        q_sequence))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_rectangular_tall_causal_mask(is_lazy_mask):
    sequence_lengths = (128, 64)
    block_shape = (16, 16)
    multi_head = MultiHeadMask((_causal(sequence_lengths, is_lazy_mask),))

    mask_info, mask_info_dkv, mask_function = _process_both(multi_head, block_shape)
    assert (mask_function is not None) == is_lazy_mask

    expected_causal_data_next = _i8([[
        [0, -1, -1, -1], [0, 1, -1, -1], [0, 1, 2, -1]] + [[0, 1, 2, 3]] * 5])
    expected_causal_mask_next = _i8([[
        [0, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1], [-1, -1, -1, 0]]
        + [[-1, -1, -1, -1]] * 4])
    expected_causal_block_mask = _i8([[
        [1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0], [2, 2, 2, 1]] + [[2, 2, 2, 2]] * 4])
    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None
    _assert_mask_info_match(mask_info, MaskInfo(
        expected_causal_data_next,
        expected_causal_mask_next if not is_lazy_mask else None,
        expected_causal_block_mask,
        _tril_block(block_shape) if not is_lazy_mask else None,
        q_sequence))

    expected_causal_data_next_dkv = _i8([[
        [0, -1, -1, -1], [1, 1, -1, -1], [2, 2, 2, -1], [3, 3, 3, 3], [4, 4, 4, 4],
        [5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7]]])
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        expected_causal_data_next_dkv,
        expected_causal_mask_next if not is_lazy_mask else None,
        expected_causal_block_mask,
        _tril_block(block_shape).swapaxes(-1, -2) if not is_lazy_mask else None,
        q_sequence))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_local_mask(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8
    multi_head = MultiHeadMask((_local(sequence_lengths, (window_size, window_size),
                                       is_lazy_mask),))

    mask_info, mask_info_dkv, mask_function = _process_both(multi_head, block_shape)
    # a lazy LocalMask is computed in the kernel (JAX's mask library made it a
    # _ComputableMask after its test was written): no partial blocks
    assert (mask_function is not None) == is_lazy_mask
    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None

    expected_partial_mask_blocks = np.stack([
        np.triu(np.tri(*block_shape, window_size, dtype=np.int32), -window_size),
        np.tri(*block_shape, -window_size, dtype=np.int32),
        np.triu(np.ones(block_shape, dtype=np.int32), window_size),
    ])

    _assert_mask_info_match(mask_info, MaskInfo(
        _i8([[[0, 1, -1], [0, 1, 2], [1, 2, 3], [2, 3, -1]]]),
        _i8([[[0, 1, -1], [2, 0, 1], [2, 0, 1], [2, 0, -1]]]) if not is_lazy_mask else None,
        _i8([[[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]]]),
        expected_partial_mask_blocks if not is_lazy_mask else None, q_sequence))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        _i8([[[-1, 0, 1, -1], [0, 1, 2, 2], [1, 2, 3, 3]]]),
        _i8([[[-1, 1, 1, -1], [0, 0, 0, 1], [2, 2, 2, 0]]]) if not is_lazy_mask else None,
        _i8([[[0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]]),
        expected_partial_mask_blocks.swapaxes(-1, -2) if not is_lazy_mask else None,
        q_sequence))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_local_mask_narrow(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8
    multi_head = MultiHeadMask((_local(sequence_lengths, (window_size, 0), is_lazy_mask),))

    mask_info, mask_info_dkv, mask_function = _process_both(multi_head, block_shape)
    assert (mask_function is not None) == is_lazy_mask
    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None

    expected_partial_mask_blocks = np.stack([
        np.triu(np.tri(*block_shape, 0, dtype=np.int32), -window_size),
        np.triu(np.ones(block_shape, dtype=np.int32), window_size),
    ])

    _assert_mask_info_match(mask_info, MaskInfo(
        _i8([[[0, -1], [0, 1], [1, 2], [2, 3]]]),
        _i8([[[0, -1], [1, 0], [1, 0], [1, 0]]]) if not is_lazy_mask else None,
        _i8([[[1, 0], [1, 1], [1, 1], [1, 1]]]),
        expected_partial_mask_blocks if not is_lazy_mask else None, q_sequence))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        _i8([[[0, 1, 2, -1], [1, 2, 3, 3]]]),
        _i8([[[0, 0, 0, -1], [1, 1, 1, 0]]]) if not is_lazy_mask else None,
        _i8([[[1, 1, 1, 0], [1, 1, 1, 1]]]),
        expected_partial_mask_blocks.swapaxes(-1, -2) if not is_lazy_mask else None,
        q_sequence))


def _four_partial_blocks(block_shape, window_size):
    return np.stack([
        np.tril(np.ones(block_shape, dtype=np.int32)),
        np.triu(np.tri(*block_shape, window_size, dtype=np.int32), -window_size),
        np.tri(*block_shape, -window_size, dtype=np.int32),
        np.triu(np.ones(block_shape, dtype=np.int32), window_size),
    ])


@pytest.mark.parametrize("is_lazy_mask", [True, False])
@pytest.mark.parametrize("shards", ["head", "q_seq"])
def test_two_shards_one_causal_one_local(is_lazy_mask, shards):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8
    mask = MultiHeadMask((_causal(sequence_lengths, is_lazy_mask),
                          _local(sequence_lengths, (window_size, window_size), is_lazy_mask)))

    kw = dict(head_shards=2) if shards == "head" else dict(q_seq_shards=2)
    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, **kw)
    assert mask_function is None

    expected_partial_mask_blocks = _four_partial_blocks(block_shape, window_size)
    _assert_mask_info_match(mask_info, MaskInfo(
        np.stack([_expected_causal_data_next, _expected_local_data_next]),
        np.stack([_expected_causal_mask_next(0), _expected_local_mask_next(1)]),
        np.stack([_expected_causal_block_mask, _expected_local_block_mask]),
        expected_partial_mask_blocks, None))

    if shards == "head":
        expected_data_next_dkv = np.stack([_expected_causal_data_next_dkv,
                                           _expected_local_data_next_dkv])
    else:
        # the dkv data indices are relative to each q shard
        expected_data_next_dkv = _i8([
            [[0, -1, -1, -1], [1, 1, -1, -1], [0, 0, 0, -1], [1, 1, 1, 1]],
            [[0, 0, -1, -1], [1, 1, 1, -1], [-1, 0, 0, 0], [-1, -1, 1, 1]],
        ])
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        expected_data_next_dkv,
        np.stack([_expected_causal_mask_next(0), _expected_local_mask_next_dkv(1)]),
        np.stack([_expected_causal_block_mask, _expected_local_block_mask]),
        expected_partial_mask_blocks.swapaxes(-1, -2), None))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_two_head_shards_causal_full(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    if is_lazy_mask:
        full_mask = FullMask(sequence_lengths)
    else:
        full_mask = NumpyMask(np.ones(sequence_lengths, dtype=np.bool_))
    mask = MultiHeadMask((_causal(sequence_lengths, is_lazy_mask), full_mask))

    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, head_shards=2)
    assert mask_function is None

    expected_block_mask = np.stack([_expected_causal_block_mask, _expected_full_block_mask])
    expected_mask_next = np.stack([_expected_causal_mask_next(0), _expected_full_mask_next()])
    _assert_mask_info_match(mask_info, MaskInfo(
        np.stack([_expected_causal_data_next, _expected_full_data_next]),
        expected_mask_next, expected_block_mask, _tril_block(block_shape), None))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        np.stack([_expected_causal_data_next_dkv, _expected_full_data_next_dkv]),
        expected_mask_next, expected_block_mask, _tril_block(block_shape).swapaxes(-1, -2),
        None))


def test_two_qseq_shards_causal_local_stacked():
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8

    causal_mask = make_causal_mask(sequence_lengths)
    local_mask = make_local_attention_mask(sequence_lengths,
                                           window_size=(window_size, window_size), offset=0)
    mask = MultiHeadMask((NumpyMask(np.concatenate((causal_mask, local_mask), axis=0)),))

    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, q_seq_shards=2)
    assert mask_function is None

    expected_block_mask = np.concatenate([
        _expected_causal_block_mask,
        _i8([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 0, 0]])])
    expected_data_next = np.concatenate([
        _expected_causal_data_next,
        _i8([[0, 1, -1, -1], [0, 1, 2, -1], [1, 2, 3, -1], [2, 3, -1, -1]])])
    expected_mask_next = np.concatenate([
        _expected_causal_mask_next(0),
        _i8([[1, 2, -1, -1], [3, 1, 2, -1], [3, 1, 2, -1], [3, 1, -1, -1]])])
    expected_partial_mask_blocks = _four_partial_blocks(block_shape, window_size)
    _assert_mask_info_match(mask_info, MaskInfo(
        expected_data_next[None], expected_mask_next[None], expected_block_mask[None],
        expected_partial_mask_blocks, None))

    expected_block_mask_dkv = np.concatenate([
        _expected_causal_block_mask,
        _i8([[0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]])])
    expected_data_next_dkv = np.concatenate([
        _expected_causal_data_next_dkv,
        _i8([[-1, 0, 1, -1], [0, 1, 2, 2], [1, 2, 3, 3], [-1, -1, -1, -1]])])
    expected_mask_next_dkv = np.concatenate([
        _expected_causal_mask_next(0),
        _i8([[-1, 2, 2, -1], [1, 1, 1, 2], [3, 3, 3, 1], [-1, -1, -1, -1]])])
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        expected_data_next_dkv[None], expected_mask_next_dkv[None],
        expected_block_mask_dkv[None], expected_partial_mask_blocks.swapaxes(-1, -2), None))


def test_two_qseq_shards_local_wide_local_narrow_stacked():
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8

    local_mask_wide = make_local_attention_mask(sequence_lengths,
                                                window_size=(window_size, window_size), offset=0)
    local_mask_narrow = make_local_attention_mask(sequence_lengths,
                                                  window_size=(window_size, 0), offset=0)
    mask = MultiHeadMask((NumpyMask(np.concatenate((local_mask_wide, local_mask_narrow),
                                                   axis=0)),))

    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, q_seq_shards=2)
    assert mask_function is None

    expected_block_mask = np.concatenate([
        _i8([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]]),
        _i8([[1, 0, 0], [1, 1, 0], [1, 1, 0], [1, 1, 0]])])
    expected_data_next = np.concatenate([
        _i8([[0, 1, -1], [0, 1, 2], [1, 2, 3], [2, 3, -1]]),
        _i8([[0, -1, -1], [0, 1, -1], [1, 2, -1], [2, 3, -1]])])
    expected_mask_next = np.concatenate([
        _i8([[0, 1, -1], [2, 0, 1], [2, 0, 1], [2, 0, -1]]),
        _i8([[3, -1, -1], [2, 3, -1], [2, 3, -1], [2, 3, -1]])])
    expected_partial_mask_blocks = np.stack([
        # Wide
        np.triu(np.tri(*block_shape, window_size, dtype=np.int32), -window_size),
        np.tri(*block_shape, -window_size, dtype=np.int32),
        np.triu(np.ones(block_shape, dtype=np.int32), window_size),
        # Narrow
        np.triu(np.tri(*block_shape, 0, dtype=np.int32), -window_size),
    ])
    _assert_mask_info_match(mask_info, MaskInfo(
        expected_data_next[None], expected_mask_next[None], expected_block_mask[None],
        expected_partial_mask_blocks, None))

    expected_block_mask_dkv = np.concatenate([
        _i8([[0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]),
        _i8([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]])])
    expected_data_next_dkv = np.concatenate([
        _i8([[-1, 0, 1, -1], [0, 1, 2, 2], [1, 2, 3, 3]]),
        _i8([[0, 1, 2, -1], [1, 2, 3, 3], [-1, -1, -1, -1]])])
    expected_mask_next_dkv = np.concatenate([
        _i8([[-1, 1, 1, -1], [0, 0, 0, 1], [2, 2, 2, 0]]),
        _i8([[3, 3, 3, -1], [2, 2, 2, 3], [-1, -1, -1, -1]])])
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        expected_data_next_dkv[None], expected_mask_next_dkv[None],
        expected_block_mask_dkv[None], expected_partial_mask_blocks.swapaxes(-1, -2), None))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_two_head_shards_causal_mask(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    causal_mask = _causal(sequence_lengths, is_lazy_mask)
    mask = MultiHeadMask((causal_mask, causal_mask))

    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, head_shards=2)
    assert (mask_function is not None) == is_lazy_mask

    q_sequence = np.arange(sequence_lengths[0], dtype=np.int32) if is_lazy_mask else None
    expected_mask_next = np.stack([_expected_causal_mask_next(0)] * 2)
    _assert_mask_info_match(mask_info, MaskInfo(
        np.stack([_expected_causal_data_next] * 2),
        expected_mask_next if not is_lazy_mask else None,
        np.stack([_expected_causal_block_mask] * 2),
        _tril_block(block_shape) if not is_lazy_mask else None, q_sequence))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        np.stack([_expected_causal_data_next_dkv] * 2),
        expected_mask_next if not is_lazy_mask else None,
        np.stack([_expected_causal_block_mask] * 2),
        _tril_block(block_shape).swapaxes(-1, -2) if not is_lazy_mask else None, q_sequence))


@pytest.mark.parametrize("is_lazy_mask", [True, False])
def test_two_head_shards_two_causal_two_local(is_lazy_mask):
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    window_size = 8
    causal_mask = _causal(sequence_lengths, is_lazy_mask)
    local_mask = _local(sequence_lengths, (window_size, window_size), is_lazy_mask)
    mask = MultiHeadMask((causal_mask, causal_mask, local_mask, local_mask))

    mask_info, mask_info_dkv, mask_function = _process_both(mask, block_shape, head_shards=2)
    assert mask_function is None

    expected_partial_mask_blocks = _four_partial_blocks(block_shape, window_size)
    expected_block_mask = np.stack([_expected_causal_block_mask, _expected_local_block_mask])
    expected_mask_next = np.stack([_expected_causal_mask_next(0), _expected_local_mask_next(1)])
    _assert_mask_info_match(mask_info, MaskInfo(
        np.stack([_expected_causal_data_next, _expected_local_data_next]), expected_mask_next,
        expected_block_mask, expected_partial_mask_blocks, None))
    _assert_mask_info_match(mask_info_dkv, MaskInfo(
        np.stack([_expected_causal_data_next_dkv, _expected_local_data_next_dkv]),
        expected_mask_next, expected_block_mask, expected_partial_mask_blocks.swapaxes(-1, -2),
        None))


def test_large_mask():
    # test_huge_mask's configuration (many head and q shards of a lazy causal
    # mask), at an eighth of its 32K tokens: a mask_function, no partial blocks
    sequence_length = (4 * 1024, 4 * 1024)
    block_shape = (256, 512)
    causal_mask = CausalMask(sequence_length, 0, shard_count=4)
    multi_head = MultiHeadMask((causal_mask,) * 64)

    mask_info, mask_function = process_mask(multi_head, block_shape, head_shards=8,
                                            q_seq_shards=4)
    assert mask_function is not None
    assert mask_info.block_mask is not None and mask_info.data_next is not None
    assert mask_info.mask_next is None and mask_info.partial_mask_blocks is None
    assert mask_info.q_sequence is not None
    assert mask_info.block_mask.shape[0] == 8	# one mask a head shard


def test_process_invalid_mask():
    """Masks with of an all-0 row causes undefined softmax, reject them."""
    sequence_length = 32

    invalid_mask = np.ones((4, sequence_length, sequence_length), dtype=np.bool_)
    invalid_mask[2, 14, :] = False

    invalid_mask = MultiHeadMask([NumpyMask(head_mask) for head_mask in invalid_mask])

    with pytest.raises(ValueError, match="softmax"):
        for mask in invalid_mask.masks:
            _check_mask(mask)


@pytest.mark.parametrize("is_dkv", [False, True])
def test_dynamic_mask(is_dkv):
    head_count, q_seq_len, kv_seq_len = 1, 8, 8
    block_shape = (2, 4)

    mask = jnp.stack([_make_causal_mask((q_seq_len, kv_seq_len))] * head_count)
    mask_info, _ = _process_dynamic_mask(mask, block_shape=block_shape, is_dkv=is_dkv)

    expected_partial_mask_blocks = np.array([
        [[1, 0, 0, 0], [1, 1, 0, 0]],
        [[0, 0, 0, 0], [0, 0, 0, 0]],
        [[1, 1, 1, 0], [1, 1, 1, 1]],
        [[0, 0, 0, 0], [0, 0, 0, 0]],
        [[1, 1, 1, 1], [1, 1, 1, 1]],
        [[1, 0, 0, 0], [1, 1, 0, 0]],
        [[1, 1, 1, 1], [1, 1, 1, 1]],
        [[1, 1, 1, 0], [1, 1, 1, 1]],
    ], dtype=np.int32)
    expected_data_next = _i8([[[0, 0], [0, 0], [0, 1], [0, 1]]])
    if is_dkv:
        expected_partial_mask_blocks = expected_partial_mask_blocks.swapaxes(-1, -2)
        expected_data_next = _i8([[[0, 0], [1, 0], [2, 2], [3, 3]]])

    np.testing.assert_array_equal(mask_info.block_mask,
                                  _i8([[[1, 0], [1, 0], [2, 1], [2, 1]]]))
    np.testing.assert_array_equal(mask_info.partial_mask_blocks, expected_partial_mask_blocks)
    np.testing.assert_array_equal(mask_info.mask_next, _i8([[[0, 0], [2, 0], [0, 5], [0, 7]]]))
    np.testing.assert_array_equal(mask_info.data_next, expected_data_next)


@pytest.mark.parametrize("is_dkv", [False, True])
def test_dynamic_mask_marks_the_same_blocks(is_dkv):
    # process_dynamic_mask on the jnp array of a mask: the same block kinds as
    # process_mask without shrinking, every block's data index, the partial
    # blocks where block_mask is 1
    sequence_lengths = (64, 64)
    block_shape = (16, 16)
    dense = np.stack([make_causal_mask(sequence_lengths),
                      make_local_attention_mask(sequence_lengths, (8, 8), offset=0)])
    info, fn = _process_dynamic_mask(jnp.array(dense), block_shape, is_dkv)
    assert fn is None
    static, _ = _process_mask(MultiHeadMask((NumpyMask(dense[0]), NumpyMask(dense[1]))),
                              block_shape, is_dkv, shrink_grid=False)
    np.testing.assert_array_equal(info.block_mask, static.block_mask)
    assert info.block_mask.dtype == np.int8
    blocks = np.asarray(info.partial_mask_blocks)
    for h, i, j in zip(*np.nonzero(np.asarray(info.block_mask) == 1)):
        block = blocks[int(np.asarray(info.mask_next)[h, i, j])]
        if is_dkv:
            block = block.T
        np.testing.assert_array_equal(block, dense[h, i * 16:(i + 1) * 16, j * 16:(j + 1) * 16])
    nonempty = np.asarray(info.block_mask) > 0
    want = np.broadcast_to(np.arange(4)[None, :, None] if is_dkv else np.arange(4)[None, None, :],
                           nonempty.shape)
    np.testing.assert_array_equal(np.asarray(info.data_next)[nonempty], want[nonempty])
