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
tests/pallas/tpu_splash_attention_mask_test.py's cases. The masks and
MaskInfo are in tpuemu.pallas.ops.tpu.splash_attention
(splash_attention_mask.py, splash_attention_mask_info.py), imported here
by JAX's path (tpuemu.experimental...). test_jax_ports10.py runs the
kernel on these MaskInfos."""
from __future__ import annotations

import numpy as np
import pytest

import tpuemu.numpy as jnp
from tpuemu.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask import (
    CausalMask, ChunkedCausalMask, FullMask, LocalMask, MultiHeadMask, NumpyMask,
    make_causal_mask, make_chunk_attention_mask, make_local_attention_mask, make_random_mask)
from tpuemu.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask_info import (
    MaskInfo, _check_mask, _process_dynamic_mask, _process_mask, process_mask,
    process_mask_dkv)


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
