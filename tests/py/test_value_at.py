# SPDX-License-Identifier: MIT
"""A kernel's values updated and sliced as jnp's are: x.at[idx].set(y)
and its siblings, x[a:b:s] with a step, and the interleave
jnp.stack([...], axis=-1).reshape(..., n * k) (an in-kernel nibble
unpack). Each result is checked against NumPy's."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

X = np.arange(16 * 256, dtype=np.float32).reshape(16, 256) - 1000


def _run(kernel, out, *args, in_specs=None):
    kw = {} if in_specs is None else {"in_specs": in_specs}
    return pl.pallas_call(kernel, out_shape=out, **kw)(*args)


def _f32(shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


@pytest.mark.parametrize("idx", [
    (slice(None), slice(0, None, 2)),
    (slice(1, 15, 3), slice(5, None, 7)),
    (slice(None, None, 4),),
    (3, slice(0, 256, 128)),
    (slice(2, 9, 2), 17),
])
def test_stepped_slices_of_a_value(idx):
    want = (X * 2)[idx]

    def kernel(x_ref, o_ref):
        o_ref[...] = (x_ref[...] * 2)[idx].reshape(o_ref.shape)

    shape = want.shape if want.ndim == 2 else (1,) + want.shape
    got = np.asarray(_run(kernel, _f32(shape), X)).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def test_updates_in_a_chain():
    def kernel(x_ref, o_ref):
        v = x_ref[...]
        v = v.at[:, 0::2].set(0.0)
        v = v.at[3].add(100.0)
        v = v.at[-1, 10:20].multiply(2)
        v = v.at[2:4, :].max(1000.0)
        v = v.at[5:7].min(-3000.0)
        v = v.at[..., 7].apply(lambda t: t * 0 - 1)
        v = v.at[8, 1::3].subtract(0.5)
        v = v.at[9].divide(4.0)
        v = v.at[10, :8].power(2)
        o_ref[...] = v + v.at[0, 1].get()

    w = X.copy()
    w[:, 0::2] = 0
    w[3] += 100
    w[-1, 10:20] *= 2
    w[2:4, :] = np.maximum(w[2:4, :], 1000)
    w[5:7] = np.minimum(w[5:7], -3000)
    w[..., 7] = -1
    w[8, 1::3] -= 0.5
    w[9] /= 4
    w[10, :8] **= 2
    w = w + w[0, 1]
    np.testing.assert_array_equal(np.asarray(_run(kernel, _f32(X.shape), X)), w)


def test_the_value_itself_is_unchanged():
    def kernel(x_ref, o_ref, p_ref):
        v = x_ref[...] + 1
        o_ref[...] = v.at[4:8].set(7.0)
        p_ref[...] = v

    o, p = _run(kernel, (_f32(X.shape), _f32(X.shape)), X)
    w = X + 1
    np.testing.assert_array_equal(np.asarray(p), w)
    w[4:8] = 7
    np.testing.assert_array_equal(np.asarray(o), w)


def test_a_row_set_at_a_traced_index():
    def kernel(x_ref, i_ref, o_ref):
        o_ref[...] = x_ref[...].at[i_ref[0]].set(jnp.zeros((256,), jnp.float32) - 5)

    got = _run(kernel, _f32(X.shape), X, np.array([6], np.int32),
               in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                         pl.BlockSpec(memory_space=pltpu.SMEM)])
    w = X.copy()
    w[6] = -5
    np.testing.assert_array_equal(np.asarray(got), w)


def test_an_update_takes_the_values_dtype():
    x = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].at[:, 1::2].add(jnp.float32(2.7))

    w = x.copy()
    w[:, 1::2] += 2		# 2.7 as int32, as jnp's .add casts it
    got = _run(kernel, jax.ShapeDtypeStruct(x.shape, jnp.int32), x)
    np.testing.assert_array_equal(np.asarray(got), w)


def test_an_empty_slice_leaves_the_value():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].at[5:5].set(1.0)

    np.testing.assert_array_equal(np.asarray(_run(kernel, _f32(X.shape), X)), X)


def _nibbles(packed_uint8):
    w = packed_uint8.astype(jnp.int32)
    lo = w & 0xF
    hi = (w >> 4) & 0xF
    lo = jnp.where(lo >= 8, lo - 16, lo)
    hi = jnp.where(hi >= 8, hi - 16, hi)
    return jnp.stack([lo, hi], axis=-1).reshape(
        *packed_uint8.shape[:-1], packed_uint8.shape[-1] * 2).astype(jnp.int8)


def test_nibble_unpack_in_a_kernel():
    """stack(axis=-1) then a reshape merging its last two dimensions: an
    interleave, each part a strided store (the stacked (64, 64, 2) value,
    two lanes a row on the device, is never made)."""
    q = np.random.default_rng(0).integers(-8, 8, (64, 128)).astype(np.int8)
    n = q.astype(np.int32) & 0xF
    packed = (n[:, 0::2] | (n[:, 1::2] << 4)).astype(np.uint8)

    def kernel(p_ref, o_ref):
        o_ref[...] = _nibbles(p_ref[...])

    got = _run(kernel, jax.ShapeDtypeStruct(q.shape, jnp.int8), packed)
    np.testing.assert_array_equal(np.asarray(got), q)


def test_three_way_interleave_and_a_plain_stack():
    a, b, c = (X[:, :64] + k for k in range(3))

    def kernel(a_ref, b_ref, c_ref, o_ref, s_ref):
        parts = [a_ref[...], b_ref[...], c_ref[...]]
        o_ref[...] = jnp.stack(parts, axis=-1).reshape(16, 192)
        s_ref[...] = jnp.stack(parts, axis=0)	# not an interleave

    o, s = _run(kernel, (_f32((16, 192)), _f32((3, 16, 64))), a, b, c)
    np.testing.assert_array_equal(np.asarray(o), np.stack([a, b, c], -1).reshape(16, 192))
    np.testing.assert_array_equal(np.asarray(s), np.stack([a, b, c], 0))


@pytest.mark.parametrize("bad, match", [
    (lambda v: v.at[16].set(0.0), "out of bounds"),
    (lambda v: v.at[0, 0, 0].set(0.0), "too many indices"),
    (lambda v: v.at[:, ::-1].set(0.0), "negative step"),
    (lambda v: v[::-2], "negative step"),
    (lambda v: v.at[None].set(0.0), "None"),
])
def test_refusals_name_the_index(bad, match):
    def kernel(x_ref, o_ref):
        o_ref[...] = bad(x_ref[...])

    with pytest.raises((IndexError, jax.TraceError), match=match):
        _run(kernel, _f32(X.shape), X)
