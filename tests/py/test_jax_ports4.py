# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU tests, fourth round (tests/pallas/
tpu_ops_test.py), each named after the test it ports, with a NumPy
reference: jnp.take_along_axis as the device's gather op."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu import lax

_rng = np.random.default_rng(4242)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


def _gather(x, idx, axis, mode=None, out_dtype=None, **kw):
    """A one-block kernel: o = jnp.take_along_axis(x, idx, axis, mode=...)."""
    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take_along_axis(x_ref[...], i_ref[...], axis, mode=mode, **kw)

    dt = out_dtype or x.dtype
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(idx.shape, dt))(x, idx)


# --- jnp.take_along_axis: dst[r, c] = x[r, idx[r, c]] (axis 1) ---

@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("mode", ["promise_in_bounds", None])
def test_dynamic_gather_along_axis(axis, mode):
    """tpu_ops_test.py OpsTest.test_dynamic_gather_along_axis: int32
    (8, 128), indices in range along either axis, both modes."""
    shape = (8, 128)
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    idx = _rng.integers(0, shape[axis], shape).astype(np.int32)
    out = _gather(x, idx, axis, mode)
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, axis=axis))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8])
@pytest.mark.parametrize("axis", [0, 1])
def test_dynamic_gather_along_axis_dtypes(dtype, axis):
    """test_dynamic_gather_along_axis in other dtypes (Pallas TPU takes
    32-bit ones; the device moves any element's bytes), NaN payloads kept."""
    shape = (16, 256)
    if dtype == np.float32:
        x = _normal(shape)
        x[3, 7] = np.float32("nan")
    else:
        x = _rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, shape).astype(dtype)
    idx = _rng.integers(0, shape[axis], shape).astype(np.int32)
    out = _gather(x, idx, axis)
    np.testing.assert_array_equal(out.view(np.uint8), np.take_along_axis(x, idx, axis).view(np.uint8))


def test_dynamic_gather_bf16():
    """bf16 elements gathered (the input given as its uint16 bits, the
    output a host bf16 array: compared as its bits)."""
    x = jax.to_bf16(_normal((8, 128)))
    idx = _rng.integers(0, 128, (8, 128)).astype(np.int32)
    out = _gather(x, idx, 1, out_dtype=jnp.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), np.take_along_axis(x, idx, axis=1))


@pytest.mark.parametrize("axis", [0, 1])
def test_take_along_axis_other_count(axis):
    """jnp's take_along_axis with fewer or more indices than the extent
    along the axis: the result has the indices' shape (top-k style)."""
    x = _normal((16, 256))
    ishape = (16, 128) if axis else (24, 256)
    idx = _rng.integers(0, x.shape[axis], ishape).astype(np.int32)
    out = _gather(x, idx, axis)
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, axis))


def test_take_along_axis_of_argmax():
    """The docstring's use: argmax(keepdims=True) then take_along_axis
    picks each row's maximum; argsort-free sorting by a permutation."""
    def kernel(x_ref, p_ref, m_ref, s_ref):
        x = x_ref[...]
        m_ref[...] = jnp.take_along_axis(x, jnp.argmax(x, axis=1, keepdims=True), axis=1)
        s_ref[...] = jnp.take_along_axis(x, p_ref[...], axis=-1)

    x = _normal((8, 128))
    perm = np.argsort(x, axis=1).astype(np.int32)
    m, s = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((8, 1), jnp.float32),
        jax.ShapeDtypeStruct((8, 128), jnp.float32)))(x, perm)
    np.testing.assert_array_equal(m, x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(s, np.sort(x, axis=1))


def test_take_along_axis_over_a_grid():
    """Blocks of a grid, each gathered along its rows: indices are
    block-local, as in a kernel they are."""
    x = _normal((64, 256))
    idx = _rng.integers(0, 128, (64, 256)).astype(np.int32)

    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take_along_axis(x_ref[...] * 2.0, i_ref[...], axis=1)

    spec = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    out = pl.pallas_call(kernel, grid=(4, 2), in_specs=[spec, spec], out_specs=spec,
                         out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x, idx)
    ref = np.concatenate([np.take_along_axis(2 * x[:, j:j + 128], idx[:, j:j + 128], 1)
                          for j in (0, 128)], axis=1)
    np.testing.assert_array_equal(out, ref)


# --- out-of-range indices: jnp's mode="fill", or a broken promise ---

def test_take_along_axis_fill_mode_out_of_range():
    """jnp.take_along_axis's default mode="fill": an index in [-n, 0)
    counts from the end, others outside give NaN (float32), the lowest
    value (int32), 255 (uint8); the same as jnp on the host here."""
    idx = _rng.integers(-160, 160, (8, 128)).astype(np.int32)
    idx[0, :4] = [-128, -129, 127, 128]
    bad = (idx < -128) | (idx >= 128)
    norm = np.where(idx < 0, idx + 128, idx)
    for x, fill in ((_normal((8, 128)), np.float32("nan")),
                    (_rng.integers(-1000, 1000, (8, 128)).astype(np.int32), np.iinfo(np.int32).min),
                    (_rng.integers(0, 255, (8, 128)).astype(np.uint8), 255)):
        out = _gather(x, idx, 1)
        ref = np.where(bad, fill, np.take_along_axis(x, np.where(bad, 0, norm), 1)).astype(x.dtype)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(jnp.take_along_axis(x, idx, axis=1), ref)
    assert bad.any() and (idx < 0).any()


def test_take_along_axis_fill_value():
    """An explicit fill_value (jnp's argument; Pallas on a TPU drops it),
    converted to the dtype, along axis 0."""
    x = _normal((8, 128))
    idx = _rng.integers(-2, 12, (8, 128)).astype(np.int32)
    out = _gather(x, idx, 0, fill_value=-1.5)
    bad = idx >= 8
    ref = np.where(bad, np.float32(-1.5),
                   np.take_along_axis(x, np.where(bad, 0, idx % 8), 0))
    np.testing.assert_array_equal(out, ref)
    out = _gather(x.astype(np.int32), idx, 0, fill_value=7)
    np.testing.assert_array_equal(out, np.where(bad, 7, np.take_along_axis(
        x.astype(np.int32), np.where(bad, 0, idx % 8), 0)))


def test_take_along_axis_gather_scatter_mode():
    """mode as lax.GatherScatterMode, as jnp takes it."""
    x = _normal((8, 128))
    idx = _rng.integers(0, 128, (8, 128)).astype(np.int32)
    for m in (lax.GatherScatterMode.PROMISE_IN_BOUNDS, lax.GatherScatterMode.FILL_OR_DROP):
        np.testing.assert_array_equal(_gather(x, idx, 1, m), np.take_along_axis(x, idx, 1))
    with pytest.raises(pl.TraceError, match="mode=.*CLIP"):
        _gather(x, idx, 1, lax.GatherScatterMode.CLIP)


def test_take_along_axis_broken_promise_fails_the_job():
    """mode="promise_in_bounds" with an index outside: on a TPU the result
    is undefined; the device fails the job naming the op and element."""
    x = _normal((8, 128))
    idx = np.zeros((8, 128), np.int32)
    idx[2, 5] = 128
    with pytest.raises(RuntimeError, match="gather index 128 outside src0's 128 columns.*row 2, col 5"):
        _gather(x, idx, 1, "promise_in_bounds")
    idx[2, 5] = -1		# not normalised under the promise
    with pytest.raises(RuntimeError, match="gather index -1 outside"):
        _gather(x, idx, 1, "promise_in_bounds")


def test_take_along_axis_refusals_name_the_construct():
    """clip and wrap modes, axis=None, 3-D values, float indices and
    indices that do not match the array in the other axis are refused."""
    x = _normal((8, 128))
    idx = _rng.integers(0, 128, (8, 128)).astype(np.int32)
    with pytest.raises(pl.TraceError, match="take_along_axis.mode='clip'.*'fill'"):
        _gather(x, idx, 1, "clip")
    with pytest.raises(pl.TraceError, match="axis=None"):
        _gather(x, idx, None)
    with pytest.raises(pl.TraceError, match="indices are float32, must be int32"):
        _gather(x, idx.astype(np.float32), 1, out_dtype=jnp.float32)
    with pytest.raises(pl.TraceError, match="differ in the other axis"):
        _gather(_normal((16, 128)), idx, 1)

    def kernel3(x_ref, i_ref, o_ref):
        o_ref[...] = jnp.take_along_axis(x_ref[...], i_ref[...], axis=1)

    with pytest.raises(pl.TraceError, match="take_along_axis of a 3-D value"):
        pl.pallas_call(kernel3, out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32))(
            _normal((2, 8, 128)), np.zeros((2, 8, 128), np.int32))
